"""A changefeed as a Spark Structured Streaming query: ``feedkv_changefeed`` in, sink out.

The query reads ``spark.readStream.format("feedkv_changefeed")`` and writes
``writeStream.format("feedkv_changefeed")``; both carry the changefeed's spec.

- **Source.** The same offsets and pieces as the ``feedkv`` source
  (:mod:`feedkv.spark.offsets`), over every target table, with each range's piece cut
  further at row boundaries into as many tasks as Spark runs at once (the ``parallelism``
  option, :func:`~feedkv.spark.source.scan_cuts`). Tasks decode each piece's changes
  into rows and encode them with the changefeed core's encoders, so a batch arrives as
  messages (topic, key, value, timestamps). Messages travel in blocks, up to
  ``BATCH_ROWS`` of one topic and descriptor version (and about ``BLOCK_BYTES``) in one
  Spark row (Arrow IPC), so Spark does not convert each of them twice. Csv rows travel
  with the row itself, packed without its descriptor (:func:`_pack_row`); parquet rows
  as the columns of their file (:class:`~feedkv.changefeed.sink.RowBlock`), which the
  writer writes as they are.
  Each piece starts with a marker row whose ``resolved`` column is the piece's upper
  bound: the timestamp the batch resolves.
- **Schema changes** are planned as the changefeed core plans them
  (:func:`~feedkv.changefeed.changefeed.plan_schema_changes`): batches end one tick
  before a change that stops the job (``schema_change_policy='stop'``, a dropped
  table), and the next ``latestOffset`` raises its error; under ``nobackfill`` the
  pieces leave out the rows the change rewrote. A backfill arrives as the rewritten
  rows themselves; a counted change that rewrites nothing (``column_changes`` on a
  nullable column) ends its batch, which also scans the table as of the change. The
  scan's files are named after the change (a piece's files after its lower bound), so
  in name order they come after the batch's changes and before the next batch's.
- **Sink.** Tasks send their messages; the driver's ``commit(batch id)`` writes the
  resolved marker only after every task's messages are durable.

  File and cloud-storage sinks are exactly-once. Tasks write their files under
  ``.feedkv/jobs/<job id>/staging/``; the commit records the batch's files in
  ``.feedkv/jobs/<job id>/manifests/<batch id>.json``, then moves each into place, then writes the
  resolved marker. A replayed batch id finds its manifest: it finishes publishing the
  files listed there and drops the replay's files, so nothing is written twice. Other
  sinks (Kafka, webhook, SQL table) are at-least-once; every message carries its MVCC
  timestamp so consumers can drop what they saw.

The query's checkpoint holds the offsets, so a restarted query (after a crash, a
pause, a node restart) continues from the last committed batch with no gap.
"""

from __future__ import annotations

import base64
import json
import pickle
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit
from pyspark.sql.types import StructType

from feedkv.changefeed.changefeed import (
    ChangefeedSpec,
    SchemaPlan,
    cdc_query,
    event_message,
    plan_schema_changes,
    resolved_topics,
    scan_messages,
    stopped_by,
)
from feedkv.changefeed.encoder import make_encoder
from feedkv.changefeed.file_formats import ParquetRows
from feedkv.changefeed.rows import RowDecoder, RowEvent, Target
from feedkv.changefeed.schema_history import SchemaHistory
from feedkv.changefeed.sink import (
    Message,
    RowBlock,
    Sink,
    make_sink,
    message_options,
    parse_sink_uri,
)
from feedkv.changefeed.sinks.cloud_storage import (
    DEFAULT_FILE_SIZE,
    BlobStore,
    blob_store,
    file_sink,
)
from feedkv.errors import InvalidArgumentError, InvariantViolation
from feedkv.spark.offsets import FeedOffset, Piece, plan_pieces
from feedkv.spark.rows import BATCH_ROWS, ArrowBuffer, connection, piece_events
from feedkv.spark.source import FollowingStreamReader, range_starts, scan_cuts
from feedkv.sql.descriptor import Family, TableDescriptor
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.rangefeed.feed_client import FeedClient

__all__ = [
    "ARROW_SCHEMA",
    "ChangefeedDataSource",
    "decode_spec",
    "encode_spec",
    "manifests",
    "staging",
]

FILE_SCHEMES = ("file", "s3")

SCHEMA = "topic STRING, schema_id BIGINT, block BINARY, resolved STRING, lo STRING"
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("schema_id", pa.int64()),
        ("block", pa.binary()),  # Arrow IPC: a MESSAGE_BLOCK, or a RowBlock for parquet
        ("resolved", pa.string()),  # a piece's marker: its window (lo, resolved]
        ("lo", pa.string()),
    ]
)
# Messages of one topic and descriptor version, as columns. ``row`` is a csv row
# (:func:`_pack_row`), else null.
MESSAGE_BLOCK = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("mvcc_wall", pa.int64()),
        ("mvcc_logical", pa.int64()),
        ("updated_wall", pa.int64()),
        ("updated_logical", pa.int64()),
        ("row", pa.binary()),
    ]
)


def encode_spec(spec: ChangefeedSpec) -> str:
    """A spec as a Spark option value."""
    return base64.b64encode(pickle.dumps(spec)).decode()


def decode_spec(text: str) -> ChangefeedSpec:
    spec = pickle.loads(base64.b64decode(text))
    if not isinstance(spec, ChangefeedSpec):
        raise InvalidArgumentError("the feedkv_changefeed option 'spec' is not a changefeed spec")
    return spec


def manifests(job_id: int) -> str:
    """Where job ``job_id`` keeps its batches' manifests, under its sink's root: jobs
    that share a sink keep apart."""
    return f".feedkv/jobs/{job_id}/manifests"


def staging(job_id: int) -> str:
    """Where job ``job_id``'s tasks write files before a commit publishes them."""
    return f".feedkv/jobs/{job_id}/staging/"


@dataclass(frozen=True)
class _Job:
    url: str
    spec: ChangefeedSpec
    job_id: int = 0
    parallelism: int = 1  # how many tasks a range's part of a batch is cut into

    @classmethod
    def from_options(cls, options: dict[str, str]) -> _Job:
        for required in ("url", "spec"):
            if not options.get(required):
                raise InvalidArgumentError(f"feedkv_changefeed needs the option {required!r}")
        numbers = {}
        for name, default in (("job_id", "0"), ("parallelism", "1")):
            text = options.get(name, default)
            if not text.isdigit():
                raise InvalidArgumentError(f"feedkv_changefeed: {name} {text!r} is not a number")
            numbers[name] = int(text)
        return cls(options["url"], decode_spec(options["spec"]), **numbers)

    def manifest(self, batch_id: int) -> str:
        return f"{manifests(self.job_id)}/{batch_id:020d}.json"


# Reading.


@dataclass(frozen=True)
class _TablePiece:
    target: Target
    piece: Piece
    skipped: frozenset[Timestamp] = frozenset()  # rewrites left out (nobackfill)


_Block = tuple[str, int, pa.RecordBatch]  # topic, descriptor version (schema id), rows
BLOCK_BYTES = 8 << 20  # a block's bytes, about: one Spark row must stay far below 2 GiB
FIRST_BLOCK_ROWS = 512  # a piece's first parquet block, before its rows' size is known


def _message_batches(job: _Job, part: _TablePiece) -> Iterator[pa.RecordBatch]:
    """A piece as Spark rows: its marker first (the sink names files after the window's
    lower bound), then its messages in blocks, each one row."""
    piece = part.piece
    yield _spark_row(None, None, None, piece.hi, piece.lo or piece.hi)
    db = connection(job.url)
    if job.spec.options.format == "parquet":
        blocks = _row_blocks(db, job.spec, part)
    else:
        blocks = _message_blocks(_piece_messages(db, job.spec, part))
    for topic, schema_id, block in blocks:
        yield _spark_row(topic, schema_id, _ipc(block), None, None)


def _spark_row(
    topic: str | None,
    schema_id: int | None,
    block: bytes | None,
    resolved: Timestamp | None,
    lo: Timestamp | None,
) -> pa.RecordBatch:
    values = (topic, schema_id, block, resolved, lo)
    arrays = [
        pa.array([str(v) if isinstance(v, Timestamp) else v], type=field.type)
        for v, field in zip(values, ARROW_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


@dataclass
class _OpenBlock:
    """A topic's block of messages being filled."""

    schema_id: int
    gathered: ArrowBuffer = field(default_factory=lambda: ArrowBuffer(MESSAGE_BLOCK))
    nbytes: int = 0


def _message_blocks(
    messages: Iterator[Message], *, max_rows: int = BATCH_ROWS, max_bytes: int = BLOCK_BYTES
) -> Iterator[_Block]:
    """``messages`` in :data:`MESSAGE_BLOCK` batches of one topic and descriptor version,
    each up to ``max_rows`` messages or about ``max_bytes``. A topic's blocks keep its
    messages' order; topics fill blocks side by side (split column families alternate
    them), since each goes to files of its own."""
    blocks: dict[str, _OpenBlock] = {}
    for message in messages:
        topic = message.topic
        block = blocks.get(topic)
        if block is not None and block.schema_id != message.schema_id:
            yield topic, block.schema_id, block.gathered.flush()
            block = None
        if block is None:
            block = blocks[topic] = _OpenBlock(message.schema_id)
        buffer = block.gathered
        columns = buffer.columns
        row = None if message.row is None else _pack_row(message.row)
        columns["key"].append(message.key)
        columns["value"].append(message.value)
        columns["mvcc_wall"].append(message.mvcc_ts.wall)
        columns["mvcc_logical"].append(message.mvcc_ts.logical)
        columns["updated_wall"].append(message.updated.wall)
        columns["updated_logical"].append(message.updated.logical)
        columns["row"].append(row)
        block.nbytes += message.size + (len(row) if row else 0)
        if len(buffer) >= max_rows or block.nbytes >= max_bytes:
            yield topic, block.schema_id, buffer.flush()
            del blocks[topic]
    for topic, block in blocks.items():
        yield topic, block.schema_id, block.gathered.flush()


def _block_messages(
    topic: str, schema_id: int, block: pa.RecordBatch, rows: _Rows
) -> Iterator[Message]:
    """The messages of a :data:`MESSAGE_BLOCK`."""
    columns = [column.to_pylist() for column in block.columns]
    for key, value, mvcc_wall, mvcc_logical, wall, logical, row in zip(*columns, strict=True):
        mvcc_ts, updated = Timestamp(mvcc_wall, mvcc_logical), Timestamp(wall, logical)
        event = None if row is None else rows.event(row, mvcc_ts, updated)
        yield Message(topic, key, value, mvcc_ts, updated, schema_id, event)


def _piece_messages(db: FeedClient, spec: ChangefeedSpec, part: _TablePiece) -> Iterator[Message]:
    """The messages of one piece: a scan's through the changefeed core's scan path,
    changes row by row, leaving out the rewrites of ``part.skipped``."""
    options = spec.options
    query = cdc_query(spec)
    encoder = make_encoder(message_options(options, spec.sink_uri))
    diff = options.diff or query is not None
    split = options.split_column_families
    piece = part.piece
    if piece.is_scan:
        decoder = RowDecoder(db, [part.target], piece.hi, diff=diff, split_families=split)
        yield from scan_messages(
            spec, encoder, query, decoder, part.target, piece.hi, span=piece.span
        )
        return
    events = piece_events(db, part.target, piece, diff=diff, split_families=split)
    skipped = part.skipped
    for event in events:
        if skipped and event.mvcc_ts in skipped:
            continue
        message = event_message(spec, encoder, query, event)
        if message is not None:
            yield message


class _BlockSize:
    """How many rows a parquet block takes: up to ``max_rows``, about ``max_bytes``. A
    block's bytes are known once it is taken, so the limit is learnt from the last
    block (the first is small)."""

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.rows = min(max_rows, FIRST_BLOCK_ROWS)

    def take(self, block: ParquetRows) -> pa.RecordBatch:
        rows, batch = len(block), block.take()
        self.rows = max(1, min(self.max_rows, rows * self.max_bytes // max(1, batch.nbytes)))
        return batch


def _row_blocks(db: FeedClient, spec: ChangefeedSpec, part: _TablePiece) -> Iterator[_Block]:
    """A piece's rows for parquet files in blocks, gathered as :func:`_message_blocks`
    gathers messages: a scan's whole rows straight from their values, else the rows
    its messages carry."""
    piece, target = part.piece, part.target
    size = _BlockSize(BATCH_ROWS, BLOCK_BYTES)
    if piece.is_scan and spec.query is None:
        split = spec.options.split_column_families
        decoder = RowDecoder(db, [target], piece.hi, split_families=split)
        if decoder.whole_rows(target):
            yield from _scanned_blocks(spec, decoder, target, piece, size)
            return
    blocks: dict[str, ParquetRows] = {}
    for message in _piece_messages(db, spec, part):
        topic, event = message.topic, message.row
        block = blocks.get(topic)
        if block is not None and not block.holds(event.table, event.columns):
            yield topic, block.desc.version, block.take()
            block = None
        if block is None:
            block = blocks[topic] = ParquetRows(event.table, event.columns)
        block.add_event(event)
        if len(block) >= size.rows:
            yield topic, block.desc.version, size.take(block)
            del blocks[topic]
    for topic, block in blocks.items():
        yield topic, block.desc.version, block.take()


def _scanned_blocks(
    spec: ChangefeedSpec, decoder: RowDecoder, target: Target, piece: Piece, size: _BlockSize
) -> Iterator[_Block]:
    """A scan piece's whole rows in blocks, straight from their values (the hot path
    of an initial scan into parquet)."""
    ts = piece.hi
    desc = decoder.histories[target.table_id].at(ts)
    if desc is None or desc.dropped:
        return
    topic = spec.topics[target.table_id]
    rows = ParquetRows(desc)
    for _key, values, mvcc_ts in decoder.scan_values(target, ts, span=piece.span):
        rows.add(values, "c", mvcc_ts, ts)
        if len(rows) >= size.rows:
            yield topic, desc.version, size.take(rows)
    if len(rows):
        yield topic, desc.version, rows.take()


def _row_block_messages(
    topic: str, schema_id: int, batch: pa.RecordBatch, ts: Timestamp, file_size: int
) -> Iterator[Message]:
    """A parquet block as :class:`RowBlock` messages of about an eighth of
    ``file_size`` each, so the file sink ends files near where it would for the rows
    one by one. Their timestamps are ``ts`` (the window's end): a block is many rows,
    and the file sink does not read them."""
    rows = max(1, batch.num_rows * file_size // 8 // max(1, batch.nbytes))
    for start in range(0, batch.num_rows, rows):
        yield Message(topic, b"", None, ts, ts, schema_id, RowBlock(batch.slice(start, rows)))


def _ipc(batch: pa.RecordBatch) -> bytes:
    """``batch`` as an Arrow IPC stream: a block in one Spark row."""
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(out.getvalue())


def _from_ipc(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(data).read_next_batch()


def _pack_row(event: RowEvent) -> bytes:
    """A row change for csv without its descriptor: the writer reads each descriptor
    version once (:class:`_Rows`)."""
    family = event.family.name if event.family is not None else None
    fields = (event.table.id, event.table.version, family, event.key, event.after)
    return pickle.dumps((*fields, event.had_before), protocol=pickle.HIGHEST_PROTOCOL)


class _ChangefeedReader(FollowingStreamReader):
    def __init__(self, job: _Job) -> None:
        super().__init__(job.url, [t.span for t in job.spec.targets])
        self.job = job
        self._histories: dict[int, SchemaHistory] = {}

    def _schema_plan(self, lo: Timestamp, hi: Timestamp) -> SchemaPlan:
        """What the schema changes of the targets in ``(lo, hi]`` mean for the job (see
        :func:`~feedkv.changefeed.changefeed.plan_schema_changes`)."""
        histories = self._histories
        if not histories:
            db = connection(self.job.url)
            for target in self.job.spec.targets:
                histories[target.table_id] = SchemaHistory(db, target.table_id, lo)
        return plan_schema_changes(self.job.spec.options, histories, lo, hi)

    def start_offset(self) -> FeedOffset:
        spec = self.job.spec
        scan_key = min(s.start for s in self.spans) if spec.options.scans else None
        return FeedOffset(spec.start, scan_key)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        offset = FeedOffset.from_json(start)
        if offset.scanning:
            return FeedOffset(offset.resolved).to_json()  # the whole scan is one batch
        if self.job.spec.options.initial_scan == "only":
            return offset.to_json()
        resolved = max(self.resolved(offset.resolved), offset.resolved)
        end_time = self.job.spec.options.end_time
        if end_time is not None:
            resolved = min(resolved, max(end_time, offset.resolved))
        if resolved == offset.resolved:
            return offset.to_json()
        plan = self._schema_plan(offset.resolved, resolved)
        # A batch that scans a table again ends at the change, so in file-name order its
        # rows follow every change before it and precede every change after it.
        ends = [change.ts for _table_id, change in plan.backfills]
        if plan.stop is not None:
            # The batches end one tick before the change; once that one is committed
            # (its rows durable, its resolved marker written), the job ends.
            if offset.resolved >= plan.stop.ts.prev():
                raise stopped_by(plan.stop)
            ends.append(plan.stop.ts.prev())
        return FeedOffset(min(ends, default=resolved)).to_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = FeedOffset.from_json(start), FeedOffset.from_json(end)
        boundaries = range_starts(self.job.url)
        plan = (
            self._schema_plan(first.resolved, last.resolved)
            if last.resolved > first.resolved
            else SchemaPlan()
        )
        parts = []
        for target in self.job.spec.targets:
            span = target.span
            table_start = FeedOffset(first.resolved, span.start) if first.scanning else first
            cuts = scan_cuts(self.job.url, span, last.resolved, self.job.parallelism)
            skipped = frozenset(ts for table_id, ts in plan.skipped if table_id == target.table_id)
            for piece in plan_pieces(table_start, last, span, boundaries + cuts):
                parts.append(InputPartition(_TablePiece(target, piece, skipped)))
            for table_id, change in plan.backfills:
                if table_id == target.table_id:  # its rows again, as of the change
                    scan = FeedOffset(change.ts, span.start)
                    for piece in plan_pieces(scan, FeedOffset(change.ts), span, boundaries + cuts):
                        parts.append(InputPartition(_TablePiece(target, piece)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _message_batches(self.job, partition.value)


# Writing.


@dataclass
class _TaskResult(WriterCommitMessage):
    resolved: Timestamp | None = None
    lo: Timestamp | None = None
    rows: int = 0
    staged: list[tuple[str, str]] = field(default_factory=list)  # (staged name, final name)


class _StagedBlobs:
    """Writes a task's files under a staging prefix and remembers where each belongs."""

    def __init__(self, blobs: BlobStore, prefix: str) -> None:
        self._blobs = blobs
        self._prefix = f"{prefix}{secrets.token_hex(8)}/"
        self.staged: list[tuple[str, str]] = []

    def put(self, name: str, data: bytes) -> None:
        self._blobs.put(self._prefix + name, data)
        self.staged.append((self._prefix + name, name))

    def get(self, name: str) -> bytes | None:
        return self._blobs.get(name)

    def rename(self, name: str, new_name: str) -> None:
        self._blobs.rename(name, new_name)

    def delete(self, name: str) -> None:
        self._blobs.delete(name)

    def list(self, prefix: str) -> list[str]:
        return self._blobs.list(prefix)

    def close(self) -> None:
        self._blobs.close()


_Described = tuple[TableDescriptor, Family | None]


class _Rows:
    """Turns a batch's packed row changes (:func:`_pack_row`) back into
    :class:`RowEvent` objects, reading each descriptor version the first time it is
    needed."""

    def __init__(self, job: _Job, since: Timestamp) -> None:
        self._job = job
        self._since = since  # the window's start: history before it may be collected
        self._histories: dict[int, SchemaHistory] = {}
        self._described: dict[tuple[int, int, str | None], _Described] = {}

    def event(self, packed: bytes, mvcc_ts: Timestamp, updated: Timestamp) -> RowEvent:
        table_id, version, family, key, after, had_before = pickle.loads(packed)
        described = self._described.get((table_id, version, family))
        if described is None:
            described = self._described[table_id, version, family] = self._describe(
                table_id, version, family
            )
        desc, fam = described
        return RowEvent(desc, fam, key, after, None, mvcc_ts, updated, had_before)

    def _describe(self, table_id: int, version: int, family: str | None) -> _Described:
        history = self._histories.get(table_id)
        if history is None:
            db = connection(self._job.url)
            history = self._histories[table_id] = SchemaHistory(db, table_id, self._since)
        desc = history.version(version)
        if desc is None:
            raise InvariantViolation(f"table {table_id} has no descriptor version {version}")
        if family is None:
            return desc, None
        return desc, next(f for f in desc.families if f.name == family)


def _tuples(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    """The rows of record batches in :data:`ARROW_SCHEMA` as tuples."""
    for batch in batches:
        yield from zip(
            *(batch.column(name).to_pylist() for name in ARROW_SCHEMA.names), strict=True
        )


class _ChangefeedWriter(DataSourceStreamArrowWriter):
    def __init__(self, job: _Job) -> None:
        self.job = job
        self.uri = parse_sink_uri(job.spec.sink_uri or "", job.spec.options)
        self.exactly_once = self.uri.scheme in FILE_SCHEMES
        self._histories: dict[int, SchemaHistory] = {}  # the driver's, across commits
        self._resolved_at: float | None = None  # when the driver wrote the last marker
        self.clock: Callable[[], float] = time.monotonic  # seconds, for the marker cadence

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_histories": {}}

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _TaskResult:
        result = _TaskResult()
        staged: _StagedBlobs | None = None
        sink: Sink | None = None
        rows: _Rows | None = None
        parse = Timestamp.parse
        parquet = self.job.spec.options.format == "parquet"
        file_size = self.uri.size_param("file_size", DEFAULT_FILE_SIZE)
        try:
            for topic, schema_id, block, resolved, lo in _tuples(iterator):
                if resolved is not None:  # a piece's marker: its window
                    hi, lo_ts = parse(resolved), parse(lo)
                    result.resolved = max(result.resolved or hi, hi)
                    result.lo = min(result.lo or lo_ts, lo_ts)
                    continue
                if sink is None or rows is None:
                    start = result.lo or self.job.spec.start
                    staged, sink = self._open(start)
                    rows = _Rows(self.job, start)
                batch = _from_ipc(block)
                if parquet:
                    ts = result.resolved or self.job.spec.start
                    for message in _row_block_messages(topic, schema_id, batch, ts, file_size):
                        sink.emit_row(message)
                    result.rows += batch.num_rows
                    continue
                for message in _block_messages(topic, schema_id, batch, rows):
                    sink.emit_row(message)
                    result.rows += 1
            if sink is not None:
                sink.flush()
        finally:
            if sink is not None:
                sink.close()
        if staged is not None:
            result.staged = staged.staged
        return result

    def _open(self, start: Timestamp) -> tuple[_StagedBlobs | None, Sink]:
        """The task's sink (and, exactly-once, the staging its files go to)."""
        options = self.job.spec.options
        if not self.exactly_once:
            return None, make_sink(self.uri, options, start=start)
        staged = _StagedBlobs(blob_store(self.uri), staging(self.job.job_id))
        return staged, file_sink(self.uri, staged, options, start=start)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = [m for m in messages if isinstance(m, _TaskResult)]
        resolved = max((m.resolved for m in results if m.resolved), default=None)
        if self.exactly_once:
            blobs = blob_store(self.uri)
            try:
                self._publish(blobs, batchId, results)
            finally:
                blobs.close()
        options = self.job.spec.options
        if resolved is None or options.resolved is None:
            return
        # A marker at most every `resolved` seconds, and always the one at end_time.
        now = self.clock()
        last = self._resolved_at
        final = options.end_time is not None and resolved >= options.end_time
        if last is not None and now - last < options.resolved and not final:
            return
        self._resolved_at = now
        histories = self._histories

        def descriptor(table_id: int) -> TableDescriptor | None:
            history = histories.get(table_id)
            if history is None:
                db = connection(self.job.url)
                history = histories[table_id] = SchemaHistory(db, table_id, resolved)
            return history.at(resolved)

        sink = make_sink(self.uri, self.job.spec.options, start=self.job.spec.start)
        try:
            sink.emit_resolved(resolved, resolved_topics(self.job.spec, descriptor))
        finally:
            sink.close()

    def _publish(self, blobs: BlobStore, batch_id: int, results: list[_TaskResult]) -> None:
        name = self.job.manifest(batch_id)
        written = blobs.get(name)
        staged = [pair for result in results for pair in result.staged]
        if written is None:
            blobs.put(name, json.dumps({"batch": batch_id, "files": staged}).encode())
            files = staged
        else:  # a replay: the batch's files are the ones its first run recorded
            files = [tuple(pair) for pair in json.loads(written)["files"]]
            for staged_name, _final in set(staged) - set(files):
                blobs.delete(staged_name)
        for staged_name, final in files:
            blobs.rename(staged_name, final)
        # What is left in staging was written by attempts that never committed (a
        # driver that died, tasks retried): batches run one at a time, so it is garbage.
        for leftover in blobs.list(staging(self.job.job_id)):
            blobs.delete(leftover)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if not self.exactly_once:
            return
        blobs = blob_store(self.uri)
        try:
            # A commit that failed after writing its manifest is finished by the replay:
            # the files the manifest lists must stay.
            written = blobs.get(self.job.manifest(batchId))
            keep = {pair[0] for pair in json.loads(written)["files"]} if written else set()
            for result in messages:
                for staged_name, _final in getattr(result, "staged", []):
                    if staged_name not in keep:
                        blobs.delete(staged_name)
        finally:
            blobs.close()


class ChangefeedDataSource(DataSource):
    """``format("feedkv_changefeed")``: a changefeed's messages (read) and its sink
    (write). Options: ``url`` (the node), ``spec`` (:func:`encode_spec`), ``job_id``
    and ``parallelism`` (tasks per range and batch)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.job = _Job.from_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return "feedkv_changefeed"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _ChangefeedReader(self.job)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return _ChangefeedWriter(self.job)
