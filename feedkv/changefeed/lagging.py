"""``changefeed.lagging_ranges``: how many of a feed's ranges are behind.

A range of a changefeed lags when its rangefeed's resolved timestamp (its last
checkpoint, or the feed's start before the first) is more than
``lagging_ranges_threshold`` behind the present: a catch-up scan that has not finished,
an intent that holds its range's resolved timestamp back, a node that does not answer.
As in CockroachDB, the count is taken again at most every
``lagging_ranges_polling_interval`` (it reads every range of the feed), and between two
counts the last one stands.

:class:`LaggingRanges` is pure: it is handed the time and a way to read the feed's ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from feedkv.rangefeed.client import FeedRange

__all__ = ["LaggingRanges"]


class LaggingRanges:
    def __init__(self, threshold_s: float, polling_interval_s: float) -> None:
        self._threshold_ns = int(threshold_s * 1e9)
        self._interval_ns = int(polling_interval_s * 1e9)
        self._counted_at: int | None = None
        self._count = 0

    def poll(self, now_ns: int, ranges: Callable[[], Sequence[FeedRange]]) -> int:
        """The ranges lagging as of the last count, counting again (reading ``ranges()``)
        if none was taken in the last polling interval."""
        if self._counted_at is None or now_ns - self._counted_at >= self._interval_ns:
            horizon = now_ns - self._threshold_ns
            self._count = sum(r.resolved.wall < horizon for r in ranges())
            self._counted_at = now_ns
        return self._count
