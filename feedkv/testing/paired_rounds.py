"""Comparing two modes of a system measured in rounds on a noisy machine.

A benchmark that compares A against B (a node's metrics on against off) runs them in
rounds, each round one run of A and one of B close together (back to back, or at once),
so a round's two runs see nearly the same machine: other processes' load changes
between rounds far more than within one. The figure is the *ratio within a round*, and
its median over the rounds. Single runs here vary by a quarter; ratios of neighbours
vary far less, and the median of several shrugs off a round that a burst of load spoiled.

The interval: with ``n`` rounds sorted, the ``k``-th smallest and the ``k``-th greatest
ratio bound the true median ratio with probability ``1 - 2 * P(X < k)``, ``X`` binomial
``(n, 1/2)`` (each ratio falls on either side of the median with even odds, whatever
their distribution). :func:`paired_ratios` takes the narrowest such interval whose
confidence is at least ``level``, or the least and the greatest ratio when no interval
reaches it (``1 - 2 ** (1 - n)``: 94% for 5 rounds). That interval, not one run, is what
can show a target met.

A ratio that moves with another one: at full speed, a run's CPU per commit falls as its
commit rate rises (group commits grow), so a round whose node with metrics happened to
commit slower shows it spending more per commit, whatever the metrics cost.
:func:`ratio_at_equal` fits ``log(y) = a + b * log(x)`` over the rounds (Theil-Sen: the
median of the pairwise slopes, which a spoiled round does not drag) and gives
``exp(a)``: the ratio ``y`` at ``x = 1``. NB: what the first mode costs through ``x``
itself is left out of it (``x``'s own ratio tells that).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb, exp, log

from feedkv.errors import InvalidArgumentError

__all__ = ["PairedRatios", "paired_ratios", "ratio_at_equal"]


@dataclass(frozen=True, slots=True)
class PairedRatios:
    """``a / b`` of each round: their median and the interval ``[low, high]`` that holds
    the true median with probability ``confidence``."""

    ratios: tuple[float, ...]
    median: float
    low: float
    high: float
    confidence: float


def paired_ratios(a: Sequence[float], b: Sequence[float], *, level: float = 0.9) -> PairedRatios:
    """The ratios ``a[i] / b[i]`` of rounds ``i`` (``a`` and ``b`` measured in the same
    round, in either order), summarised as the module's docstring says."""
    if len(a) != len(b) or not a:
        raise InvalidArgumentError(
            f"paired rounds need as many runs of each mode, at least one; got {len(a)} and {len(b)}"
        )
    if any(x <= 0 for x in b):
        raise InvalidArgumentError(f"a ratio needs a positive denominator; got {list(b)}")
    ratios = tuple(x / y for x, y in zip(a, b, strict=True))
    ordered = sorted(ratios)
    n = len(ordered)
    k = 1
    while k < (n + 1) // 2 and _confidence(n, k + 1) >= level:
        k += 1
    return PairedRatios(
        ratios=ratios,
        median=statistics.median(ratios),
        low=ordered[k - 1],
        high=ordered[n - k],
        confidence=_confidence(n, k),
    )


def _confidence(n: int, k: int) -> float:
    """The probability that the ``k``-th smallest and ``k``-th greatest of ``n`` draws
    hold their distribution's median between them."""
    below = sum(comb(n, i) for i in range(k))  # fewer than k draws below the median
    return 1 - 2 * below / float(2**n)


def ratio_at_equal(x: Sequence[float], y: Sequence[float]) -> float:
    """The ratio ``y`` would be in a round whose ratio ``x`` is 1, from the rounds'
    ratios ``x[i]`` and ``y[i]`` (see the module's docstring); at least two rounds with
    different ``x``."""
    if len(x) != len(y) or any(v <= 0 for v in (*x, *y)):
        raise InvalidArgumentError(
            f"ratio_at_equal needs as many positive ratios of each; got {list(x)} and {list(y)}"
        )
    lx, ly = [log(v) for v in x], [log(v) for v in y]
    slopes = [
        (ly[j] - ly[i]) / (lx[j] - lx[i])
        for i in range(len(lx))
        for j in range(i + 1, len(lx))
        if lx[j] != lx[i]
    ]
    if not slopes:
        raise InvalidArgumentError(
            f"ratio_at_equal needs two rounds with different ratios x; got {list(x)}"
        )
    slope = statistics.median(slopes)
    return exp(statistics.median(b - slope * a for a, b in zip(lx, ly, strict=True)))
