"""From KV changes to row changes: decoding with the schema of the moment.

A rangefeed over a table's span delivers one :class:`~feedkv.rangefeed.event.Value` per
changed column family. :class:`RowDecoder` turns them into :class:`RowEvent` objects:
the row's primary key, the whole row after the change (``None`` when deleted) and, with
``diff``, the row one tick before it. Each change is decoded with the table descriptor
in force at its timestamp (:class:`~feedkv.changefeed.schema_history.SchemaHistory`),
so a row written before ``ALTER TABLE ... ADD COLUMN`` decodes without the new column.

Column families are merged into whole rows: a table with one family needs nothing but
the changed value; with several, the row is read as of the change's timestamp (and one
tick before it for ``diff``), and the several family changes one transaction made to a
row are emitted as one row change. With ``split_column_families`` (or a ``FAMILY``
target) each family is a stream of its own, with the key columns and that family's
columns; a table of one family stays whole rows (its table's topic, as in CockroachDB).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from feedkv.changefeed.schema_history import SchemaHistory
from feedkv.rangefeed.event import Value
from feedkv.rangefeed.feed_client import KV
from feedkv.sql.descriptor import Family, TableDescriptor
from feedkv.sql.row_codec import (
    decode_family_value,
    decode_row_key,
    decode_row_values,
    decode_rows,
    table_id_of_key,
    table_span,
)
from feedkv.sql.types import Kind
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, prefix_end

__all__ = ["Columns", "RowDecoder", "RowEvent", "Target", "named_row", "omits_virtual"]

# A CDC query's columns (RowEvent.columns): each name, the kind of a value read as is
# (None: computed), and the column of the changed row it is (None: another value).
Columns = tuple[tuple[str, Kind | None, str | None], ...]


@dataclass(frozen=True, slots=True)
class Target:
    """A watched table (by id, since names change) and, for a ``FAMILY`` target, the
    one family watched; with ``bounds``, only the rows whose keys are in
    ``[bounds[0], bounds[1])`` (``VALUES FROM (...) TO (...)``)."""

    table_id: int
    family: str | None = None
    bounds: tuple[bytes, bytes] | None = None

    @property
    def span(self) -> Span:
        """What the changefeed reads of the table: all of it, or its bounds."""
        if self.bounds is not None:
            return Span(*self.bounds)
        return table_span(self.table_id)


class RowEvent(NamedTuple):
    """One version of one row (or of one family of a row, when families are split).

    ``after`` is ``None`` for a deletion. ``before`` is the row at ``mvcc_ts - 1 tick``
    (``None``: it did not exist) and is only filled in for ``diff``. ``updated`` equals
    ``mvcc_ts`` for changes; rows of an initial scan or a backfill carry the scan's
    timestamp there. Rows map column names to values in the descriptor's column order.
    ``columns`` is set when a CDC query projected ``after``: its :data:`Columns`.
    ``deleted`` is, for a deletion under a CDC query, the projection of the deleted row
    (its key columns set, the others NULL), which the ``bare`` envelope emits.
    """

    table: TableDescriptor
    family: Family | None
    key: tuple[Any, ...]
    after: dict[str, Any] | None
    before: dict[str, Any] | None
    mvcc_ts: Timestamp
    updated: Timestamp
    had_before: bool = False  # with diff: whether ``before`` is a row (for event_op())
    columns: Columns | None = None
    deleted: dict[str, Any] | None = None


def omits_virtual(virtual_columns: str, *, query: bool) -> bool:
    """Whether a changefeed's rows leave VIRTUAL computed columns out: with the option
    ``virtual_columns='omitted'`` (the default), unless a CDC query computes them."""
    return virtual_columns == "omitted" and not query


def named_row(
    desc: TableDescriptor, by_id: dict[int, Any], family: Family | None = None
) -> dict[str, Any]:
    """A row keyed by column name, in column order; with ``family``, only the key
    columns and that family's columns."""
    if family is None:
        return {c.name: by_id.get(c.id) for c in desc.columns}
    wanted = set(desc.primary_key) | set(family.column_ids)
    return {c.name: by_id.get(c.id) for c in desc.columns if c.id in wanted}


class RowDecoder:
    """Decodes a feed's values for ``targets``. Not thread-safe: one feed, one decoder."""

    def __init__(
        self,
        db: KV,
        targets: list[Target],
        since: Timestamp,
        *,
        diff: bool = False,
        split_families: bool = False,
        omit_virtual: bool = False,
    ) -> None:
        """``omit_virtual``: rows without VIRTUAL computed columns (CockroachDB's
        default, :func:`omits_virtual`); else they are there, NULL, as nothing of them
        is stored (a CDC query computes them)."""
        self._db = db
        self._targets = {t.table_id: t for t in targets}
        # where the running scan reads (the start of its page; None: none has run), read
        # by other threads for the scan's progress
        self.scan_position: bytes | None = None
        self.histories = {
            t.table_id: SchemaHistory(db, t.table_id, since, omit_virtual=omit_virtual)
            for t in targets
        }
        self._diff = diff
        self._split = split_families
        self._recent: OrderedDict[bytes, Timestamp] = OrderedDict()

    def decode(self, value: Value) -> RowEvent | None:
        """The row change ``value`` makes, or ``None`` when there is nothing to emit (the
        table did not exist then, another family of a watched ``FAMILY``, or a family
        change of a row already emitted at that timestamp)."""
        table_id = table_id_of_key(value.key)
        target = self._targets.get(table_id) if table_id is not None else None
        if target is None:
            return None
        history = self.histories[target.table_id]
        desc = history.at(value.ts)
        if desc is None or desc.dropped:
            return None
        key, family_id, prefix = decode_row_key(desc, value.key)
        if not self.whole_rows(target, desc):
            return self._family_event(desc, target, key, family_id, value)
        if len(desc.families) == 1:
            return self._value_event(desc, key, value, None)
        return self._merged_event(desc, key, prefix, value)

    def whole_rows(self, target: Target, desc: TableDescriptor | None) -> bool:
        """Whether ``target``'s changes are whole rows (not one family's columns), its
        table being ``desc`` (``None``: not known). Only a ``FAMILY`` target and, under
        ``split_column_families``, a table of several families are split: a table of
        one family stays whole rows on its table's topic, as CockroachDB keeps it."""
        if target.family is not None:
            return False
        return not self._split or (desc is not None and len(desc.families) == 1)

    def scan_rows(
        self, target: Target, ts: Timestamp, batch: int = 2000, *, span: Span | None = None
    ) -> Iterator[RowEvent]:
        """Every row of ``target`` (or of the part of it in ``span``, which starts and
        ends on row boundaries) as of ``ts``: an initial scan or a backfill, read in
        key order ``batch`` KV pairs at a time; ``updated`` is ``ts``."""
        desc = self.histories[target.table_id].at(ts)
        if desc is None or desc.dropped:
            return
        if self.whole_rows(target, desc):
            names = [c.name for c in desc.columns]
            for key, values, mvcc_ts in self.scan_values(target, ts, batch, span=span):
                after = dict(zip(names, values, strict=False))  # as long: one descriptor
                yield RowEvent(desc, None, key, after, None, mvcc_ts, ts)
            return
        families = self._families_of(desc, target)
        key_ids = desc.primary_key
        for kvs in self._pages(desc, span or target.span, ts, batch):
            for row, present, mvcc_ts in decode_rows(desc, kvs):
                key = tuple([row[i] for i in key_ids])
                for family in families:
                    if family.id != 0 and family.id not in present:
                        continue
                    after = named_row(desc, row, family)
                    yield RowEvent(desc, family, key, after, None, mvcc_ts, ts)

    def scan_values(
        self, target: Target, ts: Timestamp, batch: int = 2000, *, span: Span | None = None
    ) -> Iterator[tuple[tuple[Any, ...], list[Any], Timestamp]]:
        """:meth:`scan_rows` as plain values, for the hot path of a scan: each row's
        primary key, its columns' values in the order of ``ts``'s descriptor, and the
        timestamp of its newest version."""
        desc = self.histories[target.table_id].at(ts)
        if desc is None or desc.dropped:
            return
        for kvs in self._pages(desc, span or target.span, ts, batch):
            yield from decode_row_values(desc, kvs)

    def _pages(
        self, desc: TableDescriptor, span: Span, ts: Timestamp, batch: int
    ) -> Iterator[list[KeyValue]]:
        """The KV pairs of ``span`` as of ``ts`` in pages of whole rows.

        NB: read in this thread. A thread reading the next page while this one decodes
        made an initial scan ~30% slower (8.3 -> 12.3 us a row): the two only take turns
        at the GIL, and each turn costs."""
        start = span.start
        while start < span.end:
            self.scan_position = start
            kvs, start = self._page(desc, start, span.end, ts, batch)
            yield kvs

    def _page(
        self, desc: TableDescriptor, start: bytes, end: bytes, ts: Timestamp, batch: int
    ) -> tuple[list[KeyValue], bytes]:
        """Up to ``batch`` KV pairs from ``start`` (more when one row has more), ending
        on a row boundary, and where the next page starts (``end``: there is none)."""
        kvs = self._db.scan(start, end, as_of=ts, limit=batch)
        if len(kvs) < batch:
            return kvs, end
        # NB: a page may end inside a row; hold that row back for the next page.
        _, _, last_prefix = decode_row_key(desc, kvs[-1].key)
        cut = len(kvs) - 1
        while cut > 0 and kvs[cut - 1].key.startswith(last_prefix):
            cut -= 1  # the row's pairs are together, at the end
        if cut:
            return kvs[:cut], last_prefix
        whole_row = self._db.scan(last_prefix, prefix_end(last_prefix), as_of=ts)
        return whole_row, prefix_end(last_prefix)

    # Decoding strategies.

    def _value_event(
        self, desc: TableDescriptor, key: tuple[Any, ...], value: Value, family: Family | None
    ) -> RowEvent:
        """The change one family value makes: the whole row when the table has one
        family, else (``family``) the key columns and that family's columns."""
        after = self._row_from_value(desc, key, value.value, family)
        before, had = None, False
        if self._diff and value.prev_value is not None:
            old = self._previous(desc, value.ts)
            if old is not None:
                before, had = self._row_from_value(old, key, value.prev_value, family), True
        return RowEvent(desc, family, key, after, before, value.ts, value.ts, had)

    def _merged_event(
        self, desc: TableDescriptor, key: tuple[Any, ...], prefix: bytes, value: Value
    ) -> RowEvent | None:
        if self._recent.get(prefix) == value.ts:
            return None  # the same transaction changed another family of this row
        self._recent[prefix] = value.ts
        self._recent.move_to_end(prefix)
        if len(self._recent) > 4096:
            self._recent.popitem(last=False)
        after = self._read_row(desc, prefix, value.ts)
        before, had = None, False
        if self._diff:
            old = self._previous(desc, value.ts)
            if old is not None:
                before = self._read_row(old, prefix, value.ts.prev())
                had = before is not None
        return RowEvent(desc, None, key, after, before, value.ts, value.ts, had)

    def _family_event(
        self,
        desc: TableDescriptor,
        target: Target,
        key: tuple[Any, ...],
        family_id: int,
        value: Value,
    ) -> RowEvent | None:
        family = next((f for f in desc.families if f.id == family_id), None)
        if family is None or (target.family is not None and family.name != target.family):
            return None
        return self._value_event(desc, key, value, family)

    def _previous(self, desc: TableDescriptor, ts: Timestamp) -> TableDescriptor | None:
        """The descriptor one tick before ``ts`` (``None`` if the table was not there)."""
        old = self.histories[desc.id].at(ts.prev())
        return None if old is None or old.dropped else old

    # Helpers.

    @staticmethod
    def _row_from_value(
        desc: TableDescriptor, key: tuple[Any, ...], raw: bytes | None, family: Family | None
    ) -> dict[str, Any] | None:
        if raw is None:
            return None
        by_id = dict(zip(desc.primary_key, key, strict=True))
        by_id.update(decode_family_value(desc, raw))
        return named_row(desc, by_id, family)

    def _read_row(
        self, desc: TableDescriptor, prefix: bytes, ts: Timestamp
    ) -> dict[str, Any] | None:
        kvs = self._db.scan(prefix, prefix_end(prefix), as_of=ts)
        for row, _families, _ts in decode_rows(desc, kvs):
            return named_row(desc, row)
        return None

    def _families_of(self, desc: TableDescriptor, target: Target) -> list[Family]:
        """The families a target's changes are split into (not whole rows)."""
        if target.family is not None:
            return [desc.family(target.family)]
        return list(desc.families)
