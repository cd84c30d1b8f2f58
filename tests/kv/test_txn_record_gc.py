"""Transaction records are removed once nothing needs them, and a transaction whose
record was removed never writes it again nor commits. Real stores on disk, a manual
clock to age records past the cleanup threshold."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import TransactionAbortedError
from feedkv.kv.api import (
    GC,
    MAX_PRIORITY,
    BatchRequest,
    EndTxn,
    GCResponse,
    Header,
    HeartbeatTxn,
    PushTxn,
    PushType,
    Put,
    Transaction,
)
from feedkv.kv.db import LocalTransport
from feedkv.kv.store import Store, StoreConfig
from feedkv.kv.txn_record import TxnRecord, read_record, records_in, write_record
from feedkv.storage import mvcc
from feedkv.storage.engine import ReadWriter
from feedkv.storage.intent import Intent, TxnStatus
from feedkv.util.hlc import ManualClock
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
THRESHOLD_NS = 60 * 1_000_000_000


@pytest.fixture
def config() -> StoreConfig:
    return StoreConfig(
        closed_ts_interval_s=0.01,
        push_poll_s=0.01,
        sync=False,
        gc_interval_s=3600.0,  # the tests run the GC pass themselves
        txn_cleanup_threshold_ns=THRESHOLD_NS,
    )


def records(store: Store) -> list[TxnRecord]:
    with store.engine.snapshot() as snap:
        return records_in(snap, EVERYTHING)


def record_of(store: Store, txn: Transaction) -> TxnRecord | None:
    with store.engine.snapshot() as snap:
        return read_record(snap, txn.key, txn.id)


def intents(store: Store) -> list[Intent]:
    with store.engine.snapshot() as snap:
        return mvcc.scan_intents(snap, EVERYTHING)


def begin(store: Store, anchor: bytes) -> Transaction:
    """A transaction coordinated by hand: its record is written (PENDING), nothing else."""
    now = store.clock.now()
    txn = Transaction(uuid.uuid4().bytes, anchor, 0, now, now, 1, min_ts=now)
    return store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),))).txn or txn


def write(store: Store, txn: Transaction, key: bytes, value: bytes) -> Transaction:
    response = store.send(BatchRequest(Header(txn=txn), (Put(key, value),)))
    assert response.txn is not None
    return response.txn


def end(store: Store, txn: Transaction, commit: bool, *keys: bytes) -> None:
    spans = tuple(Span.for_key(k) for k in keys)
    store.send(BatchRequest(Header(txn=txn), (EndTxn(commit, spans),)))


def heartbeat(store: Store, txn: Transaction) -> None:
    store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),)))


def abort_by_push(store: Store, txn: Transaction) -> None:
    store.push(PushTxn(txn.meta(), PushType.ABORT, store.clock.now(), MAX_PRIORITY))


def collect_after_threshold(store: Store, clock: ManualClock) -> None:
    clock.advance(THRESHOLD_NS + 1)
    store.collect_garbage()


def test_a_commit_with_its_intents_on_the_records_range_removes_the_record_with_it(
    db: DB, store: Store
) -> None:
    with db.transaction() as txn:
        txn.put_now(b"a", b"1")  # an intent now: two phases, with a record
        [pending] = records(store)
        assert pending.status is TxnStatus.PENDING and pending.meta.id == txn.id
        txn.put(b"b", b"2")
    # NB: no wait: the EndTxn resolved both intents and removed the record in one command
    assert records(store) == []
    assert intents(store) == []
    assert (db.get(b"a"), db.get(b"b")) == (b"1", b"2")


def test_a_commit_across_ranges_removes_its_record_once_the_other_intents_are_resolved(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    db.split(b"m")
    with db.transaction() as txn:
        txn.put(b"a", b"left")
        txn.put(b"z", b"right")
    assert wait_until(lambda: intents(store) == [] and records(store) == [])
    assert (db.get(b"a"), db.get(b"z")) == (b"left", b"right")


def test_concurrent_commits_across_ranges_leave_no_record_once_resolved(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    # NB: the resolver cleans up what queued meanwhile together, one GC command a range
    db.split(b"m")

    def commit(i: int) -> None:
        with db.transaction() as txn:
            txn.put(b"a/%03d" % i, b"left")
            txn.put(b"z/%03d" % i, b"right")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(commit, range(60)))
    assert wait_until(lambda: intents(store) == [] and records(store) == [])
    assert len(db.scan(b"a/", b"a0")) == len(db.scan(b"z/", b"z0")) == 60


def test_a_rollback_across_ranges_removes_its_record_and_every_intent(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    db.split(b"m")
    txn = db.transaction()
    txn.put_now(b"a", b"left")
    txn.put_now(b"z", b"right")
    assert len(intents(store)) == 2 and len(records(store)) == 1
    txn.rollback()
    assert wait_until(lambda: intents(store) == [] and records(store) == [])
    assert (db.get(b"a"), db.get(b"z")) == (None, None)


def test_a_late_heartbeat_cannot_bring_back_a_removed_record(db: DB, store: Store) -> None:
    txn = write(store, begin(store, b"a"), b"a", b"1")
    end(store, txn, True, b"a")
    assert record_of(store, txn) is None
    with pytest.raises(TransactionAbortedError, match="RECORD_ALREADY_WRITTEN"):
        heartbeat(store, txn)
    assert record_of(store, txn) is None
    assert db.get(b"a") == b"1"


def test_a_push_of_a_removed_record_finds_the_transaction_finished_and_writes_nothing(
    store: Store,
) -> None:
    txn = write(store, begin(store, b"a"), b"a", b"1")
    end(store, txn, True, b"a")
    for push_type in (PushType.TIMESTAMP, PushType.ABORT, PushType.TOUCH):
        pushed = store.push(PushTxn(txn.meta(), push_type, store.clock.now(), MAX_PRIORITY))
        assert pushed.record.status is TxnStatus.ABORTED, push_type
    assert records(store) == []


def test_an_aborted_record_stays_until_the_threshold_then_its_transaction_cannot_commit(
    db: DB, store: Store, clock: ManualClock
) -> None:
    txn = write(store, begin(store, b"a"), b"a", b"doomed")
    abort_by_push(store, txn)
    store.collect_garbage()
    aborted = record_of(store, txn)  # kept: its coordinator learns of the abort from it
    assert aborted is not None and aborted.status is TxnStatus.ABORTED

    collect_after_threshold(store, clock)
    assert record_of(store, txn) is None
    with pytest.raises(TransactionAbortedError):
        end(store, txn, True, b"a")
    with pytest.raises(TransactionAbortedError):
        heartbeat(store, txn)
    with pytest.raises(TransactionAbortedError):  # nor in one phase, with a last write
        store.send(BatchRequest(Header(txn=txn), (Put(b"b", b"late"), EndTxn(True))))
    assert record_of(store, txn) is None
    assert (db.get(b"a"), db.get(b"b")) == (None, None)  # the reader aborted its intent
    assert intents(store) == []


@pytest.mark.parametrize("refresh", [False, True], ids=["as_it_began", "refreshed"])
def test_a_transaction_whose_record_was_collected_cannot_commit_after_a_restart(
    tmp_path: Path, clock: ManualClock, config: StoreConfig, refresh: bool
) -> None:
    """The store that opens remembers no removal: a transaction that began before may
    not write its record, even with its read timestamp moved past the opening by a
    refresh (its commit would keep one intent of an aborted transaction)."""
    path = tmp_path / "store"
    db = feedkv.connect(path, clock=clock, config=config)
    try:
        db.split(b"m")
        store = _store_of(db)
        txn = write(store, begin(store, b"a"), b"a", b"doomed")
        txn = write(store, txn, b"z", b"doomed")
        abort_by_push(store, txn)
        assert db.get(b"z") is None  # the reader resolved that intent, aborted
        collect_after_threshold(store, clock)
        assert record_of(store, txn) is None
    finally:
        db.close()
    db = feedkv.connect(path, clock=clock, config=config)
    try:
        store = _store_of(db)
        if refresh:
            clock.advance(1)
            txn = txn.started_at(clock.now())
        with pytest.raises(TransactionAbortedError, match="TIMESTAMP_CACHE_REJECTED"):
            heartbeat(store, txn)
        with pytest.raises(TransactionAbortedError):
            end(store, txn, True, b"a", b"z")
        assert records(store) == []
        assert (db.get(b"a"), db.get(b"z")) == (None, None)
    finally:
        db.close()


def test_a_committed_record_left_behind_has_its_intents_resolved_before_it_is_collected(
    db: DB, store: Store, clock: ManualClock
) -> None:
    db.split(b"m")
    txn = write(store, begin(store, b"a"), b"a", b"left")
    txn = write(store, txn, b"z", b"right")
    meta = txn.meta()
    now_ns = clock.physical_now()

    def commit_then_die(rw: ReadWriter) -> None:
        # What its EndTxn leaves when the node dies before the cleanup: the record
        # committed, naming the other range's intent, and its own range's resolved.
        mvcc.resolve_intents(rw, Span.for_key(b"a"), meta, TxnStatus.COMMITTED)
        committed = TxnRecord(meta, TxnStatus.COMMITTED, 1, now_ns, (Span.for_key(b"z"),))
        write_record(rw, committed)

    store.engine.write(commit_then_die)
    store.collect_garbage()  # too young: kept, its intent too
    assert [i.key for i in intents(store)] == [b"z"] and len(records(store)) == 1

    collect_after_threshold(store, clock)
    assert records(store) == []
    assert intents(store) == []  # resolved by the GC pass, before any reader came
    right = db.scan(b"z", b"z\x00")
    assert [(kv.value, kv.ts) for kv in right] == [(b"right", meta.write_ts)]


def test_an_abandoned_pending_record_is_collected_and_its_intent_aborted(
    db: DB, store: Store, clock: ManualClock
) -> None:
    txn = write(store, begin(store, b"a"), b"a", b"abandoned")
    collect_after_threshold(store, clock)  # long expired: nobody heartbeats it
    assert record_of(store, txn) is None
    with pytest.raises(TransactionAbortedError):
        heartbeat(store, txn)
    assert db.get(b"a") is None
    assert intents(store) == []


def test_the_gc_pass_keeps_a_pending_record_that_is_heartbeated(
    store: Store, clock: ManualClock
) -> None:
    txn = write(store, begin(store, b"a"), b"a", b"alive")
    clock.advance(THRESHOLD_NS + 1)
    heartbeat(store, txn)
    store.collect_garbage()
    # A GC request naming it (sent before the beat) leaves it too: it is not expired.
    response = store.send(BatchRequest(Header(), (GC(Span(b"a", b"b"), None, (txn.meta(),)),)))
    assert response.responses == (GCResponse(0, 0),)
    record = record_of(store, txn)
    assert record is not None and record.status is TxnStatus.PENDING
    end(store, txn, True, b"a")
    assert record_of(store, txn) is None


def _store_of(db: DB) -> Store:
    transport = db.transport
    assert isinstance(transport, LocalTransport)
    return transport.store
