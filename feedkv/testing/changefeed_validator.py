"""Validators for changefeed output: does what a sink received keep the changefeed's promises?

Parse each message a consumer read (:func:`parse_json_message`, for the JSON format in the
``wrapped`` envelope) into a :class:`ChangefeedMessage` and hand it to a validator's
``note``, in the order one sink partition (or one file prefix) delivered it. Each broken
promise becomes a line in the validator's ``failures`` naming the row (topic and key), the
timestamps and the message (``message #i``, counted from 0 over the messages of that
stream); ``check()`` raises :class:`AssertionError` listing them. The contracts are those
of ``ARCHITECTURE.md`` ("Contracts: Changefeed, per sink partition or file prefix"):

- **order** (contract 2, :class:`OrderValidator`): per row ``(topic, key)``, once a
  version with ``updated`` ``T`` was emitted, no previously unseen version older than
  ``T`` follows.
- **resolved** (contract 3, :class:`OrderValidator`): after a resolved marker ``R``, no
  previously unseen version with ``updated <= R`` follows.
- **before/after** (contract 4, :class:`BeforeAfterValidator`): ``after`` is the row as
  of ``updated`` and ``before`` (with ``diff``) the row as of ``updated - 1 tick``, both
  read from the table itself (``AS OF SYSTEM TIME``, see :func:`sql_row_reader`).
- **completeness** (contract 1, :class:`BeforeAfterValidator`, with ``diff``): per row,
  the (correct) ``before`` of a version is the ``after`` of the version emitted just
  before it; otherwise a version in between was never emitted.
- **fingerprint** (contracts 1 and 3, :class:`FingerprintValidator`): at every resolved
  marker ``R``, replaying the feed (per row, the newest version with ``updated <= R``)
  gives exactly the table as of ``R`` (see :func:`sql_table_reader`); and, as in
  CockroachDB's ``fingerprintValidator``, so does the replay at every ``updated``
  timestamp at or below ``R``. A committed version the feed missed, or one it made up,
  shows here.

:class:`ChangefeedValidator` runs them all over one stream, or over the streams of several
partitions (a Kafka topic's partitions: order holds per partition, and a row stays in
one partition); the fingerprint is then taken at the lowest marker every partition has
passed.

Changefeeds are at-least-once: a message equal in ``(topic, key, updated)`` to one
already seen is accepted anywhere, even below a resolved marker. Every row message needs
``updated`` (create the changefeed ``WITH updated``).

Rows of an initial scan (and of a backfill scan after a schema change) carry the scan's
timestamp as ``updated`` (their ``mvcc_timestamp`` may be older) and, with ``diff``, a
``"before": null``: the row as of ``updated - 1 tick`` is not what they mean. So, like
CockroachDB's ``beforeAfterValidator``, a null ``before`` is not checked on messages
before the stream's first resolved marker (the scan ends with one), nor on messages whose
``mvcc_timestamp`` (``WITH mvcc_timestamp``) differs from ``updated``; ask for
``mvcc_timestamp`` to validate a feed across backfilling schema changes. The fingerprint
needs the feed to start with an initial scan (or an empty table): rows written before a
``cursor`` are not in the feed.

Rows are compared as :func:`json.loads` gives them, with column values in the JSON forms
of :func:`feedkv.changefeed.encoder.json_value` (a ``DECIMAL`` ``1.50`` is ``1.5``). The
readers here convert SQL values the same way. Split column families are not supported:
a message must carry the whole row. Not thread-safe: one owner per validator.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import json
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from feedkv.changefeed.encoder import json_value
from feedkv.errors import InvalidArgumentError
from feedkv.sql import catalog
from feedkv.sql.descriptor import Column, TableDescriptor, quote_name
from feedkv.sql.types import Kind
from feedkv.testing.feed_validator import assert_valid
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.sql.client import SQLClient

__all__ = [
    "BeforeAfterValidator",
    "ChangefeedMessage",
    "ChangefeedValidator",
    "FingerprintValidator",
    "OrderValidator",
    "Row",
    "RowReader",
    "TableReader",
    "Validator",
    "assert_no_failures",
    "parse_json_message",
    "sql_row_reader",
    "sql_table_reader",
]

MAX_DIFFERENCES = 5  # rows a fingerprint failure spells out
MAX_SHOWN = 200  # characters of a row shown in a failure

Row = dict[str, Any]
"""A row as a JSON object decodes: column name -> JSON-form value."""

RowReader = Callable[[str, list[Any], Timestamp], Row | None]
"""``row_at(topic, key, ts)``: the row of ``topic`` with primary key ``key`` (a message's
JSON key array) as of ``ts``, or ``None`` if there was none."""

TableReader = Callable[[str, Timestamp], dict[tuple[Any, ...], Row]]
"""``table_at(topic, ts)``: every row of ``topic``'s table as of ``ts``, by key tuple
(the JSON key array as a tuple)."""


@dataclass(frozen=True, slots=True)
class ChangefeedMessage:
    """One message as a consumer read it.

    A row message has ``topic``, ``key`` (the primary key as a JSON array), ``value``
    (the decoded wrapped envelope, ``None`` for a tombstone) and ``updated``; a resolved
    marker has ``resolved`` and no key or value (``topic`` is the topic it was sent on, if
    the sink sends markers per topic).
    """

    topic: str | None
    key: list[Any] | None
    value: dict[str, Any] | None
    updated: Timestamp | None = None
    resolved: Timestamp | None = None

    @property
    def is_resolved(self) -> bool:
        return self.resolved is not None

    @property
    def after(self) -> Row | None:
        """The row after the change; ``None`` for a deletion."""
        return None if self.value is None else self.value.get("after")

    @property
    def before(self) -> Row | None:
        """The row before the change (``diff``); ``None`` if it did not exist or the
        message has no ``before`` (see :attr:`has_before`)."""
        return None if self.value is None else self.value.get("before")

    @property
    def has_before(self) -> bool:
        """Whether the message carries a ``before`` (the changefeed has ``diff``)."""
        return self.value is not None and "before" in self.value

    @property
    def mvcc_timestamp(self) -> Timestamp | None:
        """The row version's MVCC timestamp (``WITH mvcc_timestamp``), if present."""
        text = None if self.value is None else self.value.get("mvcc_timestamp")
        return None if text is None else Timestamp.parse(text)

    def __str__(self) -> str:
        if self.resolved is not None:
            return f"resolved marker at {self.resolved}"
        return f"{_row_name(self)} at {self.updated}"


def parse_json_message(
    topic: str | None, key: bytes | str | None, value: bytes | str | None
) -> ChangefeedMessage:
    """A message of the JSON format in the ``wrapped`` envelope, as a sink delivered it:
    a sinkless changefeed's ``(topic, key, value)`` rows, Kafka records, file lines.

    A message with no key whose value is ``{"resolved": "<ts>"}`` is a resolved marker.
    Raises :class:`~feedkv.errors.InvalidArgumentError` for anything else that is not a
    row in the wrapped envelope (a key that is not a JSON array, a value with no
    ``"after"``, a bad timestamp).
    """
    decoded_value = _load(value, "value")
    if decoded_value is not None and not isinstance(decoded_value, dict):
        raise InvalidArgumentError(
            f"message value {_show(decoded_value)} is not a JSON object; the validators read "
            f"the JSON format in the wrapped envelope"
        )
    if key is None:
        if decoded_value is None or "resolved" not in decoded_value:
            raise InvalidArgumentError(
                f'a message with no key must be a resolved marker {{"resolved": "<ts>"}}, '
                f"not {_show(decoded_value)}"
            )
        return ChangefeedMessage(
            topic, None, None, resolved=_parse_ts(decoded_value["resolved"], "resolved")
        )
    decoded_key = _load(key, "key")
    if not isinstance(decoded_key, list):
        raise InvalidArgumentError(
            f"message key {_show(decoded_key)} is not a JSON array of primary key values"
        )
    updated = None
    if decoded_value is not None:
        if "after" not in decoded_value:
            raise InvalidArgumentError(
                f'message value {_show(decoded_value)} has no "after": the validators read '
                f"the wrapped envelope (envelope='wrapped', the default)"
            )
        if "updated" in decoded_value:
            updated = _parse_ts(decoded_value["updated"], "updated")
    return ChangefeedMessage(topic, decoded_key, decoded_value, updated)


class Validator(Protocol):
    """What every validator here offers: ``note`` each message of a stream in order;
    ``failures`` lists the broken promises found so far."""

    failures: list[str]

    def note(self, message: ChangefeedMessage) -> None: ...

    def check(self) -> None: ...


class _Stream:
    """Counts a stream's messages and collects its failures."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.failures: list[str] = []
        self.messages = 0

    def check(self) -> None:
        """Raise :class:`AssertionError` listing every failure; nothing if there is none."""
        assert_no_failures(self.failures)

    def _next(self) -> int:
        index = self.messages
        self.messages += 1
        return index

    def _where(self, index: int) -> str:
        return f"message #{index}" + (f" of {self.label}" if self.label else "")

    def _updated(self, message: ChangefeedMessage, index: int) -> Timestamp:
        if message.updated is None:
            raise InvalidArgumentError(
                f'{self._where(index)} ({_row_name(message)}) has no "updated" timestamp: '
                f"create the changefeed WITH updated"
            )
        return message.updated


class OrderValidator(_Stream):
    """Checks **order** and **resolved** (contracts 2 and 3) over one stream.

    ``label`` names the stream in failures (``"partition 3"``); empty for a single one.
    Memory grows with the number of distinct row versions seen.
    """

    def __init__(self, label: str = "") -> None:
        super().__init__(label)
        # (topic, key) -> [(updated, index of its first message)], ascending.
        self._seen: dict[tuple[str, tuple[Any, ...]], list[tuple[Timestamp, int]]] = {}
        self._resolved: tuple[Timestamp, int] | None = None  # highest marker, its index

    def note(self, message: ChangefeedMessage) -> None:
        """Take the next message of the stream."""
        index = self._next()
        if message.resolved is not None:
            if self._resolved is None or message.resolved > self._resolved[0]:
                self._resolved = (message.resolved, index)
            return
        updated = self._updated(message, index)
        versions = self._seen.setdefault(_row_id(message), [])
        at = bisect_left(versions, updated, key=lambda v: v[0])
        if at < len(versions) and versions[at][0] == updated:
            return  # a duplicate: at-least-once allows it anywhere
        if versions and updated < versions[-1][0]:
            newest, newest_index = versions[-1]
            self.failures.append(
                f"[order] {self._where(index)}: {_row_name(message)} at {updated} is a "
                f"previously unseen version older than the one at {newest} already emitted "
                f"({self._where(newest_index)})"
            )
        if self._resolved is not None and updated <= self._resolved[0]:
            resolved, resolved_index = self._resolved
            self.failures.append(
                f"[resolved] {self._where(index)}: {_row_name(message)} at {updated} is a "
                f"previously unseen version at or below the resolved marker at {resolved} "
                f"({self._where(resolved_index)})"
            )
        versions.insert(at, (updated, index))


class BeforeAfterValidator(_Stream):
    """Checks **before/after** (contract 4) over one stream against the table itself,
    and **completeness** (contract 1) where messages carry a ``before``.

    ``row_at(topic, key, ts)`` reads the row as of ``ts`` (:func:`sql_row_reader` builds
    one). ``after`` must equal ``row_at(updated)``; ``before``, when the message has one,
    ``row_at(updated - 1 tick)`` (see the module docstring for scan rows). A correct
    ``before`` must also be the ``after`` of the newest version of the row the stream
    emitted before it: a row's versions are in one stream, in order (contract 2). Each
    row message costs one or two reads; memory holds the newest version of each row.
    """

    def __init__(self, row_at: RowReader, label: str = "") -> None:
        super().__init__(label)
        self.row_at = row_at
        self._resolved_seen = False
        # (topic, key) -> the newest version emitted: (updated, after, message index).
        self._newest: dict[tuple[str, tuple[Any, ...]], tuple[Timestamp, Row | None, int]] = {}

    def note(self, message: ChangefeedMessage) -> None:
        """Take the next message of the stream; reads the table for a row message."""
        index = self._next()
        if message.resolved is not None:
            self._resolved_seen = True
            return
        updated = self._updated(message, index)
        if message.value is None:
            raise InvalidArgumentError(
                f"{self._where(index)} ({_row_name(message)}) has no value: the before/after "
                f"check needs the wrapped envelope"
            )
        topic, key = message.topic or "", message.key or []
        expected = self.row_at(topic, key, updated)
        if message.after != expected:
            self.failures.append(
                f"[before/after] {self._where(index)}: {_row_name(message)} at {updated} has "
                f"after {_show(message.after)}, but the row as of {updated} is "
                f"{_show(expected)}"
            )
        row = _row_id(message)
        previous = self._newest.get(row)
        if previous is not None and updated <= previous[0]:
            previous = None  # a repeat (or a broken order, which OrderValidator reports)
        else:
            self._newest[row] = (updated, expected, index)
        if not message.has_before:
            return
        if message.before is None and (not self._resolved_seen or _is_scanned(message)):
            return  # NB: rows of an initial scan or a backfill carry no before
        below = updated.prev()
        expected_before = self.row_at(topic, key, below)
        if message.before != expected_before:
            self.failures.append(
                f"[before/after] {self._where(index)}: {_row_name(message)} at {updated} has "
                f"before {_show(message.before)}, but the row as of {below} (one tick "
                f"earlier) is {_show(expected_before)}"
            )
        elif previous is not None and previous[1] != message.before:
            last, last_after, last_index = previous
            self.failures.append(
                f"[completeness] {self._where(index)}: {_row_name(message)} at {updated} has "
                f"before {_show(message.before)}, but the version emitted before it, at "
                f"{last} ({self._where(last_index)}), has after {_show(last_after)}: a "
                f"version in between was never emitted"
            )


@dataclass(slots=True)
class _Version:
    updated: Timestamp
    after: Row | None
    where: str  # the message that first carried it


class FingerprintValidator:
    """Checks **fingerprint** (contracts 1 and 3): at every resolved marker, replaying
    the feed gives the table as of the marker.

    ``table_at(topic, ts)`` reads a whole table (:func:`sql_table_reader` builds one).
    ``partitions`` names the streams that :meth:`note` takes messages of; the table is
    compared at the lowest marker every partition has passed, each time it moves up, and
    (``every_update``) first at each ``updated`` timestamp of the versions it newly
    covers. ``topics`` are checked at every comparison besides the topics seen in the
    feed (name them when a table might have rows the feed never mentions).

    A comparison reads every table once and costs a pass over the rows seen; versions
    no later comparison can need are dropped, so memory stays near a version per row.
    """

    def __init__(
        self,
        table_at: TableReader,
        *,
        partitions: Iterable[str] = ("",),
        topics: Iterable[str] = (),
        every_update: bool = True,
    ) -> None:
        self.table_at = table_at
        self.every_update = every_update
        self.failures: list[str] = []
        self._pending: set[Timestamp] = set()  # updated timestamps not yet compared at
        self._resolved: dict[str, Timestamp | None] = dict.fromkeys(partitions)
        if not self._resolved:
            raise InvalidArgumentError("a fingerprint validator needs at least one partition")
        self._messages = dict.fromkeys(self._resolved, 0)
        self._compared: Timestamp | None = None
        self._rows: dict[str, dict[tuple[Any, ...], list[_Version]]] = {t: {} for t in topics}

    def note(self, message: ChangefeedMessage, partition: str = "") -> None:
        """Take the next message of ``partition``; a resolved marker that lifts the lowest
        marker of all partitions compares the replayed feed with the tables."""
        if partition not in self._messages:
            raise InvalidArgumentError(
                f"partition {partition!r} was not declared; the validator knows "
                f"{sorted(self._messages)}"
            )
        index = self._messages[partition]
        self._messages[partition] = index + 1
        where = _where(partition, index)
        if message.resolved is not None:
            known = self._resolved[partition]
            if known is None or message.resolved > known:
                self._resolved[partition] = message.resolved
            lowest = _lowest(self._resolved.values())
            if lowest is not None and (self._compared is None or lowest > self._compared):
                self._compared = lowest
                stamps = sorted(t for t in self._pending if t <= lowest)
                self._pending.difference_update(stamps)
                if self.every_update:
                    for stamp in stamps:
                        if stamp != lowest:
                            self._compare(stamp, f"an updated timestamp; checked at {where}")
                self._compare(lowest, f"the resolved marker, {where}")
            return
        if message.updated is None:
            raise InvalidArgumentError(
                f'{where} ({_row_name(message)}) has no "updated" timestamp: create the '
                f"changefeed WITH updated"
            )
        versions = self._rows.setdefault(message.topic or "", {}).setdefault(
            tuple(message.key or ()), []
        )
        at = bisect_left(versions, message.updated, key=lambda v: v.updated)
        if at < len(versions) and versions[at].updated == message.updated:
            return  # a duplicate; the before/after check judges its content
        versions.insert(at, _Version(message.updated, message.after, where))
        if self._compared is None or message.updated > self._compared:
            self._pending.add(message.updated)

    def check(self) -> None:
        """Raise :class:`AssertionError` listing every failure; nothing if there is none."""
        assert_no_failures(self.failures)

    def _compare(self, when: Timestamp, what: str) -> None:
        """Compare the replay as of ``when`` with the tables; ``what`` names the point."""
        for topic, rows in self._rows.items():
            replayed: dict[tuple[Any, ...], _Version] = {}
            for key, versions in rows.items():
                at = bisect_right(versions, when, key=lambda v: v.updated) - 1
                if at < 0:
                    continue
                del versions[:at]  # NB: comparisons only move up, so these are dead
                if versions[0].after is not None:
                    replayed[key] = versions[0]
            table = self.table_at(topic, when)
            differences: list[str] = []
            for key in sorted(replayed.keys() | table.keys(), key=_sort_key):
                version, row = replayed.get(key), table.get(key)
                if version is not None and version.after == row:
                    continue
                feed = (
                    "no row"
                    if version is None
                    else f"{_show(version.after)} (at {version.updated}, {version.where})"
                )
                differences.append(
                    f"key {_show(list(key))}: the feed gives {feed}, the table "
                    f"{'has no row' if row is None else 'has ' + _show(row)}"
                )
            if differences:
                shown = "; ".join(differences[:MAX_DIFFERENCES])
                more = len(differences) - MAX_DIFFERENCES
                tail = f"; and {more} more" if more > 0 else ""
                self.failures.append(
                    f"[fingerprint] at {when} ({what}), replaying topic {topic} differs from "
                    f"its table in {len(differences)} row(s): {shown}{tail}"
                )


class ChangefeedValidator:
    """Every check over one stream, or over the streams of several partitions.

    **order**, **resolved**, **before/after** and **completeness** run per partition
    (the last two only with ``row_at``), **fingerprint** across them (only with
    ``table_at``; ``every_update`` as in :class:`FingerprintValidator`). With several
    ``partitions``, a row found in two of them is a failure too (**partitioning**): its
    order could not be checked.

    Call :meth:`note` for every message of a partition in the order it arrived (the
    partitions may interleave any way), or :meth:`note_partitions` with each partition's
    messages; then :meth:`check`.
    """

    def __init__(
        self,
        row_at: RowReader | None = None,
        table_at: TableReader | None = None,
        *,
        partitions: Iterable[str] = ("",),
        topics: Iterable[str] = (),
        every_update: bool = True,
    ) -> None:
        self.partitions = tuple(dict.fromkeys(partitions))
        if not self.partitions:
            raise InvalidArgumentError("a changefeed validator needs at least one partition")
        labels = {p: _label(p) for p in self.partitions}
        self._order = {p: OrderValidator(labels[p]) for p in self.partitions}
        self._before_after = (
            {p: BeforeAfterValidator(row_at, labels[p]) for p in self.partitions}
            if row_at is not None
            else {}
        )
        self._fingerprint = (
            FingerprintValidator(
                table_at, partitions=self.partitions, topics=topics, every_update=every_update
            )
            if table_at is not None
            else None
        )
        self._home: dict[tuple[str, tuple[Any, ...]], tuple[str, int]] = {}
        self._partitioning: list[str] = []

    @property
    def failures(self) -> list[str]:
        """Every failure found so far: per partition order and before/after, then the
        partitioning and fingerprint failures."""
        found: list[str] = []
        for partition in self.partitions:
            found += self._order[partition].failures
            if self._before_after:
                found += self._before_after[partition].failures
        found += self._partitioning
        if self._fingerprint is not None:
            found += self._fingerprint.failures
        return found

    def note(self, message: ChangefeedMessage, partition: str = "") -> None:
        """Take the next message of ``partition`` (one of those declared)."""
        order = self._order.get(partition)
        if order is None:
            raise InvalidArgumentError(
                f"partition {partition!r} was not declared; the validator knows "
                f"{list(self.partitions)}"
            )
        index = order.messages
        order.note(message)
        if self._before_after:
            self._before_after[partition].note(message)
        if self._fingerprint is not None:
            self._fingerprint.note(message, partition)
        if message.resolved is None and len(self.partitions) > 1:
            row = _row_id(message)
            home = self._home.setdefault(row, (partition, index))
            if home[0] != partition:
                self._partitioning.append(
                    f"[partitioning] {_where(partition, index)}: {_row_name(message)} at "
                    f"{message.updated} is in a second partition; {_where(*home)} carried it "
                    f"first"
                )

    def note_all(self, messages: Iterable[ChangefeedMessage], partition: str = "") -> None:
        """:meth:`note` each of ``messages`` in order."""
        for message in messages:
            self.note(message, partition)

    def note_partitions(self, streams: Mapping[str, Iterable[ChangefeedMessage]]) -> None:
        """:meth:`note` every partition's messages, one partition after another."""
        for partition, messages in streams.items():
            self.note_all(messages, partition)

    def check(self) -> None:
        """Raise :class:`AssertionError` listing every failure; nothing if there is none."""
        assert_no_failures(self.failures)


def assert_no_failures(failures: Sequence[str]) -> None:
    """Raise :class:`AssertionError` listing the first 20 of ``failures`` (and how many
    more there are); do nothing if there are none."""
    assert_valid(failures, what="the changefeed")


# Reading the table through SQL.


def sql_row_reader(
    db: SQLClient, table: str, key_columns: Sequence[str] | None = None
) -> RowReader:
    """A :data:`RowReader` for ``table`` (``name`` or ``database.name``) that runs
    ``SELECT ... FROM table AS OF SYSTEM TIME $1 WHERE k1 = $2 AND ...``.

    ``key_columns`` name the columns of a message's key array, in order (by default, the
    primary key). Every column is read, hidden ones (``rowid``) too, as the changefeed
    emits them, and converted to its JSON form. The topic is not looked at: for a feed
    of several tables, dispatch on it to one reader per table.
    """
    descriptor = _descriptors(db, table)

    def row_at(topic: str, key: list[Any], ts: Timestamp) -> Row | None:
        desc = descriptor(ts)
        keys = [desc.column(name) for name in key_columns] if key_columns else desc.key_columns
        if len(key) != len(keys):
            raise InvalidArgumentError(
                f"key {_show(key)} has {len(key)} value(s), but table {table} is keyed by "
                f"{', '.join(c.name for c in keys)}"
            )
        where = " AND ".join(f"{quote_name(c.name)} = ${i}" for i, c in enumerate(keys, 2))
        result = db.sql(
            f"SELECT {_select_list(desc)} FROM {table} AS OF SYSTEM TIME $1 WHERE {where}",
            str(ts),
            *(_sql_value(c.type.kind, v) for c, v in zip(keys, key, strict=True)),
        )
        if not result.rows:
            return None
        if len(result.rows) > 1:
            raise InvalidArgumentError(
                f"key {_show(key)} names {len(result.rows)} rows of {table} as of {ts}; "
                f"key_columns must be a key"
            )
        return _json_row(desc.columns, result.rows[0])

    return row_at


def sql_table_reader(db: SQLClient, table: str) -> TableReader:
    """A :data:`TableReader` for ``table`` (``name`` or ``database.name``) that runs
    ``SELECT ... FROM table AS OF SYSTEM TIME $1``; rows are keyed by their primary
    key's JSON values, as a message's key array. The topic is not looked at (see
    :func:`sql_row_reader`)."""
    descriptor = _descriptors(db, table)

    def table_at(topic: str, ts: Timestamp) -> dict[tuple[Any, ...], Row]:
        desc = descriptor(ts)
        result = db.sql(f"SELECT {_select_list(desc)} FROM {table} AS OF SYSTEM TIME $1", str(ts))
        rows: dict[tuple[Any, ...], Row] = {}
        for values in result.rows:
            row = _json_row(desc.columns, values)
            rows[tuple(row[c.name] for c in desc.key_columns)] = row
        return rows

    return table_at


def _descriptors(db: SQLClient, table: str) -> Callable[[Timestamp], TableDescriptor]:
    """``table``'s descriptor as of a timestamp, the last few read kept: the rows of one
    transaction share their timestamp. (A statement's text names no timestamp, its
    ``AS OF SYSTEM TIME`` being a placeholder, so the session parses it once.)"""
    database, _, name = table.rpartition(".")

    @functools.lru_cache(maxsize=64)
    def descriptor(ts: Timestamp) -> TableDescriptor:
        snapshot = catalog.Snapshot(db, ts)
        found = catalog.database_by_name(snapshot, database or catalog.DEFAULT_DATABASE)
        return catalog.table_by_name(snapshot, found, name)

    return descriptor


def _select_list(desc: TableDescriptor) -> str:
    return ", ".join(quote_name(c.name) for c in desc.columns)


def _json_row(columns: Sequence[Column], values: Sequence[Any]) -> Row:
    return {
        c.name: json.loads(json_value(c.type.kind, v)) for c, v in zip(columns, values, strict=True)
    }


def _sql_value(kind: Kind, value: Any) -> Any:
    """A key value in JSON form back as the SQL value it was made from (the inverse of
    :func:`~feedkv.changefeed.encoder.json_value`)."""
    if value is None:
        return None
    if kind is Kind.FLOAT:
        return float(value)
    if kind is Kind.DECIMAL:
        return decimal.Decimal(str(value))
    if kind is Kind.BYTES:
        return bytes.fromhex(value.removeprefix("\\x"))
    if kind is Kind.DATE:
        return datetime.date.fromisoformat(value)
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        return datetime.datetime.fromisoformat(value)
    if kind is Kind.UUID:
        return uuid.UUID(value)
    return value


# Helpers.


def _load(text: bytes | str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"message {what} {_show(text)} is not JSON: {exc}") from exc


def _parse_ts(text: Any, field: str) -> Timestamp:
    if not isinstance(text, str):
        raise InvalidArgumentError(
            f"{field!r} is {_show(text)}, not a timestamp string '<wall>.<logical>'"
        )
    try:
        return Timestamp.parse(text)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{field!r}: {exc}") from exc


def _row_id(message: ChangefeedMessage) -> tuple[str, tuple[Any, ...]]:
    return message.topic or "", tuple(message.key or ())


def _row_name(message: ChangefeedMessage) -> str:
    return f"{message.topic} {_show(message.key)}"


def _is_scanned(message: ChangefeedMessage) -> bool:
    """Whether the message is known to come from a scan: its row version is older than
    ``updated``."""
    mvcc = message.mvcc_timestamp
    return mvcc is not None and mvcc != message.updated


def _label(partition: str) -> str:
    return f"partition {partition}" if partition else ""


def _where(partition: str, index: int) -> str:
    return f"message #{index}" + (f" of partition {partition}" if partition else "")


def _lowest(stamps: Iterable[Timestamp | None]) -> Timestamp | None:
    lowest: Timestamp | None = None
    for ts in stamps:
        if ts is None:
            return None
        if lowest is None or ts < lowest:
            lowest = ts
    return lowest


def _sort_key(key: tuple[Any, ...]) -> str:
    return json.dumps(key, default=str)


def _show(value: Any) -> str:
    shown = repr(value) if isinstance(value, bytes | str) else json.dumps(value, default=str)
    return shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 3] + "..."
