"""The versions of a table's descriptor over time, as a changefeed needs them.

A changefeed decodes each row with the schema it was written under, and reacts to
schema changes at the timestamp they happened. Descriptors live in the store as MVCC
values (:mod:`feedkv.sql.catalog`), so the history is read, not remembered: reading the
descriptor key as of ``T`` returns the version in force at ``T`` and the timestamp it
was written at, and that read also forbids any later write below ``T`` (the timestamp
cache), so the answer for ``T`` is final.

:class:`SchemaHistory` keeps the versions it has seen and how far the history is known
(``known_through``). Asking about a later timestamp reads once at a recent timestamp and
walks back version by version until it meets what it already knew, so two schema
changes between reads are both found.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

from feedkv.errors import InvariantViolation
from feedkv.rangefeed.feed_client import KV
from feedkv.sql.catalog import descriptor_key
from feedkv.sql.descriptor import TableDescriptor, decode_descriptor
from feedkv.sql.type_conversion import Conversion, conversion
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import key_next

__all__ = ["SchemaChange", "SchemaHistory"]


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """The table went from ``before`` to ``after`` at ``ts``."""

    ts: Timestamp
    before: TableDescriptor
    after: TableDescriptor

    @property
    def added_columns(self) -> tuple[str, ...]:
        old = {c.id for c in self.before.columns}
        return tuple(c.name for c in self.after.columns if c.id not in old)

    @property
    def dropped_columns(self) -> tuple[str, ...]:
        new = {c.id for c in self.after.columns}
        return tuple(c.name for c in self.before.columns if c.id not in new)

    @property
    def retyped_columns(self) -> tuple[str, ...]:
        """The columns whose type changed in a way that rewrote their values (ALTER
        COLUMN ... TYPE, see :mod:`feedkv.sql.type_conversion`)."""
        old = {c.id: c.type for c in self.before.columns}
        return tuple(
            c.name
            for c in self.after.columns
            if c.id in old and conversion(old[c.id], c.type) is Conversion.REWRITE
        )

    @property
    def rewrites_rows(self) -> bool:
        """Whether the change rewrote every row (a column added with a value to fill in,
        a column dropped, or one whose values changed type): CockroachDB's "backfill"
        changes."""
        old = {c.id for c in self.before.columns}
        added_with_value = any(
            c.id not in old
            and not c.virtual
            and (c.default is not None or not c.nullable or c.computed is not None)
            for c in self.after.columns
        )
        new = {c.id for c in self.after.columns}
        # NB: a VIRTUAL column has nothing stored to rewrite, added or dropped
        dropped_stored = any(c.id not in new and not c.virtual for c in self.before.columns)
        return added_with_value or dropped_stored or bool(self.retyped_columns)

    @property
    def takes_offline(self) -> bool:
        """Whether an IMPORT INTO took the table offline: that ends the changefeeds
        watching it, as CockroachDB's IMPORT INTO fails them."""
        return self.after.offline and not self.before.offline

    @property
    def truncates(self) -> bool:
        """Whether TRUNCATE emptied the table: that ends the changefeeds watching it,
        as CockroachDB's docs say TRUNCATE causes errors on them."""
        return self.after.truncations > self.before.truncations

    @property
    def ends_feed(self) -> bool:
        """Whether the change ends every changefeed watching the table, whatever its
        schema change policy: the table was dropped, taken offline or truncated."""
        return self.after.dropped or self.takes_offline or self.truncates

    @property
    def changes_columns(self) -> bool:
        return bool(self.added_columns or self.dropped_columns or self.retyped_columns)

    def describe(self) -> str:
        """What the change did; a drop and a truncation in CockroachDB's words (its
        changefeed jobs fail with ``"t" was dropped`` and ``"t" was truncated``)."""
        parts = []
        if self.after.dropped:
            return f'"{self.before.name}" was dropped'
        if self.takes_offline:
            return f"table {self.before.name!r} was taken offline by IMPORT INTO"
        if self.truncates:
            return f'"{self.before.name}" was truncated'
        if self.added_columns:
            parts.append("added column(s) " + ", ".join(self.added_columns))
        if self.dropped_columns:
            parts.append("dropped column(s) " + ", ".join(self.dropped_columns))
        if self.retyped_columns:
            parts.append("changed the type of column(s) " + ", ".join(self.retyped_columns))
        if self.after.name != self.before.name:
            parts.append(f"renamed to {self.after.name!r}")
        what = "; ".join(parts) or "changed its schema"
        return f"table {self.before.name!r} {what} (version {self.after.version})"


class SchemaHistory:
    """The descriptor versions of table ``table_id`` from ``since`` on. Thread-safe."""

    def __init__(
        self, db: KV, table_id: int, since: Timestamp, *, omit_virtual: bool = False
    ) -> None:
        """``omit_virtual``: every version without its VIRTUAL computed columns (a
        changefeed's ``virtual_columns='omitted'``)."""
        self._db = db
        self._omit_virtual = omit_virtual
        self._key = descriptor_key(table_id)
        self._lock = threading.Lock()
        self._times: list[Timestamp] = []  # when each version was written, ascending
        self._versions: list[TableDescriptor] = []
        self._since = since
        first = self._read(since)  # history before the feed's start is not needed
        if first is not None:
            self._times.append(first[0])
            self._versions.append(first[1])
        self.known_through = since

    def at(self, ts: Timestamp) -> TableDescriptor | None:
        """The descriptor in force at ``ts`` (``None`` if the table did not exist)."""
        with self._lock:
            if ts > self.known_through:
                self._extend(max(ts, self._db.now()))
            i = bisect.bisect_right(self._times, ts)
            return self._versions[i - 1] if i else None

    def version(self, number: int) -> TableDescriptor | None:
        """Version ``number`` of the descriptor (``None`` if it was not in force at or
        after ``since``)."""
        with self._lock:
            if not self._versions or self._versions[-1].version < number:
                self._extend(max(self.known_through, self._db.now()))
            for desc in reversed(self._versions):
                if desc.version == number:
                    return desc
            return None

    def written_at(self, number: int) -> Timestamp | None:
        """When version ``number`` was written (``None``: not a version this history
        holds)."""
        with self._lock:
            for ts, desc in zip(reversed(self._times), reversed(self._versions), strict=True):
                if desc.version == number:
                    return ts
            return None

    def changes(self, lo: Timestamp, hi: Timestamp) -> list[SchemaChange]:
        """Every version change in ``(lo, hi]``, oldest first."""
        with self._lock:
            if hi > self.known_through:
                self._extend(max(hi, self._db.now()))
            out = []
            for i in range(bisect.bisect_right(self._times, lo), len(self._times)):
                if self._times[i] > hi:
                    break
                if i > 0:
                    before, after = self._versions[i - 1], self._versions[i]
                    out.append(SchemaChange(self._times[i], before, after))
            return out

    def created(self, lo: Timestamp, hi: Timestamp) -> tuple[Timestamp, TableDescriptor] | None:
        """The table's first version and when it was written, if the table was created
        in ``(lo, hi]`` (``None``: it was not; a table that existed at the history's
        ``since`` was created before it)."""
        with self._lock:
            if hi > self.known_through:
                self._extend(max(hi, self._db.now()))
            if not self._times or self._times[0] <= self._since:
                return None
            ts = self._times[0]
            return (ts, self._versions[0]) if lo < ts <= hi else None

    def _read(self, ts: Timestamp) -> tuple[Timestamp, TableDescriptor] | None:
        found = self._db.scan(self._key, key_next(self._key), as_of=ts)
        if not found:
            return None
        desc = decode_descriptor(found[0].value)
        if not isinstance(desc, TableDescriptor):
            raise InvariantViolation(f"descriptor {self._key!r} is not a table")
        if self._omit_virtual:
            desc = desc.without_virtual()
        return found[0].ts, desc

    def _extend(self, to: Timestamp) -> None:
        """Read the version in force at ``to``, then walk back version by version until
        the history meets what was already known."""
        found: list[tuple[Timestamp, TableDescriptor]] = []
        current = self._read(to)
        while current is not None and current[0] > self.known_through:
            found.append(current)
            current = self._read(current[0].prev())
        for ts, desc in reversed(found):
            self._times.append(ts)
            self._versions.append(desc)
        self.known_through = to
