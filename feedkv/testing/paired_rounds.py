"""Comparing two modes of a system measured in interleaved rounds on a noisy machine.

A benchmark that compares A against B (a node's metrics on against off) runs them in
rounds, each round one run of A and one of B back to back (in alternating order), so a
round's two runs see nearly the same machine: other processes' load changes between
rounds far more than within one. The figure is the *ratio within a round*, and its
median over the rounds. Single runs here vary by a quarter; ratios of neighbours vary
far less, and the median of several shrugs off a round that one burst of load spoiled.

With ``n`` rounds, the smallest and the largest ratio bound the true median ratio with
probability ``1 - 2 ** (1 - n)`` (each ratio falls on either side of the median with
even odds, whatever their distribution): 94% for 5 rounds, 98% for 7. That interval,
not one run, is what can show a target met.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from feedkv.errors import InvalidArgumentError

__all__ = ["PairedRatios", "paired_ratios"]


@dataclass(frozen=True, slots=True)
class PairedRatios:
    """``a / b`` of each round: their median and the interval ``[low, high]`` (the least
    and greatest ratio) that holds the true median with probability ``confidence``."""

    ratios: tuple[float, ...]
    median: float
    low: float
    high: float
    confidence: float


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> PairedRatios:
    """The ratios ``a[i] / b[i]`` of rounds ``i`` (``a`` and ``b`` measured in the same
    round, in either order), summarised as the module's docstring says."""
    if len(a) != len(b) or not a:
        raise InvalidArgumentError(
            f"paired rounds need as many runs of each mode, at least one; got {len(a)} and {len(b)}"
        )
    if any(x <= 0 for x in b):
        raise InvalidArgumentError(f"a ratio needs a positive denominator; got {list(b)}")
    ratios = tuple(x / y for x, y in zip(a, b, strict=True))
    return PairedRatios(
        ratios=ratios,
        median=statistics.median(ratios),
        low=min(ratios),
        high=max(ratios),
        confidence=1 - 2 ** (1 - len(ratios)),
    )
