"""``CREATE CHANGEFEED``, ``EXPERIMENTAL CHANGEFEED`` and the job statements: from a
statement to a running changefeed, and the control of it.

:func:`plan_changefeed` checks everything before anything starts: the user is an admin,
the tables (and families) exist as of the statement's timestamp, every option and the
sink URI are valid together. A failure raises :class:`~feedkv.errors.SQLError` and
creates nothing.

:class:`Changefeeds` is the SQL session's way to start changefeeds (the
``changefeeds`` service of :class:`~feedkv.sql.session.Session`). A sinkless changefeed
streams back as a :class:`~feedkv.changefeed.sinkless.FeedResult`; one with a sink
becomes a job record (:mod:`feedkv.changefeed.jobs`) that a node's registry
(:mod:`feedkv.changefeed.registry`) runs, and the statement returns its ``job_id``.
``ALTER CHANGEFEED`` changes a paused job's targets and options, checked as strictly as
a new changefeed's; it cannot change where the job started (``cursor``,
``initial_scan``), and an added table is followed from the job's high-water mark.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from feedkv.changefeed.changefeed import Changefeed, ChangefeedSpec
from feedkv.changefeed.jobs import (
    ACTIVE,
    CANCEL_REQUESTED,
    CANCELED,
    PAUSE_REQUESTED,
    PAUSED,
    RUNNING,
    SHOW_COLUMNS,
    JobRecord,
    get_job,
    is_secret,
    list_jobs,
    put_job,
    redacted,
    show_row,
    table_names,
)
from feedkv.changefeed.options import ChangefeedOptions, option_error, parse_options
from feedkv.changefeed.query import CDCQuery
from feedkv.changefeed.registry import JobFactory, JobRegistry
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import SINK_OPTIONS, Sink, SinkURI, make_sink, parse_sink_uri
from feedkv.changefeed.sinkless import COLUMNS, ChannelSink, FeedResult
from feedkv.errors import BatchTimestampBeforeGCError, SQLError
from feedkv.kv.db import KVClient
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import DatabaseDescriptor, TableDescriptor
from feedkv.sql.executor import ROW_IDS, Result
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.sql.client import SQLClient
    from feedkv.sql.session import Session

__all__ = ["Changefeeds", "Job", "Plan", "ThreadJob", "plan_changefeed", "thread_jobs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    spec: ChangefeedSpec
    sink: SinkURI | None
    now: Timestamp  # the statement's timestamp


def plan_changefeed(statement: st.CreateChangefeed, session: Session) -> Plan:
    """Validate ``statement`` as ``session``'s user; see the module docstring."""
    if session.in_transaction:
        raise SQLError(
            "25001", "CREATE CHANGEFEED cannot be used inside a transaction; COMMIT first"
        )
    db = session.db
    now = db.now()
    snapshot = catalog.Snapshot(db, now)
    _require_admin(session, snapshot, "create a changefeed")
    options = parse_options(statement.options, now=now)
    query = None
    if statement.query is not None:
        query = CDCQuery(statement.query.text)
        if not any(name == "envelope" for name, _ in options.given):
            options = dataclasses.replace(options, envelope="bare")  # as in CockroachDB
    targets: list[Target] = []
    topics: dict[int, str] = {}
    for written in statement.targets:
        database, desc = _table(session, snapshot, written)
        if written.family is not None:
            desc.family(written.family)  # 42704 when it does not exist
        target = Target(desc.id, written.family)
        if target in targets:
            raise option_error(f"table {written.table} is a target more than once")
        targets.append(target)
        if query is not None:
            query.check(desc)
        topics[desc.id] = _topic(database.name, desc.name, options)
        if options.cursor is not None:
            _check_history(db, target, desc.name, options.cursor)
    sink = None
    if statement.sink is not None:
        sink = parse_sink_uri(statement.sink, options)
        if sink.scheme == "experimental-sql" and any(
            topics[t.table_id].split(".")[-1] == (sink.host + sink.path).split(".")[-1].strip("/")
            for t in targets
        ):
            raise option_error("a changefeed cannot write into a table it watches")
    else:
        _check_sinkless(options)
    spec = ChangefeedSpec(
        targets=tuple(targets),
        topics=topics,
        options=options,
        start=options.cursor or now,
        sink_uri=statement.sink,
        description=_redacted_text(statement.text, statement.sink, options.given),
        user=session.user,
        query=statement.query.text if statement.query is not None else None,
    )
    return Plan(spec, sink, now)


def _check_history(db: KVClient, target: Target, table: str, cursor: Timestamp) -> None:
    """Refuse a cursor older than what garbage collection kept of ``table``."""
    try:
        for _version in db.export(target.span, cursor, cursor):  # an empty window: a check
            pass
    except BatchTimestampBeforeGCError as exc:
        raise option_error(
            f"cursor {cursor} is too old: table {table}'s history before it has been garbage "
            f"collected ({exc})"
        ) from None


def _check_sinkless(options: ChangefeedOptions) -> None:
    if options.format == "parquet":
        raise option_error(
            "format=parquet needs a file sink (CREATE CHANGEFEED ... INTO 'file://...')"
        )
    for name, _value in options.given:
        if name in SINK_OPTIONS:
            raise option_error(f"option {name} is not usable without a sink")


class Job(Protocol):
    """A running changefeed job: :meth:`run` blocks until it ends (raising how it
    failed), :meth:`close` stops it from another thread."""

    @property
    def spec(self) -> ChangefeedSpec: ...

    @property
    def high_water(self) -> Timestamp: ...

    def run(self) -> None: ...

    def close(self) -> None: ...


class ThreadJob:
    """A changefeed run by a thread of this process into its own sink."""

    def __init__(self, changefeed: Changefeed, sink: Sink) -> None:
        self.changefeed = changefeed
        self.spec = changefeed.spec
        self._sink = sink

    @property
    def high_water(self) -> Timestamp:
        return self.changefeed.high_water

    def run(self) -> None:
        try:
            self.changefeed.run()
        finally:
            self._sink.close()

    def close(self) -> None:
        self.changefeed.close()


def thread_jobs(db: SQLClient) -> JobFactory:
    """Runs each job as a :class:`ThreadJob` from its high-water mark."""

    def make(record: JobRecord) -> Job:
        spec = record.resume_spec()
        uri = parse_sink_uri(spec.sink_uri or "", spec.options)
        sink = make_sink(uri, spec.options, start=spec.start, db=db)
        return ThreadJob(Changefeed(db, spec, sink), sink)

    return make


class Changefeeds:
    """The SQL session's changefeed service: ``CREATE CHANGEFEED`` and the job
    statements (``SHOW CHANGEFEED JOBS``, ``PAUSE`` / ``RESUME`` / ``CANCEL JOB``,
    ``ALTER CHANGEFEED``). :meth:`close` stops the sinkless feeds it started.

    ``CREATE CHANGEFEED ... INTO`` writes a job record; the node's ``registry`` (given
    when this process runs a node) runs it. A client of a remote node has none: the
    server's registry adopts the job."""

    def __init__(self, db: SQLClient, registry: JobRegistry | None = None) -> None:
        self._db = db
        self._registry = registry
        self._lock = threading.Lock()
        self._sinkless: list[FeedResult] = []

    def create(self, statement: st.CreateChangefeed, session: Session, params: Any = ()) -> Result:
        plan = plan_changefeed(statement, session)
        if plan.sink is None:
            return self._start_sinkless(plan.spec)
        # The sink is made once to check it (its parameters, its table...): a job
        # that could never write is refused now, not found failed later.
        make_sink(plan.sink, plan.spec.options, start=plan.spec.start, db=self._db).close()
        record = JobRecord(ROW_IDS.next(), plan.spec, created=plan.now)
        self._db.run_transaction(lambda txn: put_job(txn, record, watching=True))
        if self._registry is not None:
            self._registry.adopt(record.id)
        return Result(columns=("job_id",), rows=[(record.id,)], tag="CREATE CHANGEFEED")

    def execute(self, statement: st.Statement, session: Session) -> Result:
        """Run a job statement."""
        _require_admin(session, self._snapshot(), "manage changefeed jobs")
        if isinstance(statement, st.ShowChangefeedJobs):
            return self._show(statement.job_id)
        if isinstance(statement, st.ControlJob):
            return self._control(statement.action, statement.job_id)
        if isinstance(statement, st.AlterChangefeed):
            return self._alter(statement, session)
        if isinstance(statement, st.ClusterSetting):
            return self._setting(statement)
        raise SQLError("0A000", f"not a job statement: {statement.text}")

    def _setting(self, statement: st.ClusterSetting) -> Result:
        """The cluster settings, all about how jobs run: ``spark.master``, the Spark
        master URL jobs run on (a node's ``--spark-master`` comes first; empty: the
        default, ``$FEEDKV_SPARK_MASTER`` or ``local[*]``). A node's Spark session starts
        with its first job, so a change applies to the jobs of nodes started after it."""
        name = statement.name
        if name not in CLUSTER_SETTINGS:
            raise SQLError(
                "42704",
                f"unknown cluster setting {name!r}; feedkv has {', '.join(CLUSTER_SETTINGS)}",
            )
        key = catalog.setting_key(name)
        if statement.action == "show":
            shown = catalog.get_setting(self._snapshot(), name)
            return Result(columns=(name,), rows=[(shown or "",)], tag="SHOW")
        if statement.action == "set" and statement.value:
            check_spark_master(statement.value)
            value = statement.value.encode()
            self._db.run_transaction(lambda txn: txn.put(key, value))
        else:
            self._db.run_transaction(lambda txn: txn.delete(key))
        return Result(tag="SET CLUSTER SETTING")

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

    def _show(self, job_id: int | None) -> Result:
        snapshot = self._snapshot()
        if job_id is None:
            records = list_jobs(snapshot)
        else:
            records = [_existing(get_job(snapshot, job_id), job_id)]
        rows = [show_row(record, snapshot) for record in reversed(records)]  # newest first
        return Result(columns=SHOW_COLUMNS, rows=rows, tag=f"SHOW {len(rows)}")

    def _control(self, action: str, job_id: int) -> Result:
        def change(txn: Txn) -> None:
            record = _existing(get_job(txn, job_id), job_id)
            status, watching = _requested(record, action)
            if status != record.status:
                updated = record.replace(status=status)
                if action == "resume":
                    updated = updated.replace(error="", running_status="")
                put_job(txn, updated, watching=watching)

        self._db.run_transaction(change)
        if self._registry is not None:
            self._registry.poke()
        self._wait_for(job_id, lambda r: r.status not in REQUESTED, CONTROL_WAIT_S)
        return Result(tag=f"{action.upper()} JOB")

    def _alter(self, statement: st.AlterChangefeed, session: Session) -> Result:
        def change(txn: Txn) -> None:
            record = _existing(get_job(txn, statement.job_id), statement.job_id)
            if record.status != PAUSED:
                raise SQLError(
                    "55000",
                    f"job {record.id} is {record.status}: ALTER CHANGEFEED changes paused jobs "
                    f"only (PAUSE JOB {record.id} first)",
                )
            spec = altered_spec(record, statement, session, txn)
            old = {t.table_id for t in record.spec.targets}
            new = {t.table_id for t in spec.targets}
            for table_id in old - new:
                catalog.set_changefeed_watch(txn, table_id, record.id, watching=False)
            put_job(txn, record.replace(spec=spec), watching=True)

        self._db.run_transaction(change)
        return Result(tag="ALTER CHANGEFEED")

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

    def _start_sinkless(self, spec: ChangefeedSpec) -> FeedResult:
        channel = ChannelSink(text=spec.options.format != "avro")
        changefeed = Changefeed(self._db, spec, channel)
        result = FeedResult(
            columns=COLUMNS, tag="CHANGEFEED", changefeed=changefeed, channel=channel
        )

        def run() -> None:
            try:
                changefeed.run()
            except BaseException as exc:
                channel.end(exc)
            else:
                channel.end()

        threading.Thread(target=run, name="sinkless-changefeed", daemon=True).start()
        with self._lock:
            self._sinkless.append(result)
        return result


CONTROL_WAIT_S = 30.0  # how long PAUSE / CANCEL JOB wait for the runner to stop
CLUSTER_SETTINGS = ("spark.master",)
_SPARK_MASTERS = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|(spark|mesos|k8s)://.+|yarn)$")


def check_spark_master(url: str) -> None:
    """Refuse a ``spark.master`` Spark would not take (SQLSTATE 22023)."""
    if not _SPARK_MASTERS.match(url):
        raise SQLError(
            "22023",
            f"spark.master {url!r} is not a Spark master URL: expected local, local[N], "
            "local[*], spark://host:port, yarn, k8s://... or mesos://...",
        )


WAIT_POLL_S = 0.05
REQUESTED = frozenset({PAUSE_REQUESTED, CANCEL_REQUESTED})

_DONE = {"pause": "paused", "resume": "resumed", "cancel": "canceled"}

# Options that say where a changefeed starts: ALTER CHANGEFEED cannot change them.
_FIXED_OPTIONS = frozenset({"cursor", "initial_scan", "no_initial_scan", "initial_scan_only"})


def _existing(record: JobRecord | None, job_id: int) -> JobRecord:
    if record is None:
        raise SQLError("42704", f"job with ID {job_id} does not exist")
    return record


def _requested(record: JobRecord, action: str) -> tuple[str, bool | None]:
    """The status ``action`` moves ``record`` to, and whether it then watches its
    tables (``None``: unchanged). Raises when the action does not apply."""
    status = record.status
    held = record.lease is not None  # a runner has it, or had it and will be found dead
    if action == "pause":
        if status in (PAUSED, PAUSE_REQUESTED):
            return status, None
        if status == RUNNING:
            return (PAUSE_REQUESTED if held else PAUSED), None
    elif action == "resume":
        if status in (RUNNING, PAUSED):
            return RUNNING, None
    elif action == "cancel":
        if status in (RUNNING, PAUSED, PAUSE_REQUESTED):
            return (CANCEL_REQUESTED, None) if held else (CANCELED, False)
        if status == CANCEL_REQUESTED:
            return status, None
    raise SQLError("55000", f"job {record.id} is {status}: it cannot be {_DONE[action]}")


def altered_spec(
    record: JobRecord, statement: st.AlterChangefeed, session: Session, txn: Txn
) -> ChangefeedSpec:
    """``record``'s spec with ``statement``'s changes, validated like a new one."""
    spec = record.spec
    if (statement.add or statement.drop) and spec.query is not None:
        raise option_error(
            "a CDC query changefeed watches its query's table: it takes no ADD or DROP"
        )
    if (statement.add or statement.drop) and record.high_water is None:
        raise SQLError(
            "55000",
            f"job {record.id} has not finished its initial scan; it can gain or lose tables "
            "once it has",
        )
    given = dict(spec.options.given)
    for name in [*statement.unset, *(name for name, _ in statement.set_options)]:
        if name in _FIXED_OPTIONS:
            raise option_error(
                f"option {name} says where the changefeed started: it cannot be altered"
            )
    for name in statement.unset:
        given.pop(name, None)
    given.update(statement.set_options)
    options = parse_options(given.items(), now=record.created)
    parse_sink_uri(spec.sink_uri or "", options)  # the sink must still accept them
    targets = list(spec.targets)
    for written in statement.drop:
        _database, desc = _table(session, txn, written)
        dropped = Target(desc.id, written.family)
        if dropped not in targets:
            raise option_error(f"table {written.table} is not a target of job {record.id}")
        targets.remove(dropped)
    for written in statement.add:
        _database, desc = _table(session, txn, written)
        if written.family is not None:
            desc.family(written.family)
        added = Target(desc.id, written.family)
        if added in targets:
            raise option_error(f"table {written.table} is already a target of job {record.id}")
        targets.append(added)
    if not targets:
        raise option_error(f"job {record.id} would watch no table; CANCEL JOB {record.id} instead")
    topics = {}
    for target in targets:
        names = table_names(txn, target.table_id)
        if names is None:
            raise option_error(f"table [{target.table_id}] of job {record.id} was dropped")
        topics[target.table_id] = _topic(*names, options)
    spec = dataclasses.replace(spec, targets=tuple(targets), topics=topics, options=options)
    return dataclasses.replace(spec, description=describe(spec))


def describe(spec: ChangefeedSpec) -> str:
    """The CREATE CHANGEFEED statement that would make ``spec`` (for an altered job)."""
    if spec.query is not None:
        return spec.description
    tables = ", ".join(
        spec.topics[t.table_id] + (f" FAMILY {t.family}" if t.family else "") for t in spec.targets
    )
    text = f"CREATE CHANGEFEED FOR TABLE {tables} INTO '{redacted(spec.sink_uri or '')}'"
    given = [
        name if value is None else f"{name} = {_literal('redacted' if is_secret(name) else value)}"
        for name, value in spec.options.given
    ]
    return text + (f" WITH {', '.join(given)}" if given else "")


def _redacted_text(text: str, sink: str | None, given: tuple[tuple[str, str | None], ...]) -> str:
    """The statement as SHOW CHANGEFEED JOBS describes it: the secrets in its sink URI
    and in options such as ``webhook_auth_header`` redacted (they are string literals,
    where a quote is written twice)."""
    if sink:
        text = text.replace(_literal(sink), _literal(redacted(sink)))
    for name, value in given:
        if value and is_secret(name):
            text = text.replace(_literal(value), "'redacted'")
    return text


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _topic(database: str, table: str, options: ChangefeedOptions) -> str:
    return f"{database}.public.{table}" if options.full_table_name else table


def _table(
    session: Session, reader: catalog.Reader, written: st.ChangefeedTarget
) -> tuple[DatabaseDescriptor, TableDescriptor]:
    """The table a changefeed target names, and its database (42P01 if none)."""
    database = session.resolve_database(reader, written.table.database or session.database)
    return database, catalog.table_by_name(reader, database, written.table.name)


def _require_admin(session: Session, reader: catalog.Reader, what: str) -> None:
    user = catalog.get_user(reader, session.user)
    if user is None or not user.admin:
        raise SQLError(
            "42501", f"user {session.user} does not have the admin role needed to {what}"
        )
