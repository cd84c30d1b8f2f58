"""Serializable transactions as the client coordinates them: buffering, one- and two-phase
commits, refreshes, write skew, and retries."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import (
    ConditionFailedError,
    InvalidArgumentError,
    InvalidKeyError,
    TransactionAbortedError,
    TransactionRetryError,
    TransactionStatusError,
    ValueTooLargeError,
    WriteIntentError,
)
from feedkv.kv.api import (
    MAX_PRIORITY,
    BatchRequest,
    BatchResponse,
    EndTxn,
    Get,
    GetResponse,
    Header,
    Put,
    RefreshRange,
    Split,
    Transaction,
)
from feedkv.kv.db import KVClient
from feedkv.kv.observer import RangeEndReason
from feedkv.kv.store import Store
from feedkv.kv.txn import Txn, TxnState
from feedkv.kv.txn_record import TXN_RECORDS, TxnRecord
from feedkv.storage import logical_ops as ops
from feedkv.storage import mvcc
from feedkv.storage.intent import Intent, TxnStatus
from feedkv.storage.mvcc import MAX_VALUE_BYTES, scan_intents
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

ALL = (b"\x00", b"\xff")
EVERYTHING = Span(KEY_MIN, KEY_MAX)


class OpLog:
    """A range observer that keeps every logical op it is handed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[ops.LogicalOp] = []

    def on_ops(self, batch: Sequence[ops.LogicalOp]) -> None:
        with self._lock:
            self._ops.extend(batch)

    def on_closed(self, closed_ts: Timestamp) -> None:
        pass

    def on_range_ended(self, reason: RangeEndReason) -> None:
        pass

    @property
    def ops(self) -> list[ops.LogicalOp]:
        with self._lock:
            return list(self._ops)


def watch(store: Store) -> OpLog:
    """An op log registered on every range of the store."""
    log = OpLog()
    for desc in store.descriptors():
        _desc, snap = store.observe(desc.range_id, log)
        snap.close()
    return log


def txn_records(store: Store) -> list[TxnRecord]:
    with store.engine.snapshot() as snap:
        return [TxnRecord.decode(raw) for _key, raw in snap.scan(TXN_RECORDS, b"")]


def intents(store: Store) -> list[Intent]:
    with store.engine.snapshot() as snap:
        return scan_intents(snap, EVERYTHING)


def rows(db: DB) -> list[tuple[bytes, bytes]]:
    return [(kv.key, kv.value) for kv in db.scan(*ALL)]


@pytest.fixture(params=["one range", "two ranges"])
def layout(request: pytest.FixtureRequest, db: DB) -> str:
    """Run a test with keys ``a``..``z`` in one range, or split at ``m``."""
    if request.param == "two ranges":
        db.split(b"m")
    return str(request.param)


# Reads see the transaction's own writes.


def test_a_transaction_reads_its_own_buffered_puts_and_deletes(db: DB) -> None:
    db.put(b"a", b"committed")
    db.put(b"b", b"committed")
    with db.transaction() as txn:
        txn.put(b"a", b"mine")
        txn.delete(b"b")
        txn.put(b"c", b"new")
        assert txn.get(b"a") == b"mine"
        assert txn.get(b"b") is None
        assert txn.get(b"c") == b"new"
        # Nobody else sees them before the commit.
        assert db.get(b"a") == b"committed"
        assert db.get(b"c") is None


def test_a_transaction_scan_merges_its_own_writes_into_what_it_reads(db: DB, layout: str) -> None:
    for key in (b"a", b"d", b"p", b"x"):
        db.put(key, b"committed")
    with db.transaction() as txn:
        txn.put(b"b", b"mine")
        txn.put(b"p", b"mine")
        txn.delete(b"d")
        txn.put(b"z", b"mine")
        assert [(kv.key, kv.value) for kv in txn.scan(*ALL)] == [
            (b"a", b"committed"),
            (b"b", b"mine"),
            (b"p", b"mine"),
            (b"x", b"committed"),
            (b"z", b"mine"),
        ]
        assert [kv.key for kv in txn.scan(*ALL, reverse=True)] == [b"z", b"x", b"p", b"b", b"a"]
        assert [kv.key for kv in txn.scan(*ALL, limit=2)] == [b"a", b"b"]
        assert [kv.key for kv in txn.scan(*ALL, limit=2, reverse=True)] == [b"z", b"x"]
        assert [kv.key for kv in txn.scan(b"c", b"q")] == [b"p"]


def test_a_limited_scan_over_own_writes_answers_as_a_merge_and_reads_no_further(
    db: DB, layout: str
) -> None:
    """A scan with a limit, over a span holding this transaction's writes, answers what
    merging its writes into every committed key and cutting at the limit answers (both
    ways, any limit, a view's too); and it reads the committed keys only so far as the
    limit needs (plus one a deletion may hide), not to the span's end."""
    rng = random.Random(7)
    letters = [bytes([c]) for c in range(ord("a"), ord("z") + 1)]
    committed = {key: b"committed" for key in letters if rng.random() < 0.6}
    for key, value in committed.items():
        db.put(key, value)
    with db.transaction() as txn:
        model = dict(committed)
        for key in rng.sample(letters, 10):
            if rng.random() < 0.4:
                txn.delete(key)
                model.pop(key, None)
            else:
                txn.put(key, b"mine")
                model[key] = b"mine"
        view = txn.view()
        for reader in (txn, view):
            for reverse in (False, True):
                expected = sorted(model.items(), reverse=reverse)
                for limit in range(len(letters) + 2):
                    got = reader.scan(*ALL, limit=limit, reverse=reverse)
                    assert [(kv.key, kv.value) for kv in got] == expected[:limit], (
                        reader,
                        reverse,
                        limit,
                    )
    with db.transaction() as txn:
        txn.put(b"b", b"mine")
        txn.put(b"y", b"mine")
        txn.delete(b"c")
        first = [kv.key for kv in txn.scan(*ALL, limit=2)]
        assert first == sorted([b"b", *(k for k in committed if k not in (b"b", b"c"))])[:2]
        # NB: two asked and one deletion: three committed keys read, the rest not
        assert all(span.end <= b"y" for span in txn._reads), txn._reads


def test_a_view_sees_the_writes_made_before_it_and_none_after(db: DB, layout: str) -> None:
    for key in (b"a", b"d", b"p"):
        db.put(key, b"committed")
    with db.transaction() as txn:
        assert txn.get(b"a") == b"committed"  # NB: the read fixes its timestamp
        txn.put(b"b", b"before")
        txn.delete(b"d")
        view = txn.view()
        txn.put(b"a", b"after")
        txn.put(b"c", b"after")
        txn.delete(b"p")
        db.put(b"x", b"another transaction's, later")
        assert [(kv.key, kv.value) for kv in view.scan(*ALL)] == [
            (b"a", b"committed"),
            (b"b", b"before"),
            (b"p", b"committed"),
        ]
        assert [kv.key for kv in view.scan(*ALL, limit=2, reverse=True)] == [b"p", b"b"]
        assert (view.get(b"a"), view.get(b"b"), view.get(b"c")) == (b"committed", b"before", None)
        assert [kv.key for kv in txn.scan(*ALL)] == [b"a", b"b", b"c"]  # the transaction's own
    with pytest.raises(TransactionStatusError):
        view.scan(*ALL)  # its transaction ended


# Commit and rollback.


def test_commit_makes_every_write_visible_at_one_commit_timestamp(db: DB, layout: str) -> None:
    db.put(b"gone", b"old")
    with db.transaction() as txn:
        for key in (b"a", b"k", b"q", b"z"):
            txn.put(key, b"v-" + key)
        txn.delete(b"gone")
    assert txn.state is TxnState.COMMITTED
    assert txn.commit_ts is not None
    found = db.scan(*ALL)
    assert [(kv.key, kv.value) for kv in found] == [
        (b"a", b"v-a"),
        (b"k", b"v-k"),
        (b"q", b"v-q"),
        (b"z", b"v-z"),
    ]
    assert {kv.ts for kv in found} == {txn.commit_ts}
    assert db.get(b"gone", as_of=txn.commit_ts.prev()) == b"old"
    assert db.get(b"a", as_of=txn.commit_ts.prev()) is None


def test_rollback_leaves_nothing_behind(db: DB, store: Store, layout: str) -> None:
    db.put(b"a", b"before")
    txn = db.transaction()
    txn.put(b"a", b"after")
    txn.put(b"z", b"after")
    txn.rollback()
    assert txn.state is TxnState.ROLLED_BACK
    assert rows(db) == [(b"a", b"before")]
    assert intents(store) == []
    assert txn_records(store) == []


def test_put_now_leaves_an_intent_before_commit_that_a_reader_must_get_past(
    db: DB, store: Store, layout: str, wait_until: Callable[..., bool]
) -> None:
    db.put(b"a", b"before")
    txn = db.transaction()
    assert txn.get(b"a") == b"before"
    txn.put_now(b"a", b"now")
    txn.put(b"z", b"at commit")
    assert [i.key for i in intents(store)] == [b"a"]
    assert [r.status for r in txn_records(store)] == [TxnStatus.PENDING]
    with store.engine.snapshot() as snap, pytest.raises(WriteIntentError):
        mvcc.get(snap, b"a", db.now())  # a read at or above it meets it
    commit_ts = txn.commit()
    found = db.scan(*ALL)
    assert [(kv.key, kv.value) for kv in found] == [(b"a", b"now"), (b"z", b"at commit")]
    assert {kv.ts for kv in found} == {commit_ts}
    assert wait_until(lambda: intents(store) == [])


def test_a_rolled_back_put_now_leaves_nothing_behind(db: DB, store: Store) -> None:
    db.put(b"a", b"before")
    txn = db.transaction()
    txn.put_now(b"a", b"now")
    txn.rollback()
    assert rows(db) == [(b"a", b"before")]
    assert intents(store) == []
    assert [r.status for r in txn_records(store)] in ([], [TxnStatus.ABORTED])


@contextmanager
def global_random_seeded(seed: int) -> Iterator[None]:
    """The global ``random`` seeded to ``seed`` (as hypothesis does before every example),
    its state put back afterwards."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def test_transactions_begun_after_the_same_seed_of_the_global_random_get_distinct_ids(
    db: DB,
) -> None:
    with global_random_seeded(0):
        first = db.transaction()
    with global_random_seeded(0):
        second = db.transaction()
    assert first.id != second.id


def test_a_schema_change_after_another_on_one_anchor_under_a_reseeded_random_commits_its_own(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    # Two schema changes of one table (TRUNCATE, then DROP TABLE), each in its own
    # transaction begun after the global random was seeded alike: both write the
    # descriptor at once and anchor their records on the table's first key.
    with global_random_seeded(0):
        truncate = db.transaction(priority=MAX_PRIORITY - 1)
        truncate.put_now(b"d", b"truncated", anchor=b"t")
        first_ts = truncate.commit()
    with global_random_seeded(0):
        drop = db.transaction(priority=MAX_PRIORITY - 1)
        assert drop.get(b"d") == b"truncated"
        drop.put_now(b"d", b"dropped", anchor=b"t")
        drop_ts = drop.commit()
    assert drop_ts > first_ts
    # NB: sharing the first's id, the second found the first's committed record and
    # left its intent, which this read then committed at the first's timestamp, below it
    assert [(kv.value, kv.ts) for kv in db.scan(b"d", b"e")] == [(b"dropped", drop_ts)]
    # NB: both records went with their commits (their intents were all on this range)
    assert txn_records(store) == []
    assert intents(store) == []


def test_an_exception_inside_a_transaction_block_rolls_it_back_and_propagates(
    db: DB, store: Store, layout: str
) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), db.transaction() as txn:
        txn.put(b"a", b"never")
        txn.put(b"z", b"never")
        raise Boom
    assert txn.state is TxnState.ROLLED_BACK
    assert rows(db) == []
    assert intents(store) == []


@pytest.mark.parametrize("how", ["after a read", "with a priority"])
def test_a_single_range_transaction_commits_in_one_phase_without_record_or_intents(
    db: DB, store: Store, how: str
) -> None:
    # Either makes it commit with an EndTxn, not as a plain write batch.
    log = watch(store)
    with db.transaction(priority=7 if how == "with a priority" else None) as txn:
        if how == "after a read":
            assert txn.get(b"x") is None
        txn.put(b"a", b"1")
        txn.put(b"b", b"2")
        txn.delete(b"c")
    commit_ts = txn.commit_ts
    assert commit_ts is not None
    assert txn_records(store) == []
    assert intents(store) == []
    assert log.ops == [
        ops.WriteValue(b"a", commit_ts, b"1", None),
        ops.WriteValue(b"b", commit_ts, b"2", None),
        ops.WriteValue(b"c", commit_ts, None, None),
    ]


def sent_by(db: DB, call: Callable[[], object]) -> list[BatchRequest]:
    """The batches ``call()`` sends."""
    batches: list[BatchRequest] = []
    transport = db.transport
    send = transport.send

    def spying(batch: BatchRequest) -> Any:
        batches.append(batch)
        return send(batch)

    transport.send = spying  # type: ignore[method-assign]
    try:
        call()
    finally:
        transport.send = send  # type: ignore[method-assign]
    return batches


def test_a_transaction_that_read_nothing_commits_as_one_plain_write_batch(
    db: DB, store: Store
) -> None:
    db.put(b"b", b"old")
    txn = db.transaction()
    txn.put_if_absent(b"a", b"1")
    txn.put_if_present(b"b", b"2")
    txn.delete(b"c")
    deadline = Timestamp(db.now().wall + 3_600_000_000_000)
    txn.limit_commit(deadline)
    (batch,) = sent_by(db, txn.commit)
    commit_ts = txn.commit_ts
    # No transaction, no EndTxn: the node stamps the writes as it would a plain put.
    assert batch.header.txn is None
    assert batch.header.deadline == deadline
    assert not any(isinstance(r, EndTxn) for r in batch.requests)
    assert txn.state is TxnState.COMMITTED
    assert [(kv.key, kv.value, kv.ts) for kv in db.scan(*ALL)] == [
        (b"a", b"1", commit_ts),
        (b"b", b"2", commit_ts),
    ]
    assert txn_records(store) == []


def test_a_transaction_given_a_priority_commits_with_an_end_txn_though_it_read_nothing(
    db: DB,
) -> None:
    # A plain write batch pushes the intents it meets with a random priority.
    txn = db.transaction(priority=MAX_PRIORITY)
    txn.put(b"a", b"1")
    (batch,) = sent_by(db, txn.commit)
    assert batch.header.txn is not None
    assert isinstance(batch.requests[-1], EndTxn)


def test_a_plain_write_batch_split_under_it_commits_in_two_phases(db: DB, store: Store) -> None:
    txn = db.transaction()
    txn.put(b"a", b"1")
    txn.put(b"z", b"2")
    txn.limit_commit(Timestamp(db.now().wall + 3_600_000_000_000))
    store.send(BatchRequest(Header(), (Split(b"m"),)))  # the client's range cache is stale
    batches = sent_by(db, txn.commit)
    assert batches[0].header.txn is None  # the plain batch, refused: it spans two ranges
    assert isinstance(batches[-1].requests[-1], EndTxn)
    assert [(kv.key, kv.value, kv.ts) for kv in db.scan(*ALL)] == [
        (b"a", b"1", txn.commit_ts),
        (b"z", b"2", txn.commit_ts),
    ]
    assert intents(store) == []


def test_a_plain_write_batch_pushed_to_its_deadline_fails_and_writes_nothing(db: DB) -> None:
    deadline = Timestamp(db.now().wall + 1_000_000)
    db.get(b"a", as_of=deadline)  # a write of ``a`` must now land above the deadline
    txn = db.transaction()
    txn.put(b"a", b"1")
    txn.limit_commit(deadline)
    with pytest.raises(TransactionRetryError) as raised:
        txn.commit()
    assert raised.value.reason == "RETRY_COMMIT_DEADLINE_EXCEEDED"
    assert rows(db) == []


def test_a_plain_write_batch_waits_for_an_intent_and_lands_above_its_commit(db: DB) -> None:
    owner = db.transaction(priority=MAX_PRIORITY)  # a push does not abort it
    owner.put_now(b"k", b"owner")
    blind = db.transaction()
    blind.put(b"k", b"blind")
    landed: list[Timestamp] = []
    thread = threading.Thread(target=lambda: landed.append(blind.commit()), daemon=True)
    thread.start()
    owner_ts = owner.commit()
    thread.join(30)
    assert landed and landed[0] > owner_ts
    assert db.get(b"k") == b"blind"


def test_a_transaction_that_read_nothing_still_checks_its_conditions(db: DB) -> None:
    db.put(b"a", b"taken")
    txn = db.transaction()
    txn.put_if_absent(b"a", b"1")
    txn.put(b"b", b"2")
    with pytest.raises(ConditionFailedError):
        txn.commit()
    assert txn.state is TxnState.ROLLED_BACK
    assert rows(db) == [(b"a", b"taken")]


def test_a_header_deadline_is_refused_on_a_transactional_batch(store: Store) -> None:
    now = store.clock.now()
    txn = Transaction(b"t" * 16, b"a", 0, now, now, 1)
    header = Header(txn=txn, deadline=Timestamp(now.wall + 10**12))
    with pytest.raises(InvalidArgumentError, match="EndTxn"):
        store.send(BatchRequest(header, (Put(b"a", b"v"), EndTxn(True))))
    assert intents(store) == []


def test_a_transaction_that_wrote_before_cannot_commit_in_one_phase_once_aborted(
    db: DB, store: Store
) -> None:
    # Its client leaves out the lock spans: the one-phase commit must still find the record.
    now = store.clock.now()
    txn = Transaction(b"t" * 16, b"a", 0, now, now, 1)
    wrote = store.send(BatchRequest(Header(txn=txn), (Put(b"a", b"intent"),))).txn
    assert wrote is not None and wrote.seq == 1
    store.send(BatchRequest(Header(txn=wrote), (EndTxn(False, (Span(b"a", b"a\x00"),)),)))

    with pytest.raises(TransactionAbortedError):
        store.send(BatchRequest(Header(txn=wrote), (Put(b"b", b"late"), EndTxn(True))))
    assert db.get(b"a") is None
    assert db.get(b"b") is None


def test_transaction_copies_keep_every_field() -> None:
    # The copy helpers spell out the constructor: a new field must be added to them too.
    assert [f.name for f in fields(Transaction)] == [
        "id",
        "key",
        "epoch",
        "read_ts",
        "write_ts",
        "priority",
        "seq",
        "min_ts",
    ]


def test_a_refresh_keeps_the_timestamp_a_transaction_started_at() -> None:
    first, later = Timestamp(10, 0), Timestamp(20, 0)
    txn = Transaction(b"\x01" * 16, b"k", 0, ZERO_TIMESTAMP, ZERO_TIMESTAMP, 1)
    started = txn.started_at(first)
    assert started.min_ts == first
    refreshed = started.started_at(later).with_write_ts(later).with_seq(2).anchored_at(b"j")
    assert (refreshed.read_ts, refreshed.min_ts) == (later, first)


def test_a_transaction_spanning_two_ranges_commits_through_a_record_and_resolves_its_intents(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    db.split(b"m")
    log = watch(store)
    with db.transaction() as txn:
        txn.put(b"a", b"left")
        txn.put(b"z", b"right")
    commit_ts = txn.commit_ts
    assert commit_ts is not None

    # The record, committed, is removed once the other range's intent is resolved.
    assert wait_until(lambda: intents(store) == [] and txn_records(store) == [])

    assert wait_until(lambda: sum(isinstance(op, ops.CommitIntent) for op in log.ops) == 2)
    commits = {op.key: op for op in log.ops if isinstance(op, ops.CommitIntent)}
    assert commits == {
        b"a": ops.CommitIntent(txn.id, b"a", commit_ts, b"left", None),
        b"z": ops.CommitIntent(txn.id, b"z", commit_ts, b"right", None),
    }
    written = [op for op in log.ops if isinstance(op, ops.WriteIntent)]
    assert sorted(op.key for op in written) == [b"a", b"z"]
    assert all(op.txn_id == txn.id for op in written)
    assert not any(isinstance(op, ops.WriteValue) for op in log.ops)
    assert rows(db) == [(b"a", b"left"), (b"z", b"right")]


# Serializability.


def _take_doctor_off_call(txn: Txn, me: bytes) -> bool:
    """Go off call if the other doctor stays on call; returns whether this one left."""
    on_call = sum(txn.get(doctor) == b"on" for doctor in (b"alice", b"zed"))
    if on_call < 2:
        return False
    txn.put(me, b"off")
    return True


def test_write_skew_is_prevented_only_one_of_two_doctors_goes_off_call(db: DB, layout: str) -> None:
    db.put(b"alice", b"on")
    db.put(b"zed", b"on")
    first, second = db.transaction(), db.transaction()
    # Both read both doctors before either writes.
    assert _take_doctor_off_call(first, b"alice")
    assert _take_doctor_off_call(second, b"zed")

    outcomes: list[str] = []
    for txn in (first, second):
        try:
            txn.commit()
            outcomes.append("committed")
        except TransactionRetryError:
            outcomes.append("retry")
    assert sorted(outcomes) == ["committed", "retry"]
    assert [db.get(b"alice"), db.get(b"zed")].count(b"on") == 1


def test_concurrent_retrying_doctors_never_both_go_off_call(db: DB, layout: str) -> None:
    db.put(b"alice", b"on")
    db.put(b"zed", b"on")
    both_read = threading.Barrier(2, timeout=10)
    left: dict[bytes, bool] = {}
    failures: list[BaseException] = []

    def doctor(me: bytes) -> None:
        attempts = 0

        def go(txn: Txn) -> bool:
            nonlocal attempts
            attempts += 1
            on_call = sum(txn.get(d) == b"on" for d in (b"alice", b"zed"))
            if attempts == 1:
                both_read.wait()
            if on_call < 2:
                return False
            txn.put(me, b"off")
            return True

        try:
            left[me] = db.run_transaction(go)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=doctor, args=(me,)) for me in (b"alice", b"zed")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    assert sorted(left.values()) == [False, True]
    assert [db.get(b"alice"), db.get(b"zed")].count(b"on") == 1


def test_a_transaction_pushed_by_a_later_read_refreshes_and_commits_above_it(
    db: DB, store: Store, layout: str
) -> None:
    db.put(b"r", b"read me")
    txn = db.transaction()
    assert txn.get(b"r") == b"read me"
    read_ts = txn.read_ts
    assert read_ts is not None
    later_read = store.send(BatchRequest(Header(), (Get(b"w"),))).timestamp
    txn.put(b"w", b"written")
    txn.put(b"a", b"written")
    commit_ts = txn.commit()

    assert commit_ts > later_read > read_ts
    found = db.scan(*ALL)
    assert [(kv.key, kv.value) for kv in found] == [
        (b"a", b"written"),
        (b"r", b"read me"),
        (b"w", b"written"),
    ]
    assert {kv.ts for kv in found if kv.key != b"r"} == {commit_ts}


def test_a_pushed_transaction_whose_read_changed_fails_and_writes_nothing(
    db: DB, store: Store, layout: str, wait_until: Callable[..., bool]
) -> None:
    db.put(b"r", b"read me")
    txn = db.transaction()
    assert txn.get(b"r") == b"read me"
    db.put(b"r", b"changed")
    store.send(BatchRequest(Header(), (Get(b"w"),)))
    txn.put(b"w", b"written")
    txn.put(b"a", b"written")
    with pytest.raises(TransactionRetryError):
        txn.commit()
    assert txn.state is TxnState.ROLLED_BACK
    assert rows(db) == [(b"r", b"changed")]
    assert wait_until(lambda: intents(store) == [])


class _ReadAfterIntents:
    """A transport that, right after a transaction's intents land on the range holding
    ``key``, has another client read ``key`` at a fixed, later timestamp."""

    def __init__(self, store: Store, key: bytes) -> None:
        self._store = store
        self._key = key
        self.read_at: Timestamp | None = None
        self.read_value: bytes | None = None

    def send(self, batch: BatchRequest) -> BatchResponse:
        response = self._store.send(batch)
        wrote_key = any(isinstance(r, Put) and r.key == self._key for r in batch.requests)
        if batch.header.txn is not None and wrote_key and self.read_at is None:
            self.read_at = self._store.clock.now()
            read = self._store.send(BatchRequest(Header(timestamp=self.read_at), (Get(self._key),)))
            result = read.responses[0]
            assert isinstance(result, GetResponse)
            self.read_value = result.value
        return response

    def now(self) -> Timestamp:
        return self._store.clock.now()

    def close(self) -> None:
        pass


def test_a_transaction_whose_pending_intent_a_reader_pushed_commits_above_the_read(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    db.split(b"m")
    db.put(b"z", b"before")
    spy = _ReadAfterIntents(store, b"z")
    client = KVClient(spy)
    with client.transaction(priority=1) as txn:
        txn.put(b"a", b"mine")
        txn.put(b"z", b"mine")

    assert spy.read_at is not None
    assert spy.read_value == b"before"
    assert txn.commit_ts is not None and txn.commit_ts > spy.read_at
    assert db.get(b"z", as_of=spy.read_at) == b"before"
    found = db.scan(*ALL)
    assert [(kv.key, kv.value) for kv in found] == [(b"a", b"mine"), (b"z", b"mine")]
    assert {kv.ts for kv in found} == {txn.commit_ts}
    assert wait_until(lambda: intents(store) == [])


def test_a_read_only_transaction_commits_at_its_read_timestamp(db: DB) -> None:
    db.put(b"a", b"1")
    txn = db.transaction()
    assert txn.get(b"a") == b"1"
    assert txn.commit() == txn.read_ts


# Conditional puts and delete-range.


def test_conditional_put_writes_only_when_the_current_value_is_the_expected_one(db: DB) -> None:
    db.put(b"k", b"v1")
    with db.transaction() as txn:
        txn.conditional_put(b"k", b"v2", b"v1")
        txn.conditional_put(b"fresh", b"new", None)
        # It reads the transaction's own buffered write.
        txn.conditional_put(b"k", b"v3", b"v2")
        txn.conditional_put(b"fresh", None, b"new")
    assert db.get(b"k") == b"v3"
    assert db.get(b"fresh") is None


@pytest.mark.parametrize(
    ("expected", "actual_after_setup"),
    [(b"wrong", b"v1"), (None, b"v1")],
    ids=["different value", "expected absent"],
)
def test_conditional_put_with_a_wrong_expectation_fails_naming_the_actual_value(
    db: DB, expected: bytes | None, actual_after_setup: bytes
) -> None:
    db.put(b"k", b"v1")
    with pytest.raises(ConditionFailedError) as info, db.transaction() as txn:
        txn.conditional_put(b"k", b"v2", expected)
    assert info.value.actual == actual_after_setup
    assert info.value.expected == expected
    assert db.get(b"k") == b"v1"


def test_conditional_put_expecting_a_value_fails_on_an_absent_key(db: DB) -> None:
    txn = db.transaction()
    with pytest.raises(ConditionFailedError, match="found no value"):
        txn.conditional_put(b"k", b"v", b"something")
    txn.rollback()
    assert db.get(b"k") is None


def test_put_if_present_overwrites_a_value_and_its_check_fails_at_commit_on_no_value(
    db: DB, layout: str
) -> None:
    db.put(b"a", b"old")
    with db.transaction() as txn:
        txn.put_if_present(b"a", b"new")
    assert db.get(b"a") == b"new"

    txn = db.transaction()
    txn.put(b"a", b"newer")
    txn.put_if_present(b"y", b"never")  # in the other range when there are two
    with pytest.raises(ConditionFailedError, match="expected a value, found no value") as info:
        txn.commit()

    assert info.value.key == b"y"
    assert db.get(b"y") is None
    assert db.get(b"a") == b"new"


def test_put_if_present_checks_a_key_the_transaction_wrote_at_once(db: DB) -> None:
    db.put(b"a", b"old")
    with db.transaction() as txn:
        txn.delete(b"a")
        with pytest.raises(ConditionFailedError):
            txn.put_if_present(b"a", b"new")
        txn.put(b"b", b"mine")
        txn.put_if_present(b"b", b"mine again")
    assert db.get(b"a") is None
    assert db.get(b"b") == b"mine again"


def test_delete_range_deletes_every_live_key_of_the_span(db: DB, layout: str) -> None:
    for key in (b"a", b"c", b"e", b"n", b"p", b"x"):
        db.put(key, b"v")
    db.delete(b"e")
    with db.transaction() as txn:
        txn.put(b"d", b"buffered")
        deleted = txn.delete_range(b"b", b"q")
        assert deleted == [b"c", b"d", b"n", b"p"]
        assert txn.get(b"c") is None
        assert [kv.key for kv in txn.scan(*ALL)] == [b"a", b"x"]
    assert [key for key, _value in rows(db)] == [b"a", b"x"]


# Misuse and retries.


@pytest.mark.parametrize(
    "use",
    [
        lambda txn: txn.get(b"a"),
        lambda txn: txn.put(b"a", b"again"),
        lambda txn: txn.delete(b"a"),
        lambda txn: txn.scan(*ALL),
        lambda txn: txn.commit(),
    ],
    ids=["get", "put", "delete", "scan", "commit"],
)
@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_a_finished_transaction_cannot_be_used_again(
    db: DB, use: Callable[[Txn], object], ending: str
) -> None:
    txn = db.transaction()
    txn.put(b"a", b"once")
    if ending == "commit":
        txn.commit()
    else:
        txn.rollback()
    with pytest.raises(TransactionStatusError, match=ending.replace("rollback", "rolled back")):
        use(txn)
    assert db.get(b"a") == (b"once" if ending == "commit" else None)


def test_run_transaction_retries_after_a_retryable_failure_and_returns_the_value(db: DB) -> None:
    db.put(b"x", b"original")
    attempts: list[Timestamp | None] = []

    def copy_x_to_y(txn: Txn) -> bytes | None:
        x = txn.get(b"x")
        attempts.append(txn.read_ts)
        if len(attempts) == 1:
            db.put(b"x", b"changed")  # invalidates the read ...
            db.get(b"y")  # ... and a later read of y pushes the commit above it
        assert x is not None
        txn.put(b"y", x)
        return x

    assert db.run_transaction(copy_x_to_y) == b"changed"
    assert len(attempts) == 2
    assert db.get(b"y") == b"changed"


def test_run_transaction_does_not_retry_an_error_that_is_not_retryable(db: DB) -> None:
    db.put(b"k", b"actual")
    calls: list[int] = []

    def insist(txn: Txn) -> None:
        calls.append(1)
        txn.put(b"other", b"never")
        txn.conditional_put(b"k", b"v", b"expected")

    with pytest.raises(ConditionFailedError):
        db.run_transaction(insist)
    assert calls == [1]
    assert db.get(b"other") is None


def test_run_transaction_gives_up_after_max_attempts(db: DB) -> None:
    calls: list[int] = []

    def always_conflicts(txn: Txn) -> None:
        calls.append(1)
        raise TransactionRetryError("TEST", "this attempt conflicts")

    with pytest.raises(TransactionRetryError, match="this attempt conflicts"):
        db.run_transaction(always_conflicts, max_attempts=3, max_backoff_s=0.001)
    assert len(calls) == 3


BAD_TXN_CALLS: list[tuple[str, Callable[[Txn], object], type[Exception], str]] = [
    ("empty key", lambda txn: txn.put(b"", b"v"), InvalidKeyError, "empty key"),
    ("str key", lambda txn: txn.get("k"), InvalidKeyError, "not str"),  # type: ignore[arg-type]
    ("str value", lambda txn: txn.put(b"k", "v"), InvalidArgumentError, "not str"),  # type: ignore[arg-type]
    ("negative limit", lambda txn: txn.scan(*ALL, limit=-1), InvalidArgumentError, ">= 0"),
    (
        "value over 16 MiB",
        lambda txn: txn.put(b"k", b"x" * (MAX_VALUE_BYTES + 1)),
        ValueTooLargeError,
        "exceeds the limit",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [case[1:] for case in BAD_TXN_CALLS],
    ids=[case[0] for case in BAD_TXN_CALLS],
)
def test_bad_input_to_a_transaction_fails_clearly_and_the_transaction_stays_usable(
    db: DB, call: Callable[[Txn], object], error: type[Exception], message: str
) -> None:
    with db.transaction() as txn:
        with pytest.raises(error, match=message):
            call(txn)
        txn.put(b"ok", b"v")
    assert rows(db) == [(b"ok", b"v")]


def test_a_refresh_of_many_reads_is_one_batch_per_range(db: DB, store: Store) -> None:
    keys = [b"k%04d" % i for i in range(300)]
    for key in keys[::2]:
        db.put(key, b"v")
    txn = db.transaction()
    for key in keys:  # 300 point reads, 300 refresh spans
        txn.get(key)
    store.send(BatchRequest(Header(), (Get(b"w"),)))  # pushes the write above the reads
    txn.put(b"w", b"written")
    batches = sent_by(db, txn.commit)
    refreshes = [b for b in batches if any(isinstance(r, RefreshRange) for r in b.requests)]
    assert len(refreshes) == 1
    assert sum(isinstance(r, RefreshRange) for r in refreshes[0].requests) == len(keys)
    assert db.get(b"w") == b"written"


# Commit deadlines and moving a transaction up.


@pytest.mark.parametrize("read_first", [False, True], ids=["blind", "after a read"])
def test_a_commit_at_or_past_its_deadline_fails_retryably_and_writes_nothing(
    db: DB, layout: str, read_first: bool
) -> None:
    txn = db.transaction()
    if read_first:  # then the commit is an EndTxn (or two phases), not a plain batch
        assert txn.get(b"b") is None
    txn.put(b"a", b"1")
    txn.put(b"z", b"2")
    txn.limit_commit(txn.read_ts or db.now())  # at its reads, or behind the node's clock
    with pytest.raises(TransactionRetryError) as raised:
        txn.commit()
    assert raised.value.reason == "RETRY_COMMIT_DEADLINE_EXCEEDED"
    assert txn.state is TxnState.ROLLED_BACK
    assert rows(db) == []


def test_a_commit_below_its_deadline_lands(db: DB, layout: str) -> None:
    txn = db.transaction()
    txn.put(b"a", b"1")
    txn.put(b"z", b"2")
    deadline = Timestamp(db.now().wall + 3_600_000_000_000)
    txn.limit_commit(deadline)
    txn.limit_commit(Timestamp(deadline.wall + 1))  # only a lower deadline counts
    assert txn.deadline == deadline
    assert txn.commit() < deadline
    assert rows(db) == [(b"a", b"1"), (b"z", b"2")]


def test_a_read_only_transaction_past_its_deadline_fails_at_commit(db: DB) -> None:
    txn = db.transaction()
    txn.get(b"a")
    txn.limit_commit(txn.read_ts or db.now())
    with pytest.raises(TransactionRetryError, match="deadline"):
        txn.commit()


def test_advance_to_moves_reads_up_or_fails_when_they_changed(db: DB) -> None:
    txn = db.transaction()
    assert txn.get(b"a") is None
    later = db.now()
    txn.advance_to(later)
    assert txn.read_ts == later
    txn.put(b"b", b"1")
    assert txn.commit() >= later

    stale = db.transaction()
    assert stale.get(b"a") is None
    db.put(b"a", b"changed")
    with pytest.raises(TransactionRetryError):
        stale.advance_to(db.now())


# A bulk load's batch (put_if_absent_many of ascending keys).

BULK_KEYS = [b"%c%03d" % (c, i) for c in b"cx" for i in range(20)]  # m splits them


def test_a_bulk_batch_commits_whole_in_one_range_or_across_two(db: DB, layout: str) -> None:
    values = [b"v-" + k for k in BULK_KEYS]
    with db.transaction() as txn:
        assert txn.put_if_absent_many(list(BULK_KEYS), values, ascending=True)
    rows = db.scan(b"a", b"z")
    assert [(kv.key, kv.value) for kv in rows] == list(zip(BULK_KEYS, values, strict=True))
    assert len({kv.ts for kv in rows}) == 1


def test_a_bulk_batch_is_read_back_and_checked_as_single_writes_are(db: DB, layout: str) -> None:
    db.put(b"x005", b"there")
    txn = db.transaction()
    assert txn.put_if_absent_many(list(BULK_KEYS), [b"new"] * len(BULK_KEYS), ascending=True)
    assert txn.get(b"c003") == b"new"  # its own write, seen before the commit
    assert not txn.put_if_absent_many([b"c003"], [b"again"], ascending=True)
    txn.put(b"d", b"more")  # another write beside the batch
    with pytest.raises(ConditionFailedError) as caught:
        txn.commit()
    assert caught.value.key == b"x005"
    assert [(kv.key, kv.value) for kv in db.scan(b"a", b"z")] == [(b"x005", b"there")]


def test_a_savepoint_rolled_back_after_a_bulk_batch_keeps_the_batch(db: DB) -> None:
    with db.transaction() as txn:
        assert txn.put_if_absent_many(list(BULK_KEYS), [b"v"] * len(BULK_KEYS), ascending=True)
        mark = txn.savepoint()
        txn.put(b"c000", b"changed")
        txn.rollback_to(mark)
    assert db.get(b"c000") == b"v"
    assert len(db.scan(b"a", b"z")) == len(BULK_KEYS)


def test_a_transaction_over_four_ranges_commits_each_ranges_intents(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    """The record's range is written first, the three others at once (helper threads)."""
    for at in (b"g", b"m", b"t"):
        db.split(at)
    with db.transaction() as txn:
        for key in (b"a", b"h", b"n", b"u"):
            txn.put(key, b"v" + key)
    assert wait_until(lambda: intents(store) == [] and txn_records(store) == [])
    assert rows(db) == [(k, b"v" + k) for k in (b"a", b"h", b"n", b"u")]


def test_a_failed_check_on_one_of_four_ranges_leaves_no_write_on_the_others(
    db: DB, store: Store, wait_until: Callable[..., bool]
) -> None:
    for at in (b"g", b"m", b"t"):
        db.split(at)
    db.put(b"n", b"taken")
    txn = db.transaction()
    for key in (b"a", b"h", b"u"):
        txn.put(key, b"mine")
    txn.put_if_absent(b"n", b"mine")
    with pytest.raises(ConditionFailedError):
        txn.commit()
    assert txn.state is TxnState.ROLLED_BACK
    assert wait_until(lambda: intents(store) == [])
    assert rows(db) == [(b"n", b"taken")]
