"""Running a changefeed job as a Spark Structured Streaming query.

:class:`SparkJob` has the interface of :class:`~feedkv.changefeed.changefeed.Changefeed`
(``run()`` blocks until the job ends, ``close()`` stops it, ``high_water``) so the job
service runs either. The query reads and writes ``feedkv_changefeed``
(:mod:`feedkv.spark.changefeed_job`); its checkpoint directory holds the offsets, so a
job started again with the same directory continues from its last committed batch.

Until a batch of its query runs (the JVM and the session start with a node's first job;
a query started again, after a pause or a stall, reads its checkpoint first: seconds
in which its high-water mark cannot move), the job's ``running_status`` says that its
Spark query is starting (:attr:`SparkJob.starting_status`).

Micro-batches are triggered every ``min_checkpoint_frequency`` (at least every 200 ms):
each batch's end is the resolved timestamp, so that is how often rows become durable
and resolved markers can be written. ``initial_scan='only'`` runs one scan batch and
ends; ``end_time`` ends the job once a batch reaches it.

With the node's shared buffers (``buffers``), a task whose sink finds no room in them
stalls (:mod:`feedkv.spark.changefeed_job`): while it waits for its sink's backlog the
job shows ``stalled`` (:attr:`SparkJob.stalled_status`, from the task's report), and when
the stall fails the query the job starts it again from its checkpoint at once (not as a
retry, with backoff), once the node's memory has room, reading the stalled batch again.

A failure raises :class:`~feedkv.changefeed.changefeed.ChangefeedError` when it is the
changefeed's own (a schema change under ``schema_change_policy='stop'``, lost history,
a bad option) or a sink's that no retry can change (a
:class:`~feedkv.changefeed.sink.TerminalSinkError`), else
:class:`~feedkv.errors.ExternalError`, which the job registry retries (Spark could not
start, an executor lost its node, a sink failed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.errors import StreamingQueryException

from feedkv.changefeed.changefeed import ChangefeedError, ChangefeedSpec
from feedkv.changefeed.enriched_source import FeedSource
from feedkv.changefeed.metrics import FeedMetrics
from feedkv.changefeed.node_buffers import NodeBuffers, Stalled
from feedkv.changefeed.retrying import Retrying
from feedkv.errors import ExternalError
from feedkv.spark.changefeed_job import encode_node, encode_spec
from feedkv.spark.offsets import FeedOffset
from feedkv.spark.progress import SparkProgress
from feedkv.spark.session import spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["STARTING_STATUS", "SparkJob", "checkpoint_run"]

log = logging.getLogger(__name__)

MIN_TRIGGER_S = 0.2
TERMINAL_ERRORS = (
    "ChangefeedError",
    "BatchTimestampBeforeGCError",
    "InvalidArgumentError",
    "SQLError",
    "InvariantViolation",
    "TerminalSinkError",
)
POLL_S = 0.2
# a job's running_status from its start (or its query's start again) until a batch runs
STARTING_STATUS = "running: starting its Spark query"
_TASKS_END_S = 10.0  # how long a stop waits for its cancelled tasks to end
RUN_FILE = "feedkv-run"  # in a query's checkpoint: :func:`checkpoint_run`
_CAUSES = 8  # how deep a failure's causes are searched for a feedkv error


# The last line of a Python traceback that raised a feedkv error: "feedkv.x.YError: ...".
_RAISED = re.compile(r"^feedkv(?:\.\w+)+: (.+)$", re.MULTILINE)


def _feedkv_error(text: str) -> str | None:
    """The message of the feedkv error a Spark failure's text carries (a Python traceback
    inside a JVM exception), so a job's error reads as it does on the thread runner."""
    found = _RAISED.findall(text)
    return found[-1].strip() if found else None


def _failure_text(error: Any) -> str:
    """The whole text of a query's failure: its message and the JVM stack trace with
    its causes, where the Python traceback of a failed commit on the driver is (the
    message alone says only "Writing job failed.")."""
    # NB: PySpark keeps the cause and the stack trace in private attributes; without
    # them (another PySpark), the message is what there is.
    texts = []
    for _ in range(_CAUSES):
        if error is None:
            break
        texts += [str(error), str(getattr(error, "_stackTrace", "") or "")]
        error = getattr(error, "_cause", None)
    return "\n".join(texts)


# Spark's loggers that report, at ERROR with a stack trace, each task a normal stop
# cancels (TaskKilledException): nothing failed, so they say nothing while a job stops.
_STOP_NOISE = (
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.util.Utils",
)


def _processing(query: Any) -> bool:
    """Whether ``query`` runs a batch now (its status says so; the batch's progress is
    reported once it ends)."""
    status = query.status
    return isinstance(status, dict) and status.get("message") == "Processing new data"


def _stop_quietly(spark: Any, query: Any) -> None:
    """Stop ``query`` with its cancellations unlogged, the loggers' levels back once its
    cancelled tasks have ended. A failure of another job meanwhile still ends that job
    with its error (its status says it)."""
    restore = _silence(spark._jvm)
    try:
        query.stop()
        # NB: the stop returns once the job is cancelled; its tasks end (and log) later,
        # on the executor's threads.
        deadline = time.monotonic() + _TASKS_END_S
        while _tasks_running(spark, str(query.runId)) and time.monotonic() < deadline:
            time.sleep(POLL_S / 4)
    finally:
        with contextlib.suppress(Exception):  # NB: the JVM may be gone by now
            restore()


def _tasks_running(spark: Any, group: str) -> bool:
    """Whether a task of the Spark jobs in ``group`` (a streaming query's run id) is
    still running; ``False`` when the JVM is gone."""
    try:
        tracker = spark.sparkContext.statusTracker()
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None and stage.numActiveTasks > 0:
                    return True
    except Exception:  # NB: py4j's errors when the JVM is gone
        return False
    return False


def _silence(jvm: Any) -> Callable[[], None]:
    """Turn :data:`_STOP_NOISE` off; what sets the levels back (nothing to do when the
    JVM is already gone: the stop goes on)."""
    try:
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        manager = jvm.org.apache.logging.log4j.LogManager
        before = {name: manager.getLogger(name).getLevel() for name in _STOP_NOISE}
        for name in _STOP_NOISE:
            configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.OFF)
    except Exception:  # NB: py4j's errors when the JVM is gone
        return lambda: None

    def restore() -> None:
        for name, level in before.items():
            configurator.setLevel(name, level)

    return restore


def checkpoint_run(checkpoint: Path) -> str:
    """The run of batch ids of the query whose checkpoint is ``checkpoint``: made with
    the checkpoint, kept in it, so it lasts while the query counts on from its batches
    there, and a checkpoint started afresh (the job adopted by another node, whose
    store holds none of its batches) is a new run whose batch 0 is no replay of the
    first run's. ``""`` for a checkpoint begun before runs were kept (its manifests
    lie in no run's folder)."""
    file = checkpoint / RUN_FILE
    if file.exists():
        return file.read_text().strip()
    if (checkpoint / "offsets").exists():
        return ""
    checkpoint.mkdir(parents=True, exist_ok=True)
    run = secrets.token_hex(8)
    file.write_text(run + "\n")
    return run


class SparkJob:
    def __init__(
        self,
        url: str,
        job_id: int,
        spec: ChangefeedSpec,
        checkpoint_dir: str | Path,
        *,
        master: str | None = None,
        metrics: FeedMetrics | None = None,
        node: FeedSource | None = None,
        buffers: NodeBuffers | None = None,
    ) -> None:
        """``metrics``: where its micro-batches' durations are observed (``None``:
        nowhere); ``node``: the identity of the node that runs it, which its messages'
        enriched ``source`` carries (``None``: not known); ``buffers``: the node's,
        which its tasks' sinks share when they are shared
        (:meth:`~feedkv.changefeed.node_buffers.NodeBuffers.share`)."""
        self.spec = spec
        self._node = node
        self._metrics = metrics
        self._buffers = buffers
        self.stalled: Stalled | None = None  # why its tasks stalled, while they are
        self._batches_run = False  # whether a batch of this run of its query has begun
        self.job_id = job_id
        self.high_water = spec.start
        self.retrying: Retrying | None = None  # a failed query raises: the registry retries
        self.progress = SparkProgress()  # its batches' rows and the last batch, for the page
        self._url = url
        self._checkpoint = str(checkpoint_dir)
        self._master = master
        self._closed = threading.Event()
        self._query: Any = None
        self._spark: Any = None  # the query's Spark session, once it runs
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Stop the query (from any thread); the checkpoint keeps its progress."""
        self._closed.set()
        with self._lock:
            query, spark = self._query, self._spark
        if query is not None:
            _stop_quietly(spark, query)

    @property
    def stalled_status(self) -> str | None:
        """The job's ``running_status`` while its tasks are stalled on the node's buffer
        limits (``None``: they are not). Any thread."""
        stalled = self.stalled
        return stalled.status() if stalled is not None else None

    @property
    def starting_status(self) -> str | None:
        """The job's ``running_status`` while its Spark query starts (a node's first
        job starts the JVM and its session; a query started again after a pause or a
        stall reads its checkpoint), until a batch of it runs; ``None`` after. Its
        high-water mark does not move meanwhile: this says why. Any thread."""
        return None if self._batches_run else STARTING_STATUS

    def run(self) -> None:
        try:
            spark = spark_session(self._master)
        except Exception as exc:  # PySpark's own errors: the JVM did not start
            raise ExternalError(f"changefeed job {self.job_id}: cannot start Spark: {exc}") from exc
        # NB: Spark looks Python data sources up in the JVM's active session, which is
        # per thread; this thread's must be the session they are registered with.
        jvm: Any = spark._jvm
        jvm.SparkSession.setActiveSession(spark._jsparkSession)
        while self._run_query(spark):
            self._restart_after_stall()

    def _restart_after_stall(self) -> None:
        """Its query failed on a stalled task whose sink has since delivered its backlog:
        wait until the node's buffers have room again (other changefeeds may fill them),
        then let :meth:`run` start the query again from its checkpoint."""
        buffers = self._buffers
        if buffers is not None:
            while not self.closed and not buffers.has_room():
                self._closed.wait(POLL_S)
            buffers.clear_stall(self.job_id)
        self.stalled = None
        log.warning(
            "changefeed job %d: its sink's backlog cleared; restarting its query from %s",
            self.job_id,
            self.high_water,
        )

    def _run_query(self, spark: SparkSession) -> bool:
        """Run the job's query until it ends; whether it failed on a stall (and should
        start again)."""
        self._batches_run = False
        options = {
            "url": self._url,
            "spec": encode_spec(self.spec),
            "job_id": str(self.job_id),
            "run": checkpoint_run(Path(self._checkpoint)),
            "parallelism": str(spark.sparkContext.defaultParallelism),
        }
        if self._node is not None:
            options["node"] = encode_node(self._node)
        limits = None
        if self._buffers is not None:
            limits = self._buffers.limits()
            # NB: a stall an earlier run of the job reported (it was paused while
            # stalled) is not this run's
            self._buffers.clear_stall(self.job_id)
        if limits is not None:
            options["buffers"] = limits.to_json()
        o = self.spec.options
        writer = (
            spark.readStream.format("feedkv_changefeed")
            .options(**options)
            .load()
            .writeStream.format("feedkv_changefeed")
            .options(**options)
            .option("checkpointLocation", self._checkpoint)
            .queryName(f"changefeed_{self.job_id}")
        )
        if o.initial_scan == "only":
            writer = writer.trigger(availableNow=True)
        else:
            interval = max(MIN_TRIGGER_S, o.min_checkpoint_frequency)
            writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
        with self._lock:
            if self.closed:
                return False
            self._query = query = writer.start()
            self._spark = spark
        try:
            while not query.awaitTermination(POLL_S):  # type: ignore[arg-type]
                self._track(query)
                end = o.end_time
                if end is not None and self.high_water >= end:
                    _stop_quietly(spark, query)
            self._track(query)
        except StreamingQueryException:
            pass  # the query failed: query.exception() below says why
        finally:
            _stop_quietly(spark, query)
        error = query.exception()
        if error is not None and not self.closed:
            text = _failure_text(error)
            cause = _feedkv_error(text) or str(error)
            if "SinkStalledError" in text:
                self.stalled = self.stalled or Stalled(cause, time.time_ns())
                return True
            message = f"changefeed job {self.job_id}: its Spark query failed: {cause}"
            # NB: the error is text here; a terminal feedkv error inside it ends the job,
            # anything else (a lost executor, an unreachable node) is worth a retry.
            if any(name in text for name in TERMINAL_ERRORS):
                raise ChangefeedError(_feedkv_error(text) or message) from None
            raise ExternalError(message) from None
        return False

    @property
    def rows_emitted(self) -> int:
        """The rows its batches read so far (this run's), for the page's throughput."""
        return self.progress.rows

    def _track(self, query: Any) -> None:
        """Moves the high-water mark to the end of the last finished batch, and counts
        the batch's rows."""
        if self._buffers is not None:
            # NB: a worker Spark killed (or the OOM killer) leaves its spill files
            self._buffers.reap()
        if self._buffers is not None and self.stalled is None:
            self.stalled = self._buffers.stall_of(self.job_id)
        progress = query.lastProgress
        if not self._batches_run:
            self._batches_run = progress is not None or _processing(query)
        batch = self.progress.observe(progress)
        if batch is not None and batch.duration_s is not None and self._metrics is not None:
            self._metrics.spark_batch_nanos.observe(batch.duration_s * 1e9)
        for source in progress.get("sources", []) if progress else []:
            end = source.get("endOffset")
            if isinstance(end, str):
                end = json.loads(end)
            if end:
                offset = FeedOffset.from_json(end)
                if not offset.scanning and offset.resolved > self.high_water:
                    self.high_water = offset.resolved
