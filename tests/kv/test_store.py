"""The store: observers of ranges, closed timestamps, and conflicts with other transactions'
intents (pushes, waits, expired records)."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from feedkv import DB
from feedkv.errors import (
    NodeUnavailableError,
    RangeRoutingError,
    SerializationFailure,
    TransactionAbortedError,
)
from feedkv.kv.api import (
    BatchRequest,
    BatchResponse,
    DeleteRange,
    EndTxn,
    Header,
    HeartbeatTxn,
    Put,
    Transaction,
)
from feedkv.kv.observer import RangeEndReason
from feedkv.kv.store import MAX_PRIORITY, Store, StoreConfig
from feedkv.kv.txn_record import TxnRecord, read_record
from feedkv.storage import logical_ops as ops
from feedkv.storage import mvcc
from feedkv.storage.intent import Intent, TxnStatus
from feedkv.util.hlc import MAX_TIMESTAMP, ManualClock, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
TARGET_NS = 1_000_000  # closed timestamps trail the clock by 1 ms
LIVENESS_NS = 50_000_000  # a pending txn not heartbeated for 50 ms (of manual time) expires


@pytest.fixture
def config() -> StoreConfig:
    return StoreConfig(
        closed_ts_target_ns=TARGET_NS,
        closed_ts_interval_s=0.01,
        txn_liveness_ns=LIVENESS_NS,
        push_poll_s=0.01,
        sync=False,
    )


@dataclass
class Recorder:
    """A :class:`~feedkv.kv.observer.RangeObserver` that records every callback in order."""

    events: list[tuple[str, object]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_ops(self, batch: Sequence[ops.LogicalOp]) -> None:
        with self.lock:
            self.events.append(("ops", tuple(batch)))

    def on_closed(self, closed_ts: Timestamp) -> None:
        with self.lock:
            self.events.append(("closed", closed_ts))

    def on_range_ended(self, reason: RangeEndReason) -> None:
        with self.lock:
            self.events.append(("ended", reason))

    def seen(self) -> list[tuple[str, object]]:
        with self.lock:
            return list(self.events)

    def commands(self) -> list[tuple[ops.LogicalOp, ...]]:
        """The ops of each command, one tuple per command, in apply order."""
        return [batch for kind, batch in self.seen() if kind == "ops"]  # type: ignore[misc]

    def ops(self) -> list[ops.LogicalOp]:
        return [op for batch in self.commands() for op in batch]

    def ended(self) -> list[object]:
        return [reason for kind, reason in self.seen() if kind == "ended"]

    def closed(self) -> list[Timestamp]:
        return [ts for kind, ts in self.seen() if kind == "closed"]  # type: ignore[misc]


def observe(store: Store, range_id: int) -> Recorder:
    recorder = Recorder()
    _desc, snap = store.observe(range_id, recorder)
    snap.close()
    return recorder


def range_id_of(store: Store, key: bytes) -> int:
    return next(d.range_id for d in store.descriptors() if d.contains_key(key))


def intents(store: Store) -> list[Intent]:
    with store.engine.snapshot() as snap:
        return mvcc.scan_intents(snap, EVERYTHING)


def record_of(store: Store, txn: Transaction) -> TxnRecord | None:
    with store.engine.snapshot() as snap:
        return read_record(snap, txn.key, txn.id)


def begin(store: Store, anchor: bytes, *, priority: int) -> Transaction:
    """A transaction coordinated by hand: its record is created, nothing else."""
    now = store.clock.now()
    txn = Transaction(uuid.uuid4().bytes, anchor, 0, now, now, priority)
    response = store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),)))
    return response.txn or txn


def write_intent(store: Store, txn: Transaction, key: bytes, value: bytes) -> Transaction:
    response = store.send(BatchRequest(Header(txn=txn), (Put(key, value),)))
    assert response.txn is not None
    return response.txn


class Background:
    """Runs one call on another thread and hands back its result or error."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            self.result = call()
        except BaseException as exc:
            self.error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()


# Observers.


def test_an_observer_gets_each_commands_ops_in_apply_order(db: DB, store: Store) -> None:
    recorder = observe(store, 1)
    t1 = db.put(b"k", b"v1")
    t2 = db.put(b"k", b"v2")
    t3 = db.delete(b"k")
    db.put(b"a", b"x")
    db.put(b"b", b"y")
    wiped = store.send(BatchRequest(Header(), (DeleteRange(Span(b"a", b"c")),))).timestamp

    commands = recorder.commands()
    assert commands[:3] == [
        (ops.WriteValue(b"k", t1, b"v1", None),),
        (ops.WriteValue(b"k", t2, b"v2", b"v1"),),
        (ops.WriteValue(b"k", t3, None, b"v2"),),
    ]
    assert commands[-1] == (
        ops.WriteValue(b"a", wiped, None, b"x"),
        ops.WriteValue(b"b", wiped, None, b"y"),
        ops.DeleteRange(Span(b"a", b"c"), wiped),
    )
    assert len(commands) == 6


def put_batch(key: bytes, value: bytes) -> BatchRequest:
    return BatchRequest(Header(), (Put(key, value),))


def held_group(store: Store, batches: Sequence[BatchRequest]) -> list[Timestamp]:
    """Apply ``batches`` with the commit thread held back until all are queued, so
    that all (but perhaps the first, which it may have taken already) commit in one
    group; returns their timestamps."""
    with store.engine.apply_lock:
        attempts = [(batch, store.start(batch)) for batch in batches]
    return [store.finish(batch, attempt).timestamp for batch, attempt in attempts]


def test_an_observer_gets_a_commit_groups_ops_command_by_command_in_apply_order(
    db: DB, store: Store
) -> None:
    recorder = observe(store, 1)
    keys = [b"g%d" % i for i in range(6)]
    stamps = held_group(store, [put_batch(key, b"v") for key in keys])

    assert recorder.commands() == [
        (ops.WriteValue(key, ts, b"v", None),) for key, ts in zip(keys, stamps, strict=True)
    ]
    # A closed timestamp never comes before the ops of a command applied before it.
    closed = None
    for kind, item in recorder.seen():
        if kind == "closed":
            closed = item
        elif kind == "ops" and closed is not None:
            assert all(op.ts > closed for op in item)  # type: ignore[attr-defined]


def test_an_observer_that_fails_on_its_ops_is_ended_and_the_others_still_get_theirs(
    db: DB, store: Store
) -> None:
    db.split(b"m")

    class Failing(Recorder):
        def on_ops(self, batch: Sequence[ops.LogicalOp]) -> None:
            raise RuntimeError("a bug in an observer")

    failing = Failing()
    store.observe(range_id_of(store, b"a"), failing)[1].close()
    right = observe(store, range_id_of(store, b"z"))
    _left_ts, right_ts = held_group(store, [put_batch(b"a", b"1"), put_batch(b"z", b"2")])

    assert failing.ended() == [RangeEndReason.REPLICA_REMOVED]
    assert right.ops() == [ops.WriteValue(b"z", right_ts, b"2", None)]
    assert db.get(b"a") == b"1"  # the write itself stands
    db.put(b"a", b"again")  # and the ended observer gets nothing more
    assert failing.ended() == [RangeEndReason.REPLICA_REMOVED]


def test_the_snapshot_and_the_ops_after_it_hold_every_concurrent_write_exactly_once(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    writers = 4
    stop = threading.Event()
    written: list[list[bytes]] = [[] for _ in range(writers)]
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            i = 0
            while not stop.is_set():
                key = b"w%d-%05d" % (n, i)
                if n % 2:
                    db.put(key, key)
                else:
                    with db.transaction() as txn:
                        txn.put(key, key)
                written[n].append(key)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    try:
        # Register while the writers are busy: some writes land before, some after.
        assert wait_until(lambda: sum(map(len, written)) >= 20)
        recorder = Recorder()
        _desc, snap = store.observe(1, recorder)
        try:
            before = [kv.key for kv in mvcc.scan(snap, EVERYTHING, MAX_TIMESTAMP).rows]
        finally:
            snap.close()
        assert wait_until(lambda: len(recorder.ops()) >= 20)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []

    after = [op.key for op in recorder.ops() if isinstance(op, ops.WriteValue)]
    assert sorted(before + after) == sorted(key for keys in written for key in keys)
    assert before and after


def test_an_observer_ends_with_range_split_when_its_range_splits(db: DB, store: Store) -> None:
    recorder = observe(store, 1)
    db.put(b"a", b"1")
    left, right = db.split(b"m")
    db.put(b"a", b"2")
    db.put(b"z", b"2")

    assert recorder.ended() == [RangeEndReason.RANGE_SPLIT]
    assert recorder.seen()[-1] == ("ended", RangeEndReason.RANGE_SPLIT)
    assert [op.value for op in recorder.ops() if isinstance(op, ops.WriteValue)] == [b"1"]

    # Both halves can be observed afresh.
    on_left, on_right = observe(store, left.range_id), observe(store, right.range_id)
    db.put(b"a", b"3")
    db.put(b"z", b"3")
    assert [op.key for op in on_left.ops() if isinstance(op, ops.WriteValue)] == [b"a"]
    assert [op.key for op in on_right.ops() if isinstance(op, ops.WriteValue)] == [b"z"]
    assert len(on_left.ops()) == len(on_right.ops()) == 1


def test_observers_of_both_sides_end_with_range_merged_when_the_ranges_merge(
    db: DB, store: Store
) -> None:
    left, right = db.split(b"m")
    on_left, on_right = observe(store, left.range_id), observe(store, right.range_id)
    db.merge(b"a")
    db.put(b"a", b"after")
    db.put(b"z", b"after")
    assert on_left.ended() == [RangeEndReason.RANGE_MERGED]
    assert on_right.ended() == [RangeEndReason.RANGE_MERGED]
    assert on_left.ops() == [] and on_right.ops() == []
    with pytest.raises(RangeRoutingError):
        store.observe(right.range_id, Recorder())


def test_observers_end_with_node_shutdown_when_the_store_closes(db: DB, store: Store) -> None:
    db.split(b"m")
    recorders = [observe(store, d.range_id) for d in store.descriptors()]
    db.close()
    assert [r.ended() for r in recorders] == [[RangeEndReason.NODE_SHUTDOWN]] * 2
    with pytest.raises(NodeUnavailableError):
        db.put(b"a", b"too late")


def test_an_unobserved_observer_gets_nothing_more(db: DB, store: Store) -> None:
    recorder = observe(store, 1)
    db.put(b"a", b"seen")
    store.unobserve(1, recorder)
    db.put(b"a", b"unseen")
    db.split(b"m")
    assert [op.value for op in recorder.ops() if isinstance(op, ops.WriteValue)] == [b"seen"]
    assert recorder.ended() == []


def test_observing_a_range_the_store_does_not_have_fails(store: Store) -> None:
    with pytest.raises(RangeRoutingError, match="r42"):
        store.observe(42, Recorder())


# Closed timestamps.


def _write_ts(op: ops.LogicalOp) -> Timestamp | None:
    if isinstance(op, ops.WriteValue | ops.WriteIntent | ops.UpdateIntent):
        return op.ts
    return None


def assert_no_write_at_or_below_a_published_closed_timestamp(recorder: Recorder) -> int:
    """Walk the callbacks in order; returns how many writes were checked."""
    closed = Timestamp(0, 0)
    checked = 0
    for kind, payload in recorder.seen():
        if kind == "closed":
            assert isinstance(payload, Timestamp)
            assert payload >= closed, f"closed timestamp went back from {closed} to {payload}"
            closed = payload
        elif kind == "ops":
            for op in payload:  # type: ignore[attr-defined]
                ts = _write_ts(op)
                if ts is not None:
                    assert ts > closed, f"{op} landed at or below the closed timestamp {closed}"
                    checked += 1
    return checked


def test_a_non_transactional_write_never_lands_at_or_below_the_closed_timestamp(
    db: DB, store: Store, clock: ManualClock, wait_until: Callable[..., bool]
) -> None:
    rng = random.Random(7)
    recorder = observe(store, 1)
    first = db.put(b"first", b"v")
    for i in range(40):
        clock.advance(rng.randrange(0, 3 * TARGET_NS))
        closed_before = store.closed_timestamp(1)
        if i % 3 == 0:
            landed = db.put(b"k-%02d" % i, b"v")
        else:
            # Ask for a timestamp the range has already closed: exactly it, or long ago.
            at = closed_before if i % 3 == 1 else first
            put = Put(b"stale-%02d" % i, b"v")
            landed = store.send(BatchRequest(Header(timestamp=at), (put,))).timestamp
            assert landed > at
        assert landed > closed_before
    assert wait_until(lambda: len(recorder.closed()) >= 3)
    assert assert_no_write_at_or_below_a_published_closed_timestamp(recorder) == 41


def test_idle_ranges_closed_timestamps_advance_with_the_clock(
    db: DB, store: Store, clock: ManualClock, wait_until: Callable[..., bool]
) -> None:
    left, right = db.split(b"m")
    recorder = observe(store, right.range_id)
    before = {d.range_id: store.closed_timestamp(d.range_id) for d in store.descriptors()}
    clock.advance(1_000_000_000)
    target = Timestamp(clock.physical_now() - TARGET_NS, 0)
    assert wait_until(lambda: all(store.closed_timestamp(r) >= target for r in before))
    assert all(store.closed_timestamp(r) > ts for r, ts in before.items())
    assert wait_until(lambda: bool(recorder.closed()) and recorder.closed()[-1] >= target)
    published = recorder.closed()
    assert published == sorted(published)
    assert left.range_id in before


@pytest.mark.parametrize("split", [False, True], ids=["one range", "two ranges"])
def test_a_transaction_writing_below_the_closed_timestamp_is_pushed_above_it(
    db: DB,
    store: Store,
    clock: ManualClock,
    wait_until: Callable[..., bool],
    split: bool,
) -> None:
    if split:
        db.split(b"m")
    recorders = [observe(store, d.range_id) for d in store.descriptors()]
    db.put(b"r", b"read me")
    txn = db.transaction()
    assert txn.get(b"r") == b"read me"
    read_ts = txn.read_ts
    assert read_ts is not None
    clock.advance(10 * TARGET_NS)
    assert wait_until(
        lambda: all(store.closed_timestamp(d.range_id) > read_ts for d in store.descriptors())
    )
    closed = max(store.closed_timestamp(d.range_id) for d in store.descriptors())

    txn.put(b"a", b"late")
    txn.put(b"z", b"late")
    commit_ts = txn.commit()

    assert commit_ts > closed > read_ts
    assert {kv.ts for kv in db.scan(b"a", b"zz") if kv.key != b"r"} == {commit_ts}
    for recorder in recorders:
        assert_no_write_at_or_below_a_published_closed_timestamp(recorder)
    late = [op for r in recorders for op in r.ops() if getattr(op, "key", b"r") != b"r"]
    assert late and all(ts > closed for op in late if (ts := _write_ts(op)) is not None)


# Conflicts with other transactions' intents.


@pytest.mark.parametrize("writer", ["single put", "transaction"])
def test_a_writer_meeting_an_abandoned_intent_succeeds_once_the_record_expires(
    db: DB,
    store: Store,
    clock: ManualClock,
    wait_until: Callable[..., bool],
    writer: str,
) -> None:
    db.put(b"k", b"before")
    recorder = observe(store, 1)
    # The highest priority: no pusher outranks it, only its expiry lets others through.
    abandoned = begin(store, b"k", priority=MAX_PRIORITY)
    abandoned = write_intent(store, abandoned, b"k", b"abandoned")

    def overwrite() -> object:
        if writer == "single put":
            return db.put(b"k", b"after")
        with db.transaction() as txn:
            txn.put(b"k", b"after")
        return txn.commit_ts

    blocked = Background(overwrite)
    clock.advance(2 * LIVENESS_NS)
    assert wait_until(blocked.done)
    assert blocked.error is None

    assert db.get(b"k") == b"after"
    assert intents(store) == []
    record = record_of(store, abandoned)
    assert record is not None and record.status is TxnStatus.ABORTED
    mine = [op for op in recorder.ops() if getattr(op, "txn_id", None) == abandoned.id]
    assert mine == [
        ops.WriteIntent(abandoned.id, b"k", b"k", abandoned.write_ts),
        ops.AbortIntent(abandoned.id, b"k"),
    ]
    with pytest.raises(TransactionAbortedError):
        store.send(BatchRequest(Header(txn=abandoned), (EndTxn(True, (Span.for_key(b"k"),)),)))


def test_a_writer_waits_for_a_live_higher_priority_transaction_and_writes_after_its_commit(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    holder = begin(store, b"k", priority=MAX_PRIORITY)
    holder = write_intent(store, holder, b"k", b"holder")
    blocked = Background(lambda: db.put(b"k", b"waiter"))

    done = store.send(BatchRequest(Header(txn=holder), (EndTxn(True, (Span.for_key(b"k"),)),)))
    assert wait_until(blocked.done)
    assert blocked.error is None
    assert isinstance(blocked.result, Timestamp)
    assert done.txn is not None
    holder_ts = done.txn.write_ts
    assert blocked.result > holder_ts
    assert db.get(b"k", as_of=holder_ts) == b"holder"
    assert db.get(b"k") == b"waiter"


def test_a_higher_priority_writer_aborts_a_live_lower_priority_transaction(
    db: DB, store: Store
) -> None:
    victim = begin(store, b"k", priority=1)
    victim = write_intent(store, victim, b"k", b"victim")
    with db.transaction(priority=MAX_PRIORITY) as txn:
        txn.put(b"k", b"winner")
    assert db.get(b"k") == b"winner"
    record = record_of(store, victim)
    assert record is not None and record.status is TxnStatus.ABORTED
    with pytest.raises(TransactionAbortedError) as caught:
        store.send(BatchRequest(Header(txn=victim), (EndTxn(True, (Span.for_key(b"k"),)),)))
    # worded as CockroachDB's, which SQL clients see after "restart transaction: ..."
    assert str(caught.value).startswith(
        "TransactionAbortedError(ABORT_REASON_ABORTED_RECORD_FOUND): txn "
    )
    restart = SerializationFailure.restart(caught.value)
    assert restart.code == "40001" and restart.message.startswith(
        "restart transaction: TransactionRetryWithProtoRefreshError: "
        "TransactionAbortedError(ABORT_REASON_ABORTED_RECORD_FOUND): "
    )


def _pending_low_priority_intent(db: DB, store: Store) -> Transaction:
    db.put(b"k", b"committed")
    pushee = begin(store, b"k", priority=1)
    return write_intent(store, pushee, b"k", b"pending")


def _assert_pushed_not_aborted(store: Store, pushee: Transaction, above: Timestamp) -> None:
    record = record_of(store, pushee)
    assert record is not None
    assert record.status is TxnStatus.PENDING
    assert record.meta.write_ts > above
    [intent] = intents(store)
    assert intent.txn.id == pushee.id
    assert intent.txn.write_ts > above


def test_a_transactional_reader_pushes_a_lower_priority_intent_and_reads_without_waiting(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    pushee = _pending_low_priority_intent(db, store)
    reader = db.transaction(priority=MAX_PRIORITY)
    assert reader.get(b"elsewhere") is None  # fixes the reader's timestamp above the intent
    read_ts = reader.read_ts
    assert read_ts is not None and read_ts > pushee.write_ts
    # The pushee never expires (the manual clock stands still), so a reader that waited
    # for it would never finish.
    read = Background(lambda: reader.get(b"k"))
    assert wait_until(read.done)
    assert read.error is None
    assert read.result == b"committed"
    _assert_pushed_not_aborted(store, pushee, read_ts)


def test_a_single_key_reader_pushes_a_lower_priority_intent_and_reads_without_waiting(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    pushee = _pending_low_priority_intent(db, store)
    read = Background(lambda: db.get(b"k"))
    assert wait_until(read.done, timeout=5), "the read is still pushing the pending intent"
    assert read.error is None
    assert read.result == b"committed"
    _assert_pushed_not_aborted(store, pushee, pushee.write_ts)


def test_every_response_carries_a_timestamp_and_writes_report_theirs(db: DB, store: Store) -> None:
    response: BatchResponse = store.send(BatchRequest(Header(), (Put(b"k", b"v"),)))
    assert db.get(b"k", as_of=response.timestamp) == b"v"
    assert db.get(b"k", as_of=response.timestamp.prev()) is None
