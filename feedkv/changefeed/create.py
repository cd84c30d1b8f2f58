"""``CREATE CHANGEFEED`` and ``EXPERIMENTAL CHANGEFEED``: from a statement to a running
changefeed.

:func:`plan_changefeed` checks everything before anything starts: the user is an admin,
the tables (and families) exist as of the statement's timestamp, every option and the
sink URI are valid together. A failure raises :class:`~feedkv.errors.SQLError` and
creates nothing.

:class:`Changefeeds` is the SQL session's way to start changefeeds (the
``changefeeds`` service of :class:`~feedkv.sql.session.Session`). A sinkless changefeed
streams back as a :class:`~feedkv.changefeed.sinkless.FeedResult`; one with a sink runs
in a thread of this process and the statement returns its ``job_id``. (Jobs that
persist, pause, resume and run on Spark replace that thread in the Spark layer.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from feedkv.changefeed.changefeed import Changefeed, ChangefeedSpec
from feedkv.changefeed.options import ChangefeedOptions, option_error, parse_options
from feedkv.changefeed.query import CDCQuery
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import SINK_OPTIONS, Sink, SinkURI, make_sink, parse_sink_uri
from feedkv.changefeed.sinkless import COLUMNS, ChannelSink, FeedResult
from feedkv.errors import FeedKVError, SQLError
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.executor import ROW_IDS, Result
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.db import DB
    from feedkv.sql.session import Session

__all__ = ["Changefeeds", "Plan", "plan_changefeed"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    spec: ChangefeedSpec
    sink: SinkURI | None


def plan_changefeed(statement: st.CreateChangefeed, session: Session) -> Plan:
    """Validate ``statement`` as ``session``'s user; see the module docstring."""
    if session.in_transaction:
        raise SQLError(
            "25001", "CREATE CHANGEFEED cannot be used inside a transaction; COMMIT first"
        )
    db = session.db
    now = db.now()
    snapshot = catalog.Snapshot(db, now)
    user = catalog.get_user(snapshot, session.user)
    if user is None or not user.admin:
        raise SQLError(
            "42501",
            f"user {session.user} does not have the admin role needed to create a changefeed",
        )
    options = parse_options(statement.options, now=now)
    query = None
    if statement.query is not None:
        query = CDCQuery(statement.query.text)
        if not any(name == "envelope" for name, _ in options.given):
            options = dataclasses.replace(options, envelope="bare")  # as in CockroachDB
    targets: list[Target] = []
    topics: dict[int, str] = {}
    for written in statement.targets:
        database = session.resolve_database(snapshot, written.table.database or session.database)
        desc = catalog.table_by_name(snapshot, database, written.table.name)
        if written.family is not None:
            desc.family(written.family)  # 42704 when it does not exist
        target = Target(desc.id, written.family)
        if target in targets:
            raise option_error(f"table {written.table} is a target more than once")
        targets.append(target)
        if query is not None:
            query.check(desc)
        topics[desc.id] = (
            f"{database.name}.public.{desc.name}" if options.full_table_name else desc.name
        )
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
        description=statement.text,
        user=session.user,
        query=statement.query.text if statement.query is not None else None,
    )
    return Plan(spec, sink)


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


JobFactory = Callable[[int, ChangefeedSpec], Job]


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


class Changefeeds:
    """The changefeeds this process started; :meth:`close` stops them all.

    Jobs (``CREATE CHANGEFEED ... INTO``) are made by ``make_job`` (the Spark runner
    that :class:`~feedkv.db.DB` injects), or run as a :class:`ThreadJob` without one."""

    def __init__(self, db: DB, make_job: JobFactory | None = None) -> None:
        self._db = db
        self._make_job = make_job
        self._lock = threading.Lock()
        self._running: dict[int, tuple[Job, threading.Thread]] = {}
        self._errors: dict[int, BaseException] = {}
        self._sinkless: list[FeedResult] = []

    def create(self, statement: st.CreateChangefeed, session: Session, params: Any = ()) -> Result:
        plan = plan_changefeed(statement, session)
        if plan.sink is None:
            return self._start_sinkless(plan.spec)
        job_id = ROW_IDS.next()
        if self._make_job is not None:
            changefeed: Job = self._make_job(job_id, plan.spec)
        else:
            sink = make_sink(plan.sink, plan.spec.options, start=plan.spec.start, db=self._db)
            changefeed = ThreadJob(Changefeed(self._db, plan.spec, sink), sink)
        self._watch(plan.spec, job_id, watching=True)
        thread = threading.Thread(
            target=self._run,
            args=(job_id, changefeed),
            name=f"changefeed-{job_id}",
            daemon=True,
        )
        with self._lock:
            self._running[job_id] = (changefeed, thread)
        thread.start()
        return Result(columns=("job_id",), rows=[(job_id,)], tag="CREATE CHANGEFEED")

    def get(self, job_id: int) -> Job | None:
        with self._lock:
            found = self._running.get(job_id)
        return found[0] if found else None

    def error(self, job_id: int) -> BaseException | None:
        """How changefeed ``job_id`` failed, if it did."""
        with self._lock:
            return self._errors.get(job_id)

    def wait(self, job_id: int, timeout: float | None = None) -> bool:
        """Wait for changefeed ``job_id`` to end; returns whether it did."""
        with self._lock:
            found = self._running.get(job_id)
        if found is None:
            return True
        found[1].join(timeout)
        return not found[1].is_alive()

    def cancel(self, job_id: int) -> None:
        changefeed = self.get(job_id)
        if changefeed is not None:
            changefeed.close()
            self.wait(job_id)

    def close(self) -> None:
        with self._lock:
            running = list(self._running.values())
            sinkless, self._sinkless = self._sinkless, []
        for result in sinkless:
            result.close()
        for changefeed, _thread in running:
            changefeed.close()
        for _changefeed, thread in running:
            thread.join()

    def _run(self, job_id: int, changefeed: Job) -> None:
        try:
            changefeed.run()
        except BaseException as exc:
            log.warning("changefeed %d failed: %s", job_id, exc)
            with self._lock:
                self._errors[job_id] = exc
        finally:
            with contextlib.suppress(FeedKVError):  # a closed node forgets nothing it had
                self._watch(changefeed.spec, job_id, watching=False)

    def _watch(self, spec: ChangefeedSpec, job_id: int, *, watching: bool) -> None:
        """Record the tables ``job_id`` watches, so TRUNCATE can refuse them."""

        def write(txn: Txn) -> None:
            for target in spec.targets:
                catalog.set_changefeed_watch(txn, target.table_id, job_id, watching=watching)

        self._db.run_transaction(write)

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
