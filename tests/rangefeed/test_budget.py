"""Tests for feedkv.rangefeed.budget: the node-wide rangefeed memory budget.

Waiting is observed, never slept through: the budget's condition variable is swapped for
one that reports each waiter as it starts waiting, so a test releases memory only once
the other thread is provably blocked.
"""

from __future__ import annotations

import pytest
from feed_helpers import Background, ObservedCondition

from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.rangefeed.budget import Budget

DEADLINE_S = 10.0


def observe(budget: Budget) -> ObservedCondition:
    cond = ObservedCondition(budget._mutex)
    budget._cond = cond  # NB: private; swapped before any thread uses the budget
    return cond


# --- construction ---------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1])
def test_a_budget_needs_a_positive_limit(limit: int) -> None:
    with pytest.raises(InvalidArgumentError, match=str(limit)):
        Budget(limit)


# --- try_acquire ----------------------------------------------------------------------


def test_try_acquire_takes_memory_up_to_the_limit() -> None:
    budget = Budget(100)
    assert budget.try_acquire(60) is True
    assert budget.try_acquire(40) is True
    assert budget.used == 100


def test_try_acquire_fails_fast_when_memory_is_short() -> None:
    budget = Budget(100)
    budget.try_acquire(60)
    assert budget.try_acquire(41) is False
    assert budget.used == 60
    assert budget.try_acquire(101) is False
    assert budget.used == 60


def test_released_memory_can_be_taken_again() -> None:
    budget = Budget(100)
    budget.try_acquire(100)
    budget.release(30)
    assert budget.used == 70
    assert budget.try_acquire(30) is True
    assert budget.try_acquire(1) is False


def test_releasing_more_than_is_used_stops_at_zero() -> None:
    budget = Budget(100)
    budget.try_acquire(10)
    budget.release(50)
    assert budget.used == 0
    assert budget.try_acquire(100) is True


def test_try_acquire_fails_once_closed() -> None:
    budget = Budget(100)
    budget.close()
    assert budget.try_acquire(1) is False
    assert budget.used == 0


# --- acquire --------------------------------------------------------------------------


def test_acquire_takes_free_memory_without_waiting() -> None:
    budget = Budget(100)
    assert budget.acquire(40, timeout=0) is True
    assert budget.used == 40


def test_acquire_of_more_than_the_limit_takes_the_whole_budget() -> None:
    budget = Budget(100)
    assert budget.acquire(500, timeout=0) is True
    assert budget.used == 100


def test_acquire_waits_and_is_woken_by_release() -> None:
    budget = Budget(100)
    cond = observe(budget)
    budget.try_acquire(100)
    waiter = Background(lambda: budget.acquire(30, timeout=DEADLINE_S))
    cond.await_waiters()
    assert budget.used == 100  # still waiting: nothing was taken
    budget.release(50)
    assert waiter.result() is True
    assert budget.used == 80


def test_a_release_wakes_every_waiter_that_now_fits() -> None:
    budget = Budget(100)
    cond = observe(budget)
    budget.try_acquire(100)
    waiters = [Background(lambda: budget.acquire(50, timeout=DEADLINE_S)) for _ in range(2)]
    cond.await_waiters(2)
    budget.release(100)
    assert [w.result() for w in waiters] == [True, True]
    assert budget.used == 100


def test_a_waiter_keeps_waiting_while_the_release_is_too_small() -> None:
    budget = Budget(100)
    cond = observe(budget)
    budget.try_acquire(100)
    waiter = Background(lambda: budget.acquire(60, timeout=DEADLINE_S))
    cond.await_waiters()
    budget.release(30)
    cond.await_waiters()  # woken, found 30 free, waits again
    assert budget.used == 70
    budget.release(30)
    assert waiter.result() is True
    assert budget.used == 100


def test_acquire_times_out_and_returns_false() -> None:
    budget = Budget(100)
    budget.try_acquire(100)
    assert budget.acquire(1, timeout=0.01) is False
    assert budget.acquire(1, timeout=0) is False
    assert budget.used == 100


def test_close_wakes_waiters_with_node_unavailable() -> None:
    budget = Budget(100)
    cond = observe(budget)
    budget.try_acquire(100)
    waiters = [Background(lambda: budget.acquire(10)) for _ in range(2)]  # no timeout
    cond.await_waiters(2)
    budget.close()
    for waiter in waiters:
        with pytest.raises(NodeUnavailableError):
            waiter.result()
    assert budget.used == 100


def test_acquire_after_close_raises_node_unavailable() -> None:
    budget = Budget(100)
    budget.close()
    with pytest.raises(NodeUnavailableError, match="stopping"):
        budget.acquire(1, timeout=0)
    assert budget.used == 0


# --- reserve --------------------------------------------------------------------------


def test_reserve_holds_memory_for_the_block_and_releases_it() -> None:
    budget = Budget(100)
    with budget.reserve(40) as got:
        assert got is True
        assert budget.used == 40
    assert budget.used == 0


def test_reserve_releases_when_the_block_raises() -> None:
    budget = Budget(100)
    with pytest.raises(RuntimeError, match="boom"), budget.reserve(40):
        assert budget.used == 40
        raise RuntimeError("boom")
    assert budget.used == 0


def test_reserve_that_times_out_yields_false_and_releases_nothing() -> None:
    budget = Budget(100)
    budget.try_acquire(90)
    with budget.reserve(20, timeout=0) as got:
        assert got is False
        assert budget.used == 90
    assert budget.used == 90


def test_reserve_of_more_than_the_limit_gives_back_only_what_it_took() -> None:
    budget = Budget(100)
    with budget.reserve(500, timeout=0) as got:
        assert got is True
        assert budget.used == 100
    assert budget.used == 0


def test_reserve_wakes_a_waiting_acquire_on_exit() -> None:
    budget = Budget(100)
    cond = observe(budget)
    with budget.reserve(100):
        waiter = Background(lambda: budget.acquire(100, timeout=DEADLINE_S))
        cond.await_waiters()
    assert waiter.result() is True
    assert budget.used == 100
