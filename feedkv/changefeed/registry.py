"""The job registry: a node runs the changefeed jobs it holds leases on.

Every node (an embedded store, or ``feedkv start``) has one registry. Its loop looks at
the job records (:mod:`feedkv.changefeed.jobs`) every ``interval_s``, or at once when
:meth:`JobRegistry.poke`\\ d:

- a ``running`` job that no live runner holds is claimed (a lease written in a
  transaction, so two registries never both win) and run in a thread of its own, by a
  node whose locality matches the job's ``execution_locality`` only (the job's
  coordinator and every feed it reads run there: :mod:`feedkv.util.locality`);
- a job this registry runs is renewed every ``renew_s``, with its high-water mark, and
  stopped when a pause or a cancel is requested, or when its lease was taken over;
- a pause or cancel request on a job whose runner is gone takes effect at once;
- a job no live node of its ``execution_locality`` runs says so in its
  ``running_status`` (written by the nodes that may not run it).

A lease is dead once it expires, or at once when it names this node but another
instance: a store belongs to one process at a time, so that process has died (a crash,
a SIGKILL) and its jobs resume as soon as the store is open again. In a cluster a
lease is also dead once node liveness sees its node dead (9 s of silence by default):
another live node adopts the job and resumes it from its high-water mark. When the registry
closes (the node stops) its jobs stop and give their leases back, still ``running``.

A job that hits a fault outside the changefeed (:class:`~feedkv.errors.ExternalError`
or a :class:`~feedkv.errors.RetryableError`: Spark could not start, a node could not be
reached, a sink failed) runs again from its high-water mark, waiting longer after each
failure (up to ``retry_max_s``). While a job retries, here or inside itself
(:attr:`~feedkv.changefeed.job.Job.retrying`), its ``running_status`` names the last
error and when it happened (:mod:`feedkv.changefeed.retrying`), until its high-water
mark moves; while tables of it are set aside after their own failure, it names them
(:mod:`feedkv.changefeed.table_failures`); while it is stalled on the node's buffer
limits it says ``stalled`` (:mod:`feedkv.changefeed.node_buffers`); while a job says it
is starting (a Spark job's query: :attr:`feedkv.spark.runner.SparkJob.starting_status`)
it says so. Otherwise it shows the job's high-water mark (``running: resolved=...``),
before there is one ``running: initial scan``, or, for a job that scans nothing,
that it waits for its first resolved timestamp. A
:class:`~feedkv.changefeed.sink.TerminalSinkError` (bad credentials, a path that is not
a writable directory) is not retried. When a job ends, its runner
thread records why: paused or canceled on request, succeeded, failed, or paused with the
error under ``on_error=pause``.

Metrics (:mod:`feedkv.changefeed.metrics`): a job counts as running while its thread
runs it; a job that ends with an error (failed, or paused under ``on_error=pause``)
counts in ``changefeed_failures``, each retry in ``changefeed_error_retries``; each look
at the records sets ``jobs_changefeed_currently_paused`` and the jobs' distance from the
garbage-collection horizon (:meth:`~feedkv.changefeed.metrics.ChangefeedMetrics.observe_jobs`),
on one node of a cluster (the others report none: summed over the nodes, each job
counts once).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from feedkv.changefeed.jobs import (
    ACTIVE,
    CANCEL_REQUESTED,
    CANCELED,
    FAILED,
    PAUSE_REQUESTED,
    PAUSED,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    JobRecord,
    Lease,
    get_job,
    list_jobs,
    protection_expired,
    put_job,
    running_status,
)
from feedkv.changefeed.metrics import ChangefeedMetrics
from feedkv.changefeed.retrying import Retrying, backoff
from feedkv.changefeed.sink import TerminalSinkError
from feedkv.errors import (
    BatchTimestampBeforeGCError,
    ClientClosedError,
    ExternalError,
    FeedKVError,
    RetryableError,
)
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.util.hlc import Timestamp
from feedkv.util.locality import Locality

if TYPE_CHECKING:
    from feedkv.changefeed.job import Job
    from feedkv.rangefeed.feed_client import KV

__all__ = ["JobFactory", "JobRegistry", "RegistrySettings"]

log = logging.getLogger(__name__)

JobFactory = Callable[[JobRecord], "Job"]

GC_WORDS = "below the garbage-collection threshold"  # BatchTimestampBeforeGCError's text
# a job that scans nothing, before its first resolved timestamp
FIRST_RESOLVED_STATUS = "running: waiting for its first resolved timestamp"
# a job claimed by a node, until its first progress update says more
CLAIMED_STATUS = "running: starting"


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    lease_s: float = 30.0
    renew_s: float = 1.0  # also how often SHOW CHANGEFEED JOBS sees progress
    interval_s: float = 0.5
    retry_s: float = 1.0  # the first wait before a job that hit an outside fault reruns
    retry_max_s: float = 60.0


@dataclass
class _Runner:
    job: Job
    thread: threading.Thread | None = None
    lost: bool = False  # another registry holds the lease now
    renewed: float = field(default_factory=time.monotonic)
    stopped: threading.Event = field(default_factory=threading.Event)
    retrying: Retrying | None = None  # the last failure the registry retried the job after
    retrying_since: Timestamp | None = None  # the job's high-water mark then

    def stop(self) -> None:
        self.stopped.set()
        self.job.close()


class JobRegistry:
    def __init__(
        self,
        db: KV,
        node_id: str,
        make_job: JobFactory,
        settings: RegistrySettings | None = None,
        node_dead: Callable[[str], bool] | None = None,
        metrics: ChangefeedMetrics | None = None,
        locality: Locality | None = None,
        reports_stats: Callable[[], bool] | None = None,
    ) -> None:
        """``node_dead(node_id)``: whether a node of the cluster is dead, so its leases
        are too, before they expire (``None``: a node of its own). ``locality``: the
        node's tiers; it claims only the jobs whose ``execution_locality`` it matches.
        ``reports_stats()``: whether this node is the one that reports the statistics of
        all the cluster's jobs (``None``: a node of its own does), so that a sum over
        the nodes counts each job once, as CockroachDB's one poll-jobs-stats job does."""
        self._reports_stats = reports_stats
        self.locality = locality or Locality()
        self.owner = f"{node_id}/{secrets.token_hex(6)}"
        self._node_dead = node_dead
        self.settings = settings or RegistrySettings()
        self.metrics = metrics or ChangefeedMetrics()
        self._db = db
        self._node_id = node_id
        self._make_job = make_job
        self._lock = threading.Lock()
        self._runners: dict[int, _Runner] = {}
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop (idempotent)."""
        with self._lock:
            if self._thread is not None or self._closed.is_set():
                return
            self._thread = threading.Thread(target=self._loop, name="job-registry", daemon=True)
            self._thread.start()

    def poke(self) -> None:
        """Look at the job records now (a job was created or asked to change)."""
        self._wake.set()

    def running(self, job_id: int) -> Job | None:
        """The job this registry runs as ``job_id``, if it runs it."""
        with self._lock:
            runner = self._runners.get(job_id)
        return runner.job if runner is not None else None

    def close(self) -> None:
        """Stop the loop and every job; their leases are given back. Idempotent."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            runners = list(self._runners.values())
        for runner in runners:
            runner.stop()
        for runner in runners:
            if runner.thread is not None:
                runner.thread.join()

    # The loop.

    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                self._tick()
            except ClientClosedError:
                return  # NB: the node stops (its client closes before the registry)
            except FeedKVError as exc:  # the store is unreachable or shutting down: retry
                if self._closed.is_set():
                    # NB: closing, its reads and writes may fail (a cluster that lost its
                    # quorum): nothing to tell; the jobs' next holders redo the work
                    log.debug("job registry, closing: %s", exc)
                    return
                log.warning("job registry: %s", exc)
            except Exception:  # a bug; the registry must go on running the other jobs
                log.exception("job registry: unexpected error")
            self._wake.wait(self.settings.interval_s)
            self._wake.clear()

    def _tick(self) -> None:
        now = self._db.now()
        records = list_jobs(catalog.Snapshot(self._db, now))
        reports = self._reports_stats is None or self._reports_stats()
        counted = records if reports else []
        self.metrics.currently_paused.set(sum(r.status == PAUSED for r in counted))
        self.metrics.observe_jobs(
            (r.spec.options.metrics_label, r.high_water or r.spec.start)
            for r in counted
            if r.status not in TERMINAL
        )
        for record in records:
            if self._closed.is_set():
                return
            if protection_expired(record, now):
                self._update(record.id, lambda r: self._expired(r, now))
                continue
            with self._lock:
                runner = self._runners.get(record.id)
            if runner is not None:
                self._tend(record, runner)
            elif record.status in ACTIVE and self._claimable(record.lease, now.wall):
                if record.status == RUNNING and self._may_run(record):
                    self.adopt(record.id)
                elif record.status != RUNNING:  # requested while nobody ran it
                    self._update(record.id, self._stopped_by_request)
                elif record.running_status != _waiting_for_locality(record):
                    self._update(record.id, lambda r: self._waiting(r, now.wall))

    def _claimable(self, lease: Lease | None, now_ns: int) -> bool:
        return (
            lease is None
            or lease.expires_ns <= now_ns
            or (lease.node_id == self._node_id and lease.owner != self.owner)
            or (self._node_dead is not None and self._node_dead(lease.node_id))
        )

    def _may_run(self, record: JobRecord) -> bool:
        """Whether this node matches the job's ``execution_locality`` (every node
        matches a job without one): its coordinator and all its work run on such a
        node, as CockroachDB pins them."""
        wanted = record.spec.options.execution_locality
        return wanted is None or self.locality.matches(Locality(wanted))

    def _waiting(self, record: JobRecord, now_ns: int) -> tuple[JobRecord, bool | None] | None:
        """A running job no runner holds and this node may not run: its status says
        which nodes it waits for (one of them claims it as soon as it is live)."""
        if (
            record.status != RUNNING
            or not self._claimable(record.lease, now_ns)
            or self._may_run(record)
        ):
            return None  # claimed, or changed, meanwhile
        waiting = _waiting_for_locality(record)
        if record.running_status == waiting:
            return None
        return record.replace(running_status=waiting), None

    def _tend(self, record: JobRecord, runner: _Runner) -> None:
        if not self._owned(record) or record.status != RUNNING:
            # NB: the tick's snapshot may predate this runner's claim (or a RESUME): only
            # a fresh read may stop a job.
            fresh = self._fresh(record.id)
            if fresh is None or not self._owned(fresh):
                log.warning("changefeed job %d: lost its lease; stopping it here", record.id)
                runner.lost = True
                runner.stop()
            elif fresh.status != RUNNING:
                runner.stop()  # its thread records the outcome
        elif time.monotonic() - runner.renewed >= self.settings.renew_s:
            runner.renewed = time.monotonic()
            self._update(record.id, lambda r: self._renewed(r, runner))

    # Claiming, running and finishing a job.

    def adopt(self, job_id: int) -> None:
        """Claim job ``job_id`` and start it here, if it is running and unclaimed (the
        node that creates a job starts it at once)."""
        if self._closed.is_set():
            return  # the node is stopping: its next start adopts the job
        self.start()
        lease_ns = int(self.settings.lease_s * 1e9)

        def claim(txn: Txn) -> JobRecord | None:
            record = get_job(txn, job_id)
            now = self._db.now().wall
            if record is None or record.status != RUNNING or not self._claimable(record.lease, now):
                return None
            if not self._may_run(record):
                return None  # another node's registry claims it
            lease = Lease(self.owner, now + lease_ns)
            record = record.replace(lease=lease, running_status=CLAIMED_STATUS)
            put_job(txn, record)
            return record

        record = self._db.run_transaction(claim)
        if record is None:
            return
        log.info("changefeed job %d: running it here (%s)", job_id, self.owner)
        try:
            job = self._make_job(record)
        except FeedKVError as exc:
            failure = exc
            self._update(job_id, lambda r: self._ended(r, None, failure))
            return
        runner = _Runner(job)
        runner.thread = threading.Thread(
            target=self._run, args=(job_id, runner), name=f"changefeed-{job_id}", daemon=True
        )
        with self._lock:
            self._runners[job_id] = runner
        runner.thread.start()

    def _run(self, job_id: int, runner: _Runner) -> None:
        attempt = 0
        label = runner.job.spec.options.metrics_label
        metrics = self.metrics.scope(label)
        while True:
            error: BaseException | None = None
            try:
                with self.metrics.tracking(label, runner.job):
                    runner.job.run()
            except BaseException as exc:
                # NB: one that ends as its node stops is no failure to warn of
                stopping = runner.stopped.is_set() or isinstance(exc, ClientClosedError)
                level = logging.INFO if stopping else logging.WARNING
                if stopping or not _retryable(exc):
                    log.log(level, "changefeed job %d failed: %s", job_id, exc)
                else:  # NB: not "failed": the job runs on, its status says so too
                    log.log(level, "changefeed job %d: retryable error: %s", job_id, exc)
                error = exc
            if error is None or not _retryable(error) or runner.stopped.is_set():
                break
            # A fault outside the changefeed (Spark could not start, a node was
            # unreachable, a sink failed): run it again from its high-water mark, backing
            # off; progress since the last failure starts the backoff over.
            progressed = runner.retrying_since != runner.job.high_water
            attempt = 1 if progressed else attempt + 1
            delay = backoff(attempt, first_s=self.settings.retry_s, max_s=self.settings.retry_max_s)
            runner.retrying = Retrying(str(error), time.time_ns(), delay)
            runner.retrying_since = runner.job.high_water
            metrics.error_retries.inc()
            self._update(job_id, partial(self._retrying, runner=runner))
            record = None
            if not runner.stopped.wait(delay):
                record = self._fresh(job_id)
            if record is None or record.status != RUNNING or not self._owned(record):
                error = None  # stopped while it waited: a request or a shutdown says why
                break
            try:
                runner.job = self._make_job(record)
            except FeedKVError as exc:
                error = exc
                break
        try:
            if not runner.lost:
                self._update(job_id, lambda r: self._ended(r, runner.job, error))
                if error is not None and not runner.stopped.is_set():
                    metrics.failures.inc()
        except ClientClosedError as exc:  # the node stops without a quorum for the record
            log.info("changefeed job %d: its lease expires instead (%s)", job_id, exc)
        except FeedKVError as exc:  # the node is gone; the lease expires instead
            # NB: a job stopped by its node's shutdown may find no quorum for its record
            # (the other nodes stopped first): nothing is wrong
            level = logging.INFO if runner.stopped.is_set() else logging.WARNING
            log.log(level, "changefeed job %d: could not record its end: %s", job_id, exc)
        finally:
            with self._lock:
                self._runners.pop(job_id, None)

    def _update(
        self, job_id: int, change: Callable[[JobRecord], tuple[JobRecord, bool | None] | None]
    ) -> None:
        """Apply ``change`` to the job's record in a transaction. ``change`` returns the
        new record and whether the job still watches its tables (``None``: unchanged),
        or ``None`` to write nothing."""

        def write(txn: Txn) -> None:
            record = get_job(txn, job_id)
            if record is None:
                return
            changed = change(record)
            if changed is not None:
                put_job(txn, changed[0], watching=changed[1])

        self._db.run_transaction(write)

    def _fresh(self, job_id: int) -> JobRecord | None:
        """Job ``job_id``'s record as of now."""
        return get_job(catalog.Snapshot(self._db, self._db.now()), job_id)

    def _owned(self, record: JobRecord) -> bool:
        return record.lease is not None and record.lease.owner == self.owner

    def _renewed(self, record: JobRecord, runner: _Runner) -> tuple[JobRecord, bool | None] | None:
        if not self._owned(record) or record.status != RUNNING:
            return None
        job = runner.job
        expires = self._db.now().wall + int(self.settings.lease_s * 1e9)
        high_water = _progress(record, job)
        if runner.retrying is not None and runner.retrying_since != job.high_water:
            runner.retrying = None  # it made progress since
        retrying = job.retrying or runner.retrying
        tables = _table_status(job)
        stalled = getattr(job, "stalled_status", None)
        starting = getattr(job, "starting_status", None)
        if isinstance(stalled, str):
            status = stalled
        elif retrying is not None:
            status = retrying.status()
        elif tables is not None:
            status = tables
        elif isinstance(starting, str):
            status = starting
        elif high_water is not None:
            status = running_status(high_water)
        elif job.spec.options.scans or job.spec.scan_tables:
            status = "running: initial scan"
        else:
            status = FIRST_RESOLVED_STATUS
        return (
            record.replace(
                lease=Lease(self.owner, expires),
                high_water=high_water,
                running_status=status,
                fraction_completed=_scan_fraction(job),
                scan_rows=_scan_rows(job, record.scan_rows),
                scanned=getattr(job, "scanned", False) is True,
            ),
            None,
        )

    def _retrying(self, record: JobRecord, runner: _Runner) -> tuple[JobRecord, bool | None] | None:
        if not self._owned(record) or runner.retrying is None:
            return None
        status = runner.retrying.status()
        return record.replace(high_water=_progress(record, runner.job), running_status=status), None

    @staticmethod
    def _expired(record: JobRecord, now: Timestamp) -> tuple[JobRecord, bool | None] | None:
        """A paused job whose ``gc_protect_expires_after`` lapsed: canceled, as
        CockroachDB cancels it, its history no longer protected."""
        if not protection_expired(record, now):
            return None  # resumed meanwhile
        after = record.spec.options.gc_protect_expires_after
        message = (
            f"the job was paused for longer than gc_protect_expires_after ({after:g}s): its "
            "protected timestamp record expired and the job was canceled"
        )
        canceled = record.replace(status=CANCELED, lease=None, error=message, running_status="")
        return canceled, False

    def _stopped_by_request(self, record: JobRecord) -> tuple[JobRecord, bool | None] | None:
        if record.status == PAUSE_REQUESTED:
            return record.replace(status=PAUSED, lease=None, running_status="paused"), None
        if record.status == CANCEL_REQUESTED:
            return record.replace(status=CANCELED, lease=None, running_status=""), False
        return None

    def _ended(
        self, record: JobRecord, job: Job | None, error: BaseException | None
    ) -> tuple[JobRecord, bool | None] | None:
        if record.lease is not None and not self._owned(record):
            return None  # taken over: the new owner records what happens
        if job is not None:
            record = record.replace(high_water=_progress(record, job))
        requested = self._stopped_by_request(record)
        if requested is not None:
            return requested
        if error is not None:
            message = _failure(error)
            if record.spec.options.on_error == "pause":
                status = "paused on error: " + message
                return record.replace(
                    status=PAUSED, lease=None, error=message, running_status=status
                ), None
            failed = record.replace(status=FAILED, lease=None, error=message, running_status="")
            return failed, False
        if self._closed.is_set():  # the node stops: another start resumes the job
            return record.replace(lease=None, running_status="waiting for a node"), None
        return record.replace(status=SUCCEEDED, lease=None, running_status=""), False


def _waiting_for_locality(record: JobRecord) -> str:
    wanted = Locality(record.spec.options.execution_locality or ())
    return f"waiting for a live node matching execution_locality {wanted}"


def _scan_fraction(job: Job) -> float | None:
    """The part of the initial scan or backfill ``job`` runs now that is done (``None``:
    none runs, or the job does not say: a Spark job's scan runs in its executors)."""
    fraction = getattr(job, "scan_fraction", None)
    return float(fraction) if isinstance(fraction, int | float) else None


def _scan_rows(job: Job, recorded: int | None) -> int | None:
    """The rows ``job``'s scans emitted (a thread job says; ``recorded``: none does)."""
    rows = getattr(job, "scan_rows", None)
    return rows if isinstance(rows, int) else recorded


def _table_status(job: Job) -> str | None:
    """Which tables of ``job`` are set aside after their own failure, and why (``None``:
    none is, or the job does not say: a Spark job's tables fail together)."""
    status = getattr(job, "table_status", None)
    return status if isinstance(status, str) else None


def _retryable(error: BaseException) -> bool:
    """Whether a job that ended with ``error`` runs again: a fault outside the
    changefeed, unless no retry can change it."""
    return isinstance(error, RetryableError | ExternalError) and not isinstance(
        error, TerminalSinkError
    )


def _progress(record: JobRecord, job: Job) -> Timestamp | None:
    """The job's high-water mark, once it is past the spec's start (the scan is done)."""
    high_water = job.high_water
    if high_water <= record.spec.start:
        return record.high_water
    return max(high_water, record.high_water or high_water)


def _failure(error: BaseException) -> str:
    """What a job's error column says about ``error``."""
    message = str(error) or type(error).__name__
    # NB: from a Spark query the error is text (a Python traceback inside a JVM
    # exception), so the GC case is recognised by its words, not its type.
    if isinstance(error, BatchTimestampBeforeGCError) or GC_WORDS in message:
        return (
            "the changefeed fell behind the garbage-collection threshold: the history it "
            "still needed is gone, so it cannot go on; create a new changefeed (with a "
            f"cursor after the threshold, or an initial scan). Cause: {message}"
        )
    return message
