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
        self._lock = threading.Lock()  # held by writers of _entries, and for lookups
        # The cached descriptors in start order, and their start keys. NB: one tuple,
        # replaced whole under the lock and never changed in place, so a hit reads it in
        # one step without the lock (every request routed asks)
        self._entries: tuple[list[bytes], list[RangeDescriptor]] = ([], [])
        self.lookups = 0  # the node was asked this many times (CockroachDB's range lookups)

    def get(self, key: bytes) -> RangeDescriptor:
        """The cached range holding ``key``, asking the node on a miss."""
        starts, descs = self._entries
        index = bisect.bisect_right(starts, key) - 1
        if index >= 0:
            desc = descs[index]
            span = desc.span  # NB: desc.contains_key, without its call
            if span.start <= key < span.end:
                return desc
        with self._lock:
            self.lookups += 1
        fresh = self._lookup(key)
        self.insert(fresh)
        for desc in fresh:
            if desc.contains_key(key):
                return desc
        raise LookupError(f"the range lookup for {key!r} did not return its range")

    def insert(self, descs: Iterable[RangeDescriptor]) -> None:
        """Cache ``descs``, evicting every entry they overlap; one that overlaps an entry
        of a later generation is older than it and is left out. NB: lookups run outside
        the lock, so an older answer can arrive after a newer one; a split or merge
        raises the generation of every range it makes, so of two overlapping
        descriptors the one of the higher generation is the newer, as CockroachDB's
        range cache decides."""
        with self._lock:
            keep = self._entries[1]
            for desc in descs:
                if any(d.generation > desc.generation and d.span.overlaps(desc.span) for d in keep):
                    continue
                keep = [d for d in keep if not d.span.overlaps(desc.span)]
                keep.append(desc)
                keep.sort(key=lambda d: d.start)
            self._entries = ([d.start for d in keep], keep)

    def evict(self, desc: RangeDescriptor) -> None:
        with self._lock:
            starts, descs = self._entries
            if desc in descs:
                index = descs.index(desc)
                self._entries = (
                    starts[:index] + starts[index + 1 :],
                    descs[:index] + descs[index + 1 :],
                )

    def cached(self) -> list[RangeDescriptor]:
        return list(self._entries[1])
