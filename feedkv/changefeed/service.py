"""The changefeed service of a SQL session: ``CREATE CHANGEFEED``, ``EXPERIMENTAL
CHANGEFEED`` and the job statements, from a statement to a running changefeed and the
control of it.

:class:`Changefeeds` is the ``changefeeds`` service of
:class:`~feedkv.sql.session.Session`. A statement is planned first
(:mod:`feedkv.changefeed.create`: nothing starts unless it is valid). A sinkless
changefeed streams back as a :class:`~feedkv.changefeed.sinkless.FeedResult`; one with a
sink becomes a job record (:mod:`feedkv.changefeed.jobs`) that a node's registry
(:mod:`feedkv.changefeed.registry`) runs, and the statement returns its ``job_id``. The
job statements are ``SHOW CHANGEFEED JOBS``, ``PAUSE`` / ``RESUME`` / ``CANCEL JOB``
(:mod:`feedkv.changefeed.control`), ``ALTER CHANGEFEED`` (:mod:`feedkv.changefeed.alter`)
and the cluster settings (:mod:`feedkv.changefeed.cluster_settings`). A named changefeed
(:mod:`feedkv.changefeed.feed_names`) is reached by its name wherever a job id is taken, and
also by ``PAUSE | RESUME | DROP CHANGEFEED`` and ``SHOW CREATE CHANGEFEED``; the name is
resolved to the job id first, so every statement then runs as for a job id.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedkv.changefeed import feed_names
from feedkv.changefeed.alter import alter
from feedkv.changefeed.changefeed import Changefeed, ChangefeedSpec
from feedkv.changefeed.cluster_settings import run_setting
from feedkv.changefeed.control import CONTROL_WAIT_S, REQUESTED, request, requested
from feedkv.changefeed.create import (
    is_admin,
    plan_changefeed,
    require_admin,
    require_explicit_access,
)
from feedkv.changefeed.enriched_source import FeedSource
from feedkv.changefeed.job import Job
from feedkv.changefeed.jobs import (
    ACTIVE,
    CRDB_INTERNAL_JOBS_COLUMNS,
    JOBS_COLUMNS,
    SHOW_COLUMNS,
    TERMINAL,
    JobRecord,
    delete_job,
    existing_job,
    get_job,
    jobs_row,
    list_jobs,
    put_job,
    redacted,
    show_row,
    sink_topics_of,
)
from feedkv.changefeed.metrics import ChangefeedMetrics
from feedkv.changefeed.options import (
    ChangefeedOptions,
    cursor_age_notices,
    frequency_notices,
    option_error,
)
from feedkv.changefeed.registry import JobRegistry
from feedkv.changefeed.sink import (
    SinkURI,
    check_sink,
    local_paths,
    make_sink,
    parse_sink_uri,
    sink_defaults,
)
from feedkv.changefeed.sinkless import COLUMNS, ChannelSink, FeedResult
from feedkv.changefeed.sinks.batch_publisher import layout
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.security.external_io import NODELOCAL, confine, nodelocal_parts, nodelocal_to_file
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.execution import ROW_IDS, Result
from feedkv.sql.schema_jobs import list_schema_jobs

if TYPE_CHECKING:
    from feedkv.changefeed.sinks.cloud_storage import NodeBlobsOf
    from feedkv.kv.txn import Txn
    from feedkv.sql.client import SQLClient
    from feedkv.sql.session import Session
    from feedkv.util.hlc import Timestamp

__all__ = ["Changefeeds"]

WAIT_POLL_S = 0.05
SHOW_CREATE_COLUMNS = ("changefeed_name", "create_statement")
_NAMED = st.ShowChangefeedJobs | st.ShowCreateChangefeed | st.ControlJob | st.AlterChangefeed


# SHOW JOBS lists the jobs that finished within this long (crdb_internal.jobs: all)
SHOW_JOBS_FINISHED_NS = 12 * 3600 * 1_000_000_000


def _show_jobs_order(row: tuple[Any, ...]) -> tuple[datetime.datetime, datetime.datetime]:
    """SHOW JOBS' order, descending, as CockroachDB's: the running jobs first (they
    have not finished), then by when they finished; then the latest started first."""
    never = datetime.datetime.max.replace(tzinfo=datetime.UTC)
    started, finished = row[8], row[9]
    return (finished or never, started or never)


def _notices(spec: ChangefeedSpec, reader: catalog.Reader) -> tuple[str, ...]:
    """What CREATE CHANGEFEED with a sink, and ALTER CHANGEFEED (which CockroachDB plans
    as one), tell the client: the sink's topics, and a ``resolved`` more frequent than
    checkpoints can be."""
    topics = sink_topics_of(spec, reader) or ()
    return (
        *(f"changefeed will emit to topic {topic}" for topic in topics),
        *frequency_notices(spec.options),
    )


def _resolved(job_id: int | None) -> int:
    """The job id of a statement whose name was resolved (or that gave the id)."""
    if job_id is None:
        raise SQLError("42601", "syntax error: expected a job id or a changefeed name")
    return job_id


class Changefeeds:
    """The SQL session's changefeed service: ``CREATE CHANGEFEED`` and the job
    statements (``SHOW CHANGEFEED JOBS``, ``PAUSE`` / ``RESUME`` / ``CANCEL JOB``,
    ``ALTER CHANGEFEED``). :meth:`close` stops the sinkless feeds it started.

    ``CREATE CHANGEFEED ... INTO`` writes a job record; the node's ``registry`` (given
    when this process runs a node) runs it. A client of a remote node has none: the
    server's registry adopts the job."""

    def __init__(
        self,
        db: SQLClient,
        registry: JobRegistry | None = None,
        metrics: ChangefeedMetrics | None = None,
        *,
        external_io_dir: Path | None = None,
        runner: str | None = None,
        node: Callable[[], FeedSource] | None = None,
        node_blobs: NodeBlobsOf | None = None,
    ) -> None:
        """``external_io_dir``: sinks' local paths must lie below it (``None``: anywhere,
        as for an embedded node, whose users already hold the process's rights).
        ``runner``: how ``registry`` runs jobs (``spark``, ``thread``; ``None``: not
        known here, as for a client of a remote node). ``node``: the identity of the node
        sinkless changefeeds run on, for the enriched envelope's ``source`` (``None``:
        not known here). ``node_blobs``: another node's directory below its external I/O
        directory, where a ``nodelocal://`` sink naming that node writes (``None``: this
        process reaches no other node)."""
        self._db = db
        self._node = node
        self._node_blobs = node_blobs
        self._external_io_dir = external_io_dir
        self._runner = runner
        self._registry = registry
        self._metrics = metrics or ChangefeedMetrics()
        self._lock = threading.Lock()
        self._sinkless: list[FeedResult] = []

    def create(self, statement: st.CreateChangefeed, session: Session, params: Any = ()) -> Result:
        plan = plan_changefeed(statement, session)
        if plan.sink is None:
            return self._start_sinkless(plan.spec, cursor_age_notices(plan.spec.options, plan.now))
        if statement.name is not None:  # checked again when the name is taken
            feed_names.check_free(session, self._snapshot(), statement.name)
        local = self._local_sink(plan.sink, plan.spec.options)
        # The sink is made once to check it (its parameters, its table...), and
        # reached where CockroachDB reaches it (Kafka brokers, cloud storage): a job
        # that could never write is refused now, not found failed later.
        if local is not None:
            self._reach(local, plan.spec.options, plan.spec.start)
        record = JobRecord(ROW_IDS.next(), plan.spec, created=plan.now)
        name = statement.name

        def write(txn: Txn) -> None:
            named = record
            if name is not None:
                database_id, taken = feed_names.claim(txn, session, name, record.id)
                named = record.replace(name=taken, database_id=database_id)
            put_job(txn, named, watching=True)

        self._db.run_transaction(write)
        if self._registry is not None:
            self._registry.adopt(record.id)
        return Result(
            columns=("job_id",),
            rows=[(record.id,)],
            tag="CREATE CHANGEFEED",
            notices=(
                *_notices(plan.spec, catalog.Snapshot(self._db, plan.now)),
                *cursor_age_notices(plan.spec.options, plan.now),
            ),
        )

    def _reach(self, sink: SinkURI, options: ChangefeedOptions, start: Timestamp) -> None:
        """Check the sink's local paths, make it once and reach it (see :meth:`create`)."""
        self._check_external_io(sink)
        make_sink(sink, options, start=start, db=self._db, node_blobs=self._node_blobs).close()
        check_sink(sink, options, node_blobs=self._node_blobs)

    def _local_sink(self, sink: SinkURI, options: ChangefeedOptions) -> SinkURI | None:
        """``sink``; a ``nodelocal://`` one naming this node (or ``self``) as the
        ``file://`` sink below its external I/O directory (the job keeps the URI as
        written, mapped again where it runs); ``None`` when this process cannot check it
        (a client of a remote node: the node that runs the job checks it there)."""
        if sink.scheme != NODELOCAL:
            return sink
        if self._external_io_dir is None:
            if self._registry is None:
                return None
            raise option_error(
                f"sink URI {redacted(sink.uri)!r}: nodelocal:// writes below a node's "
                "external I/O directory, and this embedded store has none: use file://"
            )
        identity = self._node().node_id if self._node is not None else ""
        try:
            node_id, _path = nodelocal_parts(sink.uri)
            if node_id is None or str(node_id) == identity:
                return parse_sink_uri(nodelocal_to_file(sink.uri, self._external_io_dir), options)
        except InvalidArgumentError as exc:
            raise option_error(f"sink URI {redacted(sink.uri)!r}: {exc}") from None
        if self._node_blobs is None:
            raise option_error(
                f"sink URI {redacted(sink.uri)!r}: this process writes nodelocal files only "
                f"on its own node: name nodelocal://self/... or nodelocal://{identity}/..."
            )
        return sink  # written (and checked now) through the named node's blob service

    def _check_external_io(self, sink: SinkURI) -> None:
        """The local paths of a sink (a ``file://`` or ``delta://`` sink's directory, an
        ``iceberg://`` SQL catalog's warehouse: :func:`local_paths`) lie below
        ``--external-io-dir``; on the Spark runner, so does the folder beside a
        ``file://`` sink that holds its jobs' staging and manifests."""
        if self._external_io_dir is None:
            return
        try:
            for path in local_paths(sink):
                confine(path, self._external_io_dir)
        except InvalidArgumentError as exc:
            raise option_error(f"sink URI {redacted(sink.uri)!r}: {exc}") from None
        if sink.scheme != "file" or self._runner != "spark":
            return
        where = layout(sink)
        try:
            confine(os.path.join(where.root.path, where.work), self._external_io_dir)
        except InvalidArgumentError as exc:
            raise option_error(
                f"sink URI {redacted(sink.uri)!r}: {exc}; the Spark runner stages a file "
                "sink's files beside its directory, so the sink must be a directory below "
                "--external-io-dir, not that directory"
            ) from None

    def execute(self, statement: st.Statement, session: Session) -> Result:
        """Run a job statement: an admin's on any job, another user's on their own (a
        job of someone else is refused, 42501, as if it were for an admin only)."""
        snapshot = self._snapshot()
        admin = is_admin(session, snapshot)
        if isinstance(statement, _NAMED) and statement.name is not None:
            named = feed_names.resolve(session, snapshot, statement.name)
            statement = dataclasses.replace(statement, job_id=named, name=None)
        if not admin and isinstance(statement, _NAMED):
            if statement.job_id is not None:
                self._require_owner(session, snapshot, statement.job_id)
        elif not admin:
            what = (
                f"{statement.action.upper()} CLUSTER SETTING"
                if isinstance(statement, st.ClusterSetting)
                else "manage changefeed jobs"
            )
            require_admin(session, snapshot, what)
        if isinstance(statement, st.ShowChangefeedJobs):
            return self._show(statement, session, admin)
        if isinstance(statement, st.ShowCreateChangefeed):
            return self._show_create(_resolved(statement.job_id))
        if isinstance(statement, st.ControlJob) and (statement.query or statement.every):
            return self._control_many(statement, session, admin)
        if isinstance(statement, st.ControlJob):
            job_id = _resolved(statement.job_id)
            if statement.action == "drop":
                return self._drop(job_id)
            return self._control(statement.action, job_id)
        if isinstance(statement, st.AlterChangefeed):
            job_id = _resolved(statement.job_id)
            return self._alter(statement, session, job_id)
        if isinstance(statement, st.ClusterSetting):
            return run_setting(self._db, statement)
        raise SQLError("0A000", f"not a job statement: {statement.text}")

    def record(self, job_id: int) -> JobRecord | None:
        """Job ``job_id`` as it is recorded now."""
        return get_job(self._snapshot(), job_id)

    def get(self, job_id: int) -> Job | None:
        """Job ``job_id`` if this process runs it."""
        return self._registry.running(job_id) if self._registry is not None else None

    def error(self, job_id: int) -> str | None:
        """How job ``job_id`` failed (or why it paused), if it did."""
        record = self.record(job_id)
        return record.error or None if record is not None else None

    def wait(self, job_id: int, timeout: float | None = None) -> bool:
        """Wait until job ``job_id`` no longer runs (it ended or paused); returns whether
        it got there within ``timeout`` seconds."""
        return self._wait_for(job_id, lambda r: r.status not in ACTIVE, timeout)

    def cancel(self, job_id: int) -> None:
        """``CANCEL JOB job_id``."""
        self._control("cancel", job_id)

    def start(self) -> None:
        """Start running this node's jobs (a node does when it opens a store with jobs)."""
        if self._registry is not None:
            self._registry.start()

    def close(self) -> None:
        """Stop the sinkless feeds, and the jobs this node runs (they stay ``running``
        in their records: the next start resumes them)."""
        with self._lock:
            sinkless, self._sinkless = self._sinkless, []
        for result in sinkless:
            result.close()
        if self._registry is not None:
            self._registry.close()

    # Job statements.

    def _snapshot(self) -> catalog.Snapshot:
        return catalog.Snapshot(self._db, self._db.now())

    @staticmethod
    def _require_owner(session: Session, snapshot: catalog.Snapshot, job_id: int) -> None:
        """A user who is no admin manages their own jobs only (another's is refused,
        42501, as if it were for an admin only)."""
        record = get_job(snapshot, job_id)
        if record is None or record.spec.user != session.user:
            require_admin(session, snapshot, "manage another user's changefeed jobs")

    def _job_ids(self, session: Session, query: str, what: str) -> list[int]:
        """The job ids ``query`` gives (its one column; NULLs are skipped), as the
        ``<what> (SELECT ...)`` statements take them."""
        result = session.execute(query)
        if len(result.columns) != 1:
            raise SQLError(
                "42601", f"{what} expects a single column source, got {len(result.columns)} columns"
            )
        ids: list[int] = []
        for (value,) in result.rows:
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise SQLError(
                    "42804", f"{what} expects job ids (INT8), but the query gave {value!r}"
                )
            ids.append(value)
        return list(dict.fromkeys(ids))  # each job once, in the query's order

    def _show(self, statement: st.ShowChangefeedJobs, session: Session, admin: bool) -> Result:
        """A user who is no admin sees their own jobs only."""
        snapshot = self._snapshot()
        job_id = statement.job_id
        if statement.query is not None:
            ids = self._job_ids(session, statement.query, "SHOW JOBS")
            if not admin:
                for each in ids:
                    self._require_owner(session, snapshot, each)
            records = [existing_job(get_job(snapshot, i), i, snapshot) for i in reversed(ids)]
        elif job_id is None:
            owner = None if admin else session.user
            records = [r for r in list_jobs(snapshot) if owner in (None, r.spec.user)]
        elif statement.shape != "changefeed" and get_job(snapshot, job_id) is None:
            return self._show_schema_jobs(statement, session, admin, job_id)
        else:
            records = [existing_job(get_job(snapshot, job_id), job_id, snapshot)]
        if statement.wait:
            records = [self._wait_complete(r.id, session) for r in records]
        records.reverse()  # newest first (SHOW JOBS (query): the query's order)
        columns: tuple[str, ...]
        if statement.shape == "jobs":
            columns, rows = JOBS_COLUMNS, [jobs_row(r) for r in records]
        elif statement.shape == "crdb_internal":
            columns = CRDB_INTERNAL_JOBS_COLUMNS
            rows = [jobs_row(r, high_water=True) for r in records]
        else:
            columns, rows = SHOW_COLUMNS, [show_row(r, snapshot) for r in records]
        if statement.shape != "changefeed" and job_id is None and statement.query is None:
            rows = [*rows, *self._show_schema_jobs(statement, session, admin, None).rows]
            if statement.shape == "jobs":
                rows.sort(key=_show_jobs_order, reverse=True)
        return Result(columns=columns, rows=rows, tag=f"SHOW {len(rows)}")

    def _show_schema_jobs(
        self, statement: st.ShowChangefeedJobs, session: Session, admin: bool, job_id: int | None
    ) -> Result:
        """The schema-change jobs (:mod:`feedkv.sql.schema_jobs`) of ``SHOW JOBS`` or
        ``crdb_internal.jobs``: every one, or job ``job_id`` (42704 if there is none);
        a user who is no admin sees their own only; SHOW JOBS lists those finished within
        :data:`SHOW_JOBS_FINISHED_NS`, as CockroachDB's. ``WHEN COMPLETE`` does not wait
        for one: a GC job waits for the GC TTL (hours), and is refused (0A000)."""
        snapshot = self._snapshot()
        now = snapshot.ts.wall  # NB: the HLC the jobs' times were taken on
        jobs = [
            j
            for j in list_schema_jobs(snapshot)
            if (admin or j.user == session.user) and job_id in (None, j.id)
        ]
        if statement.shape == "jobs" and job_id is None:  # as CockroachDB's SHOW JOBS
            jobs = [j for j in jobs if not j.finished_before(now - SHOW_JOBS_FINISHED_NS)]
        if job_id is not None and not jobs:
            raise SQLError("42704", f"job with ID {job_id} does not exist")
        if statement.wait and any(j.status(now) == "running" for j in jobs):
            raise SQLError(
                "0A000", "SHOW JOB WHEN COMPLETE does not wait for a SCHEMA CHANGE GC job"
            )
        high_water = statement.shape == "crdb_internal"
        columns = CRDB_INTERNAL_JOBS_COLUMNS if high_water else JOBS_COLUMNS
        rows = [j.row(now, high_water=high_water) for j in reversed(jobs)]
        return Result(columns=columns, rows=rows, tag=f"SHOW {len(rows)}")

    def _control(self, action: str, job_id: int) -> Result:
        self._db.run_transaction(lambda txn: request(txn, job_id, action))
        if self._registry is not None:
            self._registry.poke()
        self._wait_for(job_id, lambda r: r.status not in REQUESTED, CONTROL_WAIT_S)
        return Result(tag=f"{action.upper()} JOB")

    def _wait_complete(self, job_id: int, session: Session) -> JobRecord:
        """``SHOW JOB WHEN COMPLETE``: job ``job_id`` once it succeeded, failed or was
        canceled, as CockroachDB waits for a finished job (a paused one is not); the
        client's cancel (57014) ends the wait."""
        while True:
            record = existing_job(self.record(job_id), job_id)
            if record.status in TERMINAL:
                return record
            session.interrupt.sleep(WAIT_POLL_S)

    def _control_many(self, statement: st.ControlJob, session: Session, admin: bool) -> Result:
        """``PAUSE | RESUME | CANCEL JOBS (SELECT ...)`` and ``... ALL CHANGEFEED JOBS``:
        every job is moved in one transaction (one that cannot be refuses them all), then
        the statement waits for their runners as ``PAUSE JOB`` does."""
        action, snapshot = statement.action, self._snapshot()
        what = f"{action.upper()} JOBS"
        if statement.query is not None:
            ids = self._job_ids(session, statement.query, what)
        else:  # ALL CHANGEFEED JOBS: those the action moves
            ids = []
            for record in list_jobs(snapshot):
                try:
                    moves = requested(record, action)[0] != record.status
                except SQLError:
                    moves = False
                if moves and (admin or record.spec.user == session.user):
                    ids.append(record.id)
        if not admin:
            for job_id in ids:
                self._require_owner(session, snapshot, job_id)

        def move(txn: Txn) -> None:
            for job_id in ids:
                request(txn, job_id, action)

        self._db.run_transaction(move)
        if self._registry is not None and ids:
            self._registry.poke()
        deadline = time.monotonic() + CONTROL_WAIT_S
        for job_id in ids:
            left = max(0.0, deadline - time.monotonic())
            self._wait_for(job_id, lambda r: r.status not in REQUESTED, left)
        return Result(tag=f"{what} {len(ids)}")

    def _show_create(self, job_id: int) -> Result:
        snapshot = self._snapshot()
        record = existing_job(get_job(snapshot, job_id), job_id, snapshot)
        row = (record.name, feed_names.create_statement(record, snapshot))
        return Result(columns=SHOW_CREATE_COLUMNS, rows=[row], tag="SHOW 1")

    def _drop(self, job_id: int) -> Result:
        """``DROP CHANGEFEED``: cancel the job, free its name, then forget its record
        (once its runner has stopped, or after :data:`CONTROL_WAIT_S`: a runner that
        finds its record gone stops too)."""

        def cancel(txn: Txn) -> None:
            record = existing_job(get_job(txn, job_id), job_id, txn)
            if record.status not in TERMINAL:
                request(txn, job_id, "cancel")
            feed_names.forget(txn, record)

        self._db.run_transaction(cancel)
        if self._registry is not None:
            self._registry.poke()
        self._wait_for(job_id, lambda r: r.status not in REQUESTED, CONTROL_WAIT_S)

        def forget(txn: Txn) -> None:
            record = get_job(txn, job_id)
            if record is not None:
                delete_job(txn, record)

        self._db.run_transaction(forget)
        return Result(tag="DROP CHANGEFEED")

    def _alter(self, statement: st.AlterChangefeed, session: Session, job_id: int) -> Result:
        if statement.sink is not None:
            # A new sink is made and checked as CREATE CHANGEFEED's is, before the job
            # moves to it.
            snapshot = self._snapshot()
            record = existing_job(get_job(snapshot, job_id), job_id, snapshot)
            options = sink_defaults(statement.sink, record.spec.options)
            parsed = parse_sink_uri(statement.sink, options)
            require_explicit_access(session, snapshot, parsed)  # before it is reached
            sink = self._local_sink(parsed, options)
            if sink is not None:
                self._reach(sink, options, record.high_water or record.spec.start)
        self._db.run_transaction(lambda txn: alter(txn, job_id, statement, session))
        snapshot = self._snapshot()
        altered = existing_job(get_job(snapshot, job_id), job_id, snapshot)
        return Result(
            columns=("job_id", "job_description"),
            rows=[(job_id, altered.spec.description)],
            tag="ALTER CHANGEFEED",
            notices=_notices(altered.spec, snapshot),
        )

    def _wait_for(
        self, job_id: int, done: Callable[[JobRecord], bool], timeout: float | None
    ) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.record(job_id)
            if record is None or done(record):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(WAIT_POLL_S)  # wait-ok: a job record changes in another thread

    def _start_sinkless(self, spec: ChangefeedSpec, notices: tuple[str, ...]) -> FeedResult:
        channel = ChannelSink(
            text=spec.options.format not in ("avro", "protobuf"),
            envelope=spec.options.envelope,
            csv=spec.options.format == "csv",
        )
        label = spec.options.metrics_label
        source = self._node() if self._node is not None else None
        changefeed = Changefeed(
            self._db, spec, channel, metrics=self._metrics.scope(label), source=source
        )
        result = FeedResult(
            columns=COLUMNS,
            tag="CHANGEFEED",
            notices=notices,
            changefeed=changefeed,
            channel=channel,
        )

        def run() -> None:
            try:
                with self._metrics.tracking(label, changefeed):
                    changefeed.run()
            except BaseException as exc:
                channel.end(exc)
            else:
                channel.end()

        threading.Thread(target=run, name="sinkless-changefeed", daemon=True).start()
        with self._lock:
            self._sinkless.append(result)
        return result
