"""Paired rounds (feedkv.testing.paired_rounds): the ratio within each round, their
median, and the interval of the least and greatest that bounds it."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.testing.paired_rounds import paired_ratios, ratio_at_equal


def test_the_median_is_of_the_ratios_within_rounds_not_of_the_runs() -> None:
    # the machine slowed down in rounds 2 and 4, both modes alike: the ratios see through it
    on = [980.0, 490.0, 970.0, 500.0, 1000.0]
    off = [1000.0, 500.0, 1000.0, 500.0, 1000.0]
    ratios = paired_ratios(on, off)
    assert ratios.ratios == pytest.approx((0.98, 0.98, 0.97, 1.0, 1.0))
    assert ratios.median == pytest.approx(0.98)
    assert (ratios.low, ratios.high) == pytest.approx((0.97, 1.0))
    assert ratios.confidence == pytest.approx(0.9375)  # 1 - 2**-4


def test_more_rounds_narrow_the_interval_to_inner_ratios() -> None:
    # 11 rounds: the 3rd smallest and 3rd greatest hold the median with 93.5% (>= 90%);
    # the 4th would give 77%
    off = [1000.0] * 11
    on = [900.0, 940.0, 970.0, 980.0, 990.0, 1000.0, 1000.0, 1010.0, 1020.0, 1030.0, 1300.0]
    ratios = paired_ratios(on, off)
    assert (ratios.low, ratios.high) == pytest.approx((0.97, 1.02))
    assert ratios.median == pytest.approx(1.0)
    assert ratios.confidence == pytest.approx(1 - 2 * (1 + 11 + 55) / 2**11)
    wider = paired_ratios(on, off, level=0.95)  # the 2nd: 98.8%
    assert (wider.low, wider.high) == pytest.approx((0.94, 1.03))


def test_one_round_is_a_ratio_with_no_confidence() -> None:
    ratios = paired_ratios([3.0], [2.0])
    assert (ratios.median, ratios.low, ratios.high, ratios.confidence) == (1.5, 1.5, 1.5, 0.0)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [([], [], "at least one"), ([1.0], [1.0, 2.0], "as many"), ([1.0], [0.0], "positive")],
)
def test_unpaired_or_empty_rounds_are_refused(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        paired_ratios(a, b)


def test_a_ratio_that_moves_with_another_is_read_where_the_other_is_one() -> None:
    # CPU per commit ~ rate ** -0.4, and 2% more with metrics on: whatever rate each
    # round's node with metrics happened to commit at, the fit finds the 2%
    rates = [0.8, 0.85, 0.9, 0.93, 0.97, 1.02, 1.1]  # mostly slower
    cpu = [1.02 * r**-0.4 for r in rates]
    assert paired_ratios(cpu, [1.0] * len(cpu)).median != pytest.approx(1.02, abs=0.005)
    assert ratio_at_equal(rates, cpu) == pytest.approx(1.02)
    spoiled = [*cpu[:-1], 3.0]  # a round a burst of load spoiled
    assert ratio_at_equal(rates, spoiled) == pytest.approx(1.02, abs=0.005)


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        ([1.0, 1.0], [1.0, 2.0], "different"),
        ([1.0], [1.0, 2.0], "as many"),
        ([0.0], [1.0], "positive"),
    ],
)
def test_ratio_at_equal_refuses_what_it_cannot_fit(
    x: list[float], y: list[float], match: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        ratio_at_equal(x, y)
