"""The registrations of one processor, found by key in O(log n).

The keyspace is cut at every registration's start and end key into elementary intervals;
each interval holds the tuple of registrations covering it. Looking up a key is one
bisect, so an op costs the same with 10 or 10,000 registrations. Adding a registration
cuts at most two intervals and extends the tuples it covers; removing one shrinks them
(boundaries stay: they are cheap, and the next registration often reuses them).

Owned by the processor: every call happens under the store's apply lock.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from feedkv.util.keys import Span

__all__ = ["Registry"]


class _Spanned(Protocol):
    @property
    def span(self) -> Span: ...


R = TypeVar("R", bound=_Spanned)


class Registry(Generic[R]):
    def __init__(self) -> None:
        self._bounds: list[bytes] = [b""]
        self._cover: list[tuple[R, ...]] = [()]
        self._all: dict[int, R] = {}

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, reg: object) -> bool:
        return self._all.get(id(reg)) is reg

    def __iter__(self) -> Iterator[R]:
        return iter(list(self._all.values()))

    def add(self, reg: R) -> None:
        first = self._cut(reg.span.start)
        last = self._cut(reg.span.end)
        for i in range(first, last):
            self._cover[i] = (*self._cover[i], reg)
        self._all[id(reg)] = reg

    def remove(self, reg: R) -> None:
        if self._all.pop(id(reg), None) is None:
            return
        first = bisect_right(self._bounds, reg.span.start) - 1
        for i in range(first, len(self._bounds)):
            if i > first and self._bounds[i] >= reg.span.end:
                break
            self._cover[i] = tuple(r for r in self._cover[i] if r is not reg)

    def covering(self, key: bytes) -> tuple[R, ...]:
        """The registrations whose span contains ``key``."""
        return self._cover[bisect_right(self._bounds, key) - 1]

    def covers_all(self, low: bytes, high: bytes) -> bool:
        """Whether the same registrations, one at least, cover every key from ``low`` to
        ``high`` (both in one interval: one bisect each, however many keys between)."""
        bounds = self._bounds
        at = bisect_right(bounds, low)
        return at == bisect_right(bounds, high) and bool(self._cover[at - 1])

    def overlapping(self, span: Span) -> list[R]:
        """The registrations whose span overlaps ``span``."""
        return [r for r in self._all.values() if r.span.overlaps(span)]

    def _cut(self, key: bytes) -> int:
        """Make ``key`` an interval boundary; returns the index of the interval it starts."""
        i = bisect_right(self._bounds, key) - 1
        if self._bounds[i] == key:
            return i
        self._bounds.insert(i + 1, key)
        self._cover.insert(i + 1, self._cover[i])
        return i + 1
