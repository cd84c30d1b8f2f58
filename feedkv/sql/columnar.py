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

Copies made by their writers: IMPORT INTO parses every row's values before it writes
them, and nothing else writes a table while it is offline: up to the highest timestamp
the import wrote at, the table holds what it held before (:func:`rows_before`: the copy
held, advanced by a delta, or nothing at all) and the imported rows. Once the table is
online the import hands the cache the copy made from them, merged with that
(:func:`rows_imported`, :meth:`TableCopy.of_columns`, :meth:`TableCopy.merged`: the same
table a scan makes). Reads of the online version are above that timestamp and advance
the copy by deltas as usual. A table with rows but no copy held is copied in the
background instead. A copy is never replaced by one of an older descriptor version.

Background builds: a statement that writes :data:`BULK_ROWS` rows or more into a table
(INSERT, UPSERT, COPY; :func:`note_written`), and IMPORT INTO that hands over no copy,
has its commit ask the gateway's cache for the table's copy
(:meth:`ColumnarCache.prefetch`): a read-only transaction of its own reads the
descriptor there and then (its timestamp S is taken before the statement returns), and
the builder thread, one per cache and one build at a time, makes the copy with it (or
advances the copy held by a delta) as a query would, once the table has had no bulk
write for :data:`SETTLE_S` (a later one's build replaces the one queued). A build stops
past the bound instead of keeping a copy too big for it. A query that would copy the
table itself waits for a build of it that it can read (running, or queued: it then
starts at once; its own timestamp at or above S), its interrupt honoured, then moves the
copy to its timestamp with a delta, as usual: only the head start is new, never what a
reader sees. :func:`close_cache` (``DB.close``)
stops the builder: a build running stops at its next page and the thread ends.
"""

from __future__ import annotations

import itertools
import logging
import operator
import threading
import time
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from feedkv.errors import (
    BatchTimestampBeforeGCError,
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
)
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import decode_columns, table_span
from feedkv.sql.types import Kind
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import key_next
from feedkv.util.units import parse_size

if TYPE_CHECKING:
    import pyarrow as pa

    from feedkv.kv.db import KVClient
    from feedkv.kv.txn import Txn
    from feedkv.sql.execution import Execution

__all__ = [
    "BULK_ROWS",
    "DEFAULT_MAX_BYTES",
    "LIVE",
    "MAX_BYTES_SETTING",
    "SETTING_REFRESH_S",
    "ColumnarCache",
    "TableCopy",
    "cache_for",
    "close_cache",
    "column_name",
    "copyable",
    "max_bytes_setting",
    "note_written",
    "rows_before",
    "rows_committed",
    "rows_imported",
]

DEFAULT_MAX_BYTES = 256 << 20
MAX_BYTES_SETTING = "sql.analytic_cache.max_bytes"
SETTING_REFRESH_S = 10.0
_KEY_OVERHEAD = 41  # bytes of a key object without its bytes, and its place in a list
_ADDED_OVERHEAD = 105  # ... and of an appended row's dict entry and row number
_FIRST_PAGE, _PAGE = 1024, 16384  # pairs a copy's scan reads at once: first, at most
_DELTA_SHARE = 4  # a delta of more than 1/_DELTA_SHARE of the rows: copy anew
_MIN_DELTA = 1024  # ... but this many changed keys are always applied
_TAIL_CHUNKS = 16  # chunks the rows deltas appended may take before they are joined
BULK_ROWS = 1000  # rows a statement writes into a table to have its copy made
# A background build waits until its table had no bulk write for this long (or a query
# asks for it): a load of many bulk statements is copied once, after it, rather than
# after each statement (each a delta applied to a new copy of the whole table: a load of
# 1,000-row INSERTs paid a fifth of its rate for it, and more as the table grew).
SETTLE_S = 0.5
_WAIT_SLICE_S = 0.05  # how often a query waiting for a background build checks its interrupt

log = logging.getLogger(__name__)


def _nothing() -> None:
    pass


def _arrow_type(kind: Kind) -> pa.DataType | None:
    import pyarrow as pa

    return {Kind.INT: pa.int64(), Kind.STRING: pa.string(), Kind.BOOL: pa.bool_()}.get(kind)


def column_name(column_id: int) -> str:
    """The name of a column's Arrow column in a copy."""
    return f"c{column_id}"


_ROW = "__row"  # each row's number in its copy, which is its position in the table
LIVE = "__live"  # the column :meth:`TableCopy.marked` adds: whether the row is live


def copyable(desc: TableDescriptor) -> bool:
    """Whether rows of ``desc`` can be copied: one family (a pair per row, so a changed
    key is a changed row) and no VIRTUAL computed column (computed when read)."""
    return len(desc.families) == 1 and not any(c.virtual for c in desc.columns)


@dataclass(frozen=True, slots=True)
class TableCopy:
    """The rows of one version of a table as of ``as_of`` (immutable).

    ``table`` holds every row ever appended to this copy (a ``__row`` column numbers
    them): first the rows a scan read, whose keys ``keys`` lists in key order (row n's
    key is ``keys[n]``: a sorted list costs half a dict's memory and nothing to make),
    then the rows later changes appended, ``added`` mapping the live ones' keys to
    their numbers; ``dead`` numbers the rows a later change replaced or deleted.
    ``keys_size``: the bytes ``keys`` takes, about (:func:`_keys_size`)."""

    table_id: int
    version: int
    as_of: Timestamp
    table: pa.Table
    keys: list[bytes]
    keys_size: int
    added: dict[bytes, int]
    dead: frozenset[int]

    @property
    def size(self) -> int:
        return (
            int(self.table.nbytes)
            + self.keys_size
            + sum(map(len, self.added))
            + len(self.added) * _ADDED_OVERHEAD
        )

    @property
    def live(self) -> int:
        """How many rows the copy holds."""
        return int(self.table.num_rows) - len(self.dead)

    def row_of(self, key: bytes) -> int | None:
        """The number of ``key``'s live row (``None``: no live row has it)."""
        found = self.added.get(key)
        if found is not None:
            return found
        n = bisect_left(self.keys, key)
        if n < len(self.keys) and self.keys[n] == key and n not in self.dead:
            return n
        return None

    def rows(self) -> pa.Table:
        """The live rows (columns named by :func:`column_name`, and ``__row``)."""
        if not self.dead:
            return self.table
        return self.table.filter(self._live())

    def marked(self) -> pa.Table:
        """Every row of ``table``, with a BOOL column :data:`LIVE` saying which are live
        when some are dead: what a reader that filters as it reads wants (no copy of
        the rows; the column costs a bit per row)."""
        if not self.dead:
            return self.table
        return self.table.append_column(LIVE, self._live())

    def _live(self) -> pa.BooleanArray:
        """Which rows of ``table`` are live (row n is at position n)."""
        import pyarrow as pa

        count = self.table.num_rows
        bits = bytearray(b"\xff" * ((count + 7) // 8))
        for n in self.dead:
            bits[n >> 3] &= ~(1 << (n & 7)) & 0xFF
        return pa.BooleanArray.from_buffers(pa.bool_(), count, [None, pa.py_buffer(bits)])

    def advanced(
        self, desc: TableDescriptor, as_of: Timestamp, changes: dict[bytes, bytes | None]
    ) -> TableCopy:
        """This copy with ``changes`` (key -> value, ``None``: deleted) applied, as of
        ``as_of``."""
        if not changes:
            return TableCopy(
                self.table_id,
                self.version,
                as_of,
                self.table,
                self.keys,
                self.keys_size,
                self.added,
                self.dead,
            )
        added = dict(self.added)
        dead = set(self.dead)
        for key in changes:
            old = self.row_of(key)
            if old is not None:
                dead.add(old)
                added.pop(key, None)
        kvs = [KeyValue(k, v, as_of) for k in sorted(changes) if (v := changes[k]) is not None]
        start = self.table.num_rows
        keys, appended = _columns(desc, kvs, start)
        added.update(zip(keys, range(start, start + len(keys)), strict=True))
        table = _appended(self.table, len(self.keys), appended) if keys else self.table
        copy = TableCopy(
            self.table_id,
            self.version,
            as_of,
            table,
            self.keys,
            self.keys_size,
            added,
            frozenset(dead),
        )
        return copy.compacted() if len(dead) * 2 > table.num_rows else copy

    @classmethod
    def of_columns(
        cls,
        desc: TableDescriptor,
        as_of: Timestamp,
        keys: list[bytes],
        columns: Mapping[int, Any],
        order: Sequence[int] | None = None,
    ) -> TableCopy:
        """The copy of ``desc`` as of ``as_of`` made from rows' values rather than read:
        ``keys`` are the rows' KV keys, ascending (one pair per row: one family);
        ``columns`` each column's values (coerced, as they were written; a list, or an
        Arrow column of the copy's type), by column id, in the rows' order, which is key
        order, or, given ``order``, such that the row of ``keys[n]`` is ``order[n]``.
        The same table a scan of those rows makes (:func:`_columns`); the caller answers
        for their being all the rows at ``as_of``."""
        import pyarrow as pa

        copied = _copied(desc)
        count = len(keys)
        arrays = []
        for column_id, arrow_type in copied:
            values = columns[column_id]
            if len(values) != count:
                raise InvariantViolation(
                    f"table {desc.name!r}: column {column_id} has {len(values)} "
                    f"values for {count} keys"
                )
            if not isinstance(values, pa.ChunkedArray | pa.Array):
                values = pa.array(values, arrow_type)
            elif values.type != arrow_type:
                raise InvariantViolation(
                    f"table {desc.name!r}: column {column_id} is {values.type}, not {arrow_type}"
                )
            arrays.append(values)
        names = [column_name(column_id) for column_id, _type in copied]
        table = pa.Table.from_arrays(arrays, names=names)
        if order is not None:
            table = table.take(pa.array(order, pa.int64()))
        table = table.append_column(_ROW, pa.array(range(count), pa.int64()))
        return cls(desc.id, desc.version, as_of, table, keys, _keys_size(keys), {}, frozenset())

    def merged(self, other: TableCopy) -> TableCopy | None:
        """This copy's live rows and ``other``'s together, as ``other``'s table version
        as of its ``as_of`` (the caller answers for that); ``None`` when a key is in
        both, or their columns differ."""
        import pyarrow as pa
        import pyarrow.compute as pc

        mine = self.compacted() if self.dead or self.added else self
        theirs = other.compacted() if other.dead or other.added else other
        if mine.table.schema != theirs.table.schema:
            return None
        if not mine.keys or not theirs.keys:
            keys, tables = mine.keys or theirs.keys, [mine.table if mine.keys else theirs.table]
        elif mine.keys[-1] < theirs.keys[0]:
            keys, tables = mine.keys + theirs.keys, [mine.table, theirs.table]
        elif theirs.keys[-1] < mine.keys[0]:
            keys, tables = theirs.keys + mine.keys, [theirs.table, mine.table]
        else:  # NB: interleaved: sorted in C, by pyarrow
            keys = mine.keys + theirs.keys
            order = pc.sort_indices(pa.array(keys, pa.binary()))
            keys = list(map(keys.__getitem__, order.to_pylist()))
            tables = [pa.concat_tables([mine.table, theirs.table]).take(order)]
            if not all(map(operator.lt, keys, itertools.islice(keys, 1, None))):
                return None  # a key in both
        return _numbered(other, pa.concat_tables(tables), keys)

    def compacted(self) -> TableCopy:
        """The copy without its dead rows, in key order, numbered anew."""
        import pyarrow as pa

        dead = self.dead
        live = [(key, n) for n, key in enumerate(self.keys) if n not in dead]
        live += self.added.items()
        live.sort()
        table = self.table.take(pa.array([n for _key, n in live], pa.int64()))
        return _numbered(self, table, [key for key, _n in live])


def _numbered(like: TableCopy, table: pa.Table, keys: list[bytes]) -> TableCopy:
    """A copy of ``like``'s table version as of its ``as_of`` holding ``table``, whose
    rows are those of ``keys`` in their order, numbered anew (as a scan numbers them)."""
    import pyarrow as pa

    table = table.set_column(
        table.schema.get_field_index(_ROW), _ROW, pa.array(range(len(keys)), pa.int64())
    )
    return TableCopy(
        like.table_id, like.version, like.as_of, table, keys, _keys_size(keys), {}, frozenset()
    )


def _appended(table: pa.Table, scanned: int, appended: pa.Table) -> pa.Table:
    """``table`` and then ``appended``, the rows after the first ``scanned`` (those
    appended by changes) kept in at most :data:`_TAIL_CHUNKS` chunks. NB: a delta
    appends a chunk, and DuckDB reads a table of thousands of small chunks 3x slower;
    joining them copies the changed rows only, once per :data:`_TAIL_CHUNKS` deltas."""
    import pyarrow as pa

    table = pa.concat_tables([table, appended])
    tail = table.slice(scanned)
    if tail.num_columns and tail.column(0).num_chunks > _TAIL_CHUNKS:
        table = pa.concat_tables([table.slice(0, scanned), tail.combine_chunks()])
    return table


def _keys_size(keys: list[bytes]) -> int:
    """About the bytes a list of keys takes: the keys, their objects and places."""
    return sum(map(len, keys)) + len(keys) * _KEY_OVERHEAD


def _copied(desc: TableDescriptor) -> list[tuple[int, pa.DataType]]:
    """The ids and Arrow types of the columns a copy of ``desc`` holds."""
    return [
        (column.id, arrow_type)
        for column in desc.columns
        if (arrow_type := _arrow_type(column.type.kind)) is not None
    ]


def _columns(
    desc: TableDescriptor, kvs: Sequence[KeyValue], first: int
) -> tuple[list[bytes], pa.Table]:
    """The rows of ``kvs`` (one pair per row, in key order) as an Arrow table numbered
    from ``first``, and their keys in the same order."""
    import pyarrow as pa

    copied = _copied(desc)
    keys, columns = decode_columns(desc, kvs, [column_id for column_id, _type in copied])
    arrays = [
        pa.array(values, arrow_type)
        for (_id, arrow_type), values in zip(copied, columns, strict=True)
    ]
    arrays.append(pa.array(range(first, first + len(keys)), pa.int64()))
    names = [column_name(column_id) for column_id, _type in copied] + [_ROW]
    return keys, pa.Table.from_arrays(arrays, names=names)


class _Stopped(FeedKVError):
    """The cache closed while its builder was building (never leaves this module)."""


@dataclass
class _Build:
    """A background build of ``desc``'s copy, read by ``txn`` (its timestamp taken when
    the build was asked for); ``done`` once it ended (kept or not)."""

    desc: TableDescriptor
    txn: Txn
    due: float  # when the builder may start it (time.monotonic; 0: a query waits for it)
    done: threading.Event = field(default_factory=threading.Event)

    def serves(self, desc: TableDescriptor, read_ts: Timestamp | None) -> bool:
        """Whether the copy it builds can answer a read of ``desc`` at ``read_ts``
        (``None``: a transaction yet to read, whose timestamp is taken later)."""
        built_at = self.txn.read_ts
        return (
            self.desc.id == desc.id
            and self.desc.version == desc.version
            and built_at is not None
            and (read_ts is None or read_ts >= built_at.prev())
        )

    def end(self) -> None:
        self.txn.rollback()  # NB: it only read
        self.done.set()


class ColumnarCache:
    """Table copies up to ``max_bytes`` (see the module docstring); thread-safe.

    Given the gateway's KV client ``db``, it also builds copies in the background
    (:meth:`prefetch`) on a thread of its own, one build at a time, until
    :meth:`close`."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        db: KVClient | None = None,
        *,
        between_pages: Callable[[], None] = _nothing,  # a test knob: called by the builder
    ) -> None:
        if max_bytes < 0:
            raise InvalidArgumentError(f"a columnar cache's bound must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._db = db
        self._lock = threading.Lock()
        self._copies: OrderedDict[tuple[int, int], TableCopy] = OrderedDict()
        self._bytes = 0
        # What the copies were made of, for tests and the bench: fresh scans, deltas;
        # background builds that ended (kept, or given up: too big, the table gone)
        self.built = 0
        self.advanced = 0
        self.prefetched = 0
        self.waited = 0  # queries that waited for a background build
        self.offered = 0  # copies made by their writers (IMPORT INTO) and held
        self._between_pages = between_pages
        # The background builds: tables waiting (in order), the one running, the thread
        self._queue: dict[int, _Build] = {}
        self._running: _Build | None = None
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False

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

    def building(self, table_id: int) -> bool:
        """Whether a background build of the table is queued or running."""
        with self._lock:
            return table_id in self._queue or (
                self._running is not None and self._running.desc.id == table_id
            )

    def prefetch(self, table_id: int) -> None:
        """Bring the table's copy up to date in the background (made anew, or advanced
        by a delta when one is held): after a bulk write committed there, so that the
        first analytic query finds it made. The build's transaction reads the table's
        descriptor here, so a query that starts after this returns reads at or above
        the build's timestamp and can wait for its copy; the rest runs on the builder
        thread, once the table has had no bulk write for :data:`SETTLE_S`: a build of
        the table still queued is replaced by this one (of a later timestamp), unless a
        query waits for it. Nothing happens without a KV client, once closed, when the
        bound keeps nothing, or for a table that cannot be copied (or is gone, or
        offline)."""
        from feedkv.sql import catalog

        db = self._db
        with self._lock:
            queued = self._queue.get(table_id)
            wanted = queued is not None and queued.due == 0.0  # a query waits for it
            if db is None or self._closed or self.max_bytes == 0 or wanted:
                return
        txn = db.transaction()
        try:
            desc = catalog.table_by_id(txn, table_id)
        except Exception:  # NB: the bulk write committed; the copy is only a head start
            log.warning("columnar copy of table %d not started", table_id, exc_info=True)
            desc = None
        if desc is None or desc.offline or not copyable(desc):
            txn.rollback()
            return
        build = _Build(desc, txn, time.monotonic() + SETTLE_S)
        with self._lock:
            replaced = self._queue.get(table_id)
            late = self._closed or (replaced is not None and replaced.due == 0.0)
            if not late:
                self._queue.pop(table_id, None)  # NB: the new one goes last, as it came
                self._queue[table_id] = build
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._build_loop, name="feedkv-columnar-builder", daemon=True
                    )
                    self._thread.start()
                self._wake.notify()
        if late:
            build.end()
        elif replaced is not None:
            replaced.end()

    def close(self) -> None:
        """Stop building (a build running stops at its next page) and wait for the
        builder thread to end; copies stay readable. Idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            queued = list(self._queue.values())
            self._queue.clear()
            self._wake.notify()
        for build in queued:
            build.end()
        if thread is not None:
            thread.join()

    def _build_loop(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    due = [(build.due, table_id) for table_id, build in self._queue.items()]
                    first, table_id = min(due, default=(None, 0))
                    if first is not None and first <= now:
                        break
                    self._wake.wait(None if first is None else first - now)
                build = self._running = self._queue.pop(table_id)
            try:
                self.copy_for(build.txn, build.desc, self._check_open, background=True)
            except _Stopped:
                return
            except Exception:  # NB: a failed build costs the query its head start only
                if not self._closed:  # NB: closing, its reads may fail: nothing to tell
                    log.warning("columnar copy of table %d not built", table_id, exc_info=True)
            finally:
                with self._lock:
                    self._running = None
                    self.prefetched += 1
                build.end()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        self._between_pages()
        if self._closed:
            raise _Stopped

    def _wait(self, desc: TableDescriptor, txn: Txn, check: Callable[[], None]) -> None:
        """Before ``txn`` copies ``desc`` itself: wait (calling ``check`` every
        :data:`_WAIT_SLICE_S`) for the background build of ``desc``, running or queued,
        if ``txn`` can read its copy (reads at or above the build's timestamp); a build
        queued that it cannot read is taken off the queue (``txn``'s copy is kept
        instead).

        NB: waiting beats the other ways: the build has read part of the table, a scan
        of the query's own would share the CPU with it (the GIL) and take as long again,
        and reading the rows the usual way takes longer than a copy."""
        read_ts = txn.read_ts
        with self._lock:
            queued = self._queue.get(desc.id)
            if queued is not None and not queued.serves(desc, read_ts):
                del self._queue[desc.id]
            else:
                queued = None
            build = self._running
            if build is not None and not build.serves(desc, read_ts):
                build = None
            if build is None and (build := self._queue.get(desc.id)) is not None:
                build.due = 0.0  # NB: the builder starts it now, settled or not
                self._wake.notify()
        if queued is not None:
            queued.end()
        if build is None:
            return
        with self._lock:
            self.waited += 1
        while not build.done.wait(_WAIT_SLICE_S):
            check()

    def rows_for(
        self, txn: Txn, desc: TableDescriptor, check: Callable[[], None] = _nothing
    ) -> pa.Table | None:
        """The rows of ``desc`` that ``txn``'s scan of the table would read, as an
        Arrow table; read in ``txn`` (see the module docstring). ``None`` when the
        table cannot be copied or the transaction wrote in it: read it the usual way.
        ``check`` is called between the pages of a scan (a session's interrupt), and
        while it waits for a background build of the table (:meth:`prefetch`)."""
        copy = self.copy_for(txn, desc, check)
        return None if copy is None else copy.rows()

    def copy_for(
        self,
        txn: Txn,
        desc: TableDescriptor,
        check: Callable[[], None] = _nothing,
        *,
        background: bool = False,
    ) -> TableCopy | None:
        """:meth:`rows_for`'s copy, kept. ``background``: a build for :meth:`prefetch`,
        which waits for nothing and gives up (``None``) on a table past the bound."""
        span = table_span(desc.id)
        if not copyable(desc) or txn.writes_in(span.start, span.end):
            return None
        if not background:
            self._wait(desc, txn, check)
        copy = self.get(desc)
        if copy is not None:
            advanced = self._advance(txn, desc, copy)
            if advanced is not None:
                return advanced
        fresh = self._build(txn, desc, check, self.max_bytes if background else None)
        if fresh is None:
            return None
        self._keep(fresh)
        with self._lock:
            self.built += 1
        return fresh

    def advance_held(self, txn: Txn, desc: TableDescriptor) -> TableCopy | None:
        """The copy of ``desc`` held, brought to ``txn``'s read by a delta (and kept);
        ``None`` when none is held or a delta does not serve: never a scan of the table,
        nor a wait for a build."""
        span = table_span(desc.id)
        if not copyable(desc) or txn.writes_in(span.start, span.end):
            return None
        copy = self.get(desc)
        return None if copy is None else self._advance(txn, desc, copy)

    def _advance(self, txn: Txn, desc: TableDescriptor, copy: TableCopy) -> TableCopy | None:
        """``copy`` brought to ``txn``'s read by a delta, and kept; ``None`` when the
        read is below it, the delta is past its limit, or history at its time is gone."""
        span = table_span(desc.id)
        read_ts = txn.read_ts
        if read_ts is not None and read_ts < copy.as_of:
            return None
        limit = max(_MIN_DELTA, copy.live // _DELTA_SHARE)
        try:
            changes = txn.scan_changes(span.start, span.end, copy.as_of, limit=limit)
        except (BatchTimestampBeforeGCError, InvalidArgumentError):
            return None  # history at the copy's time is gone, or read below it
        read_ts = txn.read_ts
        if changes is None or read_ts is None:
            return None
        advanced = copy.advanced(desc, read_ts.prev(), changes)
        self._keep(advanced)
        with self._lock:
            self.advanced += 1
        return advanced

    def _build(
        self,
        txn: Txn,
        desc: TableDescriptor,
        check: Callable[[], None],
        max_bytes: int | None = None,
    ) -> TableCopy | None:
        """A copy of ``desc`` made by ``txn``'s scan; ``None`` past ``max_bytes``."""
        span = table_span(desc.id)
        keys: list[bytes] = []
        pages: list[pa.Table] = []
        size = keys_size = 0
        for kvs in _pages(txn, span.start, span.end, check):
            page_keys, page = _columns(desc, kvs, len(keys))
            keys += page_keys
            pages.append(page)
            keys_size += _keys_size(page_keys)
            size += int(page.nbytes)
            if max_bytes is not None and size + keys_size > max_bytes:
                return None
        read_ts = txn.read_ts
        if read_ts is None:
            return None
        import pyarrow as pa

        table = pa.concat_tables(pages) if pages else _columns(desc, [], 0)[1]
        # NB: read_ts.prev(): see the module docstring
        return TableCopy(
            desc.id, desc.version, read_ts.prev(), table, keys, keys_size, {}, frozenset()
        )

    def offer(self, copy: TableCopy) -> bool:
        """Hold ``copy``, made by a caller that had the rows in hand (IMPORT INTO:
        :func:`rows_imported`), as if a scan had made it; whether it is held (not when
        bigger than the bound, or older than the copy held)."""
        kept = self._keep(copy)
        if kept:
            with self._lock:
                self.offered += 1
        return kept

    def _keep(self, copy: TableCopy) -> bool:
        """Hold ``copy`` (unless bigger than the bound, or older than the one held, or
        of an older version than one held), replacing its table's other versions and
        evicting the least recently used; whether it is held."""
        size = copy.size
        key = (copy.table_id, copy.version)
        with self._lock:
            held = [k for k in self._copies if k[0] == copy.table_id]
            if any(version > copy.version for _id, version in held):
                return False  # NB: e.g. a background build that read an older version
            for other in held:
                if other != key:
                    self._bytes -= self._copies.pop(other).size
            current = self._copies.get(key)
            if current is not None:
                if current.as_of >= copy.as_of:
                    return False
                self._bytes -= self._copies.pop(key).size
            if size > self.max_bytes:
                return False
            while self._copies and self._bytes + size > self.max_bytes:
                _key, evicted = self._copies.popitem(last=False)
                self._bytes -= evicted.size
            self._copies[key] = copy
            self._bytes += size
            return True


def _pages(
    txn: Txn, start: bytes, end: bytes, check: Callable[[], None]
) -> Iterator[list[KeyValue]]:
    """``txn``'s scan of ``[start, end)``, a page at a time (``check`` between pages)."""
    page = _FIRST_PAGE
    while True:
        kvs = txn.scan(start, end, limit=page)
        yield kvs
        if len(kvs) < page:
            return
        check()
        start = key_next(kvs[-1].key)
        page = min(2 * page, _PAGE)


_caches: weakref.WeakKeyDictionary[KVClient, tuple[ColumnarCache, list[float]]] = (
    weakref.WeakKeyDictionary()
)
_closed: weakref.WeakSet[KVClient] = weakref.WeakSet()
_caches_lock = threading.Lock()


def cache_for(db: KVClient) -> ColumnarCache:
    """The columnar cache of the gateway whose KV client is ``db`` (made on first use),
    bounded by the cluster setting (read again every :data:`SETTING_REFRESH_S`)."""
    now = time.monotonic()
    with _caches_lock:
        entry = _caches.get(db)
        if entry is None:
            builds = None if db in _closed else db  # NB: no builder outlives its client
            entry = _caches[db] = (ColumnarCache(db=builds), [now - 2 * SETTING_REFRESH_S])
        cache, read_at = entry
        stale = now - read_at[0] >= SETTING_REFRESH_S
        if stale:
            read_at[0] = now
    if stale:
        cache.bound(max_bytes_setting(db))
    return cache


def close_cache(db: KVClient) -> None:
    """Stop the background builds of ``db``'s cache, for good (``db`` is closing)."""
    with _caches_lock:
        _closed.add(db)
        entry = _caches.get(db)
    if entry is not None:
        entry[0].close()


def note_written(ex: Execution, desc: TableDescriptor, rows: int) -> None:
    """``ex`` wrote ``rows`` rows into ``desc``: its transaction's commit calls
    :func:`rows_committed`."""
    if rows >= BULK_ROWS:
        db = ex.session.db
        ex.on_commit(lambda: rows_committed(db, desc.id, rows))


def rows_committed(db: KVClient, table_id: int, rows: int) -> None:
    """``rows`` rows were committed into the table through ``db``: from
    :data:`BULK_ROWS` on, the gateway brings the table's copy up to date in the
    background (:meth:`ColumnarCache.prefetch`), before an analytic query asks."""
    if rows >= BULK_ROWS:
        cache_for(db).prefetch(table_id)


def rows_before(db: KVClient, desc: TableDescriptor) -> TableCopy | None:
    """The rows of ``desc`` now, for an import about to write there (the table
    offline): read by a transaction of its own, from the copy the gateway holds
    brought up to it by a delta, or, with none, by a scan that finds no row (an
    empty copy); ``None`` when neither serves (rows there, but no copy held: no scan
    of the table is made here)."""
    txn = db.transaction()
    try:
        copy = cache_for(db).advance_held(txn, desc)
        if copy is not None:
            return copy
        span = table_span(desc.id)
        if not copyable(desc) or txn.scan(span.start, span.end, limit=1):
            return None
        read_ts = txn.read_ts
        if read_ts is None:
            return None
        return TableCopy.of_columns(
            desc, read_ts.prev(), [], {column_id: [] for column_id, _type in _copied(desc)}
        )
    finally:
        txn.rollback()  # NB: it only read


def rows_imported(
    db: KVClient,
    desc: TableDescriptor,
    as_of: Timestamp,
    before: TableCopy,
    keys: list[bytes],
    columns: Mapping[int, Any],
    order: Sequence[int] | None = None,
) -> bool:
    """An import wrote the rows of ``desc`` (the version it brought online) that
    ``keys`` and ``columns`` give (:meth:`TableCopy.of_columns`) into a table that held
    ``before`` (:func:`rows_before`), and nothing else wrote there: with them, they are
    all the table's rows as of ``as_of``. The gateway holds them as the table's copy, so
    the first query finds it made. Whether it does (not for a table that cannot be
    copied, nor when the bound keeps nothing or the copy is past it)."""
    cache = cache_for(db)
    if not copyable(desc) or cache.max_bytes == 0 or cache.closed:
        return False
    copy: TableCopy | None = TableCopy.of_columns(desc, as_of, keys, columns, order)
    if before.live and copy is not None:
        copy = before.merged(copy)
    return copy is not None and cache.offer(copy)


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
