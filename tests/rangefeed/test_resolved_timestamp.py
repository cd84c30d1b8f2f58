"""Tests for feedkv.rangefeed.resolved_timestamp: the unresolved-intent queue and the
resolved timestamp it holds back.

``resolved = min(closed, oldest unresolved intent - 1 tick)``, zero until the intent scan
is in, only ever forward, and every call says whether it moved. The property tests drive
random op sequences through the tracker and a plain dict model side by side.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.errors import InvariantViolation
from feedkv.rangefeed.resolved_timestamp import ResolvedTimestamp, UnresolvedIntentQueue
from feedkv.storage.logical_ops import (
    AbortIntent,
    AbortTxn,
    CommitIntent,
    DeleteRange,
    LogicalOp,
    UpdateIntent,
    WriteIntent,
    WriteValue,
)
from feedkv.util.hlc import TOP_LOGICAL, Timestamp
from feedkv.util.keys import Span

ZERO = Timestamp(0, 0)
TXN_A = b"txn-a"
TXN_B = b"txn-b"
TXN_C = b"txn-c"


def t(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


def txn_key(txn_id: bytes) -> bytes:
    return b"record/" + txn_id


def write_intent_op(txn_id: bytes, ts: Timestamp, key: bytes = b"k") -> WriteIntent:
    return WriteIntent(txn_id, txn_key(txn_id), key, ts)


def update_intent_op(txn_id: bytes, ts: Timestamp, key: bytes = b"k") -> UpdateIntent:
    return UpdateIntent(txn_id, key, ts)


def commit_intent_op(txn_id: bytes, ts: Timestamp, key: bytes = b"k") -> CommitIntent:
    return CommitIntent(txn_id, key, ts, b"v", None)


def abort_intent_op(txn_id: bytes, key: bytes = b"k") -> AbortIntent:
    return AbortIntent(txn_id, key)


def write_value_op(ts: Timestamp, key: bytes = b"k") -> WriteValue:
    return WriteValue(key, ts, b"v", None)


def scanned(txn_id: bytes, ts: Timestamp) -> tuple[bytes, bytes, Timestamp]:
    """One intent as the initial intent scan reports it."""
    return (txn_id, txn_key(txn_id), ts)


def refcount(rts: ResolvedTimestamp, txn_id: bytes) -> int:
    """How many intents of ``txn_id`` the tracker holds (0: it does not know the txn)."""
    txn = rts.intents.get(txn_id)
    return 0 if txn is None else txn.refcount


def initialized(closed: Timestamp, *intents: tuple[bytes, bytes, Timestamp]) -> ResolvedTimestamp:
    rts = ResolvedTimestamp()
    rts.forward_closed(closed)
    rts.init(intents)
    return rts


# --- before the intent scan ------------------------------------------------------------


def test_resolved_stays_zero_until_the_intent_scan_is_in() -> None:
    rts = ResolvedTimestamp()
    assert rts.forward_closed(t(10)) is False
    assert rts.consume(write_value_op(t(3))) is False
    assert rts.consume(write_intent_op(TXN_A, t(12))) is False
    assert rts.consume(commit_intent_op(TXN_A, t(12))) is False
    assert rts.forward_closed(t(20)) is False
    assert rts.resolved == ZERO
    assert rts.initialized is False

    assert rts.init([]) is True
    assert rts.resolved == t(20)


def test_init_without_a_closed_timestamp_does_not_move() -> None:
    rts = ResolvedTimestamp()
    assert rts.init([]) is False
    assert rts.resolved == ZERO
    assert rts.initialized is True


def test_init_is_held_back_by_the_scanned_intents() -> None:
    rts = ResolvedTimestamp()
    rts.forward_closed(t(10))
    assert rts.init([scanned(TXN_A, t(7)), scanned(TXN_B, t(5))]) is True
    assert rts.resolved == t(5).prev()


def test_ops_before_init_are_not_checked_against_resolved() -> None:
    rts = ResolvedTimestamp()
    rts.forward_closed(t(10))
    # Nothing is promised yet, so low timestamps are not violations.
    rts.consume(write_value_op(ZERO))
    rts.consume(write_intent_op(TXN_A, t(1)))
    assert rts.init([]) is True
    assert rts.resolved == t(1).prev()


def test_initializing_twice_is_an_invariant_violation() -> None:
    rts = initialized(t(10))
    with pytest.raises(InvariantViolation, match="initialized twice"):
        rts.init([])
    assert rts.resolved == t(10)


# --- resolved = min(closed, oldest intent - 1 tick) -------------------------------------


def test_resolved_follows_the_closed_timestamp_without_intents() -> None:
    rts = initialized(ZERO)
    assert rts.forward_closed(t(5)) is True
    assert rts.resolved == t(5)
    assert rts.forward_closed(t(5, 1)) is True
    assert rts.resolved == t(5, 1)


def test_resolved_is_one_tick_below_the_oldest_intent() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)))
    assert rts.forward_closed(t(10)) is True
    assert rts.resolved == Timestamp(4, TOP_LOGICAL)


def test_an_intent_above_closed_does_not_hold_resolved_back() -> None:
    rts = initialized(t(10), scanned(TXN_A, t(20)))
    assert rts.resolved == t(10)


def test_an_intent_one_tick_above_closed_leaves_resolved_at_closed() -> None:
    rts = initialized(t(10), scanned(TXN_A, t(10).next()))
    assert rts.resolved == t(10)


def test_an_intent_at_closed_holds_resolved_one_tick_below_it() -> None:
    rts = initialized(t(10), scanned(TXN_A, t(10)))
    assert rts.resolved == t(10).prev()


def test_closed_timestamp_going_back_is_ignored() -> None:
    rts = initialized(t(10))
    assert rts.forward_closed(t(5)) is False
    assert rts.forward_closed(t(10)) is False
    assert rts.closed == t(10)
    assert rts.resolved == t(10)


def test_checkpoint_never_precedes_unresolved_intent() -> None:
    rts = initialized(t(10))
    rts.consume(write_intent_op(TXN_A, t(12)))
    assert rts.forward_closed(t(20)) is True
    assert rts.resolved == t(12).prev()
    assert rts.forward_closed(t(30)) is False
    assert rts.resolved < t(12)


def test_the_oldest_of_several_transactions_holds_resolved() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)), scanned(TXN_B, t(7)), scanned(TXN_C, t(9)))
    rts.forward_closed(t(20))
    assert rts.resolved == t(5).prev()

    assert rts.consume(AbortTxn(TXN_C)) is False  # not the oldest
    assert rts.resolved == t(5).prev()
    assert rts.consume(commit_intent_op(TXN_A, t(6))) is True
    assert rts.resolved == t(7).prev()
    assert rts.consume(commit_intent_op(TXN_B, t(8))) is True
    assert rts.resolved == t(20)


# --- intent refcounting ------------------------------------------------------------------


def test_a_transaction_holds_resolved_until_its_last_intent_commits() -> None:
    rts = initialized(t(10))
    rts.consume(write_intent_op(TXN_A, t(11), b"x"))
    rts.consume(write_intent_op(TXN_A, t(11), b"y"))
    rts.forward_closed(t(20))

    assert rts.consume(commit_intent_op(TXN_A, t(11), b"x")) is False
    assert rts.resolved == t(11).prev()
    assert rts.intents.get(TXN_A) is not None
    assert rts.consume(commit_intent_op(TXN_A, t(11), b"y")) is True
    assert rts.resolved == t(20)
    assert len(rts.intents) == 0


def test_abort_intent_releases_one_intent_of_the_transaction() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)), scanned(TXN_A, t(5)))
    rts.forward_closed(t(20))
    assert rts.consume(abort_intent_op(TXN_A, b"x")) is False
    assert rts.resolved == t(5).prev()
    assert rts.consume(abort_intent_op(TXN_A, b"y")) is True
    assert rts.resolved == t(20)


def test_abort_txn_drops_every_intent_of_the_transaction() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)), scanned(TXN_A, t(6)), scanned(TXN_B, t(8)))
    rts.forward_closed(t(20))
    assert rts.consume(AbortTxn(TXN_A)) is True
    assert rts.resolved == t(8).prev()
    assert rts.intents.get(TXN_A) is None
    # Intents of the aborted txn cleaned up afterwards change nothing.
    assert rts.consume(abort_intent_op(TXN_A)) is False
    assert refcount(rts, TXN_B) == 1


def test_resolving_an_unknown_transaction_is_a_no_op() -> None:
    rts = initialized(t(10), scanned(TXN_A, t(12)))
    rts.forward_closed(t(20))
    assert rts.consume(commit_intent_op(TXN_B, t(13))) is False
    assert rts.consume(abort_intent_op(TXN_B)) is False
    assert rts.consume(AbortTxn(TXN_B)) is False
    assert rts.resolved == t(12).prev()
    assert refcount(rts, TXN_A) == 1


def test_the_scan_counts_each_intent_of_a_transaction() -> None:
    rts = initialized(t(10), scanned(TXN_A, t(12)), scanned(TXN_A, t(14)))
    txn = rts.intents.get(TXN_A)
    assert txn is not None
    assert txn.refcount == 2
    assert txn.ts == t(14)  # the txn cannot commit below its newest intent
    assert txn.txn_key == txn_key(TXN_A)


def test_update_intent_moves_the_transaction_forward() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)))
    rts.forward_closed(t(20))
    assert rts.consume(update_intent_op(TXN_A, t(8))) is True
    assert rts.resolved == t(8).prev()


def test_update_intent_never_moves_a_transaction_back() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(8)))
    rts.forward_closed(t(20))
    assert rts.consume(update_intent_op(TXN_A, t(9))) is True
    assert rts.consume(update_intent_op(TXN_A, t(8, 5))) is False
    txn = rts.intents.get(TXN_A)
    assert txn is not None
    assert txn.ts == t(9)
    assert rts.resolved == t(9).prev()


def test_update_intent_keeps_the_refcount() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)), scanned(TXN_A, t(5)))
    rts.forward_closed(t(20))
    rts.consume(update_intent_op(TXN_A, t(8), b"x"))
    assert refcount(rts, TXN_A) == 2
    assert rts.consume(commit_intent_op(TXN_A, t(8), b"x")) is False
    assert rts.consume(commit_intent_op(TXN_A, t(8), b"y")) is True
    assert rts.resolved == t(20)


def test_a_newer_intent_of_a_known_transaction_moves_resolved_like_an_update() -> None:
    # The queue forwards a txn to its newest intent, so a second WriteIntent higher up
    # can raise the oldest intent and with it the resolved timestamp.
    rts = initialized(ZERO, scanned(TXN_A, t(5)))
    rts.forward_closed(t(20))
    assert rts.consume(write_intent_op(TXN_A, t(12), b"y")) is True
    assert rts.resolved == t(12).prev()
    assert refcount(rts, TXN_A) == 2


def test_update_intent_of_an_unknown_transaction_is_a_no_op() -> None:
    rts = initialized(t(10))
    assert rts.consume(update_intent_op(TXN_A, t(12))) is False
    assert len(rts.intents) == 0


# --- pushes -----------------------------------------------------------------------------


def test_forward_txn_lets_resolved_move_past_the_old_intent() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)))
    rts.forward_closed(t(20))
    assert rts.forward_txn(TXN_A, t(15)) is True
    assert rts.resolved == t(15).prev()
    # The intent is still there: the push moved it without resolving it.
    assert refcount(rts, TXN_A) == 1
    assert rts.forward_txn(TXN_A, t(25)) is True
    assert rts.resolved == t(20)


def test_forward_txn_backwards_or_unknown_changes_nothing() -> None:
    rts = initialized(ZERO, scanned(TXN_A, t(5)))
    rts.forward_closed(t(20))
    assert rts.forward_txn(TXN_A, t(3)) is False
    assert rts.forward_txn(TXN_A, t(5)) is False
    assert rts.forward_txn(TXN_B, t(30)) is False
    assert rts.resolved == t(5).prev()
    assert rts.intents.get(TXN_B) is None


# --- return values ----------------------------------------------------------------------


def test_writes_never_move_resolved() -> None:
    rts = initialized(t(10))
    assert rts.consume(write_value_op(t(11))) is False
    assert rts.consume(DeleteRange(Span(b"a", b"b"), t(11))) is False
    assert rts.consume(write_intent_op(TXN_A, t(11))) is False
    assert rts.resolved == t(10)


# --- invariants -------------------------------------------------------------------------


@pytest.mark.parametrize("below", [0, 1], ids=["at-resolved", "below-resolved"])
@pytest.mark.parametrize(
    "make_op",
    [
        lambda ts: write_intent_op(TXN_B, ts),
        lambda ts: write_value_op(ts),
        lambda ts: DeleteRange(Span(b"a", b"b"), ts),
        lambda ts: commit_intent_op(TXN_A, ts),
    ],
    ids=["WriteIntent", "WriteValue", "DeleteRange", "CommitIntent"],
)
def test_a_write_at_or_below_resolved_is_an_invariant_violation(
    make_op: Callable[[Timestamp], LogicalOp], below: int
) -> None:
    rts = initialized(t(10), scanned(TXN_A, t(12)))
    assert rts.resolved == t(10)
    ts = Timestamp(10 - below, 0)
    op = make_op(ts)
    with pytest.raises(InvariantViolation) as raised:
        rts.consume(op)
    message = str(raised.value)
    assert str(ts) in message
    assert str(t(10)) in message
    assert type(op).__name__ in message
    # The failed op left the state alone.
    assert rts.resolved == t(10)
    assert rts.intents.get(TXN_B) is None
    assert refcount(rts, TXN_A) == 1


def test_a_write_one_tick_above_resolved_is_accepted() -> None:
    rts = initialized(t(10))
    assert rts.consume(write_intent_op(TXN_A, t(10).next())) is False
    assert rts.consume(write_value_op(t(10).next())) is False
    assert rts.resolved == t(10)


def test_resolved_going_back_is_an_invariant_violation_naming_both_values() -> None:
    rts = initialized(t(10))
    # NB: no logical op can put an intent below resolved (consume rejects it), so the
    # queue is fed directly to reach the backwards check.
    rts.intents.add(TXN_A, txn_key(TXN_A), t(3))
    with pytest.raises(InvariantViolation) as raised:
        rts.forward_closed(t(11))
    message = str(raised.value)
    assert str(t(10)) in message
    assert str(t(3).prev()) in message


# --- the queue --------------------------------------------------------------------------


def oldest_id(queue: UnresolvedIntentQueue) -> bytes | None:
    oldest = queue.oldest()
    return None if oldest is None else oldest.txn_id


def test_queue_oldest_skips_transactions_that_moved_or_left() -> None:
    queue = UnresolvedIntentQueue()
    assert queue.oldest() is None
    queue.add(TXN_A, txn_key(TXN_A), t(1))
    queue.add(TXN_B, txn_key(TXN_B), t(2))
    queue.add(TXN_C, txn_key(TXN_C), t(3))
    assert oldest_id(queue) == TXN_A

    queue.forward(TXN_A, t(4))
    assert oldest_id(queue) == TXN_B
    queue.release(TXN_B)
    assert oldest_id(queue) == TXN_C
    queue.remove(TXN_C)
    oldest = queue.oldest()
    assert oldest is not None
    assert (oldest.txn_id, oldest.ts) == (TXN_A, t(4))
    queue.remove(TXN_A)
    assert queue.oldest() is None
    assert len(queue) == 0


def test_queue_finds_a_transaction_readded_after_it_left() -> None:
    queue = UnresolvedIntentQueue()
    queue.add(TXN_A, txn_key(TXN_A), t(1))
    queue.forward(TXN_A, t(9))
    queue.remove(TXN_A)
    queue.add(TXN_A, txn_key(TXN_A), t(2))  # a stale (t9) and a stale (t1) entry remain
    oldest = queue.oldest()
    assert oldest is not None
    assert (oldest.txn_id, oldest.ts, oldest.refcount) == (TXN_A, t(2), 1)


def test_queue_release_and_remove_of_unknown_transactions_are_no_ops() -> None:
    queue = UnresolvedIntentQueue()
    queue.add(TXN_A, txn_key(TXN_A), t(1))
    queue.release(TXN_B)
    queue.remove(TXN_B)
    queue.forward(TXN_B, t(5))
    assert len(queue) == 1
    assert queue.get(TXN_B) is None
    queue.release(TXN_A)
    queue.release(TXN_A)  # resolved twice
    assert len(queue) == 0


def test_queue_older_than_lists_transactions_below_a_timestamp_oldest_first() -> None:
    queue = UnresolvedIntentQueue()
    queue.add(TXN_C, txn_key(TXN_C), t(9))
    queue.add(TXN_A, txn_key(TXN_A), t(5))
    queue.add(TXN_B, txn_key(TXN_B), t(7))
    assert [txn.txn_id for txn in queue.older_than(t(9))] == [TXN_A, TXN_B]
    assert queue.older_than(t(5)) == []
    assert [txn.txn_id for txn in queue.older_than(t(10))] == [TXN_A, TXN_B, TXN_C]


def test_queue_oldest_matches_the_minimum_over_many_transactions() -> None:
    rng = random.Random(20240611)
    queue = UnresolvedIntentQueue()
    model: dict[bytes, tuple[Timestamp, int]] = {}
    for step in range(5000):
        txn_id = b"txn-%d" % rng.randrange(300)
        action = rng.random()
        if action < 0.4:
            ts = t(rng.randrange(1, 1000))
            queue.add(txn_id, txn_key(txn_id), ts)
            old = model.get(txn_id)
            model[txn_id] = (max(old[0], ts), old[1] + 1) if old else (ts, 1)
        elif action < 0.6:
            ts = t(rng.randrange(1, 1000))
            queue.forward(txn_id, ts)
            if txn_id in model:
                old_ts, count = model[txn_id]
                model[txn_id] = (max(old_ts, ts), count)
        elif action < 0.9:
            queue.release(txn_id)
            if txn_id in model:
                ts, count = model[txn_id]
                if count == 1:
                    del model[txn_id]
                else:
                    model[txn_id] = (ts, count - 1)
        else:
            queue.remove(txn_id)
            model.pop(txn_id, None)
        oldest = queue.oldest()
        expected = min((ts for ts, _count in model.values()), default=None)
        assert (oldest.ts if oldest else None) == expected, f"step {step}"
        assert len(queue) == len(model)


# --- against a model --------------------------------------------------------------------

TXNS = [b"t0", b"t1", b"t2", b"t3", b"t4"]
KINDS = [
    "init",
    "close",
    "write",
    "update",
    "commit",
    "abort_intent",
    "abort_txn",
    "push",
    "value",
    "late_write",
]

txn_ids = st.sampled_from(TXNS)
deltas = st.integers(min_value=1, max_value=4)
steps = st.lists(st.tuples(st.sampled_from(KINDS), txn_ids, deltas), max_size=40)
scans = st.lists(st.tuples(txn_ids, deltas), max_size=4)


class Model:
    """The tracker's state in the plainest terms: txn -> (newest ts, intent count)."""

    def __init__(self) -> None:
        self.txns: dict[bytes, tuple[Timestamp, int]] = {}
        self.closed = ZERO
        self.initialized = False

    def add(self, txn_id: bytes, ts: Timestamp) -> None:
        old_ts, count = self.txns.get(txn_id, (ts, 0))
        self.txns[txn_id] = (max(old_ts, ts), count + 1)

    def forward(self, txn_id: bytes, ts: Timestamp) -> None:
        if txn_id in self.txns:
            old_ts, count = self.txns[txn_id]
            self.txns[txn_id] = (max(old_ts, ts), count)

    def release(self, txn_id: bytes) -> None:
        if txn_id in self.txns:
            ts, count = self.txns[txn_id]
            if count == 1:
                del self.txns[txn_id]
            else:
                self.txns[txn_id] = (ts, count - 1)

    def oldest(self) -> Timestamp | None:
        return min((ts for ts, _count in self.txns.values()), default=None)

    def resolved(self) -> Timestamp:
        if not self.initialized:
            return ZERO
        oldest = self.oldest()
        return self.closed if oldest is None else min(self.closed, oldest.prev())


@settings(max_examples=400, deadline=None)
@given(scan=scans, script=steps)
def test_resolved_matches_a_brute_force_model(
    scan: list[tuple[bytes, int]], script: list[tuple[str, bytes, int]]
) -> None:
    rts = ResolvedTimestamp()
    model = Model()
    for step in script:
        kind, txn_id, delta = step
        before = model.resolved()
        ts = t(before.wall + delta)  # every generated write lands above resolved
        if kind == "init":
            if model.initialized:
                with pytest.raises(InvariantViolation):
                    rts.init([])
                continue
            intents = [scanned(scan_id, t(before.wall + d)) for scan_id, d in scan]
            for scan_id, _key, scan_ts in intents:
                model.add(scan_id, scan_ts)
            model.initialized = True
            moved = rts.init(intents)
        elif kind == "close":
            model.closed = max(model.closed, ts)
            moved = rts.forward_closed(ts)
        elif kind == "write":
            model.add(txn_id, ts)
            moved = rts.consume(write_intent_op(txn_id, ts))
        elif kind == "update":
            model.forward(txn_id, ts)
            moved = rts.consume(update_intent_op(txn_id, ts))
        elif kind == "commit":
            model.release(txn_id)
            moved = rts.consume(commit_intent_op(txn_id, ts))
        elif kind == "abort_intent":
            model.release(txn_id)
            moved = rts.consume(abort_intent_op(txn_id))
        elif kind == "abort_txn":
            model.txns.pop(txn_id, None)
            moved = rts.consume(AbortTxn(txn_id))
        elif kind == "push":
            model.forward(txn_id, ts)
            moved = rts.forward_txn(txn_id, ts)
        elif kind == "value":
            moved = rts.consume(write_value_op(ts))
        else:  # late_write: at or below resolved, refused once initialized
            if not model.initialized:
                continue
            late = Timestamp(max(0, before.wall - delta + 1), 0)
            assert late <= before
            with pytest.raises(InvariantViolation):
                rts.consume(write_intent_op(txn_id, late))
            moved = False
        after = model.resolved()
        assert rts.resolved == after, step
        assert moved == (after > before), step
        assert len(rts.intents) == len(model.txns), step
        oldest = rts.intents.oldest()
        assert (None if oldest is None else oldest.ts) == model.oldest(), step
