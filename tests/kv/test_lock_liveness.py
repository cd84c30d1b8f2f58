"""A lock's live holder keeps it however long it holds it (its coordinator heartbeats its
record); a holder whose coordinator died loses it once its record expires, and the
waiter goes on. Real stores on disk; the dead coordinator is a client process killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import PushFailedError, TransactionAbortedError
from feedkv.kv.api import MAX_PRIORITY, PushTxn, PushType
from feedkv.kv.store import Store, StoreConfig
from feedkv.kv.txn import Txn
from feedkv.kv.txn_record import TxnRecord, read_record
from feedkv.server.node import Node
from feedkv.storage.intent import TxnStatus
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import key_next

DEADLINE_S = 60.0
KEY = b"row/1"
LIVENESS_NS = 3_000_000_000  # three of the coordinator's heartbeats (1 s apart)
OLD_FALLBACK_NS = 5_000_000_000  # how long a waiter waited before it broke a lock
CONFIG = StoreConfig(txn_liveness_ns=LIVENESS_NS, push_poll_s=0.01, sync=False)


class _Writer:
    """A transaction on a thread of its own that locks KEY and appends ``suffix`` to it."""

    def __init__(self, db: DB, suffix: bytes) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(db, suffix), daemon=True)
        self._thread.start()

    def _run(self, db: DB, suffix: bytes) -> None:
        try:
            with db.transaction() as txn:
                (row,) = txn.scan(KEY, key_next(KEY), lock=True)
                txn.put(KEY, row.value + suffix)
                txn.commit()
        except BaseException as exc:
            self.error = exc

    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> BaseException | None:
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "the waiting writer did not end"
        return self.error


def _record(store: Store, txn_id: bytes) -> TxnRecord | None:
    with store.engine.snapshot() as snap:
        return read_record(snap, KEY, txn_id)


@pytest.mark.slow(10)
def test_a_live_holder_keeps_its_lock_past_the_liveness_window(tmp_path: Path) -> None:
    """SELECT FOR UPDATE and think for longer than the liveness window (and the old 5 s
    fallback): the writer waiting for the row waits, and goes on after the commit."""
    db = feedkv.connect(tmp_path / "store", config=CONFIG)
    try:
        assert db.node is not None
        store = db.node.store
        db.put(KEY, b"0")
        holder = db.transaction()
        assert [kv.value for kv in holder.scan(KEY, key_next(KEY), lock=True)] == [b"0"]
        began = store.clock.physical_now()
        writer = _Writer(db, b"+w")
        wait_until(lambda: store.locks.waiters() == 1, timeout_s=DEADLINE_S, what="the waiter")

        def beaten_late() -> bool:
            record = _record(store, holder.id)
            return record is not None and record.last_active_ns - began > OLD_FALLBACK_NS

        # NB: a heartbeat this late means the holder held the row past both windows
        wait_until(beaten_late, timeout_s=DEADLINE_S, what="a heartbeat 5 s in")
        record = _record(store, holder.id)
        assert record is not None and record.status is TxnStatus.PENDING
        assert writer.alive() and store.locks.holder(KEY) == holder.id

        holder.put(KEY, b"1")
        holder.commit()  # its lock was never broken
        assert writer.join() is None
        assert db.get(KEY) == b"1+w"
    finally:
        db.close()


_HOLDER = """
import sys
import feedkv
from feedkv.util.keys import key_next

db = feedkv.connect(sys.argv[1])
txn = db.transaction()
txn.scan(b"row/1", key_next(b"row/1"), lock=True)
print(txn.id.hex(), flush=True)
sys.stdin.read()  # holds the lock until killed
"""


@pytest.mark.slow(15)
def test_a_holder_whose_client_died_loses_its_lock_once_its_record_expires(
    tmp_path: Path,
) -> None:
    """The holder's coordinator is a client process, killed while it holds the row: its
    heartbeats stop, its record expires, and the waiting writer breaks the lock."""
    with Node(tmp_path / "store", listen="127.0.0.1:0", config=CONFIG) as node:
        db = feedkv.connect(node.url)
        try:
            db.put(KEY, b"0")
            child = subprocess.Popen(
                [sys.executable, "-c", _HOLDER, node.url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
            assert child.stdout is not None
            holder_id = bytes.fromhex(child.stdout.readline().strip())
            try:
                assert node.store.locks.holder(KEY) == holder_id
                writer = _Writer(db, b"+w")
                wait_until(
                    lambda: node.store.locks.waiters() == 1,
                    timeout_s=DEADLINE_S,
                    what="the waiter",
                )
                # the holder is alive: its heartbeat writes its record, which it keeps fresh
                wait_until(
                    lambda: _record(node.store, holder_id) is not None,
                    timeout_s=DEADLINE_S,
                    what="the holder's first heartbeat",
                )
                assert writer.alive()
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait()
            assert writer.join() is None
            assert db.get(KEY) == b"0+w"
            record = _record(node.store, holder_id)
            assert record is not None and record.status is TxnStatus.ABORTED
        finally:
            db.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    """A store on disk with KEY written, for a holder to lock."""
    db = feedkv.connect(tmp_path / "store", config=CONFIG)
    try:
        db.put(KEY, b"0")
        yield db
    finally:
        db.close()


def _store(db: DB) -> Store:
    assert db.node is not None
    return db.node.store


def _holding(db: DB) -> Txn:
    """A transaction that locked KEY (a locking read of it)."""
    holder = db.transaction()
    holder.scan(KEY, key_next(KEY), lock=True)
    return holder


def test_a_holder_without_a_record_yet_is_taken_for_alive(db: DB) -> None:
    """A holder writes its record with its first heartbeat: before that, a waiter's push
    finds none and takes the holder for alive (not for an orphan, as an intent's)."""
    store = _store(db)
    holder = _holding(db)
    meta = store.locks.holder_meta(KEY)
    assert meta is not None and meta.key == KEY  # anchored at what it locked
    assert _record(store, holder.id) is None
    with pytest.raises(PushFailedError):
        store.push(PushTxn(meta, PushType.TOUCH, store.clock.now(), 1, b"w" * 16))
    assert _record(store, holder.id) is None
    holder.put(KEY, b"1")
    holder.commit()
    assert db.get(KEY) == b"1"


def _wait_for_record(store: Store, txn_id: bytes) -> TxnRecord:
    wait_until(lambda: _record(store, txn_id) is not None, timeout_s=DEADLINE_S, what="its record")
    record = _record(store, txn_id)
    assert record is not None
    return record


def test_a_holder_aborted_by_a_push_cannot_commit_in_one_phase(db: DB) -> None:
    """A transaction that held a lock long enough for its heartbeat to write its record,
    then was aborted there (a pusher of higher priority): its one-phase commit fails and
    writes nothing, as its two-phase commit would."""
    store = _store(db)
    holder = _holding(db)
    record = _wait_for_record(store, holder.id)
    store.push(PushTxn(record.meta, PushType.ABORT, store.clock.now(), MAX_PRIORITY))
    aborted = _record(store, holder.id)
    assert aborted is not None and aborted.status is TxnStatus.ABORTED
    holder.put(KEY, b"1")
    with pytest.raises(TransactionAbortedError):
        holder.commit()
    assert db.get(KEY) == b"0"


def test_a_holders_one_phase_commit_removes_its_record(db: DB) -> None:
    """The record a lock holder's heartbeat wrote goes with its one-phase commit (its
    writes are committed values: nothing is left to decide), and a push finds it
    finished, not pending (which a push would take for expired and abort)."""
    store = _store(db)
    holder = _holding(db)
    record = _wait_for_record(store, holder.id)
    holder.put(KEY, b"1")
    holder.commit()
    assert _record(store, holder.id) is None
    pushed = store.push(PushTxn(record.meta, PushType.TOUCH, store.clock.now(), 1))
    assert pushed.record.status is TxnStatus.ABORTED  # finished: nothing of it to wait for
    assert _record(store, holder.id) is None  # and the push wrote none
    assert db.get(KEY) == b"1"


@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_a_locking_read_that_ends_soon_leaves_no_record(db: DB, end: str) -> None:
    """A transaction that locked and wrote nothing, ending before its first heartbeat,
    lets go of its locks and leaves no record (no durable write, nothing to collect)."""
    store = _store(db)
    holder = _holding(db)
    assert store.locks.holder(KEY) == holder.id
    getattr(holder, end)()
    assert store.locks.holder(KEY) is None
    assert _record(store, holder.id) is None
    with db.transaction() as other:  # NB: not held up by a lock left behind
        assert [kv.value for kv in other.scan(KEY, key_next(KEY), lock=True)] == [b"0"]
        other.commit()
