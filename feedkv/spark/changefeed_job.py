"""A changefeed as a Spark Structured Streaming query: ``feedkv_changefeed`` in, sink out.

The query reads ``spark.readStream.format("feedkv_changefeed")`` and writes
``writeStream.format("feedkv_changefeed")``; both carry the changefeed's spec.

- **Source.** The same offsets and pieces as the ``feedkv`` source
  (:mod:`feedkv.spark.offsets`), over every target table, with each range's piece cut
  further at row boundaries into as many tasks as Spark runs at once (the ``parallelism``
  option, :func:`~feedkv.spark.source.scan_cuts`). Tasks decode each piece's changes
  into rows and encode them with the changefeed core's encoders, so a batch arrives as
  messages (topic, key, value, timestamps), in blocks of one topic and descriptor
  version per Spark row (:mod:`feedkv.spark.blocks`; parquet rows as the columns of
  their file, which the writer writes as they are). Each piece starts with a marker
  row whose ``resolved`` column is the piece's upper bound: the timestamp the batch
  resolves.
- **Schema changes** are planned as the changefeed core plans them
  (:class:`~feedkv.changefeed.frontier.Frontier`): batches end one tick
  before a change that stops the job (``schema_change_policy='stop'``, a dropped
  table), and the next ``latestOffset`` raises its error; under ``nobackfill`` the
  pieces leave out the rows the change rewrote. A backfill arrives as the rewritten
  rows themselves; a counted change that rewrites nothing (``column_changes`` on a
  nullable column) ends its batch, which also scans the table as of the change. The
  scan's files are named after the change (a piece's files after its lower bound), so
  in name order they come after the batch's changes and before the next batch's.
- **Tables added** ``WITH initial_scan`` (``ALTER CHANGEFEED ... ADD``; the spec's
  ``scan_tables`` while the job's high-water mark is where they were added): the first
  batch of the run scans them as of the offset it resumes from, then the changes of
  every table follow (the offsets say which added tables are scanned, ``added_scans``).
- **FOR DATABASE** jobs: a batch ``(lo, hi]`` reads every table the database held at
  any time in it, each with its topic: those it holds at ``lo``'s next tick, read from
  the catalog as of then, and those created within the window, found by an incremental
  export of the descriptors (:func:`~feedkv.changefeed.database.window_tables`). A
  table created at ``T`` is read from ``lo`` (it has no rows before ``T``: nothing to
  scan); one dropped at ``T`` up to ``T``'s previous tick, and its drop ends nothing
  (its schema history is cut before it). The offsets hold no table set: the tables of
  a batch follow from its offsets and the catalog's MVCC history, so a batch read again
  from the checkpoint reads the same tables up to the same timestamps, and the file
  sinks' manifests keep it exactly-once. The driver follows the resolved timestamp of
  the tables of the moment and of the descriptors (a table that joins is followed from
  the next window; the window's export is final by itself, pushing any intent in it).
- **schema_topic** (Kafka): a window also ends one tick before each new version of a
  watched table, and the driver, planning the batch that starts with the change, sends
  it (and the creation of a table that joins a database job) to the schema topic: every
  row before it is durable by then (the batch before committed), no row at or after it
  is read yet. A batch planned again sends it again (at-least-once, as Kafka rows are);
  a change that ends the job is sent before the job fails.
- **Sink.** Tasks send their messages; the driver's ``commit(batch id)`` writes the
  resolved marker only after every task's messages are durable.
- **The node's buffer limits.** A task's sink takes the room for its sealed batches from
  the node's buffers (``--max-changefeed-memory``, then ``--max-disk-changefeed-storage``),
  shared with every other changefeed of the node through the node's buffer ledger
  (:mod:`feedkv.changefeed.buffer_ledger`; the ``buffers`` option says where it is).
  That is where a slow sink's records pile up: the driver buffers none (its source
  follows only resolved timestamps) and a task streams its window from the store a block
  at a time, reading the next block only once the sink took the last. A task whose sink
  finds no room *stalls* (:class:`~feedkv.changefeed.sink.SinkStalledError`): it stops
  reading its window, reports the stall for the job's status on the node, waits until
  its sink has delivered what it holds, and then fails with the stall. The job
  (:class:`~feedkv.spark.runner.SparkJob`) restarts its query from the checkpoint, so
  the batch is read again from the store (at-least-once, or exactly-once into files).

  File and cloud-storage sinks are exactly-once
  (:class:`~feedkv.changefeed.sinks.batch_publisher.BatchPublisher`): tasks stage
  their files, the commit publishes the batch's files through a manifest keyed by the
  batch id, then writes the resolved marker; a replayed batch id publishes nothing
  twice. Lake sinks (Delta, Iceberg) are exactly-once too: tasks stage their rows,
  the commit commits the batch's window once per table (a replayed batch finds the
  window recorded and writes nothing new; :mod:`feedkv.changefeed.sinks.lake`). Other
  sinks (Kafka, webhook, SQL table) are at-least-once; every message carries its MVCC
  timestamp so consumers can drop what they saw.

The query's checkpoint holds the offsets, so a restarted query (after a crash, a
pause, a node restart) continues from the last committed batch with no gap.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
import threading
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
    ChangefeedError,
    ChangefeedSpec,
    cdc_query,
    event_message,
    resolved_topics,
    scan_messages,
    schema_messages,
    stopped_by,
)
from feedkv.changefeed.cockroach_parquet import CockroachParquet
from feedkv.changefeed.database import (
    database_names,
    database_tables,
    first_change,
    window_tables,
)
from feedkv.changefeed.encoder import make_encoder
from feedkv.changefeed.enriched_source import FeedSource, sink_type
from feedkv.changefeed.file_formats import ParquetRows
from feedkv.changefeed.frontier import (
    Ended,
    Frontier,
    SchemaChanges,
    SchemaPlan,
    plan_schema_changes,
)
from feedkv.changefeed.node_buffers import BufferLimits, NodeBuffers
from feedkv.changefeed.rows import RowDecoder, RowEvent, Target, omits_virtual
from feedkv.changefeed.schema_history import SchemaChange, SchemaHistory
from feedkv.changefeed.sink import (
    Message,
    Sink,
    SinkStalledError,
    make_sink,
    message_options,
    parse_sink_uri,
    schema_topic,
)
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.batch_publisher import BatchPublisher, StagedBlobs, layout
from feedkv.changefeed.sinks.cloud_storage import (
    DEFAULT_FILE_SIZE,
    BlobStore,
    NodeBlobsOf,
    blob_store,
    file_sink,
)
from feedkv.errors import InvalidArgumentError, InvariantViolation
from feedkv.rangefeed.feed_client import KVFeedClient
from feedkv.spark.blocks import (
    ARROW_SCHEMA,
    BLOCK_BYTES,
    SCHEMA,
    Block,
    BlockSize,
    block_messages,
    block_row,
    from_ipc,
    marker_row,
    message_blocks,
    row_block_messages,
    spark_rows,
    unpack_row,
)
from feedkv.spark.offsets import FeedOffset, Piece, plan_pieces
from feedkv.spark.rows import BATCH_ROWS, connection, piece_events
from feedkv.spark.source import FollowingStreamReader, range_starts, scan_cuts
from feedkv.sql.catalog import descriptor_span
from feedkv.sql.descriptor import Family, TableDescriptor
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

if TYPE_CHECKING:
    from feedkv.rangefeed.feed_client import FeedClient

__all__ = [
    "ARROW_SCHEMA",
    "ChangefeedDataSource",
    "ChangefeedStreamReader",
    "ChangefeedStreamWriter",
    "JobOptions",
    "TaskResult",
    "block_bytes",
    "decode_spec",
    "encode_spec",
    "watched_spec",
]

FILE_SCHEMES = ("file", "nodelocal", "s3", "gs", "azure", "azure-blob")
STALL_POLL_S = 0.5  # how often a stalled task looks whether its sink's backlog cleared
IN_FLIGHT_SHARE = 16  # a block is at most this part of the node's memory limit
MIN_BLOCK_BYTES = 64 << 10


def node_blobs_of(url: str) -> NodeBlobsOf:
    """Where a ``nodelocal://`` sink naming another node writes from this process (a
    Spark driver or executor): that node's directory, reached through this process's
    client of the job's node at ``url``."""

    def blobs(node_id: int, directory: str) -> BlobStore:
        from feedkv.changefeed.sinks.node_blobs import dialled_blobs
        from feedkv.kv.dialer import ClusterDialer

        db = connection(url)
        transport = db.transport if isinstance(db, KVFeedClient) else None
        if not isinstance(transport, ClusterDialer):
            raise InvalidArgumentError(f"the client of {url} reaches no other node")
        return dialled_blobs(transport.dial)(node_id, directory)

    return blobs


def encode_spec(spec: ChangefeedSpec) -> str:
    """A spec as a Spark option value."""
    return base64.b64encode(pickle.dumps(spec)).decode()


def encode_node(node: FeedSource) -> str:
    """A node's identity as the data source's ``node`` option (JSON of its fields)."""
    return json.dumps(dataclasses.asdict(node), sort_keys=True)


def decode_node(text: str) -> FeedSource:
    try:
        fields = json.loads(text)
        if not isinstance(fields, dict):
            raise TypeError(f"{text!r} is no JSON object")
        return FeedSource(**{str(k): str(v) for k, v in fields.items()})
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(
            f"the feedkv_changefeed option 'node' is not a node's identity: {exc}"
        ) from None


def decode_spec(text: str) -> ChangefeedSpec:
    spec = pickle.loads(base64.b64decode(text))
    if not isinstance(spec, ChangefeedSpec):
        raise InvalidArgumentError("the feedkv_changefeed option 'spec' is not a changefeed spec")
    return spec


@dataclass(frozen=True)
class JobOptions:
    """The data source's options: the node's ``url``, the changefeed's ``spec``, the
    ``job_id`` (its files and manifests keep apart from other jobs'), ``run``, the run
    of its Spark query whose batch ids its manifests are keyed by (a query started on
    another node, with a checkpoint of its own, numbers its batches from 0 again:
    :func:`feedkv.spark.runner.checkpoint_run`), ``parallelism``,
    ``node``, the identity of the node that runs the job (the enriched envelope's
    ``source``), and the node's shared ``buffers`` (JSON of
    :class:`~feedkv.changefeed.node_buffers.BufferLimits`; none: each task's sink has
    budgets of its own)."""

    url: str
    spec: ChangefeedSpec
    job_id: int = 0
    parallelism: int = 1  # how many tasks a range's part of a batch is cut into
    run: str = ""
    node: FeedSource = field(default_factory=FeedSource)
    buffers: BufferLimits | None = None

    @classmethod
    def from_options(cls, options: dict[str, str]) -> JobOptions:
        for required in ("url", "spec"):
            if not options.get(required):
                raise InvalidArgumentError(f"feedkv_changefeed needs the option {required!r}")
        numbers = {}
        for name, default in (("job_id", "0"), ("parallelism", "1")):
            text = options.get(name, default)
            if not text.isdigit():
                raise InvalidArgumentError(f"feedkv_changefeed: {name} {text!r} is not a number")
            numbers[name] = int(text)
        node = decode_node(options["node"]) if options.get("node") else FeedSource()
        buffers = options.get("buffers")
        limits = BufferLimits.from_json(buffers) if buffers else None
        spec = decode_spec(options["spec"])
        run = options.get("run", "")
        if not run.isalnum() and run:
            raise InvalidArgumentError(f"feedkv_changefeed: run {run!r} is not alphanumeric")
        return cls(options["url"], spec, node=node, buffers=limits, run=run, **numbers)


# Reading.


@dataclass(frozen=True)
class _TablePiece:
    target: Target
    piece: Piece
    skipped: frozenset[Timestamp] = frozenset()  # rewrites left out (nobackfill)
    topic: str | None = None  # FOR DATABASE: the table's topic in this window


def watched_spec(db: FeedClient, spec: ChangefeedSpec, ts: Timestamp) -> ChangefeedSpec:
    """``spec`` with the targets and topics it watches at ``ts``: its own, or for a
    ``FOR DATABASE`` changefeed the tables its database holds at ``ts``
    (:func:`~feedkv.changefeed.database.database_tables`; none once the database is
    gone)."""
    if spec.database_id is None:
        return spec
    found = database_tables(db, spec.database_id, spec.options, ts)
    targets, topics = found if found is not None else ((), {})
    return dataclasses.replace(spec, targets=targets, topics=topics)


def _follow_spans(spec: ChangefeedSpec, targets: tuple[Target, ...]) -> list[Span]:
    """What a job's reader follows the resolved timestamp of: its targets' spans, and
    for a ``FOR DATABASE`` job the descriptors too (a database with no tables still
    moves on, so a table created in it joins)."""
    spans = [t.span for t in targets]
    if spec.database_id is not None:
        spans.append(descriptor_span())
    return spans


def _database_gone(spec: ChangefeedSpec) -> ChangefeedError:
    """The error a ``FOR DATABASE`` job ends with once its database is gone (the
    thread runner's)."""
    return ChangefeedError(f"database [{spec.database_id}] was dropped; the changefeed ended")


@dataclass(frozen=True)
class _Until:
    """A table's schema history before its drop at ``dropped``: a table leaving a
    ``FOR DATABASE`` job ends nothing (its changes are read up to the tick before)."""

    history: SchemaChanges
    dropped: Timestamp

    def changes(self, lo: Timestamp, hi: Timestamp) -> list[SchemaChange]:
        hi = min(hi, self.dropped.prev())
        return self.history.changes(lo, hi) if hi > lo else []


@dataclass(frozen=True)
class _Window:
    """What a batch ``(lo, hi]`` reads: ``spec`` with the tables watched at any time in
    it (and their topics), and when each one dropped in it was dropped."""

    spec: ChangefeedSpec
    dropped: dict[int, Timestamp] = field(default_factory=dict)


def _piece_spec(spec: ChangefeedSpec, part: _TablePiece) -> ChangefeedSpec:
    """The spec a task encodes ``part`` with: a ``FOR DATABASE`` changefeed's names its
    table as the window's planning found it."""
    if part.topic is None:
        return spec
    return dataclasses.replace(
        spec, targets=(part.target,), topics={part.target.table_id: part.topic}
    )


def block_bytes(limits: BufferLimits | None) -> int:
    """About how many bytes a block of messages holds: :data:`BLOCK_BYTES`, or within the
    node's buffer limits a sixteenth of its memory limit if that is less (at least
    :data:`MIN_BLOCK_BYTES`). Blocks, and the pages of changes a task reads from the
    node (as many bytes), are what a task has in flight between its read and its sink
    (in the reading worker, the JVM and the writing one), outside the sink's buffers:
    they must be small beside the limit."""
    if limits is None:
        return BLOCK_BYTES
    return max(MIN_BLOCK_BYTES, min(BLOCK_BYTES, limits.memory // IN_FLIGHT_SHARE))


def _message_batches(job: JobOptions, part: _TablePiece) -> Iterator[pa.RecordBatch]:
    """A piece as Spark rows: its marker first (the sink names files after the window's
    lower bound), then its messages in blocks, each one row."""
    piece = part.piece
    yield marker_row(piece.first_ts, piece.hi)
    db = connection(job.url)
    max_bytes = block_bytes(job.buffers)
    spec = _piece_spec(job.spec, part)
    if spec.options.format == "parquet":
        blocks = _row_blocks(db, spec, part, max_bytes)
    else:
        page_bytes = max_bytes if job.buffers is not None else None
        messages = _piece_messages(db, spec, part, job.job_id, job.node, page_bytes)
        blocks = message_blocks(messages, max_bytes=max_bytes)
    for topic, schema_id, block in blocks:
        yield block_row(topic, schema_id, block)


def _piece_messages(
    db: FeedClient,
    spec: ChangefeedSpec,
    part: _TablePiece,
    job_id: int = 0,
    node: FeedSource | None = None,
    page_bytes: int | None = None,
) -> Iterator[Message]:
    """The messages of one piece: a scan's through the changefeed core's scan path,
    changes row by row (read ``page_bytes`` at a time when given), leaving out the
    rewrites of ``part.skipped``. ``job_id`` and ``node`` (the job's node): for the
    enriched envelope's ``source``."""
    options = spec.options
    query = cdc_query(spec)
    encoder = make_encoder(
        message_options(options, spec.sink_uri, query=spec.query is not None),
        source=dataclasses.replace(
            node or FeedSource(), job_id=str(job_id), changefeed_sink=sink_type(spec.sink_uri)
        ),
        databases=database_names(db),
    )
    # cdc_prev, the enriched envelope's op and a Parquet file's event type need the
    # previous row
    diff = (
        options.diff
        or query is not None
        or options.envelope == "enriched"
        or options.key_column is not None
        or CockroachParquet.of(options, spec.sink_uri) is not None
    )
    split = options.split_column_families
    omit = omits_virtual(options.virtual_columns, query=query is not None)
    piece = part.piece
    if piece.is_scan:
        decoder = RowDecoder(
            db, [part.target], piece.hi, diff=diff, split_families=split, omit_virtual=omit
        )
        yield from scan_messages(
            spec, encoder, query, decoder, part.target, piece.hi, span=piece.span
        )
        return
    events = piece_events(
        db,
        part.target,
        piece,
        diff=diff,
        split_families=split,
        page_bytes=page_bytes,
        omit_virtual=omit,
    )
    skipped = part.skipped
    for event in events:
        if skipped and event.mvcc_ts in skipped:
            continue
        message = event_message(spec, encoder, query, event)
        if message is not None:
            yield message


def _row_blocks(
    db: FeedClient, spec: ChangefeedSpec, part: _TablePiece, max_bytes: int
) -> Iterator[Block]:
    """A piece's rows for parquet files in blocks, gathered as
    :func:`~feedkv.spark.blocks.message_blocks` gathers messages: a scan's whole rows
    straight from their values, else the rows its messages carry."""
    piece, target = part.piece, part.target
    size = BlockSize(BATCH_ROWS, max_bytes)
    if piece.is_scan and spec.query is None:
        split = spec.options.split_column_families
        omit = omits_virtual(spec.options.virtual_columns, query=False)
        decoder = RowDecoder(db, [target], piece.hi, split_families=split, omit_virtual=omit)
        if decoder.whole_rows(target, decoder.histories[target.table_id].at(piece.hi)):
            yield from _scanned_blocks(spec, decoder, target, piece, size)
            return
    layout = CockroachParquet.of(spec.options, spec.sink_uri)
    blocks: dict[str, ParquetRows] = {}
    for message in _piece_messages(db, spec, part):
        topic, event = message.topic, message.row
        block = blocks.get(topic)
        if block is not None and not block.holds(event.table, event.columns):
            yield topic, block.desc.version, block.take()
            block = None
        if block is None:
            images = spec.options.lake_mode == "changelog"  # before-images, as Delta's CDF
            block = blocks[topic] = ParquetRows(
                event.table, event.columns, images=images, cockroach=layout
            )
        block.add_event(event)
        if len(block) >= size.rows:
            yield topic, block.desc.version, size.take(block)
            del blocks[topic]
    for topic, block in blocks.items():
        yield topic, block.desc.version, block.take()


def _scanned_blocks(
    spec: ChangefeedSpec, decoder: RowDecoder, target: Target, piece: Piece, size: BlockSize
) -> Iterator[Block]:
    """A scan piece's whole rows in blocks, straight from their values (the hot path
    of an initial scan into parquet)."""
    ts = piece.hi
    desc = decoder.histories[target.table_id].at(ts)
    if desc is None or desc.dropped:
        return
    topic = spec.topics[target.table_id]
    rows = ParquetRows(desc, cockroach=CockroachParquet.of(spec.options, spec.sink_uri))
    for _key, values, mvcc_ts in decoder.scan_values(target, ts, span=piece.span):
        rows.add(values, "c", mvcc_ts, ts)
        if len(rows) >= size.rows:
            yield topic, desc.version, size.take(rows)
    if len(rows):
        yield topic, desc.version, rows.take()


class ChangefeedStreamReader(FollowingStreamReader):
    """The job's batches: their windows (the :class:`~feedkv.changefeed.frontier.Frontier`
    decides), partitions and, in the tasks, their messages.

    The tables a batch ``(lo, hi]`` reads are the job's own, or for a ``FOR DATABASE``
    job those its database held in the window (:meth:`_window`). With a
    ``schema_topic`` a window never crosses a schema change of a watched table (nor a
    table joining or leaving): it ends one tick before it, so the next window starts
    with the change (see :meth:`_cut`)."""

    def __init__(self, job: JobOptions) -> None:
        super().__init__(job.url, _follow_spans(job.spec, job.spec.targets))
        self.job = job
        self._histories: dict[int, SchemaHistory] = {}
        self._watching: dict[Timestamp, ChangefeedSpec] = {}  # by window start, a few

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_histories": {}, "_watching": {}}

    def _watched(self, lo: Timestamp) -> ChangefeedSpec:
        """The spec of the window after ``lo``: the targets the job watches at
        ``lo.next()``. Raises :class:`ChangefeedError` once a ``FOR DATABASE`` job's
        database is gone, as the thread runner does."""
        found = self._watching.get(lo)
        if found is not None:
            return found
        spec = self.job.spec
        if spec.database_id is not None:
            db = connection(self.job.url)
            if database_tables(db, spec.database_id, spec.options, lo.next()) is None:
                raise _database_gone(spec)
            spec = watched_spec(db, spec, lo.next())
        if len(self._watching) >= 8:  # NB: windows only move forward
            self._watching.clear()
        self._watching[lo] = spec
        return spec

    def _schema_histories(
        self, since: Timestamp, targets: tuple[Target, ...]
    ) -> dict[int, SchemaHistory]:
        """The schema histories of ``targets`` (each from ``since`` on its first use)."""
        histories = self._histories
        db = None
        for target in targets:
            if target.table_id not in histories:
                db = db or connection(self.job.url)
                histories[target.table_id] = SchemaHistory(db, target.table_id, since)
        return {t.table_id: histories[t.table_id] for t in targets}

    def _window(self, lo: Timestamp, hi: Timestamp) -> _Window:
        """The tables the batch ``(lo, hi]`` reads: the job's own, or for a ``FOR
        DATABASE`` job those its database held at any time in it (a table that joins
        within it is read from the start of the window, where it has no rows yet; one
        dropped within it up to the tick before its drop). Read from the catalog as of
        the window, so a batch read again reads the same tables."""
        spec = self.job.spec
        if spec.database_id is None:
            return _Window(spec)
        found = window_tables(connection(self.job.url), spec.database_id, spec.options, lo, hi)
        if found is None:
            raise ChangefeedError(
                f"database [{spec.database_id}] was dropped; the changefeed ended"
            )
        targets, topics, dropped = found
        return _Window(dataclasses.replace(spec, targets=targets, topics=topics), dropped)

    def _window_histories(self, lo: Timestamp, window: _Window) -> dict[int, SchemaChanges]:
        """The schema histories of ``window``'s tables, each dropped one's up to its drop."""
        histories: dict[int, SchemaChanges] = {}
        for table_id, history in self._schema_histories(lo, window.spec.targets).items():
            dropped = window.dropped.get(table_id)
            histories[table_id] = history if dropped is None else _Until(history, dropped)
        return histories

    def _follow(self, watched: ChangefeedSpec) -> None:
        """Follow the resolved timestamp of the tables a ``FOR DATABASE`` job watches
        now, when they are no longer those it follows (from the window's start: a
        window's end is at most what its tables are resolved to)."""
        self.follow(_follow_spans(watched, watched.targets))

    def _cut(self, lo: Timestamp, resolved: Timestamp, watched: ChangefeedSpec) -> Timestamp:
        """``resolved``, or with a ``schema_topic`` one tick before the first change
        after ``lo.next()`` a window must not cross, as it is announced before the
        window that starts with it (:meth:`_announce`): a new version of a watched
        table, a table joining or leaving a ``FOR DATABASE`` job."""
        spec = self.job.spec
        every = schema_topic(spec.sink_uri) is not None
        if not every or resolved <= lo.next():
            return resolved
        watched_ids = {t.table_id for t in watched.targets}
        db = connection(self.job.url)
        first = first_change(
            db, spec.database_id, watched_ids, lo.next(), resolved, every_version=every
        )
        return resolved if first is None else first.prev()

    def _announce(self, lo: Timestamp, watched: ChangefeedSpec) -> None:
        """With a ``schema_topic``: send the schema changes at ``lo.next()`` (a window
        starts with them: every row before them is durable, no row at or after them is
        read yet), those of the tables watched then and just before (a table dropped
        then) and the creation of a table that joined then. A batch read again sends
        them again (at-least-once, as the Kafka sink is)."""
        spec = self.job.spec
        topic = schema_topic(spec.sink_uri)
        if topic is None:
            return
        before = watched_spec(connection(self.job.url), spec, lo)  # a table dropped then
        names = {**before.topics, **watched.topics}
        targets = tuple(Target(table_id) for table_id in sorted(names))
        histories = self._schema_histories(lo, targets)
        messages = [
            message
            for table_id, history in histories.items()
            for message in schema_messages(topic, names[table_id], history, lo, lo.next())
        ]
        if not messages:
            return
        uri = parse_sink_uri(spec.sink_uri or "", spec.options)
        sink = make_sink(uri, spec.options, node_blobs=node_blobs_of(self.job.url))
        try:
            for message in messages:
                sink.emit_row(message)
            sink.flush()
        finally:
            sink.close()

    def start_offset(self) -> FeedOffset:
        spec = self.job.spec
        scan_key = min(s.start for s in self.spans) if spec.options.scans else None
        return FeedOffset(spec.start, scan_key, cursor=self._cursor())

    def _cursor(self) -> Timestamp | None:
        """The job's cursor, which its offsets carry: when ALTER CHANGEFEED ... SET
        cursor moved it, the query's checkpoint still ends at the old high-water mark,
        and its next batch reads from the cursor instead (:meth:`FeedOffset.window_start`)."""
        return self.job.spec.options.cursor

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        cursor = self._cursor()
        offset = FeedOffset.from_json(start)
        if cursor is not None and offset.cursor != cursor:
            # ALTER CHANGEFEED ... SET cursor moved the job since the checkpoint's offset:
            # the next batch reads from the cursor (see FeedOffset.window_start)
            offset = FeedOffset(cursor, None, offset.added_scans, cursor)
        scans = self.job.spec.scan_tables
        # NB: the added tables scanned in this run stay in its offsets (a query started
        # again from its checkpoint does not scan them again); a later run's spec
        # scans none once the high-water mark moved past the scan, and drops them
        added = tuple(sorted(scans.intersection(offset.added_scans)))
        if offset.scanning:
            return FeedOffset(offset.resolved, None, added, cursor).to_json()  # one batch
        if scans.difference(offset.added_scans):
            # the tables added WITH initial_scan: one batch scans them as of the offset
            return FeedOffset(offset.resolved, None, tuple(sorted(scans)), cursor).to_json()
        if self.job.spec.options.initial_scan == "only":
            return offset.to_json()
        watched = self._watched(offset.resolved)
        self._follow(watched)
        resolved = self._cut(offset.resolved, self.resolved(offset.resolved), watched)
        histories = self._window_histories(offset.resolved, self._window(offset.resolved, resolved))
        window = Frontier(self.job.spec.options, histories, offset.resolved).next_window(resolved)
        if isinstance(window, Ended) and window.error is not None:
            # The batch before ended one tick before the change; it is committed (its
            # rows durable, its resolved marker written): the job ends, the change
            # announced first, as the thread runner announces it.
            self._announce(offset.resolved, watched)
            raise stopped_by(window.error)
        if window is None or isinstance(window, Ended):
            return offset.to_json()
        return FeedOffset(window.hi, None, added, cursor).to_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        last = FeedOffset.from_json(end)
        first = FeedOffset.from_json(start).window_start(last)
        boundaries = range_starts(self.job.url)
        changes = last.resolved > first.resolved and not first.scanning
        if changes:
            self._announce(first.resolved, self._watched(first.resolved))
        window = self._window(first.resolved, last.resolved if changes else first.resolved)
        plan = SchemaPlan()
        if changes:
            histories = self._window_histories(first.resolved, window)
            plan = plan_schema_changes(
                self.job.spec.options, histories, first.resolved, last.resolved
            )
        parts = []
        newly_scanned = set(last.added_scans).difference(first.added_scans)
        database = self.job.spec.database_id is not None
        for target in window.spec.targets:
            topic = window.spec.topics[target.table_id] if database else None
            dropped = window.dropped.get(target.table_id)
            table_end = last
            if dropped is not None and dropped.prev() < last.resolved:
                table_end = FeedOffset(dropped.prev())  # read up to its drop
                if table_end.resolved <= first.resolved:
                    continue
            span = target.span
            table_start = FeedOffset(first.resolved, span.start) if first.scanning else first
            if target.table_id in newly_scanned:  # added WITH initial_scan (same resolved)
                table_start = FeedOffset(first.resolved, span.start)
            cuts = scan_cuts(self.job.url, span, table_end.resolved, self.job.parallelism)
            skipped = frozenset(ts for table_id, ts in plan.skipped if table_id == target.table_id)
            for piece in plan_pieces(table_start, table_end, span, boundaries + cuts):
                parts.append(InputPartition(_TablePiece(target, piece, skipped, topic)))
            for table_id, change in plan.backfills:
                if table_id == target.table_id:  # its rows again, as of the change
                    scan = FeedOffset(change.ts, span.start)
                    for piece in plan_pieces(scan, FeedOffset(change.ts), span, boundaries + cuts):
                        parts.append(InputPartition(_TablePiece(target, piece, topic=topic)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _message_batches(self.job, partition.value)


# Writing.


@dataclass
class TaskResult(WriterCommitMessage):
    """What a task hands the driver's commit: the window its pieces covered
    ``[lo, resolved]`` (``lo`` the least timestamp its rows may have:
    :attr:`~feedkv.spark.offsets.Piece.first_ts`), how many rows it wrote and the files
    it staged."""

    resolved: Timestamp | None = None
    lo: Timestamp | None = None
    rows: int = 0
    staged: list[tuple[str, str]] = field(default_factory=list)  # (staged name, final name)


_Described = tuple[TableDescriptor, Family | None]


class _Rows:
    """Turns a batch's packed row changes (:func:`~feedkv.spark.blocks.pack_row`) back into
    :class:`RowEvent` objects, reading each descriptor version the first time it is
    needed."""

    def __init__(self, job: JobOptions, since: Timestamp) -> None:
        self._job = job
        self._since = since  # the window's start: history before it may be collected
        self._histories: dict[int, SchemaHistory] = {}
        self._described: dict[tuple[int, int, str | None], _Described] = {}

    def event(self, packed: bytes, mvcc_ts: Timestamp, updated: Timestamp) -> RowEvent:
        table_id, version, family, key, after, had_before = unpack_row(packed)
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


class ChangefeedStreamWriter(DataSourceStreamArrowWriter):
    """Tasks write their messages to the sink (files: staged); the driver's commit
    publishes them, then writes the batch's resolved marker when one is due."""

    def __init__(self, job: JobOptions) -> None:
        self.job = job
        self.uri = parse_sink_uri(job.spec.sink_uri or "", job.spec.options)
        self.exactly_once = self.uri.scheme in FILE_SCHEMES
        self.lake = self.uri.kind.whole_rows  # delta://, iceberg://: a commit per window
        self._histories: dict[int, SchemaHistory] = {}  # the driver's, across commits
        self._stepping: dict[int, SchemaHistory] = {}  # those its progress follows now
        self._progress: Frontier | None = None  # the driver's, across commits
        self.clock: Callable[[], float] = time.monotonic  # seconds, for the marker cadence

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_histories": {}, "_stepping": {}, "_progress": None}

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskResult:
        if self.lake:
            return self._stage(iterator)
        result = TaskResult()
        staged: StagedBlobs | None = None
        sink: Sink | None = None
        rows: _Rows | None = None
        parse = Timestamp.parse
        parquet = self.job.spec.options.format == "parquet"
        file_size = self.uri.size_param("file_size", DEFAULT_FILE_SIZE)
        try:
            for topic, schema_id, block, resolved, lo in spark_rows(iterator):
                if resolved is not None:  # a piece's marker: its window
                    hi, lo_ts = parse(resolved), parse(lo)
                    result.resolved = max(result.resolved or hi, hi)
                    result.lo = min(result.lo or lo_ts, lo_ts)
                    continue
                if sink is None or rows is None:
                    start = result.lo or self.job.spec.start
                    staged, sink = self._open(start)
                    rows = _Rows(self.job, start)
                batch = from_ipc(block)
                if parquet:
                    ts = result.resolved or self.job.spec.start
                    for message in row_block_messages(topic, schema_id, batch, ts, file_size):
                        sink.emit_row(message)
                    result.rows += batch.num_rows
                    continue
                for message in block_messages(topic, schema_id, batch, rows):
                    sink.emit_row(message)
                    result.rows += 1
            if sink is not None:
                sink.flush()
        except SinkStalledError as stall:
            if sink is not None:
                self._wait_out(sink, stall)
            raise
        finally:
            if sink is not None:
                sink.close()
        if staged is not None:
            result.staged = staged.staged
        return result

    def _wait_out(self, sink: Sink, stall: SinkStalledError) -> None:
        """The task's sink found no room in the node's buffers: the task reads no more
        of its window (its feed is torn down), reports the stall for the job's status,
        and waits until the sink has delivered what it holds (the backlog cleared), so
        the query that the stall then fails restarts only when the sink takes rows
        again. A task with no backlog of its own (the others' took the room) waits
        until the node's buffers have room again for the batch it could not hold, for
        the same reason. A sink that
        gave up its backlog raises its own failure instead (the job retries, with
        backoff). Spark ends the wait by killing the worker when the job stops
        meanwhile."""
        limits = self.job.buffers
        buffers = NodeBuffers.attach(limits) if limits is not None else None
        if buffers is not None:
            buffers.report_stall(self.job.job_id, str(stall))
        wait_drained = getattr(sink, "wait_drained", None)
        while callable(wait_drained) and not wait_drained(STALL_POLL_S):
            pass
        pause = threading.Event()
        while buffers is not None and getattr(sink, "failure", None) is None:
            if buffers.has_room(stall.needed):
                break
            pause.wait(STALL_POLL_S)  # NB: room is given back in other processes
        failure = getattr(sink, "failure", None)
        if failure is not None:
            raise failure from stall

    def _stage(self, iterator: Iterator[pa.RecordBatch]) -> TaskResult:
        """A lake sink's task: its rows staged as files for the driver's commit."""
        result = TaskResult()
        batches = []
        parse = Timestamp.parse
        for topic, _schema_id, block, resolved, lo in spark_rows(iterator):
            if resolved is not None:
                hi, lo_ts = parse(resolved), parse(lo)
                result.resolved = max(result.resolved or hi, hi)
                result.lo = min(result.lo or lo_ts, lo_ts)
                continue
            batch = from_ipc(block)
            result.rows += batch.num_rows
            batches.append((topic, batch))
        result.staged = [(name, name) for name in lake.stage(self.uri, self.job.job_id, batches)]
        return result

    def _commit_lake(
        self, results: list[TaskResult], resolved: Timestamp | None, batch_id: int
    ) -> None:
        """Commit the batch's window into the lake tables: one commit per table, rows a
        previous run of the batch committed skipped (:mod:`~feedkv.changefeed.sinks.lake`),
        so a replayed batch writes nothing new."""
        staged = [path for result in results for path, _ in result.staged]
        if resolved is not None:
            sink = lake.make(self.uri, self.job.spec.options)
            try:
                sink.emit_batches(lake.read_staged(self.uri, staged))
                watched = self.job.spec
                if watched.database_id is not None:  # NB: its tables are in the catalog
                    watched = watched_spec(connection(self.job.url), watched, resolved)
                topics = watched.topics.values()
                sink.commit_window(resolved, topics, batch=(self.job.job_id, batch_id))
            finally:
                sink.close()
        lake.remove_staged(self.uri, staged)

    def _open(self, start: Timestamp) -> tuple[StagedBlobs | None, Sink]:
        """The task's sink (and, exactly-once, the staging its files go to)."""
        options = self.job.spec.options
        limits = self.job.buffers
        buffers = NodeBuffers.attach(limits) if limits is not None else None
        if not self.exactly_once:
            return None, make_sink(self.uri, options, start=start, buffers=buffers)
        where = layout(self.uri)
        root = blob_store(where.root, node_blobs_of(self.job.url))
        staged = BatchPublisher.of(root, self.job.job_id, where, self.job.run).stage()
        return staged, file_sink(self.uri, staged, options, start=start, buffers=buffers)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        results = [m for m in messages if isinstance(m, TaskResult)]
        resolved = max((m.resolved for m in results if m.resolved), default=None)
        if self.lake:
            self._commit_lake(results, resolved, batchId)
            return
        if self.exactly_once:
            where = layout(self.uri)
            blobs = blob_store(where.root, node_blobs_of(self.job.url))
            try:
                staged = [pair for result in results for pair in result.staged]
                BatchPublisher.of(blobs, self.job.job_id, where, self.job.run).publish(
                    batchId, staged
                )
            finally:
                blobs.close()
        options = self.job.spec.options
        if resolved is None or options.resolved is None:
            return
        if not self._frontier(resolved).committed(resolved, self.clock()):
            return
        histories = self._histories
        # NB: the tables watched at the marker (a FOR DATABASE job's of the moment)
        watched = watched_spec(connection(self.job.url), self.job.spec, resolved)
        self._track(watched, resolved)
        sink = make_sink(
            self.uri,
            self.job.spec.options,
            start=self.job.spec.start,
            node_blobs=node_blobs_of(self.job.url),
        )
        try:
            topics = resolved_topics(watched, lambda t: histories[t].at(resolved))
            sink.emit_resolved(resolved, topics)
        finally:
            sink.close()

    def _frontier(self, since: Timestamp) -> Frontier:
        """The driver's progress (its marker cadence), with the schema histories of the
        tables watched after ``since`` (the batch's end: a ``FOR DATABASE`` job's of
        the moment, so a table dropped just after it does not end the job)."""
        spec = self.job.spec
        if self._progress is None or spec.database_id is not None:
            self._stepping.clear()
            watched = watched_spec(connection(self.job.url), spec, since.next())
            for table_id, history in self._track(watched, since).items():
                self._stepping[table_id] = history
        if self._progress is None:
            self._progress = Frontier(spec.options, self._stepping, spec.start)
        return self._progress

    def _track(self, watched: ChangefeedSpec, since: Timestamp) -> dict[int, SchemaHistory]:
        """The schema histories of ``watched``'s targets, each from ``since`` on its
        first use."""
        db = None
        for target in watched.targets:
            if target.table_id not in self._histories:
                db = db or connection(self.job.url)
                self._histories[target.table_id] = SchemaHistory(db, target.table_id, since)
        return {t.table_id: self._histories[t.table_id] for t in watched.targets}

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.lake:
            names = [name for m in messages for name, _ in getattr(m, "staged", [])]
            lake.remove_staged(self.uri, names)
            return
        if not self.exactly_once:
            return
        where = layout(self.uri)
        blobs = blob_store(where.root, node_blobs_of(self.job.url))
        try:
            staged = [pair for result in messages for pair in getattr(result, "staged", [])]
            BatchPublisher.of(blobs, self.job.job_id, where, self.job.run).abort(batchId, staged)
        finally:
            blobs.close()


class ChangefeedDataSource(DataSource):
    """``format("feedkv_changefeed")``: a changefeed's messages (read) and its sink
    (write). Options: ``url`` (the node), ``spec`` (:func:`encode_spec`), ``job_id``
    and ``parallelism`` (tasks per range and batch)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.job = JobOptions.from_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return "feedkv_changefeed"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ChangefeedStreamReader(self.job)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return ChangefeedStreamWriter(self.job)
