"""Running one changefeed: initial scan, rangefeed, rows, messages, resolved markers.

:class:`Changefeed` runs a :class:`ChangefeedSpec` into a sink, wherever it is asked
to run (a thread for ``CREATE CHANGEFEED``, the SQL client for a sinkless changefeed,
Spark for jobs):

1. With an initial scan, every row of every target as of the start timestamp
   (``updated`` is that timestamp), then the feed from there. ``cursor`` starts the
   feed at the cursor with no scan; ``initial_scan='only'`` stops after the scan.
2. A rangefeed over the targets' spans from the start (exclusive). Each value becomes a
   row change (:class:`~feedkv.changefeed.rows.RowDecoder`), is encoded and emitted.
3. Each checkpoint moves the frontier: every row at or below it has been emitted. The
   sink is flushed at least every ``min_checkpoint_frequency``, and when ``resolved``
   markers are due the marker follows the flush, so it never precedes a row it covers.
   The high-water mark (:attr:`Changefeed.high_water`) is the last flushed frontier: a
   restart from it loses nothing. A :class:`~feedkv.changefeed.sink.WindowSink` (the
   lake sinks) is not flushed but committed a window at a time: the flush names the
   frontier it reaches.
4. Schema changes of a watched table are found as the history is read
   (:class:`~feedkv.changefeed.schema_history.SchemaHistory`), before any row at or
   after them is emitted. Which changes count: ``schema_change_events=default``, those
   that rewrite rows (a column added with a value, a column dropped);
   ``column_changes``, any column added or dropped. What happens, by
   ``schema_change_policy``: ``backfill`` emits every row at the change's timestamp
   (rows rewritten by the change arrive through the feed; otherwise they are scanned);
   ``nobackfill`` leaves the rewritten rows out; ``stop`` ends the feed resolved up to
   one tick before the change, with an error saying so. A dropped table always ends it,
   and so does a table taken offline by ``IMPORT INTO`` (CockroachDB documents that an
   import fails the changefeeds on its table; a changefeed created after the import
   finds the imported rows in its initial scan). With a Kafka ``schema_topic``, each
   change is sent there before any row at or after it, and so is the creation of a
   table that joins a ``FOR DATABASE`` feed (:func:`schema_messages`).
5. ``end_time`` ends the feed once the frontier reaches it; rows after it are not
   emitted.

Metrics (:mod:`feedkv.changefeed.metrics`) move once per batch: the rows emitted since
the last checkpoint are counted at the next checkpoint, and a flush observes its
latencies once, for its oldest row.

A sink failure (:class:`~feedkv.changefeed.sink.SinkError`) resets the sink (what it had
not delivered is dropped) and restarts the feed from its high-water mark after a backoff
(doubling up to ``MAX_RESTART_BACKOFF``, from the start again once the high-water mark
moves, as CockroachDB's does since cockroachdb/cockroach#164933); nothing acknowledged is
lost and rows after the mark may be emitted again (at-least-once). Meanwhile
:attr:`Changefeed.retrying` holds the last failure, for the job's status. A
:class:`~feedkv.changefeed.sink.TerminalSinkError` is not retried: :meth:`Changefeed.run`
raises it.

One table failing does not stop the others (the CDC design's per-table isolation,
:mod:`feedkv.changefeed.table_failures`): a row of a table that cannot be encoded (its
schema refused by the schema registry, a value the format cannot hold) or a topic the
sink refuses (:class:`~feedkv.changefeed.sink.TopicError`) sets that table aside from the
high-water mark. Its rows are skipped while the others are emitted, flushed and
resolved; the high-water mark stays at the point the table was set aside, so a restart
owes nothing. At each checkpoint a table whose retry is due reads its changes since then
again (a rangefeed over its spans up to the checkpoint, the schema-change backfills due
meanwhile in their place) and rejoins the feed if they go through.
:attr:`Changefeed.table_status` says which table fails and why, for the job's status.
An initial scan's failure is the whole feed's (it restarts), and a feed that reaches its
end with a table set aside restarts from the held mark rather than end without its rows.

A sink that finds no room in the node's changefeed buffers
(:mod:`feedkv.changefeed.node_buffers`) raises
:class:`~feedkv.changefeed.sink.SinkStalledError`: the feed *stalls*. Its rangefeed is
torn down (so it reads nothing more and its buffers are freed), :attr:`Changefeed.stalled`
says why for the job's status, and once the sink has delivered its backlog and the
node's buffers have room for the batch it could not hold (the room other feeds' sinks
hold may be what it lacked) the feed restarts from its high-water mark, reading again
everything after it.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from feedkv.changefeed.cockroach_parquet import CockroachParquet
from feedkv.changefeed.database import database_names, database_tables, retargets
from feedkv.changefeed.encoder import Encoder, make_encoder
from feedkv.changefeed.enriched_source import FeedSource, sink_type
from feedkv.changefeed.frontier import Backfill, Frontier
from feedkv.changefeed.headers import Headers, split_headers
from feedkv.changefeed.lagging import LaggingRanges
from feedkv.changefeed.metrics import ChangefeedMetrics, FeedMetrics
from feedkv.changefeed.node_buffers import Stalled
from feedkv.changefeed.options import ROW_FORMATS, ChangefeedOptions
from feedkv.changefeed.retrying import Retrying, backoff
from feedkv.changefeed.rows import RowDecoder, RowEvent, Target, omits_virtual
from feedkv.changefeed.schema_history import SchemaChange, SchemaHistory
from feedkv.changefeed.sink import (
    Message,
    Sink,
    SinkError,
    SinkStalledError,
    TerminalSinkError,
    TopicError,
    WindowSink,
    message_options,
    schema_topic,
)
from feedkv.changefeed.table_failures import TableFailure, TableFailures
from feedkv.errors import FeedKVError
from feedkv.rangefeed.event import Checkpoint, Value
from feedkv.sql.catalog import descriptor_span
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import table_id_of_key
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

if TYPE_CHECKING:
    from feedkv.changefeed.query import CDCQuery
    from feedkv.rangefeed.client import FeedRange, RangeFeed
    from feedkv.rangefeed.feed_client import FeedClient

__all__ = [
    "Changefeed",
    "ChangefeedError",
    "ChangefeedSpec",
    "Stalled",
    "cdc_query",
    "creation_message",
    "event_message",
    "resolved_topics",
    "scan_messages",
    "schema_message",
    "schema_messages",
    "stopped_by",
]

log = logging.getLogger(__name__)

STALL_POLL_S = 0.5  # how often a stalled feed looks whether it was closed
RESTART_BACKOFF = 0.2  # seconds before the first restart after a sink failure
MAX_RESTART_BACKOFF = 10.0
# What encoding a row raises when the row cannot be encoded: a schema registry refusing
# its schema (SinkError), a value the format cannot hold. Its table is set aside.
ENCODING_ERRORS = (SinkError, ValueError, TypeError, OverflowError)


class ChangefeedError(FeedKVError):
    """The changefeed ended and cannot go on by itself (a schema change under
    ``schema_change_policy='stop'``, a dropped table, data garbage-collected)."""


@dataclass(frozen=True)
class ChangefeedSpec:
    """Everything needed to run a changefeed, fixed when it is created.

    ``topics`` maps each target table id to its topic name (the table's name then, or
    ``db.public.t`` with ``full_table_name``). ``start`` is exclusive: the cursor, or the
    statement's timestamp (the initial scan reads as of it)."""

    targets: tuple[Target, ...]
    topics: dict[int, str]
    options: ChangefeedOptions
    start: Timestamp
    sink_uri: str | None = None
    description: str = ""
    user: str = "root"
    query: str | None = None  # a CDC query's SELECT text
    # FOR DATABASE: the database whose tables are watched, the targets being those it
    # holds when the feed (re)starts (feedkv.changefeed.database)
    database_id: int | None = None
    # Tables scanned as of ``start`` before the feed goes on, whatever initial_scan says:
    # those ALTER CHANGEFEED ... ADD ... WITH initial_scan added (JobRecord.resume_spec)
    scan_tables: frozenset[int] = frozenset()


class Changefeed:
    """Runs ``spec`` into ``sink``: :meth:`run` blocks until the feed ends (end time,
    scan-only, :meth:`close`) and raises :class:`ChangefeedError` if it fails."""

    def __init__(
        self,
        db: FeedClient,
        spec: ChangefeedSpec,
        sink: Sink,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall_ns: Callable[[], int] = time.time_ns,
        metrics: FeedMetrics | None = None,
        source: FeedSource | None = None,
    ) -> None:
        """``source``: who emits, for the enriched envelope's ``source`` (its runner
        knows the job and the node; by default only the sink's kind is known)."""
        self.spec = spec
        self.high_water = spec.start
        self.rows_emitted = 0
        self.scan_rows = 0  # of those, the rows initial scans and backfills emitted
        self.backfill_pending = 0  # target spans an initial scan or backfill has yet to scan
        self._scan_spans = 0  # the target spans of the scan running now (0: none runs)
        self._scan_bounds: list[bytes] = []  # the range boundaries inside the one scanned
        o = spec.options
        self._lagging = LaggingRanges(o.lagging_ranges_threshold, o.lagging_ranges_polling_interval)
        self._lagging_lock = threading.Lock()
        self._metrics = metrics or ChangefeedMetrics().scope(spec.options.metrics_label)
        self._batch = _Batch()
        self.retrying: Retrying | None = None  # the last sink failure, until progress
        self._wall_ns = wall_ns
        self._db = db
        self._sink = sink
        self._clock = clock
        self._sleep = sleep
        self._closed = threading.Event()
        self._feed_lock = threading.Lock()
        self._feed: RangeFeed | None = None
        self._encoder: Encoder = make_encoder(
            message_options(spec.options, spec.sink_uri, query=spec.query is not None),
            source=source or FeedSource(changefeed_sink=sink_type(spec.sink_uri)),
            databases=database_names(db),
        )
        self._query = cdc_query(spec)
        # cdc_prev, the enriched envelope's op, a Parquet file's event type (u or c) and
        # a deletion's key_column need the previous row
        self._with_diff = (
            spec.options.diff
            or self._query is not None
            or spec.options.envelope == "enriched"
            or spec.options.key_column is not None
            or CockroachParquet.of(spec.options, spec.sink_uri) is not None
        )
        self._scanned = not (spec.options.scans or spec.scan_tables)
        self._topics_used: set[str] = set()
        self._schema_topic = schema_topic(spec.sink_uri)
        self._schema_seen: dict[int, Timestamp] = {}  # schema changes sent, per table
        self._schema_from = spec.start
        # tables set aside after their own failure (feedkv.changefeed.table_failures)
        self._failures = TableFailures(first_s=RESTART_BACKOFF, max_s=MAX_RESTART_BACKOFF)
        self._failures_lock = threading.Lock()  # table_status reads from other threads
        # NB: the latest value the feed has passed on (or by, for a table set aside):
        # values come ahead of the checkpoints that cover them, so a table's retry at a
        # checkpoint must read its changes up to here, not only to the checkpoint
        self._passed = spec.start
        self._live = False  # whether rows now come from the feed (not an initial scan)
        self.stalled: Stalled | None = None  # why the feed is stalled, while it is

    def close(self) -> None:
        """Stop :meth:`run` (from any thread), interrupting a sink that waits on its
        destination (one that can be: ``interrupt()``). Idempotent."""
        self._closed.set()
        interrupt = getattr(self._sink, "interrupt", None)
        if callable(interrupt):
            interrupt()
        with self._feed_lock:
            feed = self._feed
        if feed is not None:
            feed.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def scan_fraction(self) -> float | None:
        """The part of the initial scan or backfill running now that is done (``None``:
        none runs), counted as CockroachDB counts it, in ranges: the target tables
        scanned, and of the one being scanned, the ranges its scan has passed (by the
        range boundaries when its scan started). Any thread."""
        total, pending = self._scan_spans, self.backfill_pending
        if not total or not pending:
            return None
        bounds, decoder = self._scan_bounds, getattr(self, "_decoder", None)
        position = decoder.scan_position if decoder is not None else None
        within = 0.0
        if position is not None and bounds:
            within = bisect.bisect_right(bounds, position) / (len(bounds) + 1)
        return min(1.0, max(0.0, (total - pending + within) / total))

    @property
    def scanned(self) -> bool:
        """Whether its initial scan is done (or it has none). Any thread."""
        return self._scanned

    @property
    def table_status(self) -> str | None:
        """Which tables are set aside after their own failure, why, and when each is tried
        again (``None``: none is). Any thread."""
        with self._failures_lock:
            return self._failures.status(self._clock())

    def lagging_ranges(self) -> int:
        """The feed's ranges whose resolved timestamp lags (:mod:`feedkv.changefeed.lagging`).
        Any thread."""
        with self._lagging_lock:
            return self._lagging.poll(self._wall_ns(), self.ranges)

    def ranges(self) -> list[FeedRange]:
        """The ranges the feed's rangefeed is registered on now, with their resolved
        timestamps (none during an initial scan, or between restarts). Any thread."""
        with self._feed_lock:
            feed = self._feed
        return feed.ranges() if feed is not None else []

    def run(self) -> None:
        attempt = 0
        failed_at = self.high_water
        while not self.closed:
            try:
                start: Timestamp | None = self.high_water
                while start is not None:
                    start = self._run_from(start)
                return
            except TerminalSinkError:
                raise
            except SinkStalledError as exc:
                self._stall(exc)
            except SinkError as exc:
                if self._closed.is_set():
                    # NB: closing interrupted the sink: the next run sends it all again
                    log.info("changefeed closed while its sink waited: %s", exc)
                    return
                attempt = 1 if self.high_water > failed_at else attempt + 1
                failed_at = self.high_water
                delay = backoff(attempt, first_s=RESTART_BACKOFF, max_s=MAX_RESTART_BACKOFF)
                self.retrying = Retrying(str(exc), self._wall_ns(), delay)
                self._metrics.error_retries.inc()
                self._batch = _Batch()  # what it held is dropped with the sink's buffer
                with self._failures_lock:  # the restart from the held mark owes them all
                    self._failures.clear()
                log.warning(
                    "changefeed sink failed (%s); restarting from %s in %.1fs",
                    exc,
                    self.high_water,
                    delay,
                )
                self._sink.reset()
                self._closed.wait(delay)

    def _stall(self, cause: SinkStalledError) -> None:
        """The sink has no room: the feed is torn down already (``_run_from`` closes it
        on the way out); wait until the sink's backlog has cleared and the node has room
        for the batch that found none, then let :meth:`run` start again from the
        high-water mark."""
        self.stalled = Stalled(str(cause), self._wall_ns())
        self._batch = _Batch()  # what it held is read again
        log.warning(
            "changefeed stalled: %s; its feed is torn down until the sink's backlog clears, "
            "then it restarts from %s",
            cause,
            self.high_water,
        )
        wait_drained = getattr(self._sink, "wait_drained", None)
        while callable(wait_drained) and not self.closed and not wait_drained(STALL_POLL_S):
            pass
        # NB: a sink with no backlog of its own stalled because other sinks hold the
        # node's room; restarting before it is free would read and stall again at once
        has_room = getattr(self._sink, "has_room", None)
        while callable(has_room) and not self.closed and not has_room(cause.needed):
            self._closed.wait(STALL_POLL_S)  # room is given back by other sinks, unseen
        self.stalled = None
        log.warning("changefeed: the sink's backlog cleared; restarting from %s", self.high_water)

    @property
    def stalled_status(self) -> str | None:
        """The job's ``running_status`` while the feed is stalled (``None``: it is not).
        Any thread."""
        stalled = self.stalled
        return stalled.status() if stalled is not None else None

    # One attempt, from a high-water mark.

    def _run_from(self, start: Timestamp) -> Timestamp | None:
        """Run from ``start``; returns where to run from again when the tables of a
        database changefeed changed (``None``: the feed ended)."""
        o = self.spec.options
        if self.spec.database_id is not None:
            self._watch_database(start)
        decoder = RowDecoder(
            self._db,
            list(self.spec.targets),
            start,
            diff=self._with_diff,
            split_families=o.split_column_families,
            omit_virtual=omits_virtual(o.virtual_columns, query=self._query is not None),
        )
        self._decoder = decoder
        self._schema_seen, self._schema_from = {}, start
        if self._query is not None:
            histories = decoder.histories
            self._query.schema_time = lambda desc: histories[desc.id].written_at(desc.version)
        self._live = False
        if not self._scanned:
            scanned = [
                t for t in self.spec.targets if o.scans or t.table_id in self.spec.scan_tables
            ]
            self.backfill_pending = self._scan_spans = len(scanned)
            for target in scanned:
                for message in self._scan(target, start):
                    if self.closed:
                        return None
                    self._send(message)
                self.backfill_pending -= 1
                self._count_emitted()
            self._flush(start)
            self._scanned = True
            if o.initial_scan == "only":
                return None
            if o.resolved is not None:
                self._sink.emit_resolved(start, self._all_topics(start))
        self._live = True
        now = self._clock()  # both cadences count from here
        frontier = Frontier(o, decoder.histories, start, marker_at=now, flushed_at=now)
        spans = [t.span for t in self.spec.targets]
        catalog_span = descriptor_span() if self.spec.database_id is not None else None
        if catalog_span is not None:
            spans.append(catalog_span)
        # NB: in timestamp order: a schema change is applied when a value passes it
        feed = self._db.rangefeed(spans, start, with_diff=self._with_diff, timestamp_order=True)
        with self._feed_lock:
            self._feed = feed
        if self.closed:
            feed.close()
        # FOR DATABASE: the earliest time the database's tables changed at; the feed
        # runs again from just before it once every value before it has arrived
        retarget: Timestamp | None = None
        try:
            for event in feed:
                if (
                    isinstance(event, Value)
                    and catalog_span is not None
                    and catalog_span.contains_key(event.key)
                ):
                    if self._retargets(event) and (retarget is None or event.ts < retarget):
                        retarget = event.ts
                    continue
                if isinstance(event, Value):
                    if retarget is not None and event.ts >= retarget:
                        continue  # read again after the restart
                    if event.ts > self._passed:
                        self._passed = event.ts
                    if self._batch.admitted_wall is None:
                        self._batch.admitted_wall = event.ts.wall  # the oldest: in ts order
                    admission = frontier.admit(event.ts)
                    self._backfill(admission.backfills)
                    if not admission.emit:
                        continue
                    if self._failures and table_id_of_key(event.key) in self._failures:
                        continue  # set aside: its retry reads it again
                    row = decoder.decode(event)
                    if row is not None and not frontier.rewritten(row.table.id, row.mvcc_ts):
                        self._send_schema_changes(row.table.id, event.ts)
                        self._emit(row)
                    continue
                if not isinstance(event, Checkpoint):
                    continue
                if retarget is not None and event.ts >= retarget.prev():
                    # NB: a table dropped at retarget is no target after the restart:
                    # its drop goes to the schema topic now, before any row after it
                    for target in self.spec.targets:
                        self._send_schema_changes(target.table_id, retarget)
                    return retarget.prev()  # again, with the tables of the moment
                self._backfill(frontier.reach(event.ts))
                for target in self.spec.targets:
                    self._send_schema_changes(target.table_id, event.ts)
                if self._failures:
                    self._retry_tables(event.ts, frontier)
                self._count_emitted()
                advance = frontier.advance(self._clock())
                if advance is None:
                    continue
                self._flush(advance.to)
                self._move_high_water(advance.to)
                self.retrying = None
                if advance.marker:
                    self._emit_resolved(advance.to)
                if advance.final:
                    if self._failures:  # owed rows: run again from the held mark
                        raise SinkError(f"the changefeed reached its end, but {self.table_status}")
                    if advance.error is not None:
                        raise stopped_by(advance.error)
                    return None
        finally:
            feed.close()
        return None

    def _watch_database(self, start: Timestamp) -> None:
        """A database changefeed run from ``start`` (exclusive) watches the tables its
        database holds at the tick after it: a table created then joins."""
        database_id = self.spec.database_id
        if database_id is None:
            return
        found = database_tables(self._db, database_id, self.spec.options, start.next())
        if found is None:
            raise ChangefeedError(f"database [{database_id}] was dropped; the changefeed ended")
        targets, topics = found
        self.spec = dataclasses.replace(self.spec, targets=targets, topics=topics)

    def _retargets(self, event: Value) -> bool:
        database_id = self.spec.database_id
        return database_id is not None and retargets(database_id, self.spec.targets, event.value)

    def _backfill(self, backfills: Iterable[Backfill]) -> None:
        """Emits the rows of each table a schema change is due to scan again, as of it
        (a table set aside, or that fails now, scans when its retry comes)."""
        for table_id, change in backfills:
            if table_id in self._failures or not self._scan_table(table_id, change.ts):
                with self._failures_lock:
                    self._failures.defer_backfill(table_id, change.ts)

    def _scan_table(self, table_id: int, ts: Timestamp) -> bool:
        """Emits every row of ``table_id``'s targets as of ``ts``; whether they went
        through (a row that cannot be encoded, or a topic refused, sets the table aside
        and ends the scan)."""
        attempt = self._attempt(table_id)
        for target in self.spec.targets:
            if target.table_id != table_id:
                continue
            self.backfill_pending += 1
            self._scan_spans = self.backfill_pending
            try:
                messages = self._scan(target, ts)
                while True:
                    # NB: only encoding is the table's own failure; the sink's (in
                    # _send) is the whole feed's
                    try:
                        message = next(messages, None)
                    except TerminalSinkError:
                        raise
                    except ENCODING_ERRORS as exc:
                        self._fail_table(table_id, f"cannot encode a row: {exc}")
                        return False
                    if message is None:
                        break
                    self._send(message)
                    if self._attempt(table_id) != attempt:
                        return False
            finally:
                self.backfill_pending -= 1
        return True

    # Tables set aside (feedkv.changefeed.table_failures).

    def _fail_table(self, table_id: int, error: str) -> None:
        """Set ``table_id`` aside from the high-water mark (the others go on)."""
        name = self.spec.topics.get(table_id, f"[{table_id}]")
        with self._failures_lock:
            failure = self._failures.fail(
                table_id, name, error, self.high_water, self._clock(), self._wall_ns()
            )
        self._metrics.error_retries.inc()
        log.warning(
            "changefeed: table %s failed (%s); the other tables go on; retrying it in %.1f s",
            name,
            error,
            max(0.0, failure.retry_at - self._clock()),
        )

    def _fail_topics(self, error: TopicError) -> None:
        """The sink refused ``error.topics``: set their tables aside. A topic of no
        table (the schema topic) fails the whole sink."""
        for topic, why in error.topics.items():
            tables = self._tables_of(topic)
            if not tables:
                raise SinkError(str(error)) from error
            for table_id in tables:
                self._fail_table(table_id, why)

    def _tables_of(self, topic: str) -> list[int]:
        return [
            table_id
            for table_id, base in self.spec.topics.items()
            if topic == base or topic.startswith(base + ".")
        ]

    def _move_high_water(self, to: Timestamp) -> None:
        """Every row up to ``to`` is durable, but for the tables set aside: the mark
        stays at the oldest point one was set aside from."""
        with self._failures_lock:
            hold = self._failures.hold()
        if hold is not None:
            to = max(self.high_water, min(to, hold))
        self.high_water = to

    def _emit_resolved(self, ts: Timestamp) -> None:
        """A resolved marker on the topics of every table that is not set aside."""
        topics = [
            t
            for t in self._all_topics(ts)
            if not any(i in self._failures for i in self._tables_of(t))
        ]
        if not topics:
            return
        try:
            self._sink.emit_resolved(ts, topics)
        except TopicError as exc:
            self._fail_topics(exc)

    def _retry_tables(self, reached: Timestamp, frontier: Frontier) -> None:
        """Catch every table whose retry is due up to ``reached`` (every value at or
        below it has come through the feed), or to the latest value the feed passed by
        if later; those that go through rejoin it."""
        with self._failures_lock:
            due = self._failures.due(self._clock())
        for failure in due:
            if self.closed:
                return
            if self._catch_up(failure, max(reached, self._passed), frontier):
                with self._failures_lock:
                    self._failures.recovered(failure.table_id)
                log.warning("changefeed: table %s recovered; it goes on", failure.name)

    def _catch_up(self, failure: TableFailure, reached: Timestamp, frontier: Frontier) -> bool:
        """Emit ``failure``'s table's changes in ``(since, reached]`` and the backfills
        due in it, in timestamp order; whether they all went through. (``since`` stays
        where it is: what this emits is durable only at the next flush.) ``reached`` is at
        least the latest value the feed passed by: once the table rejoins, the feed
        hands on only what comes after."""
        table_id = failure.table_id
        attempt = failure.attempt
        spans = [t.span for t in self.spec.targets if t.table_id == table_id]
        backfills = [ts for ts in failure.backfills if ts <= reached]
        feed = self._db.rangefeed(
            spans, failure.since, with_diff=self._with_diff, timestamp_order=True
        )
        try:
            for event in feed:
                if self.closed or failure.attempt != attempt:
                    return False
                if isinstance(event, Checkpoint):
                    if event.ts >= reached:
                        break
                    continue
                if not isinstance(event, Value) or event.ts > reached:
                    continue
                while backfills and backfills[0] <= event.ts:
                    if not self._rescan(failure, backfills.pop(0)):
                        return False
                if not frontier.emits(event.ts):
                    continue
                row = self._decoder.decode(event)
                if row is not None and not frontier.rewritten(table_id, row.mvcc_ts):
                    self._emit(row)
        finally:
            feed.close()
        return all(self._rescan(failure, ts) for ts in backfills) and failure.attempt == attempt

    def _rescan(self, failure: TableFailure, ts: Timestamp) -> bool:
        """A backfill deferred while ``failure``'s table was set aside, run now."""
        if not self._scan_table(failure.table_id, ts):
            return False
        failure.backfills.remove(ts)
        return True

    def _attempt(self, table_id: int) -> int:
        """How many times ``table_id`` failed in a row (0: it is not set aside)."""
        failure = self._failures.get(table_id)
        return failure.attempt if failure is not None else 0

    # Emitting.

    def _send_schema_changes(self, table_id: int, ts: Timestamp) -> None:
        """With a ``schema_topic``: a message for each change of ``table_id``'s schema at
        or below ``ts`` not sent yet (its creation too, for a table that joined a
        ``FOR DATABASE`` feed), before any row at or after it (a restart sends them
        again: at-least-once)."""
        if self._schema_topic is None:
            return
        since = self._schema_seen.get(table_id, self._schema_from)
        if ts <= since:
            return
        self._schema_seen[table_id] = ts
        history = self._decoder.histories[table_id]
        table = self.spec.topics[table_id]  # every target has its topic
        for message in schema_messages(self._schema_topic, table, history, since, ts):
            self._sink.emit_row(message)

    def _all_topics(self, ts: Timestamp) -> list[str]:
        histories = self._decoder.histories
        return resolved_topics(self.spec, lambda t: histories[t].at(ts), self._topics_used)

    def _scan(self, target: Target, ts: Timestamp) -> Iterator[Message]:
        self._decoder.scan_position = None
        self._scan_bounds = self._range_bounds(target.span)
        return scan_messages(self.spec, self._encoder, self._query, self._decoder, target, ts)

    def _range_bounds(self, span: Span) -> list[bytes]:
        """The range boundaries inside ``span``, sorted (none if they cannot be read: the
        scan's progress then moves a table at a time)."""
        try:
            ranges = self._db.ranges()
        except FeedKVError as exc:
            log.debug("changefeed: no range boundaries for the scan's progress: %s", exc)
            return []
        return sorted(r.span.start for r in ranges if span.start < r.span.start < span.end)

    def _emit(self, event: RowEvent) -> None:
        try:
            message = event_message(self.spec, self._encoder, self._query, event)
        except TerminalSinkError:
            raise
        except ENCODING_ERRORS as exc:
            self._fail_table(event.table.id, f"cannot encode a row: {exc}")
            return
        if message is not None:
            self._send(message)

    def _send(self, message: Message) -> None:
        self._topics_used.add(message.topic)
        try:
            self._sink.emit_row(message)
        except TopicError as exc:
            if not self._live:  # an initial scan's failure is the whole feed's
                raise
            self._fail_topics(exc)
            return
        self.rows_emitted += 1
        if self.backfill_pending:
            self.scan_rows += 1
        batch = self._batch
        batch.messages += 1
        batch.bytes += message.size
        if batch.oldest_wall is None:
            batch.oldest_wall = message.mvcc_ts.wall
            batch.started = self._clock()
        else:
            batch.oldest_wall = min(batch.oldest_wall, message.mvcc_ts.wall)

    # Metrics, once per batch.

    def _count_emitted(self) -> None:
        """Count the messages sent since the last count, and observe the admission
        latency of the oldest value admitted since then."""
        batch, m = self._batch, self._metrics
        if batch.messages:
            m.emitted_messages.inc(batch.messages)
            m.emitted_bytes.inc(batch.bytes)
            batch.unflushed_bytes += batch.bytes
            batch.messages = batch.bytes = 0
        if batch.admitted_wall is not None:
            m.admit_latency.observe(max(0, self._wall_ns() - batch.admitted_wall))
            batch.admitted_wall = None

    def _flush(self, to: Timestamp) -> None:
        """Make every row emitted durable: every row at or below ``to`` has been."""
        if isinstance(self._sink, WindowSink):
            self._sink.commit_window(to, self._all_topics(to))
        else:
            try:
                self._sink.flush()
            except TopicError as exc:
                if not self._live:
                    raise
                self._fail_topics(exc)  # every other topic's rows are durable
        self._count_emitted()
        batch, m = self._batch, self._metrics
        if batch.oldest_wall is None:
            return
        m.flushed_bytes.inc(batch.unflushed_bytes)
        m.commit_latency.observe(max(0, self._wall_ns() - batch.oldest_wall))
        m.sink_batch_hist_nanos.observe(max(0.0, self._clock() - batch.started) * 1e9)
        self._batch = _Batch()


class _Batch:
    """What was sent since the last count (``messages``, ``bytes``) and since the last
    flush (the rest), for the metrics."""

    __slots__ = ("admitted_wall", "bytes", "messages", "oldest_wall", "started", "unflushed_bytes")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.unflushed_bytes = 0
        self.oldest_wall: int | None = None  # the oldest MVCC time sent since the flush
        self.started = 0.0  # when the first of those was sent (the feed's clock)
        self.admitted_wall: int | None = None  # the oldest value admitted since the count


def cdc_query(spec: ChangefeedSpec) -> CDCQuery | None:
    """The changefeed's CDC query (``AS SELECT ...``) compiled, or ``None`` without one."""
    if spec.query is None:
        return None
    # NB: imported here: a query needs the SQL parser (sqlglot), which a feed without one,
    # and each Spark worker of its job, would otherwise import for nothing
    from feedkv.changefeed.query import CDCQuery

    return CDCQuery(spec.query, created=spec.start, diff=spec.options.diff, user=spec.user)


def schema_message(topic: str, table: str, change: SchemaChange) -> Message:
    """The message of a schema change for a ``schema_topic``: keyed by the table's
    topic; the value names the table, the descriptor's new version, its columns (name
    and type), what was added and dropped, and the change's timestamp."""
    return _schema_message(
        topic,
        table,
        change.after,
        change.ts,
        added=change.added_columns,
        dropped=change.dropped_columns,
        created=False,
    )


def creation_message(topic: str, table: str, desc: TableDescriptor, ts: Timestamp) -> Message:
    """The message announcing on a ``schema_topic`` a table created at ``ts`` (a table
    joining a ``FOR DATABASE`` changefeed): as :func:`schema_message`, every column
    added and ``created`` true."""
    added = tuple(c.name for c in desc.columns)
    return _schema_message(topic, table, desc, ts, added=added, dropped=(), created=True)


def _schema_message(
    topic: str,
    table: str,
    after: TableDescriptor,
    ts: Timestamp,
    *,
    added: tuple[str, ...],
    dropped: tuple[str, ...],
    created: bool,
) -> Message:
    value = {
        "table": table,
        "version": after.version,
        "columns": [{"name": c.name, "type": c.type.sql()} for c in after.columns],
        "added_columns": list(added),
        "dropped_columns": list(dropped),
        "created": created,
        "dropped": after.dropped,
        "updated": str(ts),
    }
    key = json.dumps([table]).encode()
    return Message(topic, key, json.dumps(value).encode(), ts, ts, after.version)


def schema_messages(
    topic: str, table: str, history: SchemaHistory, lo: Timestamp, hi: Timestamp
) -> list[Message]:
    """The ``schema_topic`` messages of table ``table`` (its topic) for ``(lo, hi]``,
    oldest first: its creation, when it was created then, and each schema change."""
    messages = []
    created = history.created(lo, hi)
    if created is not None:
        messages.append(creation_message(topic, table, created[1], created[0]))
    messages += [schema_message(topic, table, change) for change in history.changes(lo, hi)]
    return messages


def stopped_by(change: SchemaChange) -> ChangefeedError:
    """The error a feed ends with at ``change`` (a stop, a dropped table, one taken
    offline by IMPORT INTO, or one truncated)."""
    if change.ends_feed:
        return ChangefeedError(f"{change.describe()} at {change.ts}; the changefeed ended")
    return ChangefeedError(
        f"schema change occurred at {change.ts}: {change.describe()}; "
        f"the changefeed stopped, resolved up to {change.ts.prev()}"
    )


def event_message(
    spec: ChangefeedSpec, encoder: Encoder, query: CDCQuery | None, event: RowEvent
) -> Message | None:
    """The message a row change becomes (``None``: a CDC query filtered it out)."""
    if query is not None:
        filtered = query.apply(event)
        if filtered is None:
            return None
        event = filtered
    base = spec.topics[event.table.id]
    topic = f"{base}.{event.family.name}" if event.family is not None else base
    headers: Headers = ()
    column = spec.options.headers_json_column_name
    if column is not None:  # the column goes to the headers, not the value
        after, headers = split_headers(event.after, column)
        before, _ = split_headers(event.before, column)
        event = event._replace(after=after, before=before)
    # Row formats (csv, parquet) write the row itself: it needs no encoded value.
    rows_out = spec.options.format in ROW_FORMATS
    return Message(
        topic,
        encoder.encode_key(event, topic),
        None if rows_out else encoder.encode_value(event, topic),
        event.mvcc_ts,
        event.updated,
        event.table.version,
        event if rows_out else None,
        headers,
    )


def scan_messages(
    spec: ChangefeedSpec,
    encoder: Encoder,
    query: CDCQuery | None,
    decoder: RowDecoder,
    target: Target,
    ts: Timestamp,
    *,
    span: Span | None = None,
) -> Iterator[Message]:
    """The messages of an initial scan or a backfill: every row of ``target`` (or of
    the part of it in ``span``) as of ``ts``. Whole rows for an encoder that encodes
    them straight from their values skip the :class:`RowEvent` and
    :func:`event_message` of each row (a scan's time is mostly per-row overhead)."""
    topic = spec.topics[target.table_id]
    desc = decoder.histories[target.table_id].at(ts)
    encode = (
        encoder.scan_encoder(desc, topic, ts)
        if desc is not None
        and query is None
        and spec.options.headers_json_column_name is None
        and spec.options.format not in ROW_FORMATS
        and decoder.whole_rows(target, desc)
        else None
    )
    if desc is None or encode is None:
        for event in decoder.scan_rows(target, ts, span=span):
            message = event_message(spec, encoder, query, event)
            if message is not None:
                yield message
        return
    version = desc.version
    for key, values, mvcc_ts in decoder.scan_values(target, ts, span=span):
        key_bytes, value = encode(key, values, mvcc_ts)
        yield Message(topic, key_bytes, value, mvcc_ts, ts, version)


def resolved_topics(
    spec: ChangefeedSpec,
    descriptor: Callable[[int], TableDescriptor | None],
    used: Iterable[str] = (),
) -> list[str]:
    """Every topic rows may go to (a topic per family when families are split, by
    ``descriptor(table_id)`` of the moment), and any topic rows went to (``used``):
    each gets the resolved marker."""
    split = spec.options.split_column_families
    topics = set(used)
    for target in spec.targets:
        base = spec.topics[target.table_id]
        desc = descriptor(target.table_id)
        if target.family is not None:
            topics.add(f"{base}.{target.family}")
        elif split and desc is not None and len(desc.families) > 1:
            topics.update(f"{base}.{family.name}" for family in desc.families)
        else:
            topics.add(base)
    return sorted(topics)
