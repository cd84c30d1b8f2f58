"""The feedkv Spark data source (PySpark's Python Data Source API), format ``feedkv``.

Register it once per session with ``spark.dataSource.register(FeedKVDataSource)`` (the
session from :func:`feedkv.spark.session.spark_session` comes with it registered).

Batch: a consistent snapshot of a table, one partition per range::

    spark.read.format("feedkv").option("url", "feedkv://127.0.0.1:26258")
        .option("table", "rides").option("as_of", ts).load()

Streaming: every change of the table, in micro-batches that each hold the committed
changes of a window ``(previous offset, next offset]`` (see :mod:`feedkv.spark.offsets`)::

    spark.readStream.format("feedkv").option("url", url).option("table", "rides")
        .option("cursor", ts).option("initial_scan", "no").load()

Options: ``url`` (required: ``feedkv://host:port``, or several nodes of the cluster,
``feedkv://h1:p1,h2:p2``: each process connects through the first that answers, and
moves to the next when that node dies, a task in the middle of its read included: it
reads the rest of its piece, a fixed window, through the next; local Spark retries no
task, and none needs to),
``table`` (required: ``name`` or ``database.name``; the database defaults to
``defaultdb``), ``certs_dir`` and ``user``
(a secure node: connect with TLS as ``user``, root by default, with its client
certificate ``client.USER.crt`` from ``certs_dir``, as the ``?certs_dir=&user=`` of a
node's URL does), ``password`` (log in as ``user`` with its SQL password instead of a
certificate; ``certs_dir`` then needs only the CA's ``ca.crt``. The password is never
part of a URL, a plan or a log line: the source's URL names it by a random ``login=``
id, and Spark redacts the option in plans), ``as_of`` (batch only),
``cursor`` (stream: start after this timestamp, with no initial scan unless
``initial_scan`` says ``yes``; both take what CockroachDB's cursor does: a logical
timestamp, a negative interval such as ``-10s``, or a date/time), ``initial_scan``
(``yes``/``no``, stream), ``diff`` (``true`` adds ``__before``), ``maxRowsPerTrigger``
(bounds initial-scan batches),
``gc_protect_expires_after`` (how long the stream's hold on history outlives its last
commit, ``24h`` by default), ``changelog_columns`` (``delta``: the rows and columns of
Delta's Change Data Feed, as ``readChangeFeed`` gives them, instead of ``__op`` and
``__before``; see :mod:`feedkv.spark.rows`).
The columns are the table's as of when the query starts (found by id in later rows:
a renamed column keeps its values), plus the columns listed in :mod:`feedkv.spark.rows`.
``table`` is ``t``, ``database.t`` or ``database.public.t``.

Reading as a user other than root: the node lets it read the keys of the tables it
holds ``SELECT`` on, and nothing else (:mod:`feedkv.sql.read_access`); a table it may
not read fails the query with a :class:`~feedkv.errors.PermissionDeniedError` naming
the table. Such a stream's hold on history is placed by the node when the user holds
``CHANGEFEED`` on the table (:mod:`feedkv.changefeed.hold_calls`); with ``SELECT``
alone it streams without one, as CockroachDB's sinkless changefeeds protect none.

The driver's stream reader keeps a rangefeed over the table open to follow its resolved
timestamp: a batch never ends above it, so it is final. ``Trigger.AvailableNow`` stops
at the resolved timestamp current when the query started. The stream holds the table's
history from its start offset against garbage collection
(:class:`~feedkv.changefeed.jobs.HistoryHold`); each commit moves the hold up to the
committed offset, and stopping the query releases it.
"""

from __future__ import annotations

import difflib
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from feedkv.changefeed.hold_calls import HoldRequest, call_hold
from feedkv.changefeed.jobs import HOLD_EXPIRES_AFTER_NS, HistoryHold, release_hold
from feedkv.changefeed.rows import Target
from feedkv.errors import (
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
    PermissionDeniedError,
    SQLError,
)
from feedkv.kv.address import node_url_params
from feedkv.rangefeed.event import Checkpoint
from feedkv.rangefeed.feed_client import FeedClient
from feedkv.spark.offsets import FeedOffset, Piece, plan_pieces
from feedkv.spark.rows import (
    LOGIN_PARAM,
    cdf_ddl,
    cdf_record_batches,
    connected,
    connection,
    forget_connection,
    gateway_channel,
    piece_events,
    record_batches,
    remember_password,
    replaced,
    spark_ddl,
)
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import TABLES_PREFIX, row_split_key, table_span
from feedkv.sql.types import timestamp_of
from feedkv.util.encoding import key_between
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span
from feedkv.util.units import parse_duration_ns

__all__ = [
    "FeedKVDataSource",
    "FollowingStreamReader",
    "ResolvedFollower",
    "SourceOptions",
    "range_starts",
    "scan_cuts",
]

FIRST_CHECKPOINT_TIMEOUT_S = 60.0

log = logging.getLogger(__name__)

_OPTIONS = (
    "url",
    "table",
    "as_of",
    "cursor",
    "initial_scan",
    "diff",
    "maxrowspertrigger",
    "gc_protect_expires_after",
    "changelog_columns",
    "certs_dir",
    "user",
    "password",
)


def _with_credentials(
    url: str, certs_dir: str | None, user: str | None, login: str | None = None
) -> str:
    """``url`` with the ``certs_dir`` and ``user`` options as its parameters (the key
    of this process's connection, so each user has its own), and the id of its
    password (``login``) when it logs in with one."""
    params = node_url_params(url)
    for name, value in (("certs_dir", certs_dir), ("user", user)):
        if value is None:
            continue
        if params.get(name, value) != value:
            raise InvalidArgumentError(
                f"feedkv source option {name}={value!r} differs from the url's {params[name]!r}"
            )
        params[name] = value
    if login is not None and "certs_dir" not in params:
        raise InvalidArgumentError(
            "feedkv source option password needs certs_dir: the directory with the "
            "cluster's ca.crt (a password is sent only over TLS)"
        )
    if login is not None and "user" not in params:
        raise InvalidArgumentError("feedkv source option password needs the option user")
    if "user" in params and "certs_dir" not in params:
        raise InvalidArgumentError(
            f"feedkv source option user={params['user']!r} needs certs_dir: the directory "
            f"with ca.crt and the user's client.{params['user']}.crt and .key"
        )
    if login is not None:
        params[LOGIN_PARAM] = login
    base = url.partition("?")[0]
    return f"{base}?{urlencode(params)}" if params else base


def _bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise InvalidArgumentError(f"feedkv source option {name}={text!r}: expected true or false")


def _timestamp(name: str, value: str) -> Timestamp:
    """A ``cursor`` or ``as_of`` option, as CockroachDB's cursor and AS OF SYSTEM TIME
    take one: a logical timestamp (``cluster_logical_timestamp()``), a negative interval
    before now (``'-10s'``: this machine's clock, when the option is read), or a
    date/time."""
    try:
        return timestamp_of(value, Timestamp(time.time_ns(), 0))
    except SQLError:
        raise InvalidArgumentError(
            f"feedkv source option {name}={value!r} is not a timestamp; use a logical "
            "timestamp (cluster_logical_timestamp()), a negative interval such as '-10s', "
            "or a date/time"
        ) from None


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, checked. ``table`` is ``(database, name)``."""

    url: str
    database: str
    table: str
    as_of: Timestamp | None = None
    cursor: Timestamp | None = None
    initial_scan: bool = True
    diff: bool = False
    delta_cdf: bool = False  # changelog_columns=delta
    max_rows_per_trigger: int | None = None
    hold_expires_after_ns: int = HOLD_EXPIRES_AFTER_NS
    given: tuple[str, ...] = field(default=())
    password: str | None = field(default=None, repr=False)  # url names it: login=

    def __post_init__(self) -> None:
        self._remember()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled in a Spark worker: that process learns the password too."""
        self.__dict__.update(state)
        self._remember()

    def _remember(self) -> None:
        if self.password is not None:
            login = parse_qs(self.url.partition("?")[2]).get(LOGIN_PARAM)
            if login:
                remember_password(login[0], self.password)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        lowered = {k.lower(): v for k, v in options.items()}
        for name in lowered:
            if name not in _OPTIONS:
                close = difflib.get_close_matches(name, _OPTIONS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise InvalidArgumentError(f"unknown feedkv source option {name!r}{hint}")
        for required in ("url", "table"):
            if not lowered.get(required):
                raise InvalidArgumentError(f"the feedkv source needs the option {required!r}")
        password = lowered.get("password")
        if password is not None and not password:
            raise InvalidArgumentError("feedkv source option password is empty")
        database, _, table = lowered["table"].rpartition(".")
        if database.endswith(".public"):  # CockroachDB's full name: database.public.table
            database = database.removesuffix(".public")
        cursor = _timestamp("cursor", lowered["cursor"]) if "cursor" in lowered else None
        scan = lowered.get("initial_scan")
        if scan is not None and scan.lower() not in ("yes", "no"):
            raise InvalidArgumentError(f"feedkv source option initial_scan={scan!r}: yes or no")
        max_rows = lowered.get("maxrowspertrigger")
        if max_rows is not None and (not max_rows.isdigit() or int(max_rows) <= 0):
            raise InvalidArgumentError(
                f"feedkv source option maxRowsPerTrigger={max_rows!r}: a positive integer"
            )
        changelog = lowered.get("changelog_columns")
        if changelog is not None and changelog.lower() != "delta":
            raise InvalidArgumentError(
                f"feedkv source option changelog_columns={changelog!r}: only 'delta' "
                "(Delta's Change Data Feed columns) is known"
            )
        if changelog is not None and "diff" in lowered:
            raise InvalidArgumentError(
                "feedkv source options diff and changelog_columns do not go together: with "
                "Delta's columns an update's row before is a row of its own (update_preimage)"
            )
        expires = lowered.get("gc_protect_expires_after")
        try:
            hold_ns = parse_duration_ns(expires) if expires is not None else HOLD_EXPIRES_AFTER_NS
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(
                f"feedkv source option gc_protect_expires_after: {exc}"
            ) from None
        return cls(
            url=_with_credentials(
                lowered["url"],
                lowered.get("certs_dir"),
                lowered.get("user"),
                uuid.uuid4().hex if password is not None else None,
            ),
            database=database or "defaultdb",
            table=table,
            as_of=_timestamp("as_of", lowered["as_of"]) if "as_of" in lowered else None,
            cursor=cursor,
            initial_scan=scan.lower() == "yes" if scan is not None else cursor is None,
            diff=_bool("diff", lowered["diff"]) if "diff" in lowered else False,
            delta_cdf=changelog is not None,
            max_rows_per_trigger=int(max_rows) if max_rows is not None else None,
            hold_expires_after_ns=hold_ns,
            given=tuple(lowered),
            password=password,
        )

    def descriptor(self, ts: Timestamp | None = None) -> TableDescriptor:
        """The table as of ``ts`` (now by default); SQLSTATE 42P01 if it does not exist.
        Its VIRTUAL computed columns are left out, as a changefeed leaves them out by
        default: nothing of them is stored to read."""

        def read(db: FeedClient) -> TableDescriptor:
            snapshot = catalog.Snapshot(db, ts or db.now())
            database = catalog.database_by_name(snapshot, self.database)
            return catalog.table_by_name(snapshot, database, self.table).without_virtual()

        return connected(self.url, read)


def _answering(db: FeedClient) -> FeedClient:
    """``db``, once its node has answered a call."""
    db.now()
    return db


def range_starts(url: str) -> list[bytes]:
    """Where each range of the node at ``url`` starts: the places to cut batches."""
    return [info.span.start for info in connected(url, lambda db: db.ranges())]


def scan_cuts(url: str, span: Span, ts: Timestamp, parts: int) -> list[bytes]:
    """Row boundaries that cut the rows of ``span`` as of ``ts`` into about ``parts``
    pieces, so one range's part of a batch (its initial scan, or its changes) can run as
    several tasks. The cuts are spread
    evenly between the first and the last key's primary-key values (see
    :func:`~feedkv.util.encoding.key_between`), each moved to the start of the row it
    falls in: a row's column families stay in one piece."""
    if parts <= 1:
        return []
    db = connection(url)
    first = db.scan(span.start, span.end, as_of=ts, limit=1)
    last = db.scan(span.start, span.end, as_of=ts, limit=1, reverse=True)
    if not first:
        return []
    cuts: list[bytes] = []
    for i in range(1, parts):
        probe = key_between(first[0].key, last[0].key, i / parts, columns_at=len(TABLES_PREFIX))
        found = db.scan(probe, span.end, as_of=ts, limit=1)
        cut = row_split_key(found[0].key) if found else None
        if cut is not None and cut > (cuts[-1] if cuts else span.start):
            cuts.append(cut)
    return cuts


class _PieceReader:
    """Reads one piece into Arrow batches (runs in Spark's Python workers)."""

    def __init__(self, options: SourceOptions, desc: TableDescriptor) -> None:
        self.options = options
        self.desc = desc

    def read_piece(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        piece: Piece = partition.value
        # NB: asked the time first, so a client whose node went away since this worker's
        # last task is replaced before any row goes out (then a failure fails the task)
        db = connected(self.options.url, _answering)
        # NB: read with the row before each change, as diff does, so __op can tell an
        # update from an insert; __before is there only with diff.
        events = piece_events(db, Target(self.desc.id), piece, diff=True, omit_virtual=True)
        try:
            if self.options.delta_cdf:
                yield from cdf_record_batches(events, self.desc)
            else:
                yield from record_batches(events, self.desc, diff=self.options.diff)
        except NodeUnavailableError:
            # NB: no node of the URL answered (the client moves to the next by itself),
            # and rows went out already: the task fails, and its next attempt (or the
            # query's restart from its checkpoint) connects anew
            forget_connection(self.options.url, db)
            raise


class _BatchReader(_PieceReader, DataSourceReader):
    def __init__(self, options: SourceOptions, desc: TableDescriptor, ts: Timestamp) -> None:
        super().__init__(options, desc)
        self.ts = ts

    def partitions(self) -> list[InputPartition]:
        start = FeedOffset(self.ts, table_span(self.desc.id).start)
        pieces = plan_pieces(
            start, FeedOffset(self.ts), table_span(self.desc.id), range_starts(self.options.url)
        )
        return [InputPartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.read_piece(partition)


class ResolvedFollower:
    """Follows the resolved timestamp of ``spans`` through a checkpoint-only rangefeed
    (``values=False``: the node sends no values and scans no history for it)."""

    def __init__(self, url: str, spans: list[Span], since: Timestamp) -> None:
        self.resolved = since
        self.error: BaseException | None = None
        self._first = threading.Event()
        self.url = url
        self.db = connection(url)
        self._feed = self.db.rangefeed(spans, since, values=False)
        self._thread = threading.Thread(target=self._run, name="feedkv-resolved", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._feed:
                if isinstance(event, Checkpoint) and event.ts > self.resolved:
                    self.resolved = event.ts
                    self._first.set()
        except BaseException as exc:  # handed to the caller of current()
            self.error = exc
            self._first.set()

    def current(self, *, wait_s: float = 0.0) -> Timestamp:
        """The resolved timestamp (after waiting up to ``wait_s`` for it to move once).
        Raises :class:`~feedkv.errors.NodeUnavailableError` when the client's node went
        away: the feed retries without end and would never move again."""
        if wait_s:
            self._first.wait(wait_s)
        if self.error is not None:
            raise self.error
        if replaced(self.url, self.db):
            raise NodeUnavailableError("the client's node went away")
        self.db.now()  # NB: the one call per batch that tells the client's node is gone
        return self.resolved

    def close(self) -> None:
        self._feed.close()
        self._thread.join(timeout=10)


class FollowingStreamReader(DataSourceStreamReader):
    """A stream reader of ``spans`` that follows their resolved timestamp. It lives in
    Spark's driver-side Python runner and is pickled to executors for ``read`` before
    any feed is opened: live state is created on first use. Subclasses say where a new
    stream starts (:meth:`start_offset`)."""

    def __init__(self, url: str, spans: list[Span]) -> None:
        self.url = url
        self.spans = spans
        self._follower: ResolvedFollower | None = None
        self._initial: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_follower": None}

    def start_offset(self) -> FeedOffset:
        raise NotImplementedError

    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:  # Spark asks more than once: the answer must not change
            self._initial = self.start_offset().to_json()
        return self._initial

    def commit(self, end: dict[str, Any]) -> None:
        FeedOffset.from_json(end)

    def stop(self) -> None:
        if self._follower is not None:
            self._follower.close()
            self._follower = None

    def follow(self, spans: list[Span]) -> None:
        """Follow ``spans`` instead (when they differ): the next :meth:`resolved` starts
        following them from its ``since``."""
        if spans != self.spans:
            FollowingStreamReader.stop(self)
            self.spans = spans

    def resolved(self, since: Timestamp, *, wait: bool = False) -> Timestamp:
        """The spans' resolved timestamp (following them from ``since`` on first use;
        ``wait``: until it has moved once)."""
        if self._follower is None:
            self._follower = ResolvedFollower(self.url, self.spans, since)
        try:
            return self._follower.current(wait_s=FIRST_CHECKPOINT_TIMEOUT_S if wait else 0.0)
        except NodeUnavailableError:
            # the client's node went away: follow from where it got to, through another
            failed = self._follower
            self._follower = None
            failed.close()
            forget_connection(self.url, failed.db)
            return self.resolved(failed.resolved, wait=wait)


class _StreamReader(_PieceReader, FollowingStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, desc: TableDescriptor) -> None:
        _PieceReader.__init__(self, options, desc)
        self.span = table_span(desc.id)
        FollowingStreamReader.__init__(self, options.url, [self.span])
        self._stop_at: Timestamp | None = None
        self.hold_id = uuid.uuid4().hex
        self._holding = False
        # who writes the hold: the stream itself (root), the node for the stream's user
        # ("node"), or no one (a user without CHANGEFEED on the table: None)
        self._held_by: str | None = "txn"

    def start_offset(self) -> FeedOffset:
        o = self.options
        start = o.cursor or connected(o.url, lambda db: db.now())
        return FeedOffset(start, self.span.start if o.initial_scan else None)

    def initialOffset(self) -> dict[str, Any]:
        initial = super().initialOffset()
        self._hold(FeedOffset.from_json(initial).resolved)
        return initial

    def commit(self, end: dict[str, Any]) -> None:
        """Batches up to ``end`` are done: the stream needs history from there on (an
        initial scan in progress reads at that offset's timestamp)."""
        self._hold(FeedOffset.from_json(end).resolved)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            try:
                self._hold_request(None)
            except FeedKVError as exc:  # the hold lapses by itself
                log.warning("could not release the stream's hold on history: %s", exc)

    def _hold(self, since: Timestamp) -> None:
        self._holding = True
        try:
            self._hold_request(since)
        except PermissionDeniedError as exc:
            self._held_by = None
            log.warning(
                "the stream of %s holds no history against garbage collection (%s): "
                "if it falls further behind than the GC TTL, it fails",
                self.desc.name,
                exc,
            )

    def _hold_request(self, since: Timestamp | None) -> None:
        """Place or renew the hold from ``since`` (``None``: release it): root writes
        it, another user asks the node to (see :mod:`feedkv.changefeed.hold_calls`)."""
        connected(self.options.url, lambda db: self._hold_through(db, since))

    def _hold_through(self, db: FeedClient, since: Timestamp | None) -> None:
        if self._held_by == "txn":
            try:
                if since is None:
                    db.run_transaction(lambda txn: release_hold(txn, self.hold_id))
                else:
                    after_ns = self.options.hold_expires_after_ns
                    hold = HistoryHold.renewed(
                        self.hold_id, self.desc.id, since, db.now(), after_ns
                    )
                    db.run_transaction(hold.put)
                return
            except PermissionDeniedError:
                self._held_by = "node"
        if self._held_by == "node":
            request = HoldRequest(
                self.hold_id, self.desc.id, since, self.options.hold_expires_after_ns
            )
            call_hold(gateway_channel(db), request)

    def getDefaultReadLimit(self) -> ReadLimit:
        rows = self.options.max_rows_per_trigger
        return ReadMaxRows(rows) if rows is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        now = connected(self.options.url, lambda db: db.now())
        self._stop_at = self.resolved(now, wait=True)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        offset = FeedOffset.from_json(start)
        if not self._holding:  # a query restarted from its checkpoint: hold from there
            self._hold(offset.resolved)
        # the first batch's end tells where the stream began (FeedOffset.replayed_from)
        origin = offset.resolved if start == self._initial else None
        if offset.scan_key is not None:
            if isinstance(limit, ReadMaxRows):
                cut = self._scan_cut(offset, limit.max_rows)
                return FeedOffset(offset.resolved, cut, origin=origin).to_json()
            return FeedOffset(offset.resolved, origin=origin).to_json()
        resolved = self.resolved(offset.resolved)
        if self._stop_at is not None:
            resolved = min(resolved, self._stop_at)
        return FeedOffset(max(resolved, offset.resolved), origin=origin).to_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = FeedOffset.from_json(start), FeedOffset.from_json(end)
        if start == self._initial:
            replayed = first.replayed_from(last)
            if replayed != first:  # an earlier start's first batch, replayed
                self._hold(replayed.resolved)
                first = replayed
        pieces = plan_pieces(first, last, self.span, range_starts(self.options.url))
        return [InputPartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.read_piece(partition)

    def _scan_cut(self, offset: FeedOffset, max_rows: int) -> bytes | None:
        """Where a scan batch of at most ``max_rows`` rows from ``offset`` ends (``None``:
        the scan finishes in this batch). A row has a key for each family that holds a
        value, so the rows are counted, not the keys."""
        start_key = offset.scan_key
        if start_key is None:
            return None
        db = connection(self.options.url)
        limit = (max_rows + 1) * len(self.desc.families)
        kvs = db.scan(start_key, self.span.end, as_of=offset.resolved, limit=limit)
        rows = list(dict.fromkeys(row_split_key(kv.key) for kv in kvs))
        return rows[max_rows] if len(rows) > max_rows else None


class FeedKVDataSource(DataSource):
    """``format("feedkv")``: a table of a feedkv node as a batch or streaming source."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.feed_options = SourceOptions.parse(options)
        self._desc: TableDescriptor | None = None

    @classmethod
    def name(cls) -> str:
        return "feedkv"

    def _descriptor(self) -> TableDescriptor:
        if self._desc is None:
            self._desc = self.feed_options.descriptor(self.feed_options.as_of)
        return self._desc

    def schema(self) -> str:
        if self.feed_options.delta_cdf:
            return cdf_ddl(self._descriptor())
        return spark_ddl(self._descriptor(), diff=self.feed_options.diff)

    def reader(self, schema: StructType) -> DataSourceReader:
        o = self.feed_options
        if o.cursor is not None or "initial_scan" in o.given or "maxrowspertrigger" in o.given:
            raise InvalidArgumentError(
                "cursor, initial_scan and maxRowsPerTrigger are streaming options; "
                "a batch read takes as_of"
            )
        ts = o.as_of or connection(o.url).now()
        return _BatchReader(o, self._descriptor(), ts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if self.feed_options.as_of is not None:
            raise InvalidArgumentError("as_of is a batch option; a stream starts at cursor")
        return _StreamReader(self.feed_options, self._descriptor())
