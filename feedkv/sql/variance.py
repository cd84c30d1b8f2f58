"""The aggregates of spread: ``variance`` / ``var_samp``, ``var_pop``, ``stddev`` /
``stddev_samp`` and ``stddev_pop``, as CockroachDB types them: a DECIMAL over INT or
DECIMAL values, a FLOAT over FLOAT ones.

Over DECIMAL and INT the sums are exact, and the result is rounded once, to 20
significant digits (as ``avg``'s quotient); over FLOAT, Welford's running mean keeps the
result stable. A sample's spread needs two values (else NULL), a population's one (over
no rows it is NULL). NULL values are skipped, as by every aggregate.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

from feedkv.sql.types import DECIMAL_QUOTIENT, EXACT_DECIMAL

__all__ = ["Spread"]

_ROOT = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP, Emax=2000, Emin=-2000)


class Spread:
    """One group's variance or standard deviation (``sample``: divide by n - 1, else by
    n; ``root``: the standard deviation)."""

    keeps_nulls = False

    def __init__(self, sample: bool, root: bool) -> None:
        self.sample, self.root = sample, root
        self.count = 0
        self.exact: tuple[decimal.Decimal, decimal.Decimal] | None = None  # sum, sum of squares
        self.mean = 0.0  # FLOAT values: Welford's mean and sum of squared deviations
        self.squares = 0.0
        self.floats: bool | None = None

    def add(self, value: Any, separator: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
            raise TypeError(value)
        floats = isinstance(value, float)
        if self.floats is not None and floats != self.floats:
            raise TypeError(value)  # one column has one type: only a mix of expressions
        self.floats = floats
        self.count += 1
        if isinstance(value, float):
            delta = value - self.mean
            self.mean += delta / self.count
            self.squares += delta * (value - self.mean)
            return
        number = decimal.Decimal(value)
        total, squares = self.exact or (decimal.Decimal(0), decimal.Decimal(0))
        self.exact = (
            EXACT_DECIMAL.add(total, number),
            EXACT_DECIMAL.add(squares, EXACT_DECIMAL.multiply(number, number)),
        )

    def result(self) -> Any:
        n = self.count
        if n < (2 if self.sample else 1):
            return None
        divisor = n - 1 if self.sample else n
        if self.floats:
            spread = max(self.squares, 0.0) / divisor
            return math.sqrt(spread) if self.root else spread
        if self.exact is None:
            return None
        total, squares = self.exact
        # sum((x - mean)^2) = (n * sum(x^2) - sum(x)^2) / n, exactly
        exact = EXACT_DECIMAL.subtract(
            EXACT_DECIMAL.multiply(squares, n), EXACT_DECIMAL.multiply(total, total)
        )
        if self.root:
            return DECIMAL_QUOTIENT.sqrt(_ROOT.divide(exact, n * divisor))
        return DECIMAL_QUOTIENT.divide(exact, n * divisor)
