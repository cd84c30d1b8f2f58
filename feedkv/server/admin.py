"""The admin page's data and actions: what the node's HTTP port shows at ``/`` and does
when a button is pressed (:mod:`feedkv.server.http` serves them).

:meth:`Admin.overview` is the JSON the page polls (``GET /_admin/v1/overview``): this
node, the cluster's nodes (liveness), the ranges of this node's store, what its
changefeeds buffer for their sinks against its limits (memory, disk:
:mod:`feedkv.changefeed.node_buffers`), and every
changefeed job the user may see, each with its status, its sink (secrets redacted:
:func:`~feedkv.changefeed.jobs.redacted`), its high-water mark and lag now, the error
that failed or paused it, the ranges it reads with their resolved timestamps, and the
history of its lag and throughput that the node samples (:mod:`feedkv.server.feed_history`:
a thread samples every job every ``interval_s``, whether or not the page is open). A job
this node runs as a thread shows its rangefeed's ranges and the rows it emitted; a job
this node runs on Spark (whose reads happen in its executors) shows the ranges its
batches read, each up to the offset its last batch ended at, the rows its batches read,
and its last batch's figures as Spark reports them (:mod:`feedkv.spark.progress`).

:meth:`Admin.control` pauses, resumes or cancels a job (``POST
/_admin/v1/jobs/<id>/<action>``) by running ``PAUSE JOB`` (...) in a SQL session of
the user, so the SQL layer's privilege checks apply as they do to the statement: an
admin may act on any job, another user on their own only.

Who the user is (:meth:`Admin.user`): on a secure node, HTTP Basic authentication (the
port is https) against the user's SQL password, anyone else is refused (and, after
repeated failures for a user from one address, refused without a look at the password
for a while: :class:`~feedkv.security.login_throttle.LoginThrottle`); each refused
login is logged as a warning with the user and the address, never the password, as the
SQL and gRPC ports log theirs; on an insecure
node (``--insecure``), ``root``, as CockroachDB's insecure mode has it.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from feedkv.changefeed.jobs import TERMINAL, JobRecord, list_jobs, redacted
from feedkv.changefeed.thread_job import ThreadJob
from feedkv.errors import FeedKVError, InvalidArgumentError, PermissionDeniedError
from feedkv.security.login_throttle import LoginThrottle
from feedkv.security.scram import check_login
from feedkv.server.feed_history import FeedHistory, Sample
from feedkv.spark.progress import SparkProgress, read_ranges
from feedkv.sql import catalog
from feedkv.util.hlc import Timestamp
from feedkv.util.keyspace import pretty_key

if TYPE_CHECKING:
    from feedkv.changefeed.job import Job
    from feedkv.changefeed.node_buffers import NodeBuffers
    from feedkv.changefeed.service import Changefeeds
    from feedkv.kv.server import NodeServer
    from feedkv.kv.store import Store
    from feedkv.rangefeed.client import FeedRange
    from feedkv.security.tls import ServerTLS
    from feedkv.server.cluster import Cluster
    from feedkv.sql.client import SQLClient
    from feedkv.sql.session import Session

__all__ = ["ACTIONS", "Admin", "AdminNode", "span_text"]

log = logging.getLogger(__name__)

ACTIONS = ("pause", "resume", "cancel")


class AdminNode(Protocol):
    """What the admin page reads of its node (:class:`feedkv.server.node.Node`)."""

    node_id: str
    tls: ServerTLS | None
    store: Store
    server: NodeServer | None
    cluster: Cluster | None
    changefeed_buffers: NodeBuffers

    @property
    def url(self) -> str: ...


class Admin:
    """The admin page of ``node``: its job records read through ``client``, the jobs
    this node runs from ``changefeeds()``, actions through ``sessions(user)``, passwords
    checked against ``verifier(user)`` (the user's stored SCRAM verifier)."""

    def __init__(
        self,
        node: AdminNode,
        client: SQLClient,
        *,
        changefeeds: Callable[[], Changefeeds],
        sessions: Callable[[str], Session],
        verifier: Callable[[str], str | None],
        history: FeedHistory | None = None,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._node = node
        self._client = client
        self._changefeeds = changefeeds
        self._sessions = sessions
        self._verifier = verifier
        self._throttle = LoginThrottle()
        self.history = history or FeedHistory()
        self._wall_ns = wall_ns
        self._lock = threading.Lock()  # the history's
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # The sampler.

    def start(self) -> None:
        """Sample every job every ``history.interval_s`` until :meth:`stop` (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="admin-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self.sample()
            except FeedKVError as exc:  # the store closing under it, a node away
                log.debug("admin page: sampling the changefeeds failed: %s", exc)
            self._stopped.wait(self.history.interval_s)

    def sample(self) -> None:
        """Record a sample of every job that has not ended."""
        records = self._records()
        now = self._wall_ns()
        with self._lock:
            self.history.forget({r.id for r in records})
            for record in records:
                if record.status in TERMINAL:
                    continue
                job = self._running(record.id)
                emitted = _rows_emitted(job)
                high_water = _high_water(record, job)
                self.history.record(record.id, Sample(now, high_water.wall, emitted))

    # Who is asking.

    def user(self, authorization: str | None, client: str = "") -> str:
        """The user an ``Authorization`` header from address ``client`` names and proves
        (see the module's docstring); PermissionDeniedError if it does not."""
        if self._node.tls is None:
            return "root"
        if not authorization or not authorization.startswith("Basic "):
            raise PermissionDeniedError(
                "log in with your SQL user name and password (HTTP Basic authentication)"
            )
        try:
            text = base64.b64decode(authorization.removeprefix("Basic "), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise PermissionDeniedError("the Authorization header is not valid Basic") from exc
        name, _, password = text.partition(":")
        wait = self._throttle.retry_after(name, client, time.monotonic())
        if wait > 0:
            log.warning("HTTP login of %r from %s refused: too many failed logins", name, client)
            raise PermissionDeniedError(
                f"too many failed logins for {name!r}: try again in {wait:.0f} s"
            )
        verifier = self._verifier(name) if name else None
        # NB: an unknown user's password is checked too, so its refusal costs the same
        if not check_login(verifier, password):
            self._throttle.failed(name, client, time.monotonic())
            # NB: the words of the SQL and gRPC ports' lines; never the password
            log.warning("HTTP login of %r from %s refused: wrong password", name, client)
            raise PermissionDeniedError(f"wrong user name or password for {name!r}")
        self._throttle.succeeded(name, client)
        return name

    # What the page shows.

    def overview(self, user: str) -> dict[str, Any]:
        """The page's data as JSON-ready values (see the module's docstring)."""
        snapshot = catalog.Snapshot(self._client, self._client.now())
        admin = catalog.is_admin(snapshot, user)
        now = self._wall_ns()
        feeds = []
        for record in reversed(list_jobs(snapshot)):  # newest first, as SHOW JOBS
            if admin or record.spec.user == user:
                feeds.append(self._feed(record, now))
        return {
            "node": self._node.node_id,
            "now": now / 1e9,
            "user": user,
            "secure": self._node.tls is not None,
            "sample_interval_s": self.history.interval_s,
            "nodes": self._nodes(),
            "ranges": self._ranges(),
            "buffers": _buffers(self._node.changefeed_buffers),
            "changefeeds": feeds,
        }

    def _feed(self, record: JobRecord, now: int) -> dict[str, Any]:
        job = self._running(record.id)
        high_water = _high_water(record, job)
        with self._lock:
            series = self.history.series(record.id)
        ranges = self._feed_ranges(job, high_water)
        spark = _spark_progress(job)
        lease = record.lease
        return {
            "job_id": str(record.id),  # NB: a string: ids pass 2**53, JavaScript's integers
            "description": record.spec.description,
            "user": record.spec.user,
            "status": record.status,
            "running_status": record.running_status,
            "error": record.error,
            "sink": redacted(record.spec.sink_uri or ""),
            "high_water": str(high_water),
            "high_water_time": _iso(high_water),
            "lag_s": None if record.status in TERMINAL else max(0, now - high_water.wall) / 1e9,
            "runner": lease.node_id if lease is not None else None,
            "scan_fraction": _scan_fraction(record, job),
            "runner_kind": "spark" if spark is not None else "thread" if job is not None else None,
            "spark": spark.last.to_json() if spark is not None and spark.last else None,
            "spark_batches": spark.batches if spark is not None else None,
            "ranges": [
                {
                    "range_id": r.range_id,
                    "span": span_text(r.span.start, r.span.end),
                    "node": r.node_id,
                    "resolved": str(r.resolved),
                    "resolved_time": _iso(r.resolved),
                }
                for r in ranges
            ],
            "history": {"t": series.times, "lag_s": series.lag_s, "rows_per_s": series.rows_per_s},
        }

    def _feed_ranges(self, job: Job | None, high_water: Timestamp) -> list[FeedRange]:
        """The ranges ``job`` reads now: a thread job's rangefeed's, or those of a Spark
        job's targets, each read up to its high-water mark (none: not run here)."""
        if isinstance(job, ThreadJob):
            return job.ranges()
        if _spark_progress(job) is None or job is None:
            return []
        return read_ranges((t.span for t in job.spec.targets), self._client.ranges(), high_water)

    def _nodes(self) -> list[dict[str, Any]]:
        cluster = self._node.cluster
        if cluster is None:
            address = self._node.url if self._node.server is not None else "(embedded)"
            return [{"node_id": self._node.node_id, "address": address, "live": True}]
        return [
            {
                "node_id": f"n{status.desc.node_id}",
                "address": status.desc.address,
                "locality": str(status.desc.locality),
                "live": status.live,
                "heard_ago_s": (
                    status.heard_ago_ns / 1e9 if status.heard_ago_ns is not None else None
                ),
                "offset_ms": status.offset_ns / 1e6 if status.offset_ns is not None else None,
            }
            for status in cluster.liveness.status(time.monotonic_ns())
        ]

    def _ranges(self) -> list[dict[str, Any]]:
        """The cluster's ranges (a range lookup through the node's client), with the
        size of those this node holds; the closed timestamp is known for those too."""
        store = self._node.store
        local = {d.range_id for d in store.descriptors()}
        out = []
        for info in self._client.ranges():
            here = info.range_id in local
            closed = store.closed_timestamp(info.range_id) if here else None
            out.append(
                {
                    "range_id": info.range_id,
                    "span": span_text(info.span.start, info.span.end),
                    "replicas": [f"n{r}" for r in info.replicas],
                    "bytes": store.range_bytes(info.range_id) if here else None,
                    "closed": str(closed) if closed is not None else None,
                    "closed_time": _iso(closed) if closed is not None else None,
                }
            )
        return out

    # What the buttons do.

    def control(self, user: str, job_id: str, action: str) -> None:
        """``action`` (``pause``, ``resume``, ``cancel``) on job ``job_id`` as ``user``:
        InvalidArgumentError names a bad action or id; the statement's SQLError (42501:
        not allowed, 42704: no such job, 55000: not in a state for it) passes through."""
        if action not in ACTIONS:
            raise InvalidArgumentError(
                f"unknown job action {action!r}; expected one of {', '.join(ACTIONS)}"
            )
        if not job_id.isdigit():
            raise InvalidArgumentError(f"job id {job_id!r} is not a number")
        self._sessions(user).execute(f"{action.upper()} JOB {int(job_id)}")

    # Reading the parts.

    def _records(self) -> list[JobRecord]:
        return list_jobs(catalog.Snapshot(self._client, self._client.now()))

    def _running(self, job_id: int) -> Job | None:
        return self._changefeeds().get(job_id)


def _buffers(buffers: NodeBuffers) -> dict[str, int]:
    """What the node's changefeeds buffer for their sinks, against its limits."""
    return {
        "memory": buffers.memory.used,
        "memory_limit": buffers.memory.limit,
        "disk": buffers.disk.used,
        "disk_limit": buffers.disk.limit,
    }


def _rows_emitted(job: Job | None) -> int | None:
    """The rows ``job`` emitted (a thread job) or read (a Spark job's batches) in this
    run (``None``: not run here)."""
    rows = getattr(job, "rows_emitted", None)
    return rows if isinstance(rows, int) else None


def _spark_progress(job: Job | None) -> SparkProgress | None:
    progress = getattr(job, "progress", None)
    return progress if isinstance(progress, SparkProgress) else None


def _high_water(record: JobRecord, job: Job | None) -> Timestamp:
    """The job's high-water mark: the running job's own (the record's trails it by up to
    a lease renewal), else the record's, else where it started."""
    if job is not None:
        return job.high_water
    return record.high_water or record.spec.start


def _scan_fraction(record: JobRecord, job: Job | None) -> float | None:
    """The part of the initial scan or backfill running now that is done (``None``:
    none runs): a thread job's own, else what its runner last recorded."""
    if isinstance(job, ThreadJob):
        return job.scan_fraction
    return record.fraction_completed


def span_text(start: bytes, end: bytes) -> str:
    return f"{pretty_key(start)} - {pretty_key(end)}"


def _iso(ts: Timestamp) -> str:
    return datetime.datetime.fromtimestamp(ts.wall / 1e9, tz=datetime.UTC).isoformat()
