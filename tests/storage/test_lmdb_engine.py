"""Tests for feedkv.storage.lmdb_engine against a real LMDB store in ``tmp_path``.

Group-commit tests park the commit thread inside a first job (:func:`parked_commit_thread`)
so that everything submitted meanwhile is drained into exactly one group once released:
the grouping is then deterministic instead of depending on fsync timing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from feedkv.errors import InvariantViolation, StorageError, StoreLockedError
from feedkv.storage.engine import ReadWriter, WriteBatch
from feedkv.storage.lmdb_engine import ISOLATED_GROUPS, LMDBEngine
from feedkv.testing.waiting import wait_until

TIMEOUT = 10.0  # seconds; only reached when something is broken
DATABASES = ("a", "b")
SMALL_MAP = 256 << 10


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def engine(store: Path) -> Iterator[LMDBEngine]:
    with LMDBEngine(store, databases=DATABASES) as opened:
        yield opened


def put(db: str, key: bytes, value: bytes) -> Callable[[ReadWriter], None]:
    def fn(rw: ReadWriter) -> None:
        rw.put(db, key, value)

    return fn


def put_all(engine: LMDBEngine, db: str, items: dict[bytes, bytes]) -> None:
    def fn(rw: ReadWriter) -> None:
        for key, value in items.items():
            rw.put(db, key, value)

    engine.write(fn)


def read(engine: LMDBEngine, db: str, key: bytes) -> bytes | None:
    with engine.snapshot() as snap:
        return snap.get(db, key)


def read_all(engine: LMDBEngine, db: str) -> dict[bytes, bytes]:
    with engine.snapshot() as snap:
        return dict(snap.scan(db, b""))


@contextmanager
def parked_commit_thread(engine: LMDBEngine) -> Iterator[Future[None]]:
    """Hold the commit thread inside a job until the block exits.

    Jobs submitted inside the block queue up behind it and, on release, are committed
    together as the next group. NB: the parked job holds ``apply_lock``.
    """
    started = threading.Event()
    release = threading.Event()

    def park(rw: ReadWriter) -> None:
        started.set()
        if not release.wait(TIMEOUT):
            raise TimeoutError("the test never released the parked commit thread")

    parked = engine.submit(park)
    assert started.wait(TIMEOUT), "the commit thread never picked up the parking job"
    try:
        yield parked
    finally:
        release.set()
    parked.result(TIMEOUT)


# Reads and writes.


def test_get_returns_latest_value_and_none_for_missing_key(engine: LMDBEngine) -> None:
    engine.write(put("a", b"k", b"v1"))
    engine.write(put("a", b"k", b"v2"))

    with engine.snapshot() as snap:
        assert snap.get("a", b"k") == b"v2"
        assert snap.get("a", b"missing") is None


def test_write_returns_the_function_result(engine: LMDBEngine) -> None:
    assert engine.write(lambda rw: 42) == 42


def test_write_function_reads_its_own_writes(engine: LMDBEngine) -> None:
    engine.write(put("a", b"gone", b"x"))

    def fn(rw: ReadWriter) -> tuple[Any, ...]:
        rw.put("a", b"k1", b"v1")
        rw.put("a", b"k2", b"v2")
        existed = rw.delete("a", b"gone")
        missing = rw.delete("a", b"never")
        return (rw.get("a", b"k1"), rw.seek("a", b"k"), list(rw.scan("a", b"")), existed, missing)

    got, first, everything, existed, missing = engine.write(fn)

    assert got == b"v1"
    assert first == (b"k1", b"v1")
    assert everything == [(b"k1", b"v1"), (b"k2", b"v2")]
    assert (existed, missing) == (True, False)


def test_sub_databases_are_independent(engine: LMDBEngine) -> None:
    put_all(engine, "a", {b"k": b"in-a", b"only-a": b"1"})
    put_all(engine, "b", {b"k": b"in-b", b"only-b": b"2"})
    assert engine.write(lambda rw: rw.delete("a", b"k")) is True

    with engine.snapshot() as snap:
        assert snap.get("a", b"k") is None
        assert snap.get("b", b"k") == b"in-b"
        assert snap.get("a", b"only-b") is None
        assert list(snap.scan("a", b"")) == [(b"only-a", b"1")]
        assert list(snap.scan("b", b"")) == [(b"k", b"in-b"), (b"only-b", b"2")]
        assert snap.seek("a", b"") == (b"only-a", b"1")
        assert snap.seek_before("b", b"\xff") == (b"only-b", b"2")


def test_seek_finds_first_key_at_or_after_target(engine: LMDBEngine) -> None:
    put_all(engine, "a", {b"b": b"1", b"d": b"2"})

    with engine.snapshot() as snap:
        assert snap.seek("a", b"") == (b"b", b"1")
        assert snap.seek("a", b"b") == (b"b", b"1")
        assert snap.seek("a", b"c") == (b"d", b"2")
        assert snap.seek("a", b"d") == (b"d", b"2")
        assert snap.seek("a", b"e") is None
        assert snap.seek("b", b"") is None


def test_seek_before_finds_last_key_strictly_before_target(engine: LMDBEngine) -> None:
    put_all(engine, "a", {b"b": b"1", b"d": b"2"})

    with engine.snapshot() as snap:
        assert snap.seek_before("a", b"b") is None
        assert snap.seek_before("a", b"c") == (b"b", b"1")
        assert snap.seek_before("a", b"d") == (b"b", b"1")
        assert snap.seek_before("a", b"d\x00") == (b"d", b"2")
        assert snap.seek_before("a", b"\xff") == (b"d", b"2")
        assert snap.seek_before("b", b"\xff") is None
        # NB: the snapshot caches one cursor per database; interleaving must not confuse it.
        assert snap.seek("a", b"c") == (b"d", b"2")
        assert snap.seek_before("a", b"c") == (b"b", b"1")


SCAN_KEYS = [b"b", b"d", b"d\x00", b"f"]


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (b"", None),
        (b"", b"\xff"),
        (b"b", b"f"),  # end is exclusive even when it is a key
        (b"c", b"e"),  # bounds between keys
        (b"d", b"d\x00"),  # exactly one key
        (b"d", b"d"),  # empty range
        (b"e", b"c"),  # inverted range
        (b"c", None),
        (b"g", None),  # start past the last key
        (b"", b"b"),  # end at the first key
    ],
)
def test_scan_yields_half_open_range_in_both_directions(
    engine: LMDBEngine, start: bytes, end: bytes | None
) -> None:
    put_all(engine, "a", {key: key.upper() for key in SCAN_KEYS})
    put_all(engine, "b", {b"c": b"other database"})
    expected = [
        (key, key.upper()) for key in SCAN_KEYS if start <= key and (end is None or key < end)
    ]

    with engine.snapshot() as snap:
        assert list(snap.scan("a", start, end)) == expected
        assert list(snap.scan("a", start, end, reverse=True)) == expected[::-1]
        assert snap.count("a", start, end, 100) == len(expected)
        assert snap.count("a", start, end, 1) == min(1, len(expected))
    in_place = engine.read_now(
        lambda rw: (list(rw.scan("a", start, end, reverse=True)), rw.count("a", start, end, 100))
    )
    assert in_place == (expected[::-1], len(expected))


def test_counts_stop_at_the_limit_or_the_end_across_chunks_and_entries_count_all(
    engine: LMDBEngine,
) -> None:
    put_all(engine, "a", {b"k%05d" % i: b"" for i in range(10_000)})
    with engine.snapshot() as snap:
        assert snap.entries("a") == 10_000
        assert snap.entries("b") == 0
        assert snap.count("a", b"", None, 10**6) == 10_000
        assert snap.count("a", b"", None, 9_000) == 9_000
        assert snap.count("a", b"k01000", b"k09500", 10**6) == 8_500
        assert snap.count("a", b"k01000", b"k09500", 8_499) == 8_499
        assert snap.count("a", b"", b"k05000", 0) == 0


def test_scan_of_empty_database_yields_nothing(engine: LMDBEngine) -> None:
    with engine.snapshot() as snap:
        assert list(snap.scan("a", b"")) == []
        assert list(snap.scan("a", b"", b"z", reverse=True)) == []
        assert list(snap.scan("a", b"", None, reverse=True)) == []


# Snapshots.


def test_snapshot_opened_before_a_write_does_not_see_it(engine: LMDBEngine) -> None:
    engine.write(put("a", b"k", b"old"))

    with engine.snapshot() as before:
        engine.write(put("a", b"k", b"new"))
        engine.write(put("a", b"k2", b"added"))
        with engine.snapshot() as after:
            assert before.get("a", b"k") == b"old"
            assert list(before.scan("a", b"")) == [(b"k", b"old")]
            assert after.get("a", b"k") == b"new"
            assert list(after.scan("a", b"")) == [(b"k", b"new"), (b"k2", b"added")]


def test_snapshot_close_is_idempotent(engine: LMDBEngine) -> None:
    snap = engine.snapshot()
    snap.close()
    snap.close()

    assert engine.write(lambda rw: "still writable") == "still writable"


# Group commit.


def increment(rw: ReadWriter) -> int:
    count = int(rw.get("a", b"counter") or b"0") + 1
    rw.put("a", b"counter", str(count).encode())
    return count


def test_jobs_queued_together_commit_as_one_group_in_submit_order(engine: LMDBEngine) -> None:
    threads, per_thread = 8, 25
    futures: list[list[Future[int]]] = [[] for _ in range(threads)]

    def submitter(index: int) -> None:
        for _ in range(per_thread):
            futures[index].append(engine.submit(increment))

    groups_before, jobs_before = engine.stats.groups, engine.stats.jobs
    with parked_commit_thread(engine):
        workers = [threading.Thread(target=submitter, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(TIMEOUT)
        assert not any(f.done() for fs in futures for f in fs)

    results = [[f.result(TIMEOUT) for f in fs] for fs in futures]
    # Each job saw every job before it in the group; one submitter's jobs keep their order.
    for per_submitter in results:
        assert per_submitter == sorted(per_submitter)
    assert sorted(r for rs in results for r in rs) == list(range(1, threads * per_thread + 1))
    assert read(engine, "a", b"counter") == str(threads * per_thread).encode()
    assert engine.stats.groups - groups_before == 2  # the parking job, then everyone else
    assert engine.stats.jobs - jobs_before == threads * per_thread + 1


def test_concurrent_writers_all_complete_with_distinct_results(engine: LMDBEngine) -> None:
    threads, per_thread = 8, 20
    results: list[list[int]] = [[] for _ in range(threads)]

    def writer(index: int) -> None:
        for _ in range(per_thread):
            results[index].append(engine.write(increment))

    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT)

    assert not any(worker.is_alive() for worker in workers)
    assert sorted(r for rs in results for r in rs) == list(range(1, threads * per_thread + 1))
    assert engine.stats.jobs == threads * per_thread
    assert 1 <= engine.stats.groups <= engine.stats.jobs


def test_failing_job_leaves_no_writes_and_spares_its_group(engine: LMDBEngine) -> None:
    applied: list[str] = []

    def failing(rw: ReadWriter) -> None:
        rw.put("a", b"bad", b"x")
        rw.put("b", b"bad", b"x")
        raise ValueError("job failed on purpose")

    def after(rw: ReadWriter) -> bytes | None:
        rw.put("a", b"after", b"3")
        return rw.get("a", b"bad")

    groups_before = engine.stats.groups
    with parked_commit_thread(engine):
        before_f = engine.submit(put("a", b"before", b"1"), lambda _: applied.append("before"))
        failing_f = engine.submit(failing, lambda _: applied.append("failing"))
        after_f = engine.submit(after, lambda _: applied.append("after"))

    with pytest.raises(ValueError, match="on purpose"):
        failing_f.result(TIMEOUT)
    assert before_f.result(TIMEOUT) is None
    assert after_f.result(TIMEOUT) is None  # the failed job's write was invisible to it
    assert engine.stats.groups - groups_before == 2
    assert read_all(engine, "a") == {b"before": b"1", b"after": b"3"}
    assert read_all(engine, "b") == {}
    assert applied == ["before", "after"]


def test_jobs_run_again_after_a_failure_in_their_group_write_once(engine: LMDBEngine) -> None:
    def failing(rw: ReadWriter) -> None:
        increment(rw)
        raise ValueError("job failed on purpose")

    with parked_commit_thread(engine):
        first = [engine.submit(increment) for _ in range(3)]
        failed = engine.submit(failing)
        then = [engine.submit(increment) for _ in range(2)]
    with parked_commit_thread(engine):  # a group after the failure
        last = engine.submit(increment)

    assert [f.result(TIMEOUT) for f in (*first, *then, last)] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="on purpose"):
        failed.result(TIMEOUT)
    assert read(engine, "a", b"counter") == b"6"


def test_groups_after_a_failure_nest_each_job_and_are_not_run_again(engine: LMDBEngine) -> None:
    def failing(rw: ReadWriter) -> None:
        increment(rw)
        raise ValueError("job failed on purpose")

    def round_with_a_failure() -> None:
        """Two groups: the parking job's, then three jobs of which one fails."""
        with parked_commit_thread(engine):
            futures = [engine.submit(increment), engine.submit(failing), engine.submit(increment)]
        for future in futures:
            future.exception(TIMEOUT)

    round_with_a_failure()
    assert engine.stats.reruns == 1
    for _ in range(ISOLATED_GROUPS // 2):
        round_with_a_failure()
    assert engine.stats.reruns == 1  # those groups nested each job from the start
    round_with_a_failure()
    assert engine.stats.reruns == 2
    assert read(engine, "a", b"counter") == str(2 * (ISOLATED_GROUPS // 2 + 2)).encode()


def test_lmdb_error_in_a_job_becomes_storage_error_and_leaves_no_writes(
    engine: LMDBEngine,
) -> None:
    def bad_key(rw: ReadWriter) -> None:
        rw.put("a", b"partial", b"x")
        rw.put("a", b"", b"LMDB rejects empty keys")

    with parked_commit_thread(engine):
        failing = engine.submit(bad_key)
        fine = engine.submit(put("a", b"fine", b"1"))

    with pytest.raises(StorageError, match="write failed"):
        failing.result(TIMEOUT)
    fine.result(TIMEOUT)
    assert read_all(engine, "a") == {b"fine": b"1"}


# on_applied and apply_lock.


def test_on_applied_runs_in_submit_order_after_commit_before_future(engine: LMDBEngine) -> None:
    count = 20
    futures: list[Future[int]] = []
    seen: list[tuple[int, bytes | None, bool, str]] = []

    def job(i: int) -> Callable[[ReadWriter], int]:
        def fn(rw: ReadWriter) -> int:
            rw.put("a", b"%03d" % i, b"v")
            return i

        return fn

    def on_applied(i: int) -> None:
        # A fresh snapshot (a new read transaction) only sees committed data.
        seen.append((i, read(engine, "a", b"%03d" % i), futures[i].done(), current_thread()))

    with parked_commit_thread(engine):
        for i in range(count):
            futures.append(engine.submit(job(i), on_applied))

    assert [f.result(TIMEOUT) for f in futures] == list(range(count))
    assert seen == [(i, b"v", False, "feedkv-commit") for i in range(count)]


def test_a_group_completes_once_durable_and_before_the_next_group_commits(
    engine: LMDBEngine,
) -> None:
    first: list[Future[None]] = []
    seen: list[tuple[bool, bool]] = []  # (first group done, second group done) per on_applied

    def second_applied(_: object) -> None:
        seen.append((all(f.done() for f in first), second.done()))

    with parked_commit_thread(engine):
        first.extend(engine.submit(put("a", b"%d" % i, b"1")) for i in range(3))
    second = engine.submit(put("a", b"second", b"2"), second_applied)

    second.result(TIMEOUT)
    assert [f.result(TIMEOUT) for f in first] == [None] * 3
    assert seen == [(True, False)]


def test_a_failing_done_callback_spares_the_other_callers_and_the_engine(
    engine: LMDBEngine,
) -> None:
    completed_on: list[str] = []

    def failing() -> None:
        completed_on.append(current_thread())
        raise RuntimeError("a done callback that fails")

    with parked_commit_thread(engine):
        first = engine.submit(put("a", b"first", b"1"))
        second = engine.submit(put("a", b"second", b"2"))
        first.add_done_callback(failing)
        second.add_done_callback(lambda: completed_on.append(current_thread()))

    assert second.result(TIMEOUT) is None
    assert first.result(TIMEOUT) is None
    wait_until(lambda: len(completed_on) == 2)  # NB: a callback runs after its result is out
    assert completed_on == ["feedkv-commit", "feedkv-commit"]
    assert engine.write(lambda rw: rw.get("a", b"second")) == b"2"  # the engine goes on


def test_a_busy_queue_does_not_hold_back_completions(engine: LMDBEngine) -> None:
    # Each job queues the next, so the queue is never empty while the chain runs.
    chain: list[Future[int]] = []
    first_done_at: list[int] = []

    def link(i: int) -> Callable[[ReadWriter], int]:
        def fn(rw: ReadWriter) -> int:
            if chain[0].done() and not first_done_at:
                first_done_at.append(i)
            if i < 50:
                chain.append(engine.submit(link(i + 1)))
            return i

        return fn

    with parked_commit_thread(engine):  # NB: link 0 reads chain[0]
        chain.append(engine.submit(link(0)))
    while len(chain) < 51:
        chain[-1].result(TIMEOUT)
    assert [f.result(TIMEOUT) for f in chain] == list(range(51))
    assert first_done_at and first_done_at[0] <= 3


def test_reads_queued_behind_a_write_do_not_hold_back_its_completion(
    engine: LMDBEngine,
) -> None:
    seen: list[bool] = []

    def queue_a_read(_: object) -> None:  # the queue is not empty when the group ends
        engine.submit(lambda rw: seen.append(write.done()), read_only=True)

    write = engine.submit(put("a", b"k", b"v"), queue_a_read)
    write.result(TIMEOUT)
    wait_until(lambda: bool(seen))
    assert seen == [True]


def current_thread() -> str:
    return threading.current_thread().name


def test_on_applied_runs_while_apply_lock_is_held(engine: LMDBEngine) -> None:
    in_callback = threading.Event()
    leave_callback = threading.Event()

    def on_applied(_: None) -> None:
        in_callback.set()
        leave_callback.wait(TIMEOUT)

    future = engine.submit(put("a", b"k", b"v"), on_applied)
    assert in_callback.wait(TIMEOUT)
    try:
        assert not engine.apply_lock.acquire(blocking=False)
        assert read(engine, "a", b"k") == b"v"  # already committed, callback still running
        assert not future.done()
    finally:
        leave_callback.set()
    future.result(TIMEOUT)

    with engine.apply_lock:
        assert read(engine, "a", b"k") == b"v"


def test_snapshot_under_apply_lock_sees_exactly_the_applied_writes(engine: LMDBEngine) -> None:
    count = 300
    applied: list[bytes] = []
    futures: list[Future[bytes]] = []

    def job(key: bytes) -> Callable[[ReadWriter], bytes]:
        def fn(rw: ReadWriter) -> bytes:
            rw.put("a", key, b"v")
            return key

        return fn

    def submitter() -> None:
        for i in range(count):
            futures.append(engine.submit(job(b"%04d" % i), applied.append))

    worker = threading.Thread(target=submitter)
    worker.start()
    checks = 0
    while checks == 0 or worker.is_alive() or not all(f.done() for f in list(futures)):
        with engine.apply_lock, engine.snapshot() as snap:
            assert [key for key, _ in snap.scan("a", b"")] == sorted(applied)
            assert len(set(applied)) == len(applied)
        checks += 1
    worker.join(TIMEOUT)

    for future in futures:
        future.result(TIMEOUT)
    with engine.apply_lock, engine.snapshot() as snap:
        assert [key for key, _ in snap.scan("a", b"")] == applied == sorted(applied)
    assert len(applied) == count


# Map growth.


def test_map_grows_to_fit_data_beyond_initial_size(store: Path) -> None:
    value = bytes(range(256)) * 16  # 4 KiB
    jobs, per_job = 64, 16  # 4 MiB in all

    def job(j: int) -> Callable[[ReadWriter], int]:
        def fn(rw: ReadWriter) -> int:
            for i in range(per_job):
                rw.put("a", b"%03d-%02d" % (j, i), value)
            return j

        return fn

    with LMDBEngine(store, databases=DATABASES, map_size=SMALL_MAP) as engine:
        futures = [engine.submit(job(j)) for j in range(jobs)]
        assert [f.result(TIMEOUT) for f in futures] == list(range(jobs))

        assert engine.stats.map_growths > 0
        assert engine.map_size > SMALL_MAP
        with engine.snapshot() as snap:
            rows = list(snap.scan("a", b""))
        assert len(rows) == jobs * per_job
        assert all(v == value for _, v in rows)


def test_group_retried_after_map_growth_applies_each_job_once(store: Path) -> None:
    value = b"x" * (64 << 10)
    jobs = 20  # 1.25 MiB in one group, several times the initial map
    applied: list[int] = []

    def job(j: int) -> Callable[[ReadWriter], int]:
        def fn(rw: ReadWriter) -> int:
            rw.put("a", b"%02d" % j, value)
            return j

        return fn

    with LMDBEngine(store, databases=DATABASES, map_size=SMALL_MAP) as engine:
        with parked_commit_thread(engine):
            futures = [engine.submit(job(j), applied.append) for j in range(jobs)]

        assert [f.result(TIMEOUT) for f in futures] == list(range(jobs))
        assert engine.stats.map_growths > 0
        assert applied == list(range(jobs))
        assert engine.stats.jobs == jobs + 1
        assert len(read_all(engine, "a")) == jobs


def test_map_growth_waits_for_open_snapshots(store: Path) -> None:
    with LMDBEngine(store, databases=DATABASES, map_size=SMALL_MAP) as engine:
        engine.write(put("a", b"small", b"1"))
        snap = engine.snapshot()
        try:
            big = engine.submit(put("a", b"big", b"x" * (1 << 20)))
            # NB: a bounded wait for something that must not happen; unbounded it would hang.
            with pytest.raises(TimeoutError):
                big.result(timeout=0.2)
            assert engine.stats.map_growths == 0
            assert snap.get("a", b"small") == b"1"  # still readable: nothing was remapped
        finally:
            snap.close()

        big.result(TIMEOUT)
        assert engine.stats.map_growths > 0
        assert read(engine, "a", b"big") == b"x" * (1 << 20)


# The store lock, reopening and closing.


def test_second_open_of_a_store_fails_naming_the_owner(store: Path) -> None:
    with LMDBEngine(store, databases=DATABASES) as first:
        first.write(put("a", b"k", b"v"))

        with pytest.raises(StoreLockedError, match=rf"process {os.getpid()}\b"):
            LMDBEngine(store, databases=DATABASES)

        assert first.write(lambda rw: rw.get("a", b"k")) == b"v"  # the owner is unaffected

    with LMDBEngine(store, databases=DATABASES) as second:
        assert read(second, "a", b"k") == b"v"


def test_close_is_idempotent(store: Path) -> None:
    engine = LMDBEngine(store, databases=DATABASES)
    engine.write(put("a", b"k", b"v"))
    engine.close()
    engine.close()

    with LMDBEngine(store, databases=DATABASES) as reopened:
        assert read(reopened, "a", b"k") == b"v"


def test_close_commits_jobs_still_queued(store: Path) -> None:
    engine = LMDBEngine(store, databases=DATABASES)
    with parked_commit_thread(engine):
        futures = [engine.submit(put("a", b"%02d" % i, b"v")) for i in range(10)]
        closer = threading.Thread(target=engine.close)
        closer.start()
        closer.join(0.05)
        assert closer.is_alive(), "close returned while a group was still running"
    closer.join(TIMEOUT)

    assert not closer.is_alive()
    assert all(f.done() and f.exception() is None for f in futures)
    with LMDBEngine(store, databases=DATABASES) as reopened:
        assert sorted(read_all(reopened, "a")) == [b"%02d" % i for i in range(10)]


def test_every_job_accepted_while_closing_completes(store: Path) -> None:
    engine = LMDBEngine(store, databases=DATABASES)
    accepted: list[Future[None]] = []
    refused = threading.Event()
    start = threading.Barrier(5)

    def submitter(n: int) -> None:
        start.wait()
        for i in range(10_000):
            try:
                accepted.append(engine.submit(put("a", b"%d-%05d" % (n, i), b"v")))
            except StorageError:
                refused.set()
                return

    threads = [threading.Thread(target=submitter, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    engine.close()
    for thread in threads:
        thread.join(TIMEOUT)

    assert refused.is_set()
    assert all(f.exception(TIMEOUT) is None for f in accepted)


def test_submit_and_snapshot_after_close_raise_storage_error(store: Path) -> None:
    engine = LMDBEngine(store, databases=DATABASES)
    engine.close()

    with pytest.raises(StorageError, match="closed"):
        engine.submit(put("a", b"k", b"v"))
    with pytest.raises(StorageError, match="closed"):
        engine.write(put("a", b"k", b"v"))
    with pytest.raises(StorageError, match="closed"):
        engine.snapshot()


# Re-entrancy from the commit thread.


@pytest.mark.timeout(30)  # a regression here deadlocks close()
def test_write_from_a_job_raises_invariant_violation(engine: LMDBEngine) -> None:
    def nested(rw: ReadWriter) -> None:
        rw.put("a", b"outer", b"x")
        engine.write(put("a", b"inner", b"x"))

    future = engine.submit(nested)

    with pytest.raises(InvariantViolation, match="deadlock"):
        future.result(TIMEOUT)
    assert read_all(engine, "a") == {}


@pytest.mark.timeout(30)  # a regression here deadlocks close()
def test_write_from_on_applied_raises_invariant_violation(engine: LMDBEngine) -> None:
    def on_applied(_: None) -> None:
        engine.write(put("a", b"inner", b"x"))

    future = engine.submit(put("a", b"outer", b"x"), on_applied)

    error = future.exception(TIMEOUT)
    assert isinstance(error, InvariantViolation)
    assert "after a durable commit" in str(error)
    assert isinstance(error.__cause__, InvariantViolation)
    assert "deadlock" in str(error.__cause__)
    # The job itself was already durable when its callback failed.
    assert read_all(engine, "a") == {b"outer": b"x"}
    assert engine.write(lambda rw: "commit thread still alive") == "commit thread still alive"


# WriteBatch.


def test_write_batch_applies_puts_and_deletes_atomically(engine: LMDBEngine) -> None:
    put_all(engine, "a", {b"stale": b"0", b"keep": b"1"})
    batch = WriteBatch()
    batch.put("a", b"new", b"2")
    batch.delete("a", b"stale")
    batch.put("b", b"other", b"3")
    batch.put("a", b"new", b"4")  # later ops win
    batch.delete("a", b"absent")  # deleting a missing key is not an error
    assert len(batch) == 5

    with engine.snapshot() as before:
        engine.write(batch.apply)
        assert dict(before.scan("a", b"")) == {b"stale": b"0", b"keep": b"1"}
        assert before.get("b", b"other") is None

    assert read_all(engine, "a") == {b"keep": b"1", b"new": b"4"}
    assert read_all(engine, "b") == {b"other": b"3"}


def test_write_batch_with_a_failing_put_applies_nothing(engine: LMDBEngine) -> None:
    engine.write(put("a", b"stale", b"0"))
    batch = WriteBatch()
    batch.put("a", b"new", b"1")
    batch.delete("a", b"stale")
    batch.put("a", b"k" * 1024, b"key longer than LMDB allows")

    with pytest.raises(StorageError):
        engine.write(batch.apply)
    assert read_all(engine, "a") == {b"stale": b"0"}


def test_an_appending_bulk_write_past_the_last_key_lands_and_one_before_it_fails_whole(
    engine: LMDBEngine,
) -> None:
    engine.write(lambda rw: rw.put_many("a", [(b"b", b"1"), (b"c", b"2")]))
    engine.write(lambda rw: rw.put_many("a", [(b"d", b"3"), (b"e", b"4")], append=True))
    with pytest.raises(InvariantViolation, match="not past its last"):
        engine.write(lambda rw: rw.put_many("a", [(b"a", b"5"), (b"f", b"6")], append=True))
    with engine.snapshot() as snap:
        assert list(snap.scan("a", b"")) == [
            (b"b", b"1"),
            (b"c", b"2"),
            (b"d", b"3"),
            (b"e", b"4"),
        ]
