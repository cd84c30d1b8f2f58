"""Range ids from the cluster's counter: the block logic, the allocator's prefetching and
errors, the counter's transaction, and a real store's splits taking ids from it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import InvariantViolation, NodeUnavailableError, RangeUnavailableError
from feedkv.kv.db import LocalTransport
from feedkv.kv.range_descriptor import local_range_id_floor, seed_range_ids
from feedkv.kv.range_id_alloc import (
    MAX_RANGE_ID,
    RANGE_IDS_KEY,
    UNSEEDED_FLOOR,
    IDBlocks,
    RangeIDAllocator,
    take_block,
)
from feedkv.kv.store import Store, StoreConfig
from feedkv.testing.waiting import run_threads, wait_until


class Counter:
    """An in-memory counter handing out blocks, recording which thread took each."""

    def __init__(self) -> None:
        self.last = 1
        self.threads: list[threading.Thread] = []
        self.reachable = threading.Event()
        self.reachable.set()
        self._lock = threading.Lock()

    def take(self, count: int) -> int:
        if not self.reachable.is_set():
            raise NodeUnavailableError("no quorum for the counter's range")
        with self._lock:
            self.threads.append(threading.current_thread())
            first, self.last = self.last + 1, self.last + count
            return first


def store_of(db: DB) -> Store:
    transport = db.transport
    assert isinstance(transport, LocalTransport)
    return transport.store


def counted(db: DB, floor: int = 2) -> Callable[[], int]:
    """The allocator a node would give its store, over ``db``'s own KV client."""
    return RangeIDAllocator(lambda count: take_block(db, count, floor)).allocate


def test_blocks_hand_out_their_ids_in_order_across_blocks() -> None:
    blocks = IDBlocks()
    assert blocks.take() is None
    blocks.add(2, 2)
    blocks.add(10, 3)
    assert blocks.left() == 5
    assert [blocks.take() for _ in range(6)] == [2, 3, 10, 11, 12, None]


@pytest.mark.parametrize(("first", "count"), [(5, 2), (3, 1), (8, 0), (MAX_RANGE_ID, 2)])
def test_blocks_refuse_a_block_not_above_the_last_or_past_the_max(first: int, count: int) -> None:
    blocks = IDBlocks()
    blocks.add(2, 4)  # ids 2..5
    with pytest.raises(InvariantViolation, match="range id block"):
        blocks.add(first, count)


def test_concurrent_allocations_get_distinct_ids_from_the_counters_blocks() -> None:
    counter = Counter()
    allocator = RangeIDAllocator(counter.take, block_size=10)
    got: list[int] = []
    lock = threading.Lock()

    def allocate() -> None:
        for _ in range(50):
            range_id = allocator.allocate()
            with lock:
                got.append(range_id)

    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 400
    assert len(set(got)) == 400
    assert max(got) <= counter.last


def test_the_next_block_is_fetched_ahead_on_the_allocators_thread() -> None:
    counter = Counter()
    allocator = RangeIDAllocator(counter.take, block_size=10, low_water=5)
    assert allocator.allocate() == 2  # the first block: fetched on this thread
    assert [allocator.allocate() for _ in range(4)] == [3, 4, 5, 6]  # 5 left: fetch ahead
    wait_until(lambda: len(counter.threads) == 2, what="the block fetched ahead")
    assert counter.threads[0] is threading.current_thread()
    assert counter.threads[1] is not threading.current_thread()
    assert [allocator.allocate() for _ in range(6)] == [7, 8, 9, 10, 11, 12]


def test_an_unreachable_counter_fails_the_allocation_retryably_with_no_local_id() -> None:
    counter = Counter()
    counter.reachable.clear()
    now = [0.0]
    allocator = RangeIDAllocator(counter.take, retry_after_s=5.0, clock=lambda: now[0])
    with pytest.raises(RangeUnavailableError, match="no quorum for the counter's range"):
        allocator.allocate()
    now[0] = 6.0
    counter.reachable.set()
    assert allocator.allocate() == 2


def test_after_a_failed_fetch_allocations_fail_at_once_until_the_retry_time() -> None:
    """A split queue with many ranges to split does not wait out the counter's range
    for each: the next fetch is tried only ``retry_after_s`` after the last failed."""
    counter = Counter()
    counter.reachable.clear()
    tries: list[int] = []
    now = [100.0]

    def take(count: int) -> int:
        tries.append(count)
        return counter.take(count)

    allocator = RangeIDAllocator(take, retry_after_s=5.0, clock=lambda: now[0])
    with pytest.raises(RangeUnavailableError, match="no quorum"):
        allocator.allocate()
    counter.reachable.set()
    now[0] = 104.0
    for _ in range(3):
        with pytest.raises(RangeUnavailableError, match="tried again 5 s after a failure"):
            allocator.allocate()
    assert len(tries) == 1
    now[0] = 105.5
    assert allocator.allocate() == 2
    assert len(tries) == 2


def test_the_counter_is_set_up_by_whoever_finds_it_missing_from_its_floor(db: DB) -> None:
    assert take_block(db, 10, 7) == 7
    assert take_block(db, 10, UNSEEDED_FLOOR) == 17
    assert take_block(db, 10, 1000) == 27  # NB: a floor only sets a missing counter up
    assert db.get(RANGE_IDS_KEY) == b"36"


def test_nodes_setting_the_missing_counter_up_at_once_get_one_counter(db: DB) -> None:
    """n1 (its floor) and other nodes (theirs) find it missing together: the
    serializable transaction lets one set it up, and the others count on from it."""
    floors = [7, UNSEEDED_FLOOR, UNSEEDED_FLOOR, 7]
    firsts: list[int] = []
    lock = threading.Lock()

    def take(floor: int) -> Callable[[], None]:
        def run() -> None:
            first = take_block(db, 10, floor)
            with lock:
                firsts.append(first)

        return run

    run_threads([take(floor) for floor in floors])
    firsts.sort()
    assert firsts[0] in (7, UNSEEDED_FLOOR)
    assert firsts == [firsts[0] + 10 * i for i in range(4)]
    assert db.get(RANGE_IDS_KEY) == str(firsts[0] + 39).encode()


def test_the_counter_refuses_ids_that_could_meet_old_node_ids(db: DB) -> None:
    db.put(RANGE_IDS_KEY, str(MAX_RANGE_ID - 5).encode())
    with pytest.raises(InvariantViolation, match="no more ranges can split"):
        take_block(db, 10, UNSEEDED_FLOOR)
    assert db.get(RANGE_IDS_KEY) == str(MAX_RANGE_ID - 5).encode()


def test_the_range_holding_the_counter_splits_at_it_and_around_it(db: DB, store: Store) -> None:
    """The split's id is taken through the very range that splits, before the split
    is queued for the commit thread: no deadlock, and small ids from the counter."""
    store.range_ids = counted(db)
    _, at = db.split(RANGE_IDS_KEY)
    _, below = db.split(b"\x00")
    _, above = db.split(RANGE_IDS_KEY + b"\x00")
    ids = sorted(d.range_id for d in store.descriptors())
    assert ids == [1, 2, 3, 4]
    assert {at.range_id, below.range_id, above.range_id} == {2, 3, 4}
    assert int(db.get(RANGE_IDS_KEY) or b"0") >= 4


def test_a_store_with_old_big_ids_takes_small_ones_from_the_counter_across_restarts(
    tmp_path: Path,
) -> None:
    """A node's store from before the counter (its own ids from ``node_id << 32``)
    gets small ids from the counter next to them, and again after a restart."""
    config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
    path = tmp_path / "store"
    with feedkv.connect(path, config=config) as db:
        store = store_of(db)
        store.engine.write(lambda rw: seed_range_ids(rw, 3))
        _, old = db.split(b"a")
        assert old.range_id == 3 << 32
        assert store.engine.read_now(local_range_id_floor) == 2
        store.range_ids = counted(db)
        _, new = db.split(b"b")
        assert new.range_id == 2
    with feedkv.connect(path, config=config) as db:
        store = store_of(db)
        store.range_ids = counted(db)
        _, after = db.split(b"c")
        ids = sorted(d.range_id for d in store.descriptors())
    assert 2 < after.range_id < 100
    assert ids == [1, 2, after.range_id, 3 << 32]


def test_a_split_the_counter_refuses_is_retried_by_the_split_queue(tmp_path: Path) -> None:
    config = StoreConfig(
        closed_ts_interval_s=0.01,
        push_poll_s=0.01,
        sync=False,
        range_max_bytes=20_000,
        range_min_bytes=1,
        range_check_interval_s=0.02,
    )
    counter = Counter()
    counter.reachable.clear()
    tried = threading.Event()

    def take(count: int) -> int:
        tried.set()
        return counter.take(count)

    with feedkv.connect(tmp_path / "store", config=config) as db:
        store = store_of(db)
        store.range_ids = RangeIDAllocator(take, retry_after_s=0.0).allocate
        for i in range(40):
            db.put(b"row/%03d" % i, b"x" * 1000)
        wait_until(tried.is_set, what="the split queue to ask for an id")
        assert len(store.descriptors()) == 1
        counter.reachable.set()
        wait_until(lambda: len(store.descriptors()) > 1, what="the split, retried")
        assert all(d.range_id < 100 for d in store.descriptors())
