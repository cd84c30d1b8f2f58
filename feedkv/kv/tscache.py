"""The timestamp cache: the highest timestamp at which each key was read.

A write must land above every read of its key that already happened, or the reader would
have missed it; so before a write at ``ts`` the store asks the cache for the key's highest
read and pushes the write above it. Entries remember which transaction read (a
transaction may write under its own reads); two readers at the same timestamp leave no
owner.

The cache is bounded. When it overflows it forgets entries and raises its low-water mark
to the highest timestamp it forgot: answers only ever get more conservative, never lower.
A new cache (after a restart) starts with its low water at the clock's current time, since
it cannot know what was read before.

Not thread-safe: the store touches it only from the engine's commit thread.
"""

from __future__ import annotations

from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["TimestampCache"]

_Entry = tuple[Timestamp, bytes | None]


def _merge(old: _Entry | None, ts: Timestamp, txn_id: bytes | None) -> _Entry:
    if old is None or ts > old[0]:
        return (ts, txn_id)
    if ts == old[0] and old[1] != txn_id:
        return (ts, None)
    return old


class TimestampCache:
    def __init__(
        self, low_water: Timestamp, *, max_points: int = 200_000, max_spans: int = 1_000
    ) -> None:
        self.low_water = low_water
        self._max_points = max_points
        self._max_spans = max_spans
        self._points: dict[bytes, _Entry] = {}
        self._spans: list[tuple[Span, _Entry]] = []

    def add_key(self, key: bytes, ts: Timestamp, txn_id: bytes | None) -> None:
        """Record a read of ``key`` at ``ts`` by ``txn_id`` (``None``: no transaction)."""
        if ts <= self.low_water:
            return
        points = self._points
        points[key] = _merge(points.get(key), ts, txn_id)
        if len(points) > self._max_points:
            self._forget_points()

    def add_span(self, span: Span, ts: Timestamp, txn_id: bytes | None) -> None:
        """Record a scan of ``span`` at ``ts`` (missing keys count: a later insert must land
        above the scan too)."""
        if ts <= self.low_water:
            return
        self._spans.append((span, (ts, txn_id)))
        if len(self._spans) > self._max_spans:
            self._forget_spans()

    def max_read(self, key: bytes, txn_id: bytes | None) -> Timestamp:
        """The highest read of ``key`` by anyone other than ``txn_id`` (at least the low water)."""
        best = self.low_water
        entry = self._points.get(key)
        if entry is not None and entry[0] > best and (txn_id is None or entry[1] != txn_id):
            best = entry[0]
        for span, (ts, owner) in self._spans:
            if ts > best and span.start <= key < span.end and (txn_id is None or owner != txn_id):
                best = ts
        return best

    def max_read_span(self, span: Span, txn_id: bytes | None) -> Timestamp:
        """The highest read of any key in ``span`` by anyone other than ``txn_id``."""
        best = self.low_water
        for key, (ts, owner) in self._points.items():
            if ts > best and span.start <= key < span.end and (txn_id is None or owner != txn_id):
                best = ts
        for read_span, (ts, owner) in self._spans:
            if ts > best and read_span.overlaps(span) and (txn_id is None or owner != txn_id):
                best = ts
        return best

    def _forget_points(self) -> None:
        self.low_water = max([self.low_water, *(ts for ts, _owner in self._points.values())])
        self._points.clear()
        self._drop_below_low_water()

    def _forget_spans(self) -> None:
        self.low_water = max([self.low_water, *(entry[0] for _span, entry in self._spans)])
        self._spans.clear()
        self._drop_below_low_water()

    def _drop_below_low_water(self) -> None:
        low = self.low_water
        self._points = {k: e for k, e in self._points.items() if e[0] > low}
        self._spans = [(s, e) for s, e in self._spans if e[0] > low]
