"""variance: the spread aggregates' arithmetic, without a store."""

from __future__ import annotations

import decimal
import math

import pytest

from feedkv.sql.variance import Spread


def spread(values: list[object], sample: bool, root: bool) -> object:
    state = Spread(sample=sample, root=root)
    for value in values:
        state.add(value, None)
    return state.result()


def test_integer_variance_is_a_decimal_of_20_significant_digits() -> None:
    assert spread([1, 2, 3, 4], sample=True, root=False) == decimal.Decimal("1.6666666666666666667")
    assert spread([1, 2, 3, 4], sample=False, root=False) == decimal.Decimal("1.25")
    assert spread([1, 2, 3, 4], sample=True, root=True) == decimal.Decimal("1.2909944487358056284")


def test_float_spread_is_a_float() -> None:
    result = spread([1.0, 2.0, 3.0, 4.0], sample=False, root=True)
    assert isinstance(result, float)
    assert math.isclose(result, math.sqrt(1.25))


@pytest.mark.parametrize(("sample", "expected"), [(True, None), (False, decimal.Decimal(0))])
def test_a_sample_needs_two_values_a_population_one(sample: bool, expected: object) -> None:
    assert spread([7], sample=sample, root=False) == expected
    assert spread([], sample=sample, root=False) is None


def test_large_values_lose_nothing_before_the_final_rounding() -> None:
    big = 10**18
    assert spread([big, big + 1, big + 2], sample=True, root=False) == decimal.Decimal(1)


def test_mixing_floats_and_integers_is_refused() -> None:
    state = Spread(sample=True, root=False)
    state.add(1.0, None)
    with pytest.raises(TypeError):
        state.add(1, None)
