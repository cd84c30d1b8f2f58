"""Columnar copies of tables' rows, kept per gateway and brought up to each reader's
timestamp with MVCC deltas (for :mod:`feedkv.sql.analytic`).

A :class:`TableCopy` is a table's committed rows as of a timestamp ``as_of`` (R), as an
Arrow table with one column per column of a kind it holds (INT, STRING, BOOL; the
others are left out, and a query naming one is not answered from the copy). It is made
by a transaction's ordinary scan of the table's span at its read timestamp S, by a
transaction with no write in the table: so it holds every committed version at or
below S, and nothing commits below S afterwards (the scan put S in the timestamp cache
over the span). NB: its own transaction may still write there *at* S (the timestamp
cache lets a transaction write where it read), and those writes are not in the copy:
so R is S's predecessor, and every later delta reads the versions at S again (applying
a row's newest value twice changes nothing).

A transaction reading at T >= R gets the table at T from the copy and
:meth:`~feedkv.kv.txn.Txn.scan_changes` from R (an
:class:`~feedkv.kv.api.IncrementalScan`: a read at T with a scan's conflicts,
timestamp cache and refresh), applied to it. The result is what its scan of the table
would have read; the copy moves on to T (a new copy: one in use is never changed).
A transaction that wrote in the table, one reading below R, a delta of more than a
quarter of the rows, a table whose history at R was garbage collected: the copy is made
again by a scan at the transaction's read timestamp.

Memory: :class:`ColumnarCache` holds copies up to ``max_bytes`` (the Arrow buffers plus
an estimate for the key index), evicting the least recently used; a table bigger than
that is copied for the query that needs it and never kept. The gateway's cache takes its
bound from the cluster setting ``sql.analytic_cache.max_bytes`` (:data:`MAX_BYTES_SETTING`;
default 256MiB, ``0`` keeps nothing), read again at most every
:data:`SETTING_REFRESH_S` seconds (a snapshot read outside the query's transaction);
a lower bound evicts at once. An entry is keyed by table
id and descriptor version: a new version replaces the older ones of its table (a schema
change drops the copy at once), and a copy goes when the cache needs the room. One
cache per KV client (a gateway node's sessions share theirs): :func:`cache_for`.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feedkv.errors import BatchTimestampBeforeGCError, InvalidArgumentError
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import decode_row_values, table_span
from feedkv.sql.types import Kind
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import key_next
from feedkv.util.units import parse_size

if TYPE_CHECKING:
    import pyarrow as pa

    from feedkv.kv.db import KVClient
    from feedkv.kv.txn import Txn

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_BYTES_SETTING",
    "SETTING_REFRESH_S",
    "ColumnarCache",
    "TableCopy",
    "cache_for",
    "column_name",
    "copyable",
    "max_bytes_setting",
]

DEFAULT_MAX_BYTES = 256 << 20
MAX_BYTES_SETTING = "sql.analytic_cache.max_bytes"
SETTING_REFRESH_S = 10.0
_KEY_OVERHEAD = 120  # bytes of a dict entry, its key object and row number, about
_FIRST_PAGE, _PAGE = 1024, 16384  # pairs a copy's scan reads at once: first, at most
_DELTA_SHARE = 4  # a delta of more than 1/_DELTA_SHARE of the rows: copy anew
_MIN_DELTA = 1024  # ... but this many changed keys are always applied


def _nothing() -> None:
    pass


def _arrow_type(kind: Kind) -> pa.DataType | None:
    import pyarrow as pa

    return {Kind.INT: pa.int64(), Kind.STRING: pa.string(), Kind.BOOL: pa.bool_()}.get(kind)


def column_name(column_id: int) -> str:
    """The name of a column's Arrow column in a copy."""
    return f"c{column_id}"


_ROW = "__row"  # each row's number in its copy: how dead rows are filtered out


def copyable(desc: TableDescriptor) -> bool:
    """Whether rows of ``desc`` can be copied: one family (a pair per row, so a changed
    key is a changed row) and no VIRTUAL computed column (computed when read)."""
    return len(desc.families) == 1 and not any(c.virtual for c in desc.columns)


@dataclass(frozen=True, slots=True)
class TableCopy:
    """The rows of one version of a table as of ``as_of`` (immutable).

    ``table`` holds every row ever appended to this copy (a ``__row`` column numbers
    them), ``index`` maps each live row's key to its number, and ``dead`` numbers the
    rows a later change replaced or deleted."""

    table_id: int
    version: int
    as_of: Timestamp
    table: pa.Table
    index: dict[bytes, int]
    dead: frozenset[int]

    @property
    def size(self) -> int:
        return int(self.table.nbytes) + len(self.index) * _KEY_OVERHEAD

    def rows(self) -> pa.Table:
        """The live rows (columns named by :func:`column_name`, and ``__row``)."""
        if not self.dead:
            return self.table
        import pyarrow as pa
        import pyarrow.compute as pc

        dead = pa.array(sorted(self.dead), pa.int64())
        return self.table.filter(pc.invert(pc.is_in(self.table[_ROW], value_set=dead)))

    def advanced(
        self, desc: TableDescriptor, as_of: Timestamp, changes: dict[bytes, bytes | None]
    ) -> TableCopy:
        """This copy with ``changes`` (key -> value, ``None``: deleted) applied, as of
        ``as_of``."""
        if not changes:
            return TableCopy(self.table_id, self.version, as_of, self.table, self.index, self.dead)
        index = dict(self.index)
        dead = set(self.dead)
        for key in changes:
            old = index.pop(key, None)
            if old is not None:
                dead.add(old)
        kvs = [KeyValue(k, v, as_of) for k in sorted(changes) if (v := changes[k]) is not None]
        start = self.table.num_rows
        keys, added = _columns(desc, kvs, start)
        index.update(zip(keys, range(start, start + len(keys)), strict=True))
        import pyarrow as pa

        table = pa.concat_tables([self.table, added]) if keys else self.table
        if len(dead) * 2 > table.num_rows:
            return _compacted(desc, self.table_id, self.version, as_of, table, index, dead)
        return TableCopy(self.table_id, self.version, as_of, table, index, frozenset(dead))


def _compacted(
    desc: TableDescriptor,
    table_id: int,
    version: int,
    as_of: Timestamp,
    table: pa.Table,
    index: dict[bytes, int],
    dead: set[int],
) -> TableCopy:
    """The copy without its dead rows, renumbered."""
    import pyarrow as pa

    copy = TableCopy(table_id, version, as_of, table, index, frozenset(dead))
    live = copy.rows()
    old_rows = live[_ROW].to_pylist()
    renumber = {old: new for new, old in enumerate(old_rows)}
    live = live.set_column(
        live.schema.get_field_index(_ROW), _ROW, pa.array(range(len(old_rows)), pa.int64())
    )
    return TableCopy(
        table_id,
        version,
        as_of,
        live,
        {key: renumber[row] for key, row in index.items()},
        frozenset(),
    )


def _columns(
    desc: TableDescriptor, kvs: Iterable[KeyValue], first: int
) -> tuple[list[bytes], pa.Table]:
    """The rows of ``kvs`` (one pair per row) as an Arrow table numbered from ``first``,
    and their keys in the same order."""
    import pyarrow as pa

    keys: list[bytes] = []
    rows: list[Any] = []
    pairs = list(kvs)
    for kv, (_key, values, _ts) in zip(pairs, decode_row_values(desc, pairs), strict=True):
        keys.append(kv.key)
        rows.append(values)
    arrays: list[pa.Array] = []
    names: list[str] = []
    by_position: list[Any] = list(zip(*rows, strict=True)) if rows else [()] * len(desc.columns)
    for column, values in zip(desc.columns, by_position, strict=True):
        arrow_type = _arrow_type(column.type.kind)
        if arrow_type is None:
            continue
        names.append(column_name(column.id))
        arrays.append(pa.array(values, arrow_type))
    names.append(_ROW)
    arrays.append(pa.array(range(first, first + len(keys)), pa.int64()))
    return keys, pa.Table.from_arrays(arrays, names=names)


class ColumnarCache:
    """Table copies up to ``max_bytes`` (see the module docstring); thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise InvalidArgumentError(f"a columnar cache's bound must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._copies: OrderedDict[tuple[int, int], TableCopy] = OrderedDict()
        self._bytes = 0
        # What the copies were made of, for tests and the bench: fresh scans, deltas
        self.built = 0
        self.advanced = 0

    def bound(self, max_bytes: int) -> None:
        """Hold at most ``max_bytes`` from now on (evicting what no longer fits)."""
        if max_bytes < 0:
            raise InvalidArgumentError(f"a columnar cache's bound must be >= 0, got {max_bytes}")
        with self._lock:
            self.max_bytes = max_bytes
            while self._copies and self._bytes > max_bytes:
                _key, evicted = self._copies.popitem(last=False)
                self._bytes -= evicted.size

    def held_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def get(self, desc: TableDescriptor) -> TableCopy | None:
        with self._lock:
            copy = self._copies.get((desc.id, desc.version))
            if copy is not None:
                self._copies.move_to_end((desc.id, desc.version))
            return copy

    def rows_for(
        self, txn: Txn, desc: TableDescriptor, check: Callable[[], None] = _nothing
    ) -> pa.Table | None:
        """The rows of ``desc`` that ``txn``'s scan of the table would read, as an
        Arrow table; read in ``txn`` (see the module docstring). ``None`` when the
        table cannot be copied or the transaction wrote in it: read it the usual way.
        ``check`` is called between the pages of a scan (a session's interrupt)."""
        span = table_span(desc.id)
        if not copyable(desc) or txn.writes_in(span.start, span.end):
            return None
        copy = self.get(desc)
        if copy is not None:
            read_ts = txn.read_ts
            if read_ts is None or read_ts >= copy.as_of:
                limit = max(_MIN_DELTA, len(copy.index) // _DELTA_SHARE)
                try:
                    changes = txn.scan_changes(span.start, span.end, copy.as_of, limit=limit)
                except (BatchTimestampBeforeGCError, InvalidArgumentError):
                    changes = None  # history at the copy's time is gone, or read below it
                if changes is not None:
                    read_ts = txn.read_ts
                    if read_ts is None:
                        return None
                    advanced = copy.advanced(desc, read_ts.prev(), changes)
                    self._keep(advanced)
                    with self._lock:
                        self.advanced += 1
                    return advanced.rows()
        fresh = self._build(txn, desc, check)
        if fresh is None:
            return None
        self._keep(fresh)
        with self._lock:
            self.built += 1
        return fresh.rows()

    def _build(
        self, txn: Txn, desc: TableDescriptor, check: Callable[[], None]
    ) -> TableCopy | None:
        span = table_span(desc.id)
        keys, table = _columns(desc, _scan(txn, span.start, span.end, check), 0)
        read_ts = txn.read_ts
        if read_ts is None:
            return None
        return TableCopy(
            desc.id,
            desc.version,
            read_ts.prev(),  # NB: see the module docstring
            table,
            dict(zip(keys, range(len(keys)), strict=True)),
            frozenset(),
        )

    def _keep(self, copy: TableCopy) -> None:
        """Hold ``copy`` (unless bigger than the bound, or older than the one held),
        replacing its table's other versions and evicting the least recently used."""
        size = copy.size
        key = (copy.table_id, copy.version)
        with self._lock:
            for held in [k for k in self._copies if k[0] == copy.table_id]:
                if held != key:
                    self._bytes -= self._copies.pop(held).size
            current = self._copies.get(key)
            if current is not None:
                if current.as_of >= copy.as_of:
                    return
                self._bytes -= self._copies.pop(key).size
            if size > self.max_bytes:
                return
            while self._copies and self._bytes + size > self.max_bytes:
                _key, evicted = self._copies.popitem(last=False)
                self._bytes -= evicted.size
            self._copies[key] = copy
            self._bytes += size


def _scan(txn: Txn, start: bytes, end: bytes, check: Callable[[], None]) -> Iterator[KeyValue]:
    page = _FIRST_PAGE
    while True:
        kvs = txn.scan(start, end, limit=page)
        yield from kvs
        if len(kvs) < page:
            return
        check()
        start = key_next(kvs[-1].key)
        page = min(2 * page, _PAGE)


_caches: weakref.WeakKeyDictionary[KVClient, tuple[ColumnarCache, list[float]]] = (
    weakref.WeakKeyDictionary()
)
_caches_lock = threading.Lock()


def cache_for(db: KVClient) -> ColumnarCache:
    """The columnar cache of the gateway whose KV client is ``db`` (made on first use),
    bounded by the cluster setting (read again every :data:`SETTING_REFRESH_S`)."""
    now = time.monotonic()
    with _caches_lock:
        entry = _caches.get(db)
        if entry is None:
            entry = _caches[db] = (ColumnarCache(), [now - 2 * SETTING_REFRESH_S])
        cache, read_at = entry
        stale = now - read_at[0] >= SETTING_REFRESH_S
        if stale:
            read_at[0] = now
    if stale:
        cache.bound(max_bytes_setting(db))
    return cache


def max_bytes_setting(db: KVClient) -> int:
    """The cluster setting's bound (its default when unset or unreadable as a size)."""
    from feedkv.sql import catalog

    value = catalog.get_setting(catalog.Snapshot(db, db.now()), MAX_BYTES_SETTING)
    if value is None:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(value)
    except InvalidArgumentError:
        return DEFAULT_MAX_BYTES
