"""Changefeed metrics, as CockroachDB names them (``changefeed.emitted_messages`` is
``changefeed_emitted_messages``; see :mod:`feedkv.util.metrics`).

Every changefeed metric has a ``scope`` label: the feed's ``metrics_label`` option, or
``default`` (CockroachDB's scoped metrics). Sum over ``scope`` for the node's total.

Pushed by the feed, once per batch (a checkpoint or a flush), never per row:
``emitted_messages``, ``emitted_bytes``, ``flushed_bytes``, ``error_retries``,
``failures``, and the histograms (nanoseconds) ``commit_latency`` (MVCC time of the
oldest row of a flush to the flush's end), ``admit_latency`` (MVCC time of the oldest
value since the last checkpoint to its admission) and ``sink_batch_hist_nanos`` (first
row of a flush buffered to the flush's end). A batch is one observation. A Spark job
observes each of its micro-batches' durations in ``spark_batch_nanos``.

Sampled at scrape time from the feeds running on this node (:meth:`ChangefeedMetrics.tracking`):
``running``, ``checkpoint_progress`` (the lowest high-water mark, nanoseconds since the
epoch), ``max_behind_nanos`` (now minus it), ``backfill_count`` (feeds in an initial scan
or a backfill), ``backfill_pending_ranges`` (spans those still have to scan: one for each
target table, as a scan here goes table by table), ``lagging_ranges`` (ranges whose
resolved timestamp is more than the feed's ``lagging_ranges_threshold`` behind, counted at
most every ``lagging_ranges_polling_interval``: :mod:`feedkv.changefeed.lagging`),
``stalled`` (feeds stalled on the node's buffer limits), and of the node's buffers
(:mod:`feedkv.changefeed.node_buffers`) ``buffer_memory_bytes`` and ``buffer_disk_bytes``.

From the job records, which the job registry hands over each time it reads them
(:meth:`ChangefeedMetrics.observe_jobs`; jobs that have not ended, wherever they run,
paused ones too): ``jobs_changefeed_currently_paused``;
``jobs_changefeed_protected_age_sec``, the age of the oldest history a job holds back
from garbage collection (its high-water mark, or its start); and
``changefeed_gc_threshold_distance_nanos``, per scope the least distance between a job's
high-water mark and the garbage-collection horizon (now minus the store's GC TTL): how
long the most-behind job can stay stuck before the history it needs would be collected
but for its protection. It falls as a job falls behind; below zero the job lives on its
protected history alone (an alert belongs well above zero).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from feedkv.changefeed.buffer_ledger import COUNTS
from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.storage.gc import DEFAULT_GC_TTL_NS
from feedkv.util.hlc import Timestamp
from feedkv.util.metrics import Counter, LeanHistogram, Registry

__all__ = ["DEFAULT_SCOPE", "ChangefeedMetrics", "FeedMetrics", "Progress"]

DEFAULT_SCOPE = "default"


class Progress(Protocol):
    """What the sampled metrics read of a running feed (a job or a sinkless feed)."""

    @property
    def high_water(self) -> Timestamp: ...


@dataclass(frozen=True, slots=True)
class FeedMetrics:
    """One scope's pushed metrics (the children of each labelled metric)."""

    emitted_messages: Counter
    emitted_bytes: Counter
    flushed_bytes: Counter
    error_retries: Counter
    failures: Counter
    commit_latency: LeanHistogram
    admit_latency: LeanHistogram
    sink_batch_hist_nanos: LeanHistogram
    spark_batch_nanos: LeanHistogram  # a Spark job's micro-batches, as Spark timed them


class ChangefeedMetrics:
    def __init__(
        self,
        registry: Registry | None = None,
        *,
        wall_ns: Callable[[], int] = time.time_ns,
        gc_ttl_ns: int = DEFAULT_GC_TTL_NS,
    ) -> None:
        """``gc_ttl_ns``: the store's GC TTL (how far back history is kept)."""
        r = registry or Registry()
        self._wall_ns = wall_ns
        self._gc_ttl_ns = gc_ttl_ns
        self._jobs: list[tuple[str, int]] = []  # (scope, protected-from wall ns) of each job
        self._lock = threading.Lock()
        self._scopes: dict[str, FeedMetrics] = {}
        self._live: dict[int, tuple[str, Progress]] = {}
        scope = ("scope",)
        self._emitted_messages = r.counter(
            "changefeed_emitted_messages", "Messages emitted by all feeds", scope
        )
        self._emitted_bytes = r.counter(
            "changefeed_emitted_bytes", "Bytes emitted by all feeds", scope
        )
        self._flushed_bytes = r.counter(
            "changefeed_flushed_bytes",
            "Bytes emitted by all feeds; maybe different from "
            "changefeed_emitted_bytes when compression is enabled",
            scope,
        )
        self._error_retries = r.counter(
            "changefeed_error_retries",
            "Total retryable errors encountered by all changefeeds",
            scope,
        )
        self._failures = r.counter(
            "changefeed_failures", "Total number of changefeed jobs which have failed", scope
        )
        self._commit_latency = r.histogram(
            "changefeed_commit_latency",
            "Event commit latency: the time between an event's MVCC timestamp and its "
            "acknowledgement by the sink (the oldest event of each flush)",
            scope,
        )
        self._admit_latency = r.histogram(
            "changefeed_admit_latency",
            "Event admission latency: the time between an event's MVCC timestamp and its "
            "admission into the changefeed pipeline (the oldest event of each checkpoint)",
            scope,
        )
        self._sink_batch = r.histogram(
            "changefeed_sink_batch_hist_nanos",
            "Time spent batched in the sink buffer before being flushed and acknowledged",
            scope,
        )
        self._spark_batch = r.histogram(
            "changefeed_spark_batch_nanos",
            "Duration of a Spark changefeed job's micro-batches (Spark's triggerExecution)",
            scope,
        )
        self.currently_paused = r.gauge(
            "jobs_changefeed_currently_paused",
            "Number of changefeed jobs currently considered Paused",
        )
        r.sampled(
            "changefeed_running",
            "Number of currently running changefeeds, including sinkless",
            lambda: self._by_scope(lambda _: 1.0, sum),
            labelnames=scope,
        )
        r.sampled(
            "changefeed_checkpoint_progress",
            "The earliest timestamp of any changefeed's persisted checkpoint (values prior "
            "to this timestamp will never need to be re-emitted)",
            lambda: self._by_scope(lambda p: float(p.high_water.wall), min),
            labelnames=scope,
        )
        r.sampled(
            "changefeed_max_behind_nanos",
            "The most any changefeed's persisted checkpoint is behind the present",
            lambda: self._by_scope(
                lambda p: float(max(0, self._wall_ns() - p.high_water.wall)), max
            ),
            labelnames=scope,
        )
        r.sampled(
            "changefeed_backfill_count",
            "Number of changefeeds currently executing backfill",
            lambda: self._by_scope(lambda p: 1.0 if _pending(p) else 0.0, sum),
            labelnames=scope,
        )
        r.sampled(
            "changefeed_backfill_pending_ranges",
            "Number of ranges in an ongoing backfill that are yet to be fully emitted",
            lambda: self._by_scope(lambda p: float(_pending(p)), sum),
            labelnames=scope,
        )

        r.sampled(
            "changefeed_lagging_ranges",
            "The number of ranges considered to be lagging behind",
            lambda: self._by_scope(lambda p: float(_lagging(p)), sum),
            labelnames=scope,
        )
        r.sampled(
            "changefeed_gc_threshold_distance_nanos",
            "The least distance between a changefeed job's high-water mark and the "
            "garbage-collection horizon (now minus the GC TTL)",
            self._gc_distances,
            labelnames=scope,
        )
        # NB: the default scope's counters exist from the start, at 0, as CockroachDB's
        # do: Prometheus's increase() misses a series' first value, so an alert on
        # increase(changefeed_failures[5m]) would miss a node's first failure
        self.scope(None)
        self.buffers: NodeBuffers | None = None  # the node's (its node sets them)
        # NB: the five totals below come from one read of the buffers a scrape (a file's
        # lock and a read of it, when shared with Spark workers)
        self._buffer_totals = r.per_scrape(self._read_buffer_totals)
        r.sampled(
            "changefeed_stalled",
            "Number of changefeeds stalled on the node's buffer limits (their feeds torn "
            "down until their sinks' backlog clears)",
            lambda: self._by_scope(lambda p: 1.0 if _stalled(p) else 0.0, sum),
            labelnames=scope,
        )
        r.sampled(
            "changefeed_buffer_memory_bytes",
            "Bytes of changefeed records waiting for their sinks in memory, across the "
            "node's changefeeds (at most --max-changefeed-memory)",
            lambda: float(self.buffers.memory.used) if self.buffers is not None else 0.0,
        )
        r.sampled(
            "changefeed_buffer_disk_bytes",
            "Bytes of changefeed records spilled to disk waiting for their sinks, across "
            "the node's changefeeds (at most --max-disk-changefeed-storage)",
            lambda: float(self.buffers.disk.used) if self.buffers is not None else 0.0,
        )
        for name, what in (
            ("entries_in", "Total entries entering the buffer between the feeds and the sinks"),
            ("entries_out", "Total entries leaving the buffer for the sinks"),
            ("entries_released", "Total entries whose buffer was released (delivered, dropped)"),
        ):
            r.sampled(
                f"changefeed_buffer_{name}",
                what,
                partial(self._count, name),
                kind="counter",
            )
        for name, what in (
            (
                "mem_acquired",
                "Total amount of memory acquired for entries as they enter the buffer",
            ),
            ("mem_released", "Total amount of memory released by the buffer's entries"),
        ):
            r.sampled(
                f"changefeed_buffer_entries_{name}",
                what,
                partial(self._count, name),
                kind="counter",
            )
        r.sampled(
            "jobs_changefeed_protected_age_sec",
            "The age of the oldest history protected by changefeed jobs",
            self._protected_age_s,
        )

    def _count(self, name: str) -> float:
        """A total of the node's buffers, its Spark workers' included
        (:meth:`~feedkv.changefeed.node_buffers.NodeBuffers.totals`)."""
        return float(self._buffer_totals()[COUNTS.index(name)])

    def _read_buffer_totals(self) -> tuple[int, ...]:
        return self.buffers.totals() if self.buffers is not None else (0,) * len(COUNTS)

    def observe_jobs(self, jobs: Iterable[tuple[str | None, Timestamp]]) -> None:
        """The jobs that have not ended, as ``(metrics_label, the timestamp their history is
        held from)``: the job registry's last read of the records."""
        observed = [(label or DEFAULT_SCOPE, ts.wall) for label, ts in jobs]
        with self._lock:
            self._jobs = observed

    def _gc_distances(self) -> dict[tuple[str, ...], float]:
        horizon = self._wall_ns() - self._gc_ttl_ns
        with self._lock:
            jobs = list(self._jobs)
        out: dict[tuple[str, ...], float] = {}
        for name, wall in jobs:
            distance = float(wall - horizon)
            out[(name,)] = min(out.get((name,), distance), distance)
        return out

    def _protected_age_s(self) -> float:
        with self._lock:
            oldest = min((wall for _name, wall in self._jobs), default=None)
        return 0.0 if oldest is None else max(0, self._wall_ns() - oldest) / 1e9

    def scope(self, label: str | None) -> FeedMetrics:
        """The metrics of feeds with ``metrics_label=label`` (``None``: the default)."""
        name = label or DEFAULT_SCOPE
        with self._lock:
            metrics = self._scopes.get(name)
            if metrics is None:
                metrics = self._scopes[name] = FeedMetrics(
                    self._emitted_messages.labels(name),
                    self._emitted_bytes.labels(name),
                    self._flushed_bytes.labels(name),
                    self._error_retries.labels(name),
                    self._failures.labels(name),
                    self._commit_latency.labels(name),
                    self._admit_latency.labels(name),
                    self._sink_batch.labels(name),
                    self._spark_batch.labels(name),
                )
            return metrics

    @contextmanager
    def tracking(self, label: str | None, feed: Progress) -> Iterator[None]:
        """Count ``feed`` as running (in scope ``label``) while the block runs."""
        key = id(feed)
        self.scope(label)  # NB: its scope reads 0, not absent, once the feed ends
        with self._lock:
            self._live[key] = (label or DEFAULT_SCOPE, feed)
        try:
            yield
        finally:
            with self._lock:
                self._live.pop(key, None)

    def _by_scope(
        self, read: Callable[[Progress], float], fold: Callable[[list[float]], float]
    ) -> dict[tuple[str, ...], float]:
        with self._lock:
            live = list(self._live.values())
            scopes = set(self._scopes) | {DEFAULT_SCOPE}
        values: dict[str, list[float]] = {name: [] for name in scopes}
        for name, feed in live:
            values.setdefault(name, []).append(read(feed))
        # NB: a scope with no feed reads 0 (not absent), so `changefeed_running == 0` and
        # alerts on it work.
        return {(name,): fold(v) if v else 0.0 for name, v in values.items()}


def _lagging(feed: Progress) -> int:
    """The ranges of ``feed`` that lag (a job run elsewhere, Spark's, says none)."""
    count = getattr(feed, "lagging_ranges", None)
    value = count() if callable(count) else 0
    return value if isinstance(value, int) else 0


def _stalled(feed: Progress) -> bool:
    """Whether ``feed`` is stalled on the node's buffer limits."""
    return isinstance(getattr(feed, "stalled_status", None), str)


def _pending(feed: Progress) -> int:
    """The spans ``feed`` still has to scan (a job run elsewhere, Spark's, says none)."""
    pending = getattr(feed, "backfill_pending", 0)
    return pending if isinstance(pending, int) else 0
