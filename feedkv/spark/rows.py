"""What Spark tasks run: a piece of a batch read from the store as row changes, and
row changes as Arrow record batches typed from the table's descriptor.

Tasks run in Spark's Python workers, other processes than the node: each opens a client
to the node's URL once per process (:func:`connection`) and reuses it for every task
that process runs.

Rows carry the table's columns (typed: a DECIMAL with a precision of up to 38 digits as
Spark's DECIMAL of its precision and scale, other DECIMALs and UUIDs as text, JSONB as
JSON text, TIMESTAMP without a zone, TIMESTAMPTZ in UTC) plus:

- ``__op``: ``insert``, ``update`` or ``delete`` (rows of the initial scan are inserts; a
  change is read with the row before it, as ``diff`` reads, to tell an update);
- ``__mvcc_ts``: the change's MVCC timestamp, ``<wall>.<logical>`` as CockroachDB prints it;
- ``__key``: the primary key as a JSON array, the changefeed's message key;
- ``__before`` (with ``diff``): the row one tick before the change, a struct of the
  same columns (null when there was none).

A deleted row keeps only its key columns. Rows decoded with an older or newer version
of the descriptor than the stream's schema fill the columns they share (the rest null).

With Delta's Change Data Feed columns (:func:`cdf_record_batches`, the source's
``changelog_columns=delta``), rows are what Delta's ``readChangeFeed`` gives, so code
written against its documented columns runs unchanged: the table's columns, then
``_change_type`` (``insert``, ``update_preimage`` and ``update_postimage``, a row each
for an update, or ``delete``, whose row is the deleted one, whole),
``_commit_version`` (the change's MVCC wall time in nanoseconds: a long that orders a
key's changes, as Delta's table versions do; two changes of one key in the same
nanosecond, told apart only by the logical clock, tie there, and ``__mvcc_ts`` orders
them) and ``_commit_timestamp``; then ``__mvcc_ts`` and ``__key`` as above.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs, urlencode

import pyarrow as pa

from feedkv.changefeed.cockroach_parquet import decimal_type
from feedkv.changefeed.encoder import RowFormats
from feedkv.changefeed.file_formats import arrow_type, arrow_value
from feedkv.changefeed.rows import RowDecoder, RowEvent, Target
from feedkv.errors import FeedKVError, InvalidArgumentError, NodeUnavailableError
from feedkv.rangefeed.event import Value
from feedkv.rangefeed.feed_client import FeedClient, KVFeedClient, open_client
from feedkv.spark.offsets import Piece
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.types import ColumnType, Kind

if TYPE_CHECKING:
    import grpc

__all__ = [
    "CDF_COLUMNS",
    "META_COLUMNS",
    "ArrowBuffer",
    "arrow_schema",
    "cdf_ddl",
    "cdf_record_batches",
    "cdf_schema",
    "LOGIN_PARAM",
    "connected",
    "connection",
    "forget_connection",
    "gateway_channel",
    "piece_events",
    "record_batches",
    "remember_password",
    "replaced",
    "spark_ddl",
]

META_COLUMNS = ("__op", "__mvcc_ts", "__key", "__before")
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
BATCH_ROWS = 8192

_SPARK_TYPES = {
    Kind.INT: "BIGINT",
    Kind.FLOAT: "DOUBLE",
    Kind.DECIMAL: "STRING",
    Kind.STRING: "STRING",
    Kind.BYTES: "BINARY",
    Kind.BOOL: "BOOLEAN",
    Kind.DATE: "DATE",
    Kind.TIMESTAMP: "TIMESTAMP_NTZ",
    Kind.TIMESTAMPTZ: "TIMESTAMP",
    Kind.UUID: "STRING",
    Kind.JSONB: "STRING",
    Kind.TIME: "STRING",
    Kind.INTERVAL: "STRING",
    Kind.INET: "STRING",
    Kind.BIT: "STRING",
    Kind.VARBIT: "STRING",
    Kind.ENUM: "STRING",
    Kind.ARRAY: "STRING",
}

_connections: dict[str, FeedClient] = {}
_connections_lock = threading.Lock()
# A source's URL names its password by a random id (``&login=``), never the password:
# URLs are keys and appear in errors and logs. Each process learns the password from
# the source's options (feedkv.spark.source.SourceOptions, which hold it unprinted).
LOGIN_PARAM = "login"
_passwords: dict[str, str] = {}


def remember_password(login: str, password: str) -> None:
    """Let this process's :func:`connection` s log in with ``password`` where a URL
    says ``login=<login>``."""
    with _connections_lock:
        _passwords[login] = password


def connection(url: str) -> FeedClient:
    """This process's client to the node at ``url`` (opened on first use; a URL with
    ``login=`` logs in with the password :func:`remember_password` gave it)."""
    with _connections_lock:
        db = _connections.get(url)
        if db is None:
            base, _, query = url.partition("?")
            params = parse_qs(query)
            login = params.pop(LOGIN_PARAM, [None])[0]
            password = _passwords.get(login) if login is not None else None
            if login is not None and password is None:
                raise InvalidArgumentError(
                    f"the password of the feedkv source at {url} is not known in this "
                    "process (give the source its password option)"
                )
            query = urlencode({name: values[0] for name, values in params.items()})
            db = open_client(f"{base}?{query}" if query else base, password=password)
            _connections[url] = db
        return db


def forget_connection(url: str, failed: FeedClient) -> None:
    """Drop ``failed``, this process's client of ``url``, whose node could not be
    reached: the next :func:`connection` opens another, through the first node of
    ``url`` that answers then (a URL may list several of the cluster's)."""
    with _connections_lock:
        if _connections.get(url) is failed:
            del _connections[url]
    with contextlib.suppress(FeedKVError):  # a client of a node that is gone
        failed.close()


def replaced(url: str, db: FeedClient) -> bool:
    """Whether ``db`` is no longer this process's client of ``url``: it was dropped
    (:func:`forget_connection`), its node gone."""
    with _connections_lock:
        return _connections.get(url) is not db


T = TypeVar("T")


def connected(url: str, call: Callable[[FeedClient], T]) -> T:
    """``call(connection(url))``; if the client's node cannot be reached
    (:class:`~feedkv.errors.NodeUnavailableError`), once more with a new client, which
    connects through another node of ``url`` when its first is down. For calls that
    may run twice (reads, idempotent writes)."""
    db = connection(url)
    try:
        return call(db)
    except NodeUnavailableError:
        forget_connection(url, db)
    return call(connection(url))


def gateway_channel(db: FeedClient) -> grpc.Channel:
    """The channel to the node a client of :func:`connection` dialed."""
    # NB: imported here, as feed_client does: a process that never dials imports no gRPC
    from feedkv.kv.dialer import ClusterDialer
    from feedkv.kv.gateway import Gateway

    transport = db.transport if isinstance(db, KVFeedClient) else None
    gateway = transport.gateway if isinstance(transport, ClusterDialer) else None
    if not isinstance(gateway, Gateway):
        raise InvalidArgumentError("the client does not talk to a node over gRPC")
    return gateway.transport.channel


@atexit.register
def _close_connections() -> None:
    with _connections_lock:
        for db in _connections.values():
            db.close()
        _connections.clear()


def piece_events(
    db: FeedClient,
    target: Target,
    piece: Piece,
    *,
    diff: bool,
    split_families: bool = False,
    page_bytes: int | None = None,
    omit_virtual: bool = False,
) -> Iterator[RowEvent]:
    """The row changes of one piece: the rows as of ``piece.hi`` for a scan piece, else
    every change in ``(piece.lo, piece.hi]``, each key's oldest first, read from the
    node about ``page_bytes`` at a time when given."""
    decoder = RowDecoder(
        db,
        [target],
        piece.lo or piece.hi,
        diff=diff,
        split_families=split_families,
        omit_virtual=omit_virtual,
    )
    if piece.lo is None:
        yield from decoder.scan_rows(target, piece.hi, span=piece.span)
        return
    versions = db.export(piece.span, piece.lo, piece.hi, with_diff=diff, page_bytes=page_bytes)
    for version in versions:
        event = decoder.decode(Value(version.key, version.value, version.ts, version.prev_value))
        if event is not None:
            yield event


def _spark_type(ctype: ColumnType) -> str:
    decimal = decimal_type(ctype) if ctype.kind is Kind.DECIMAL else None
    if isinstance(decimal, pa.Decimal128Type):
        return f"DECIMAL({decimal.precision},{decimal.scale})"
    return _SPARK_TYPES[ctype.kind]


def _ddl_columns(desc: TableDescriptor) -> list[str]:
    return [f"`{c.name}` {_spark_type(c.type)}" for c in desc.columns]


def spark_ddl(desc: TableDescriptor, *, diff: bool) -> str:
    """The stream's Spark schema, as DDL."""
    columns = _ddl_columns(desc)
    columns += ["`__op` STRING", "`__mvcc_ts` STRING", "`__key` STRING"]
    if diff:
        columns.append(f"`__before` STRUCT<{', '.join(_ddl_columns(desc))}>")
    return ", ".join(columns)


def _row_fields(desc: TableDescriptor) -> list[pa.Field]:
    return [pa.field(c.name, arrow_type(c.type)) for c in desc.columns]


def arrow_schema(desc: TableDescriptor, *, diff: bool) -> pa.Schema:
    """The Arrow schema matching :func:`spark_ddl`."""
    fields = _row_fields(desc)
    fields += [pa.field(name, pa.string()) for name in META_COLUMNS[:3]]
    if diff:
        fields.append(pa.field("__before", pa.struct(_row_fields(desc))))
    return pa.schema(fields)


def _op(event: RowEvent) -> str:
    if event.after is None:
        return "delete"
    return "update" if event.had_before else "insert"


class ArrowBuffer:
    """Rows gathered column by column and handed out as record batches of ``schema``
    (struct columns take dicts)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        self._first = self.columns[schema.names[0]]

    def __len__(self) -> int:
        return len(self._first)

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(values, type=self.schema.field(name).type)
                for name, values in self.columns.items()
            ],
            schema=self.schema,
        )
        for values in self.columns.values():
            values.clear()
        return batch


class _Sources:
    """Where each column of the stream's schema (``desc``, the table when the query
    started) is in a row decoded with another version of the table: the column of the
    same id, under whatever name it has now (a renamed column keeps its values under the
    stream's name; a dropped one is NULL, a new column of an old name is not it)."""

    def __init__(self, desc: TableDescriptor) -> None:
        self._desc = desc
        self._by_version: dict[int, list[tuple[str, ColumnType, str]]] = {}

    def __call__(self, table: TableDescriptor) -> list[tuple[str, ColumnType, str]]:
        found = self._by_version.get(table.version)
        if found is None:
            now = {c.id: c.name for c in table.columns}
            # NB: a column gone is named "", which no row has (a column's name is never empty)
            found = [(c.name, c.type, now.get(c.id, "")) for c in self._desc.columns]
            self._by_version[table.version] = found
        return found


def record_batches(
    events: Iterable[RowEvent], desc: TableDescriptor, *, diff: bool, size: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """``events`` as record batches of at most ``size`` rows in :func:`arrow_schema`."""
    buffer = ArrowBuffer(arrow_schema(desc, diff=diff))
    columns = buffer.columns
    sources = _Sources(desc)
    formats = RowFormats()
    for event in events:
        row = event.after
        if row is None:
            row = dict(zip((c.name for c in event.table.key_columns), event.key, strict=True))
        found = sources(event.table)
        for name, ctype, source in found:
            columns[name].append(arrow_value(ctype, row.get(source)))
        columns["__op"].append(_op(event))
        columns["__mvcc_ts"].append(str(event.mvcc_ts))
        columns["__key"].append(formats(event.table).key_array(event.key))
        if diff:
            before = event.before
            columns["__before"].append(
                None
                if before is None
                else {name: arrow_value(ctype, before.get(source)) for name, ctype, source in found}
            )
        if len(buffer) == size:
            yield buffer.flush()
    if len(buffer):
        yield buffer.flush()


def cdf_ddl(desc: TableDescriptor) -> str:
    """The schema with Delta's Change Data Feed columns, as DDL."""
    columns = _ddl_columns(desc)
    columns += ["`_change_type` STRING", "`_commit_version` BIGINT"]
    columns += ["`_commit_timestamp` TIMESTAMP", "`__mvcc_ts` STRING", "`__key` STRING"]
    return ", ".join(columns)


def cdf_schema(desc: TableDescriptor) -> pa.Schema:
    """The Arrow schema matching :func:`cdf_ddl`."""
    fields = _row_fields(desc)
    fields += [
        pa.field("_change_type", pa.string()),
        pa.field("_commit_version", pa.int64()),
        pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("__mvcc_ts", pa.string()),
        pa.field("__key", pa.string()),
    ]
    return pa.schema(fields)


def cdf_record_batches(
    events: Iterable[RowEvent], desc: TableDescriptor, *, size: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """``events`` (read with the row before each, as ``diff`` reads) as the rows of
    Delta's Change Data Feed, in :func:`cdf_schema` (see the module docstring)."""
    buffer = ArrowBuffer(cdf_schema(desc))
    columns = buffer.columns
    sources = _Sources(desc)
    formats = RowFormats()

    def add(row: dict[str, Any], change: str, event: RowEvent, key: str) -> None:
        for name, ctype, source in sources(event.table):
            columns[name].append(arrow_value(ctype, row.get(source)))
        wall = event.mvcc_ts.wall
        columns["_change_type"].append(change)
        columns["_commit_version"].append(wall)
        columns["_commit_timestamp"].append(wall // 1000)
        columns["__mvcc_ts"].append(str(event.mvcc_ts))
        columns["__key"].append(key)

    for event in events:
        key = formats(event.table).key_array(event.key)
        before = event.before if event.had_before else None
        if event.after is None:
            keys = dict(zip((c.name for c in event.table.key_columns), event.key, strict=True))
            add(before if before is not None else keys, "delete", event, key)
        elif before is not None:
            add(before, "update_preimage", event, key)
            add(event.after, "update_postimage", event, key)
        else:
            add(event.after, "insert", event, key)
        if len(buffer) >= size:
            yield buffer.flush()
    if len(buffer):
        yield buffer.flush()
