"""The recent history of each changefeed's lag and throughput, kept in memory on a node
for its admin page's charts.

:class:`FeedHistory` is pure: the node's sampler hands it a sample of each job now and
then (:meth:`FeedHistory.record`); the page reads a job's series
(:meth:`FeedHistory.series`). Its memory is bounded twice: a job keeps the samples of the
last ``window_s`` seconds, at most one per ``interval_s`` (a sample that comes sooner is
dropped), and the history holds at most ``max_feeds`` jobs (the one sampled longest ago
goes first). Nothing is kept across restarts of the node.

Lag is the sample's time minus the job's high-water mark (how far behind the present
the feed's emitted-and-flushed position is, as ``changefeed.max_behind_nanos``);
throughput is the messages the job emitted between two samples over the time between
them, known only for a job this node runs as a thread (a Spark job's rows are counted by
its executors): ``None`` otherwise.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from feedkv.errors import InvalidArgumentError

__all__ = ["FeedHistory", "Sample", "Series"]


@dataclass(frozen=True, slots=True)
class Sample:
    wall_ns: int
    high_water_ns: int
    emitted: int | None  # messages emitted since the job started here (None: unknown)


@dataclass(frozen=True, slots=True)
class Series:
    """A job's chart: at each time (seconds since the epoch), its lag (seconds) and its
    throughput (messages a second since the sample before; ``None``: unknown)."""

    times: list[float]
    lag_s: list[float]
    rows_per_s: list[float | None]


class FeedHistory:
    def __init__(
        self, *, interval_s: float = 10.0, window_s: float = 3600.0, max_feeds: int = 64
    ) -> None:
        if interval_s <= 0 or window_s < interval_s or max_feeds < 1:
            raise InvalidArgumentError(
                f"a feed history needs 0 < interval_s <= window_s and max_feeds >= 1; got "
                f"interval_s={interval_s}, window_s={window_s}, max_feeds={max_feeds}"
            )
        self.interval_s = interval_s
        self.window_s = window_s
        self._max_samples = int(window_s / interval_s) + 1
        self._max_feeds = max_feeds
        self._feeds: OrderedDict[int, deque[Sample]] = OrderedDict()

    def record(self, job_id: int, sample: Sample) -> bool:
        """Add ``sample`` of job ``job_id``; returns whether it was kept (not within
        ``interval_s`` of the job's last one, nor older than it)."""
        samples = self._feeds.get(job_id)
        if samples is None:
            samples = self._feeds[job_id] = deque(maxlen=self._max_samples)
            while len(self._feeds) > self._max_feeds:
                self._feeds.popitem(last=False)
        elif sample.wall_ns < samples[-1].wall_ns + self.interval_s * 1e9:
            return False
        self._feeds.move_to_end(job_id)
        samples.append(sample)
        horizon = sample.wall_ns - self.window_s * 1e9
        while samples[0].wall_ns < horizon:
            samples.popleft()
        return True

    def forget(self, keep: set[int]) -> None:
        """Drop the history of every job not in ``keep`` (jobs that no longer exist)."""
        for job_id in [j for j in self._feeds if j not in keep]:
            del self._feeds[job_id]

    def series(self, job_id: int) -> Series:
        """Job ``job_id``'s chart, oldest first (empty for a job never sampled)."""
        samples = list(self._feeds.get(job_id, ()))
        rates: list[float | None] = []
        for before, after in zip([None, *samples], samples, strict=False):
            if before is None or before.emitted is None or after.emitted is None:
                rates.append(None)
                continue
            seconds = (after.wall_ns - before.wall_ns) / 1e9
            # NB: a count that went down is a job restarted here (its count restarts)
            rates.append(max(0, after.emitted - before.emitted) / seconds if seconds else None)
        return Series(
            [s.wall_ns / 1e9 for s in samples],
            [max(0, s.wall_ns - s.high_water_ns) / 1e9 for s in samples],
            rates,
        )
