"""A span frontier: the lowest checkpoint over a set of spans.

A multi-range feed runs one piece per range; each piece checkpoints its own span. The
frontier keeps, for every part of the tracked spans, the highest checkpoint seen, and
answers the minimum over all of them: the timestamp up to which the whole feed is
resolved. :meth:`SpanFrontier.forward` says whether that minimum moved.

The tracked spans are cut into intervals at every boundary a checkpoint used; a min-heap
over the intervals (stale entries skipped lazily) makes both calls O(log n) amortized,
so a feed over thousands of ranges checkpoints cheaply. Not thread-safe: one owner.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable

from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, merge_spans

__all__ = ["SpanFrontier"]

ZERO = Timestamp(0, 0)


class SpanFrontier:
    def __init__(self, spans: Iterable[Span], initial: Timestamp = ZERO) -> None:
        self.spans = merge_spans(spans)
        # Interval i is [starts[i], starts[i + 1]); ts None marks a gap between spans.
        self._starts: list[bytes] = []
        self._ts: list[Timestamp | None] = []
        for span in self.spans:  # merged spans never touch, so each adds two boundaries
            self._starts.append(span.start)
            self._ts.append(initial)
            self._starts.append(span.end)
            self._ts.append(None)
        self._heap: list[tuple[Timestamp, bytes]] = [
            (ts, start) for start, ts in zip(self._starts, self._ts, strict=True) if ts is not None
        ]
        heapq.heapify(self._heap)

    @property
    def frontier(self) -> Timestamp:
        """The lowest timestamp over every tracked key."""
        heap = self._heap
        while heap:
            ts, start = heap[0]
            i = bisect_right(self._starts, start) - 1
            if i >= 0 and self._starts[i] == start and self._ts[i] == ts:
                return ts
            heapq.heappop(heap)
        return ZERO

    def forward(self, span: Span, ts: Timestamp) -> bool:
        """Raise every tracked part of ``span`` to at least ``ts``; returns whether the
        frontier moved."""
        before = self.frontier
        if not self._starts or span.end <= self._starts[0] or span.start >= self._starts[-1]:
            return False
        first = self._cut(max(span.start, self._starts[0]))
        last = self._cut(min(span.end, self._starts[-1]))
        for i in range(first, last):
            current = self._ts[i]
            if current is not None and current < ts:
                self._ts[i] = ts
                heapq.heappush(self._heap, (ts, self._starts[i]))
        return self.frontier > before

    def entries(self) -> list[tuple[Span, Timestamp]]:
        """Every tracked interval and its timestamp, in key order."""
        return [
            (Span(self._starts[i], self._starts[i + 1]), ts)
            for i, ts in enumerate(self._ts)
            if ts is not None
        ]

    def _cut(self, key: bytes) -> int:
        i = bisect_right(self._starts, key) - 1
        if self._starts[i] == key:
            return i
        self._starts.insert(i + 1, key)
        ts = self._ts[i]
        self._ts.insert(i + 1, ts)
        if ts is not None:
            heapq.heappush(self._heap, (ts, key))
        return i + 1
