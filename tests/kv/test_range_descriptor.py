"""Tests for feedkv.kv.range_descriptor against a real LMDB engine in ``tmp_path``."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedkv.errors import InvariantViolation, RangeKeyMismatchError
from feedkv.kv.range_descriptor import (
    LEGACY_NEXT_REPLICA_ID,
    META,
    RangeDescriptor,
    ReplicaDescriptor,
    all_descriptors,
    bootstrap,
    delete_descriptor,
    descriptor_by_id,
    descriptor_for_key,
    next_range_id,
    replica_tombstone,
    write_descriptor,
    write_replica_tombstone,
)
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

T = TypeVar("T")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def engine(store: Path) -> Iterator[LMDBEngine]:
    with LMDBEngine(store, databases=[META]) as opened:
        yield opened


def desc(range_id: int, start: bytes, end: bytes, generation: int = 0) -> RangeDescriptor:
    return RangeDescriptor(range_id, Span(start, end), generation)


def read(engine: LMDBEngine, fn: Callable[[Reader], T]) -> T:
    with engine.snapshot() as snap:
        return fn(snap)


def write_all(engine: LMDBEngine, *descs: RangeDescriptor) -> None:
    def fn(rw: ReadWriter) -> None:
        for d in descs:
            write_descriptor(rw, d)

    engine.write(fn)


def split_into(engine: LMDBEngine, *splits: bytes) -> list[RangeDescriptor]:
    """Bootstrap, then split r1 at each key in turn, as the split command does."""
    engine.write(bootstrap)
    for key in splits:

        def split(rw: ReadWriter, key: bytes = key) -> None:
            parent = descriptor_for_key(rw, key)
            gen = parent.generation + 1
            write_descriptor(rw, desc(parent.range_id, parent.start, key, gen))
            write_descriptor(rw, desc(next_range_id(rw), key, parent.end, gen))

        engine.write(split)
    return read(engine, all_descriptors)


# --- Encoding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "descriptor",
    [
        desc(1, KEY_MIN, KEY_MAX),
        desc(7, b"a", b"b", generation=3),
        desc(2, b"\x00", b"\x00\x00"),
        desc(3, b"\xff\x00\xff", KEY_MAX),
        desc(2**64 - 1, b"k" * 400, b"l", generation=2**64 - 1),
    ],
    ids=["whole keyspace", "plain", "zero bytes", "0xff bytes", "largest fields"],
)
def test_a_descriptor_round_trips_through_its_encoding(descriptor: RangeDescriptor) -> None:
    assert RangeDescriptor.decode(descriptor.encode()) == descriptor


@given(
    range_id=st.integers(0, 2**64 - 1),
    generation=st.integers(0, 2**64 - 1),
    bounds=st.lists(st.binary(max_size=12), min_size=2, max_size=2, unique=True),
)
def test_any_descriptor_round_trips_through_its_encoding(
    range_id: int, generation: int, bounds: list[bytes]
) -> None:
    start, end = sorted(bounds)
    descriptor = desc(range_id, start, end, generation)

    assert RangeDescriptor.decode(descriptor.encode()) == descriptor


def test_a_descriptor_holds_its_start_key_but_not_its_end_key() -> None:
    d = desc(1, b"b", b"d")

    assert d.contains_key(b"b")
    assert d.contains_key(b"c\xff")
    assert not d.contains_key(b"a")
    assert not d.contains_key(b"d")


# --- Bootstrap ------------------------------------------------------------------------


def test_bootstrap_creates_r1_over_the_whole_keyspace(engine: LMDBEngine) -> None:
    assert engine.write(bootstrap) is True

    assert read(engine, all_descriptors) == [desc(1, KEY_MIN, KEY_MAX)]
    assert read(engine, lambda r: descriptor_by_id(r, 1)) == desc(1, KEY_MIN, KEY_MAX)


def test_bootstrapping_twice_creates_r1_once(engine: LMDBEngine) -> None:
    engine.write(bootstrap)

    assert engine.write(bootstrap) is False
    assert read(engine, all_descriptors) == [desc(1, KEY_MIN, KEY_MAX)]


def test_bootstrap_leaves_a_split_keyspace_alone(engine: LMDBEngine) -> None:
    before = split_into(engine, b"m")

    assert engine.write(bootstrap) is False
    assert read(engine, all_descriptors) == before


def test_the_bootstrapped_range_survives_a_restart(store: Path) -> None:
    with LMDBEngine(store, databases=[META]) as first:
        first.write(bootstrap)

    with LMDBEngine(store, databases=[META]) as second:
        assert second.write(bootstrap) is False
        assert read(second, all_descriptors) == [desc(1, KEY_MIN, KEY_MAX)]


# --- Lookups --------------------------------------------------------------------------


def test_every_key_maps_to_r1_before_any_split(engine: LMDBEngine) -> None:
    engine.write(bootstrap)

    for key in [KEY_MIN, b"\x00", b"a", b"\xff\xfe\xff"]:
        assert read(engine, lambda r, key=key: descriptor_for_key(r, key)).range_id == 1


def test_descriptor_for_key_finds_the_range_holding_each_key_after_splits(
    engine: LMDBEngine,
) -> None:
    split_into(engine, b"m", b"d", b"t")
    # r1 [KEY_MIN, d), r3 [d, m), r2 [m, t), r4 [t, KEY_MAX)
    expected = {
        KEY_MIN: 1,
        b"a": 1,
        b"c\xff": 1,
        b"d": 3,
        b"d\x00": 3,
        b"l\xff\xff": 3,
        b"m": 2,
        b"s": 2,
        b"t": 4,
        b"\xff\xfe": 4,
    }

    found = {key: read(engine, lambda r, key=key: descriptor_for_key(r, key)) for key in expected}

    assert {key: d.range_id for key, d in found.items()} == expected
    assert all(d.contains_key(key) for key, d in found.items())


def test_a_split_bumps_the_generation_of_both_halves(engine: LMDBEngine) -> None:
    descs = split_into(engine, b"m")

    assert descs == [desc(1, KEY_MIN, b"m", 1), desc(2, b"m", KEY_MAX, 1)]


def test_a_merge_written_as_delete_and_rewrite_is_found_by_key(engine: LMDBEngine) -> None:
    left, right = split_into(engine, b"m")
    merged = desc(left.range_id, left.start, right.end, 2)

    def merge(rw: ReadWriter) -> None:
        delete_descriptor(rw, left)
        delete_descriptor(rw, right)
        write_descriptor(rw, merged)

    engine.write(merge)

    assert read(engine, lambda r: descriptor_for_key(r, b"x")) == merged
    assert read(engine, lambda r: descriptor_by_id(r, right.range_id)) is None
    assert read(engine, all_descriptors) == [merged]


def test_a_key_past_the_last_range_of_the_store_is_a_routing_error(engine: LMDBEngine) -> None:
    """A store of a cluster holds some ranges: the client must look elsewhere."""
    write_all(engine, desc(1, KEY_MIN, b"m"))

    with pytest.raises(RangeKeyMismatchError, match="no range of this node"):
        read(engine, lambda r: descriptor_for_key(r, b"x"))


def test_a_key_in_a_gap_between_ranges_is_a_routing_error(engine: LMDBEngine) -> None:
    write_all(engine, desc(1, KEY_MIN, b"d"), desc(2, b"m", KEY_MAX))

    with pytest.raises(RangeKeyMismatchError, match="no range of this node"):
        read(engine, lambda r: descriptor_for_key(r, b"f"))


def test_descriptor_by_id_of_an_unknown_range_is_none(engine: LMDBEngine) -> None:
    engine.write(bootstrap)

    assert read(engine, lambda r: descriptor_by_id(r, 2)) is None


def test_all_descriptors_lists_ranges_in_key_order_not_id_order(engine: LMDBEngine) -> None:
    descs = [
        desc(5, b"\xff", KEY_MAX),
        desc(1, KEY_MIN, b"\x00"),
        desc(3, b"b", b"\xff"),
        desc(9, b"\x00", b"b"),
    ]
    write_all(engine, *descs)

    assert read(engine, all_descriptors) == sorted(descs, key=lambda d: d.start)


# --- Range ids ------------------------------------------------------------------------


def test_next_range_id_hands_out_increasing_ids_starting_after_r1(engine: LMDBEngine) -> None:
    ids = [engine.write(next_range_id) for _ in range(3)]

    assert ids == [2, 3, 4]


def test_ids_handed_out_in_one_write_are_distinct(engine: LMDBEngine) -> None:
    assert engine.write(lambda rw: [next_range_id(rw) for _ in range(3)]) == [2, 3, 4]


def test_next_range_id_persists_across_a_restart(store: Path) -> None:
    with LMDBEngine(store, databases=[META]) as first:
        first.write(next_range_id)
        first.write(next_range_id)

    with LMDBEngine(store, databases=[META]) as second:
        assert second.write(next_range_id) == 4


def test_an_id_handed_out_by_a_failed_write_is_handed_out_again(engine: LMDBEngine) -> None:
    def fail_after_taking_an_id(rw: ReadWriter) -> None:
        next_range_id(rw)
        raise RuntimeError("the split failed")

    with pytest.raises(RuntimeError):
        engine.write(fail_after_taking_an_id)

    assert engine.write(next_range_id) == 2


def test_the_id_counter_does_not_look_like_a_range(engine: LMDBEngine) -> None:
    engine.write(bootstrap)
    engine.write(next_range_id)

    assert read(engine, all_descriptors) == [desc(1, KEY_MIN, KEY_MAX)]


def test_a_descriptor_keeps_its_replicas_through_encoding_and_splits(engine: LMDBEngine) -> None:
    placed = RangeDescriptor(7, Span(b"a", b"q"), 3, sticky=True, replicas=(3, 1, 2))

    assert RangeDescriptor.decode(placed.encode()) == placed
    assert placed.lease_holder == 3
    engine.write(lambda rw: bootstrap(rw, 4))
    assert read(engine, all_descriptors)[0].replicas == (4,)


def test_replicas_keep_their_ids_and_the_next_id_through_encoding() -> None:
    """Node 3's replica was removed and added back: it is replica 5 now, and the range
    hands out 7 next (6 was a learner on node 4)."""
    desc = RangeDescriptor(
        9,
        Span(b"a", b"m"),
        4,
        replicas=(2, 1, 3),
        ids=(
            ReplicaDescriptor(1, 1),
            ReplicaDescriptor(3, 5),
            ReplicaDescriptor(2, 2),
            ReplicaDescriptor(4, 6, learner=True),
        ),
        next_replica_id=7,
    )
    decoded = RangeDescriptor.decode(desc.encode())
    assert decoded == desc
    assert decoded.replicas == (2, 1, 3)  # node ids, the lease holder first
    assert decoded.lease_holder == 2
    assert [(r.node_id, r.replica_id, r.learner) for r in decoded.members] == [
        (2, 2, False),
        (1, 1, False),
        (3, 5, False),
        (4, 6, True),
    ]
    assert decoded.replica_of(3) == ReplicaDescriptor(3, 5)
    assert decoded.replica_of(4) == ReplicaDescriptor(4, 6, learner=True)
    assert decoded.replica_of(5) is None
    assert decoded.next_id == 7
    assert str(decoded) == "r9:[a, m) (gen 4, on n2/2,n1/1,n3/5,n4/6L)".replace(
        "[a, m)", str(Span(b"a", b"m"))
    )


def test_a_descriptor_without_ids_names_its_nodes_as_replica_ids() -> None:
    """As before replica ids: each voter's id is its node's, the next one above them."""
    desc = RangeDescriptor(3, Span(b"a", b"b"), 1, replicas=(2, 5))
    assert [(r.node_id, r.replica_id) for r in desc.members] == [(2, 2), (5, 5)]
    assert desc.next_id == 6
    assert RangeDescriptor.decode(desc.encode()) == desc
    # a next id above them stays
    later = RangeDescriptor(3, Span(b"a", b"b"), 1, replicas=(2, 5), next_replica_id=9)
    assert RangeDescriptor.decode(later.encode()).next_id == 9


def test_a_descriptor_written_in_the_old_encoding_still_reads() -> None:
    """The encoding before replica ids: no version byte, node ids only."""
    start, end = b"k", b"z"
    old = (
        struct.pack(">QQ?HB", 7, 2, True, len(start), 3)
        + b"".join(struct.pack(">I", n) for n in (3, 1, 2))
        + start
        + end
    )
    desc = RangeDescriptor.decode(old)
    assert desc.replicas == (3, 1, 2)
    assert desc.range_id == 7 and desc.span == Span(start, end)
    assert (desc.generation, desc.sticky) == (2, True)
    assert [r.replica_id for r in desc.members] == [3, 1, 2]
    assert desc.encode()[0] == 2  # written again, in the new encoding
    assert RangeDescriptor.decode(desc.encode()) == desc


def test_a_learner_an_old_descriptor_does_not_list_keeps_its_node_id_as_replica_id() -> None:
    """The old encoding lists the voters only (3 and 1 here); the Raft group also has
    a learner, 4, whose id is its node's, as every id then. The group's members give it
    back; a descriptor in the new encoding names every replica and guesses none."""
    old = struct.pack(">QQ?HB", 7, 2, False, 1, 2)
    old += b"".join(struct.pack(">I", n) for n in (3, 1)) + b"kz"
    desc = RangeDescriptor.decode(old)
    assert desc.replica_nodes((1, 3, 4)) == {3: 3, 1: 1, 4: 4}
    assert desc.replica_nodes() == {3: 3, 1: 1}
    new = RangeDescriptor.decode(desc.encode())
    assert new == desc and new.replica_nodes((1, 3, 4)) == {3: 3, 1: 1}


def test_the_first_replica_id_after_an_old_descriptor_is_above_every_node_id() -> None:
    """Before replica ids a replica's id was its node's, and a replica removed while its
    node was down (node 4 here: the descriptor no longer names it) may still be there: the
    first id given after decoding is above any node id, not one above the voters (4)."""
    old = struct.pack(">QQ?HB", 7, 2, False, 1, 3)
    old += b"".join(struct.pack(">I", n) for n in (3, 1, 2)) + b"kz"
    desc = RangeDescriptor.decode(old)
    assert desc.next_id == LEGACY_NEXT_REPLICA_ID
    assert LEGACY_NEXT_REPLICA_ID > 1 << 20  # far above the node ids of any old cluster
    # an old descriptor naming a node past the floor still gives an id above it
    huge = struct.pack(">QQ?HB", 7, 2, False, 1, 1)
    huge += struct.pack(">I", LEGACY_NEXT_REPLICA_ID + 5) + b"kz"
    assert RangeDescriptor.decode(huge).next_id == LEGACY_NEXT_REPLICA_ID + 6


def test_ids_that_disagree_with_the_voters_fail_loudly() -> None:
    desc = RangeDescriptor(1, Span(b"a", b"b"), 0, replicas=(1, 2), ids=(ReplicaDescriptor(1, 1),))
    with pytest.raises(InvariantViolation, match="voters"):
        desc.encode()


def test_a_replica_tombstone_only_rises(engine: LMDBEngine) -> None:
    assert read(engine, lambda r: replica_tombstone(r, 4)) == 0
    engine.write(lambda rw: write_replica_tombstone(rw, 4, 6))
    engine.write(lambda rw: write_replica_tombstone(rw, 4, 3))
    assert read(engine, lambda r: replica_tombstone(r, 4)) == 6
    assert read(engine, lambda r: replica_tombstone(r, 5)) == 0
