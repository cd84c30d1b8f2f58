"""The txn wait queue: the waits a node learns of from the pushes that arrive at its
records, answered transitively, forgotten when a waiter stops or falls silent."""

from __future__ import annotations

from feedkv.kv.txn_wait import TxnWaitQueue
from feedkv.kv.wait_for import is_victim

A, B, C, D = b"a" * 16, b"b" * 16, b"c" * 16, b"d" * 16
TTL = 1_000


def test_dependents_are_the_waits_ending_at_a_txn_directly_or_through_others() -> None:
    queue = TxnWaitQueue(TTL)
    assert not queue and queue.dependents(A, 0) == ()
    queue.waits(B, 5, A, (), 0)
    queue.waits(C, 7, B, (), 0)  # C waits for B, which waits for A: both end at A
    queue.waits(D, 1, C, ((A, D, 3),), 0)  # relayed: A waits for D (known to D's node)
    assert set(queue.dependents(A, 10)) == {(B, A, 5), (C, B, 7), (D, C, 1), (A, D, 3)}
    assert set(queue.dependents(B, 10)) == {(C, B, 7), (D, C, 1), (A, D, 3)}
    assert queue.dependents(D, 10) == ()


def test_a_waiters_own_push_outranks_a_relayed_wait_of_it() -> None:
    queue = TxnWaitQueue(TTL)
    queue.waits(B, 5, A, ((C, B, 2),), 0)
    queue.waits(C, 2, A, (), 0)  # C's own push: it waits for A now, not for B
    assert set(queue.dependents(A, 0)) == {(B, A, 5), (C, A, 2)}


def test_a_waiter_that_stopped_or_fell_silent_is_forgotten() -> None:
    queue = TxnWaitQueue(TTL)
    queue.waits(B, 5, A, (), 0)
    queue.waits(C, 5, A, (), 500)
    queue.stopped(B)
    assert queue.dependents(A, 600) == ((C, A, 5),)
    assert queue.dependents(A, 500 + TTL + 1) == ()
    assert not queue


def test_two_nodes_waits_close_a_cycle_with_exactly_one_victim() -> None:
    """A's record on one node, B's on another: A waits for B (its push at B's node) and B
    for A (at A's node). Each learns the other's wait from its own record's node."""
    node_a, node_b = TxnWaitQueue(TTL), TxnWaitQueue(TTL)
    node_b.waits(A, 4, B, node_a.dependents(A, 0), 0)
    node_a.waits(B, 9, A, node_b.dependents(B, 0), 0)
    seen_by_a = {w: (to, p) for w, to, p in node_a.dependents(A, 1)}
    seen_by_b = {w: (to, p) for w, to, p in node_b.dependents(B, 1)}
    assert is_victim({**seen_by_a, A: (B, 4)}, A)
    assert not is_victim({**seen_by_b, B: (A, 9)}, B)
