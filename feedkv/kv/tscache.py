"""The timestamp cache: the highest timestamp at which each key was read.

A write must land above every read of its key that already happened, or the reader would
have missed it; so before a write at ``ts`` the store asks the cache for the key's highest
read and pushes the write above it. Entries remember which transaction read (a
transaction may write under its own reads); two readers at the same timestamp leave no
owner.

Point reads are kept per key. Scans are kept as a partition of the key space into
segments, each holding the highest read over it (with its owner, merged as for points),
so the question a write asks, "the highest read of this key", is one binary search
however many scans there were. Keeping only the highest read per segment loses nothing
a writer needs: a transaction writes at or above every timestamp it read at, so when
its own read is the highest, any lower read by another is below its write too.

The cache is bounded. When it overflows it forgets entries and raises its low-water mark
to the highest timestamp it forgot: answers only ever get more conservative, never lower.
A new cache (after a restart) starts with its low water at the clock's current time, since
it cannot know what was read before.

Not thread-safe: the store touches it only from the engine's commit thread.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

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
        self, low_water: Timestamp, *, max_points: int = 200_000, max_spans: int = 4_096
    ) -> None:
        self.low_water = low_water
        self._max_points = max_points
        self._max_spans = max_spans  # segments, in fact: a scan adds at most two
        self._points: dict[bytes, _Entry] = {}
        # Segment i covers keys from _starts[i] up to _starts[i + 1] (the last: to the end).
        self._starts: list[bytes] = [b""]
        self._entries: list[_Entry | None] = [None]
        self.recording: list[tuple[Span, Timestamp, bytes | None]] | None = None
        """When a list, every read added is appended to it too (a replicated range's
        command collects the reads its Raft entry carries to the other replicas)."""

    def add_key(self, key: bytes, ts: Timestamp, txn_id: bytes | None) -> None:
        """Record a read of ``key`` at ``ts`` by ``txn_id`` (``None``: no transaction)."""
        if self.recording is not None:
            self.recording.append((Span.for_key(key), ts, txn_id))
        if ts <= self.low_water:
            return
        points = self._points
        points[key] = _merge(points.get(key), ts, txn_id)
        if len(points) > self._max_points:
            self._forget_points()

    def add_span(self, span: Span, ts: Timestamp, txn_id: bytes | None) -> None:
        """Record a scan of ``span`` at ``ts`` (missing keys count: a later insert must land
        above the scan too)."""
        if self.recording is not None:
            self.recording.append((span, ts, txn_id))
        if ts <= self.low_water or not span.start < span.end:
            return
        first = self._cut(span.start)
        last = self._cut(span.end)
        entries = self._entries
        for i in range(first, last):
            entries[i] = _merge(entries[i], ts, txn_id)
        if len(entries) > self._max_spans:
            self._forget_spans()

    def max_read(self, key: bytes, txn_id: bytes | None) -> Timestamp:
        """The highest read of ``key`` by anyone other than ``txn_id`` (at least the low water)."""
        best = self.low_water
        entry = self._points.get(key)
        if entry is not None and entry[0] > best and (txn_id is None or entry[1] != txn_id):
            best = entry[0]
        entry = self._entries[bisect_right(self._starts, key) - 1]
        if entry is not None and entry[0] > best and (txn_id is None or entry[1] != txn_id):
            best = entry[0]
        return best

    def max_read_span(self, span: Span, txn_id: bytes | None) -> Timestamp:
        """The highest read of any key in ``span`` by anyone other than ``txn_id``."""
        best = self.low_water
        for key, (ts, owner) in self._points.items():
            if ts > best and span.start <= key < span.end and (txn_id is None or owner != txn_id):
                best = ts
        first = bisect_right(self._starts, span.start) - 1
        last = bisect_left(self._starts, span.end)
        for entry in self._entries[first:last]:
            if entry is not None and entry[0] > best and (txn_id is None or entry[1] != txn_id):
                best = entry[0]
        return best

    def _cut(self, key: bytes) -> int:
        """The index of the segment starting at ``key``, splitting the one holding it."""
        i = bisect_right(self._starts, key) - 1
        if self._starts[i] == key:
            return i
        self._starts.insert(i + 1, key)
        self._entries.insert(i + 1, self._entries[i])
        return i + 1

    def _forget_points(self) -> None:
        self.low_water = max([self.low_water, *(ts for ts, _owner in self._points.values())])
        self._points.clear()
        self._drop_below_low_water()

    def _forget_spans(self) -> None:
        self.low_water = max([self.low_water, *(e[0] for e in self._entries if e is not None)])
        self._starts, self._entries = [b""], [None]
        self._drop_below_low_water()

    def _drop_below_low_water(self) -> None:
        low = self.low_water
        self._points = {k: e for k, e in self._points.items() if e[0] > low}
        starts: list[bytes] = []
        entries: list[_Entry | None] = []
        for start, entry in zip(self._starts, self._entries, strict=True):
            kept = entry if entry is not None and entry[0] > low else None
            if not entries or kept != entries[-1]:  # neighbours that agree become one
                starts.append(start)
                entries.append(kept)
        self._starts, self._entries = starts, entries
