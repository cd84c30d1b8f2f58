"""Tests for feedkv.kv.closed_timestamp: per-range promises that only move forward."""

from __future__ import annotations

import pytest

from feedkv.errors import InvariantViolation
from feedkv.kv.closed_timestamp import ClosedTimestamps
from feedkv.util.hlc import Timestamp

TARGET = 1_000
OPENED = Timestamp(50_000, 3)


def make_closed(target_ns: int = TARGET) -> ClosedTimestamps:
    return ClosedTimestamps(target_ns, OPENED)


def test_every_range_starts_closed_at_the_time_the_store_opened() -> None:
    closed = make_closed()

    assert closed.get(1) == OPENED
    assert closed.get(42) == OPENED


def test_a_negative_target_is_rejected() -> None:
    with pytest.raises(InvariantViolation, match="-1"):
        ClosedTimestamps(-1, OPENED)


def test_close_moves_the_range_to_now_minus_the_target() -> None:
    closed = make_closed()

    assert closed.close(1, Timestamp(60_000, 7)) == Timestamp(59_000, 0)
    assert closed.get(1) == Timestamp(59_000, 0)


def test_a_zero_target_closes_at_the_wall_time_of_now() -> None:
    closed = make_closed(target_ns=0)

    assert closed.close(1, Timestamp(60_000, 7)) == Timestamp(60_000, 0)


def test_close_leaves_other_ranges_alone() -> None:
    closed = make_closed()

    closed.close(1, Timestamp(60_000))

    assert closed.get(2) == OPENED


def test_close_never_moves_a_range_below_the_time_the_store_opened() -> None:
    closed = make_closed()

    assert closed.close(1, Timestamp(OPENED.wall + TARGET - 1, 9)) == OPENED
    assert closed.get(1) == OPENED


def test_close_never_moves_a_range_backwards() -> None:
    closed = make_closed()
    closed.close(1, Timestamp(70_000))

    assert closed.close(1, Timestamp(65_000)) == Timestamp(69_000)
    assert closed.get(1) == Timestamp(69_000)


def test_closing_again_at_the_same_time_is_idempotent() -> None:
    closed = make_closed()

    first = closed.close(1, Timestamp(70_000))
    second = closed.close(1, Timestamp(70_000))

    assert first == second == Timestamp(69_000)


def test_the_right_side_of_a_split_inherits_its_parents_closed_timestamp() -> None:
    closed = make_closed()
    closed.close(1, Timestamp(70_000))

    closed.split(1, 2)

    assert closed.get(2) == Timestamp(69_000)
    assert closed.get(1) == Timestamp(69_000)


def test_the_halves_of_a_split_close_independently_afterwards() -> None:
    closed = make_closed()
    closed.close(1, Timestamp(70_000))
    closed.split(1, 2)

    closed.close(2, Timestamp(80_000))

    assert closed.get(1) == Timestamp(69_000)
    assert closed.get(2) == Timestamp(79_000)


def test_splitting_a_range_that_never_closed_hands_down_the_opening_time() -> None:
    closed = make_closed()

    closed.split(1, 2)

    assert closed.get(2) == OPENED


@pytest.mark.parametrize(("left_now", "right_now"), [(70_000, 90_000), (90_000, 70_000)])
def test_a_merged_range_keeps_the_higher_closed_timestamp_of_the_two(
    left_now: int, right_now: int
) -> None:
    closed = make_closed()
    closed.close(1, Timestamp(left_now))
    closed.close(2, Timestamp(right_now))

    closed.merge(1, 2)

    assert closed.get(1) == Timestamp(89_000)


def test_a_merged_range_cannot_be_closed_below_what_the_right_side_promised() -> None:
    closed = make_closed()
    closed.close(2, Timestamp(90_000))
    closed.merge(1, 2)

    assert closed.close(1, Timestamp(80_000)) == Timestamp(89_000)


def test_a_range_with_a_target_of_its_own_closes_at_it_and_the_others_at_the_default() -> None:
    closed = make_closed()
    closed.set_targets({2: 100})

    assert closed.close(1, Timestamp(60_000, 0)) == Timestamp(59_000, 0)
    assert closed.close(2, Timestamp(60_000, 0)) == Timestamp(59_900, 0)
    assert (closed.target(1), closed.target(2)) == (TARGET, 100)


def test_a_longer_target_never_moves_a_closed_timestamp_back() -> None:
    closed = make_closed()
    closed.set_targets({1: 100})
    closed.close(1, Timestamp(60_000, 0))
    closed.set_targets({})  # back to the default, 1000 behind now

    assert closed.close(1, Timestamp(60_500, 0)) == Timestamp(59_900, 0)
    assert closed.close(1, Timestamp(61_000, 0)) == Timestamp(60_000, 0)


def test_a_negative_range_target_is_rejected() -> None:
    closed = make_closed()
    with pytest.raises(InvariantViolation, match="range 3's closed timestamp target"):
        closed.set_targets({3: -5})
    assert closed.target(3) == TARGET
