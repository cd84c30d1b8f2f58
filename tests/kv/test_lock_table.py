"""The lock table alone, then locking reads through a real store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import LockNotAvailableError, TransactionRetryError
from feedkv.kv.api import MAX_PRIORITY
from feedkv.kv.lock_table import LockConflictError, LockTable
from feedkv.kv.store import StoreConfig
from feedkv.storage.intent import TxnMeta
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

A, B, C = b"a" * 16, b"b" * 16, b"c" * 16


def meta(txn_id: bytes) -> TxnMeta:
    return TxnMeta(txn_id, b"anchor", 0, Timestamp(1, 0))


def test_a_held_key_refuses_others_and_lets_its_holder_in() -> None:
    locks = LockTable()
    assert not locks
    locks.acquire([b"k"], meta(A))
    locks.check(b"k", A)
    with pytest.raises(LockConflictError) as caught:
        locks.check(b"k", B)
    assert caught.value.holder == A
    with pytest.raises(LockConflictError):
        locks.check(b"k", None)  # a batch outside a transaction waits too
    with pytest.raises(LockConflictError):
        locks.acquire([b"j", b"k"], meta(B))
    assert locks.holder(b"j") is None  # all or none


def test_release_keeps_the_key_for_the_first_waiter() -> None:
    locks = LockTable()
    locks.acquire([b"k"], meta(A))
    locks.enqueue(b"k", B)
    locks.enqueue(b"k", C)
    assert locks.waiters() == 2
    seen = locks.generation
    assert locks.release(A) == 1
    assert locks.generation > seen
    assert locks.blocker(b"k", C) == B  # kept for B, who came first
    assert locks.blocker(b"k", B) is None
    locks.check(b"k", None)  # a batch outside a transaction holds nothing: it may go
    locks.acquire([b"k"], meta(B))
    assert locks.holder(b"k") == B
    assert locks.waiters() == 1
    locks.dequeue(b"k", C)
    locks.release(B)
    assert len(locks) == 0


def test_a_waiter_that_leaves_frees_the_key_it_was_kept_for() -> None:
    locks = LockTable()
    locks.acquire([b"k"], meta(A))
    locks.enqueue(b"k", B)
    locks.release(A)
    locks.dequeue(b"k", B)
    assert len(locks) == 0
    locks.check(b"k", C)


def test_release_in_a_span_keeps_the_other_locks() -> None:
    locks = LockTable()
    locks.acquire([b"a", b"m", b"z"], meta(A))
    assert locks.release(A, Span(b"l", b"n")) == 1
    assert [locks.holder(k) for k in (b"a", b"m", b"z")] == [A, None, A]
    assert locks.release(A) == 2
    assert locks.release(A) == 0
    assert len(locks) == 0


def test_check_span_finds_a_locked_key_inside() -> None:
    locks = LockTable()
    locks.acquire([b"m"], meta(A))
    locks.check_span(Span(b"a", b"l"), B)
    with pytest.raises(LockConflictError):
        locks.check_span(Span(b"a", b"n"), B)


def test_clear_forgets_a_span_and_wakes_its_waiters() -> None:
    locks = LockTable()
    locks.acquire([b"a", b"m"], meta(A))
    locks.enqueue(b"m", B)
    seen = locks.generation
    assert locks.clear(Span(b"l", b"n")) == 1  # the range holding m left this store
    assert locks.generation > seen
    locks.check(b"m", C)
    assert locks.waiters() == 0
    assert locks.holder(b"a") == A
    assert locks.release(A) == 1
    assert len(locks) == 0


@pytest.fixture
def db(tmp_path: Path) -> Iterator[feedkv.DB]:
    database = feedkv.connect(tmp_path / "store", config=StoreConfig(sync=False, push_poll_s=0.01))
    yield database
    database.close()


def _locks(db: feedkv.DB) -> LockTable:
    assert db.node is not None
    return db.node.store.locks


def test_locking_scan_makes_a_second_writer_wait_then_see_the_first(db: feedkv.DB) -> None:
    db.put(b"row", b"0")
    first = db.transaction()
    assert [kv.value for kv in first.scan(b"row", b"rox", lock=True)] == [b"0"]
    assert _locks(db).holder(b"row") == first.id
    second = db.transaction()
    second.get(b"other")  # its read timestamp is below the first's commit
    done = threading.Event()
    read: list[bytes] = []

    def lock_second() -> None:
        read.extend(kv.value for kv in second.scan(b"row", b"rox", lock=True))
        second.put(b"row", read[0] + b"+2")
        second.commit()
        done.set()

    waiter = threading.Thread(target=lock_second)
    waiter.start()
    try:
        wait_until(lambda: _locks(db).waiters() == 1, what="the second to queue")
        assert not done.is_set()
        first.put(b"row", b"1")
        first.commit()
    finally:
        waiter.join(timeout=60)
    assert done.is_set()
    assert read == [b"1"]  # refreshed above the first's commit and read again
    assert db.get(b"row") == b"1+2"
    assert len(_locks(db)) == 0


def test_locking_scan_refreshes_other_reads_or_fails(db: feedkv.DB) -> None:
    db.put(b"row", b"0")
    db.put(b"seen", b"0")
    txn = db.transaction()
    txn.get(b"seen")
    db.put(b"seen", b"1")  # what txn read changes, then the row it locks
    db.put(b"row", b"1")  # the locking read must move up to it: the refresh fails
    with pytest.raises(TransactionRetryError) as caught:
        txn.scan(b"row", b"rox", lock=True)
    assert str(caught.value) == (  # worded as CockroachDB's
        "TransactionRetryError: retry txn (RETRY_SERIALIZABLE - failed preemptive refresh due "
        "to a conflict: committed value on key b'seen')"
    )
    txn.rollback()
    assert len(_locks(db)) == 0


def test_rollback_lets_go_of_the_locks(db: feedkv.DB) -> None:
    db.put(b"row", b"0")
    txn = db.transaction()
    txn.scan(b"row", b"rox", lock=True)
    assert len(_locks(db)) == 1
    txn.rollback()
    assert len(_locks(db)) == 0
    db.put(b"row", b"1")  # nothing holds it: a plain write goes through
    assert db.get(b"row") == b"1"


@pytest.mark.parametrize("commit", [True, False])
def test_a_locking_scan_from_the_empty_key_lets_go_of_its_locks(
    db: feedkv.DB, commit: bool
) -> None:
    """A scan of everything (from b"") anchors its record at the first key there is, so
    its commit or rollback lets go of its locks and a later locking read goes on."""
    db.put(b"row", b"0")
    txn = db.transaction()
    assert [kv.key for kv in txn.scan(b"", b"z", lock=True)] == [b"row"]
    assert _locks(db).holder(b"row") == txn.id
    if commit:
        txn.commit()
    else:
        txn.rollback()
    assert len(_locks(db)) == 0
    other = db.transaction()
    assert [kv.value for kv in other.scan(b"row", b"rox", lock=True, nowait=True)] == [b"0"]
    other.rollback()


def test_nowait_locking_scan_fails_at_once_on_a_held_key(db: feedkv.DB) -> None:
    db.put(b"row", b"0")
    first = db.transaction()
    first.scan(b"row", b"rox", lock=True)
    second = db.transaction()
    with pytest.raises(LockNotAvailableError) as caught:
        second.scan(b"row", b"rox", lock=True, nowait=True)
    assert caught.value.key == b"row"
    assert _locks(db).waiters() == 0  # it never queued
    assert _locks(db).holder(b"row") == first.id
    second.rollback()
    first.commit()
    third = db.transaction()
    assert [kv.value for kv in third.scan(b"row", b"rox", lock=True, nowait=True)] == [b"0"]
    assert _locks(db).holder(b"row") == third.id
    third.rollback()
    assert len(_locks(db)) == 0


def test_nowait_locking_scan_fails_on_a_pending_writers_intent(db: feedkv.DB) -> None:
    db.put(b"row", b"0")
    writer = db.transaction()
    writer.put_now(b"row", b"1")  # an intent, its transaction alive (heartbeating)
    reader = db.transaction()
    with pytest.raises(LockNotAvailableError) as caught:
        reader.scan(b"row", b"rox", lock=True, nowait=True)
    assert caught.value.key == b"row"
    reader.rollback()
    writer.commit()
    after = db.transaction()
    assert [kv.value for kv in after.scan(b"row", b"rox", lock=True, nowait=True)] == [b"1"]
    after.commit()
    assert len(_locks(db)) == 0


def test_a_wait_for_a_lock_or_an_intent_ends_at_the_lock_timeout(db: feedkv.DB) -> None:
    """A transaction's ``lock_timeout_ms`` bounds each wait (CockroachDB's lock_timeout):
    a locking read queued behind a lock, a plain read and a write behind a pending
    writer's intent each fail with LockNotAvailableError (LOCK_TIMEOUT) naming the key,
    and leave nothing queued (waiting without one: the tests above)."""
    db.put(b"row", b"0")
    holder = db.transaction()
    holder.scan(b"row", b"rox", lock=True)
    locker = db.transaction()
    locker.lock_timeout_ms = 50
    with pytest.raises(LockNotAvailableError) as caught:
        locker.scan(b"row", b"rox", lock=True)
    assert (caught.value.key, caught.value.reason) == (b"row", LockNotAvailableError.LOCK_TIMEOUT)
    assert _locks(db).waiters() == 0
    locker.rollback()
    holder.rollback()

    # NB: the highest priority, so the others' pushes fail and they wait
    writer = db.transaction(priority=MAX_PRIORITY)
    writer.put_now(b"row", b"1")  # an intent, its transaction alive (heartbeating)
    for attempt in ("read", "write"):
        other = db.transaction()
        other.lock_timeout_ms = 50
        with pytest.raises(LockNotAvailableError) as caught:
            if attempt == "read":
                other.get(b"row")
            else:
                other.put_now(b"row", b"2")
        assert caught.value.reason == LockNotAvailableError.LOCK_TIMEOUT, attempt
        other.rollback()
    writer.commit()
    assert db.get(b"row") == b"1"


def test_refused_in_names_the_keys_others_hold_in_a_span() -> None:
    locks = LockTable()
    assert locks.refused_in(Span(b"a", b"z"), A) == []
    locks.acquire([b"k", b"m"], meta(A))
    locks.acquire([b"n"], meta(B))
    assert sorted(locks.refused_in(Span(b"a", b"z"), B)) == [b"k", b"m"]
    assert locks.refused_in(Span(b"a", b"m"), B) == [b"k"]  # the end is exclusive
    assert locks.refused_in(Span(b"a", b"z"), A) == [b"n"]


def _rows(db: feedkv.DB) -> None:
    for n in range(1, 6):
        db.put(b"row%d" % n, b"%d" % n)


def test_skip_locked_scan_leaves_out_held_keys_and_pending_intents(db: feedkv.DB) -> None:
    _rows(db)
    locker = db.transaction()
    locker.scan(b"row2", b"row3", lock=True)  # a lock on row2
    writer = db.transaction()
    writer.put_now(b"row4", b"40")  # an intent on row4, its transaction alive
    reader = db.transaction()
    found = reader.scan(b"row", b"rox", lock=True, skip_locked=True)
    assert [kv.key for kv in found] == [b"row1", b"row3", b"row5"]
    assert _locks(db).waiters() == 0  # it never queued
    assert _locks(db).holder(b"row3") == reader.id  # the rows it returned are its own
    assert _locks(db).holder(b"row2") == locker.id
    reader.rollback()
    locker.commit()
    writer.commit()
    after = db.transaction()
    found = after.scan(b"row", b"rox", lock=True, skip_locked=True)
    assert [kv.value for kv in found] == [b"1", b"2", b"3", b"40", b"5"]
    after.commit()
    assert len(_locks(db)) == 0


@pytest.mark.parametrize("reverse", [False, True])
def test_skip_locked_scans_with_a_limit_each_take_the_next_free_key(
    db: feedkv.DB, reverse: bool
) -> None:
    _rows(db)
    locker = db.transaction()
    locker.scan(b"row2", b"row3", lock=True)
    locker.scan(b"row4", b"row5", lock=True)
    workers, taken = [], []
    for _ in range(4):  # a job queue's workers, each taking one free row and holding it
        worker = db.transaction()
        found = worker.scan(b"row", b"rox", limit=1, reverse=reverse, lock=True, skip_locked=True)
        taken.append([kv.key for kv in found])
        workers.append(worker)
    free = [[b"row1"], [b"row3"], [b"row5"]]
    assert taken == [*(free[::-1] if reverse else free), []]
    assert _locks(db).waiters() == 0
    for worker in workers:
        worker.rollback()
    locker.rollback()
    assert len(_locks(db)) == 0
