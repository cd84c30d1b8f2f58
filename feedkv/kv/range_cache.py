"""The client's cache of range descriptors, for routing requests by key.

Entries are looked up by key (bisect on start keys); a miss asks the node
(``RangeLookup``) and caches what it returns, including prefetched neighbours. A node that
rejects a request as misrouted tells the client the current descriptors, which replace
every cached entry they overlap. Thread-safe.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Sequence

from feedkv.kv.range_descriptor import RangeDescriptor

__all__ = ["RangeCache"]


class RangeCache:
    def __init__(self, lookup: Callable[[bytes], Sequence[RangeDescriptor]]) -> None:
        self._lookup = lookup
        self._lock = threading.Lock()
        self._starts: list[bytes] = []
        self._descs: list[RangeDescriptor] = []
        self.lookups = 0  # the node was asked this many times (CockroachDB's range lookups)

    def get(self, key: bytes) -> RangeDescriptor:
        """The cached range holding ``key``, asking the node on a miss."""
        with self._lock:
            desc = self._find(key)
            if desc is None:
                self.lookups += 1
        if desc is not None:
            return desc
        fresh = self._lookup(key)
        self.insert(fresh)
        for desc in fresh:
            if desc.contains_key(key):
                return desc
        raise LookupError(f"the range lookup for {key!r} did not return its range")

    def insert(self, descs: Iterable[RangeDescriptor]) -> None:
        """Cache ``descs``, evicting every entry they overlap."""
        with self._lock:
            for desc in descs:
                keep = [d for d in self._descs if not d.span.overlaps(desc.span)]
                keep.append(desc)
                keep.sort(key=lambda d: d.start)
                self._descs = keep
                self._starts = [d.start for d in keep]

    def evict(self, desc: RangeDescriptor) -> None:
        with self._lock:
            if desc in self._descs:
                index = self._descs.index(desc)
                del self._descs[index]
                del self._starts[index]

    def cached(self) -> list[RangeDescriptor]:
        with self._lock:
            return list(self._descs)

    def _find(self, key: bytes) -> RangeDescriptor | None:
        index = bisect.bisect_right(self._starts, key) - 1
        if index >= 0 and self._descs[index].contains_key(key):
            return self._descs[index]
        return None
