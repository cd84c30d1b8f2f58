"""Tests for feedkv.kv.range_cache: the client's cache of range descriptors.

The node is a fake lookup that answers from a fixed list of descriptors and counts how
often it is asked.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

import pytest

from feedkv.kv.range_cache import RangeCache
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span


def desc(range_id: int, start: bytes, end: bytes, generation: int = 1) -> RangeDescriptor:
    return RangeDescriptor(range_id, Span(start, end), generation)


R1 = desc(1, KEY_MIN, b"d")
R2 = desc(2, b"d", b"m")
R3 = desc(3, b"m", b"t")
R4 = desc(4, b"t", KEY_MAX)
RANGES = [R1, R2, R3, R4]


class FakeNode:
    """Answers a lookup with the range holding the key and ``prefetch`` ranges after it."""

    def __init__(self, ranges: list[RangeDescriptor], prefetch: int = 0) -> None:
        self.ranges = ranges
        self.prefetch = prefetch
        self.asked: list[bytes] = []

    def lookup(self, key: bytes) -> Sequence[RangeDescriptor]:
        self.asked.append(key)
        index = next(i for i, d in enumerate(self.ranges) if d.contains_key(key))
        return self.ranges[index : index + 1 + self.prefetch]


def make_cache(prefetch: int = 0) -> tuple[RangeCache, FakeNode]:
    node = FakeNode(RANGES, prefetch)
    return RangeCache(node.lookup), node


# --- get ------------------------------------------------------------------------------


def test_a_miss_asks_the_node_and_returns_the_range_holding_the_key() -> None:
    cache, node = make_cache()

    assert cache.get(b"f") == R2
    assert node.asked == [b"f"]


def test_later_lookups_in_the_same_range_hit_the_cache() -> None:
    cache, node = make_cache()
    cache.get(b"f")

    assert cache.get(b"d") == R2
    assert cache.get(b"f") == R2
    assert cache.get(b"l\xff") == R2
    assert node.asked == [b"f"]


def test_a_key_at_a_cached_ranges_end_is_a_miss() -> None:
    cache, node = make_cache()
    cache.get(b"f")

    assert cache.get(b"m") == R3
    assert node.asked == [b"f", b"m"]


def test_a_key_in_a_gap_between_cached_ranges_is_a_miss() -> None:
    cache, node = make_cache()
    cache.get(b"a")
    cache.get(b"x")

    assert cache.get(b"f") == R2
    assert node.asked == [b"a", b"x", b"f"]


def test_the_first_and_last_ranges_cover_the_ends_of_the_keyspace() -> None:
    cache, node = make_cache()
    cache.get(b"a")
    cache.get(b"x")

    assert cache.get(KEY_MIN) == R1
    assert cache.get(b"\xff\xfe\xff") == R4
    assert len(node.asked) == 2


def test_prefetched_neighbours_are_cached() -> None:
    cache, node = make_cache(prefetch=2)

    assert cache.get(b"f") == R2
    assert cache.get(b"n") == R3
    assert cache.get(b"x") == R4
    assert node.asked == [b"f"]
    assert cache.cached() == [R2, R3, R4]


def test_a_lookup_that_misses_the_key_raises_lookup_error() -> None:
    cache = RangeCache(lambda key: [R3])

    with pytest.raises(LookupError, match="did not return its range"):
        cache.get(b"a")


def test_a_lookup_failure_propagates_and_caches_nothing() -> None:
    def unreachable(key: bytes) -> Sequence[RangeDescriptor]:
        raise ConnectionError("node down")

    cache = RangeCache(unreachable)

    with pytest.raises(ConnectionError):
        cache.get(b"a")
    assert cache.cached() == []


# --- insert ---------------------------------------------------------------------------


def test_inserted_descriptors_are_served_without_asking_the_node() -> None:
    cache, node = make_cache()

    cache.insert([R3, R1])

    assert cache.get(b"a") == R1
    assert cache.get(b"p") == R3
    assert node.asked == []
    assert cache.cached() == [R1, R3]


def test_inserting_the_halves_of_a_split_evicts_the_stale_parent() -> None:
    cache, _node = make_cache()
    parent = desc(2, b"d", b"t", generation=1)
    cache.insert([R1, parent, R4])

    left, right = desc(2, b"d", b"m", generation=2), desc(5, b"m", b"t", generation=2)
    cache.insert([left, right])

    assert cache.cached() == [R1, left, right, R4]
    assert cache.get(b"p") == right


def test_an_older_generation_arriving_late_does_not_replace_the_newer_ranges() -> None:
    # Two lookups raced: the one that read the parent before its split answers last.
    cache, _node = make_cache()
    left, right = desc(2, b"d", b"m", generation=2), desc(5, b"m", b"t", generation=2)
    cache.insert([R1, left, right, R4])

    cache.insert([desc(2, b"d", b"t", generation=1)])

    assert cache.cached() == [R1, left, right, R4]


def test_inserting_a_merged_range_evicts_every_range_it_covers() -> None:
    cache, _node = make_cache()
    cache.insert(RANGES)

    merged = desc(2, b"d", b"t", generation=2)
    cache.insert([merged])

    assert cache.cached() == [R1, merged, R4]
    assert cache.get(b"p") == merged


def test_inserting_a_range_that_only_touches_its_neighbours_keeps_them() -> None:
    cache, _node = make_cache()
    cache.insert([R1, R3])

    cache.insert([R2])

    assert cache.cached() == [R1, R2, R3]


def test_reinserting_a_cached_range_keeps_one_copy() -> None:
    cache, _node = make_cache()
    cache.insert([R2])

    cache.insert([R2])

    assert cache.cached() == [R2]


# --- evict ----------------------------------------------------------------------------


def test_an_evicted_range_is_looked_up_again() -> None:
    cache, node = make_cache()
    cache.get(b"f")

    cache.evict(R2)

    assert cache.cached() == []
    assert cache.get(b"f") == R2
    assert node.asked == [b"f", b"f"]


def test_evict_removes_only_the_given_range() -> None:
    cache, _node = make_cache()
    cache.insert(RANGES)

    cache.evict(R3)

    assert cache.cached() == [R1, R2, R4]
    assert cache.get(b"a") == R1
    assert cache.get(b"x") == R4


def test_evicting_an_uncached_or_older_generation_descriptor_changes_nothing() -> None:
    cache, _node = make_cache()
    cache.insert([R2])

    cache.evict(R3)
    cache.evict(desc(2, b"d", b"m", generation=0))

    assert cache.cached() == [R2]


def test_a_hit_without_the_lock_reads_one_version_of_the_entries() -> None:
    """Hits read the cache without its lock while another thread replaces its entries:
    each answer is a range holding the key, from the node's split or merged layout,
    found in the cache (both layouts cover every key, so a hit never needs the node),
    never a start key paired with another range's descriptor nor a torn read's
    IndexError. The interpreter switches threads every microsecond meanwhile, so
    readers do land between a writer's steps."""
    merged = desc(5, KEY_MIN, KEY_MAX, generation=2)
    node = FakeNode(RANGES)
    cache = RangeCache(node.lookup)
    cache.insert(RANGES)
    stop = threading.Event()
    wrong: list[object] = []

    def read() -> None:
        try:
            while not stop.is_set():
                for key in (b"a", b"f", b"p", b"x"):
                    found = cache.get(key)
                    if not found.contains_key(key):
                        wrong.append((key, found))
        except Exception as exc:  # NB: a thread's exception would only be a warning
            wrong.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    for reader in readers:
        reader.start()
    try:
        for round_ in range(2000):
            cache.insert([merged] if round_ % 2 else RANGES)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
        sys.setswitchinterval(switch)
    assert wrong == []
    assert cache.lookups == 0
    assert cache.get(b"f") in (R2, merged)
