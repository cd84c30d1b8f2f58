"""The log a range's processor keeps of its values, read by its registrations.

The processor (:mod:`feedkv.rangefeed.processor`) appends each value once, on the
commit thread; each registration (:mod:`feedkv.rangefeed.registration`) reads it from
its own cursor, on its consumer's thread. A trim replaces the log whole rather than
editing it, so a reader always holds one consistent version.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

from feedkv.rangefeed.event import Value
from feedkv.util.hlc import Timestamp

__all__ = ["EventLog", "LogSlice", "LoggedValues"]

_TS = operator.attrgetter("ts")

Stamp = tuple[int, ...]  # a timestamp as a plain (wall, logical) tuple


class EventLog(NamedTuple):
    """The processor's log, swapped whole when trimmed so readers on other threads always
    see one consistent version: entry ``i`` of each list is at position ``base + i``."""

    base: int
    values: list[Value]  # without prev_value
    diffs: list[Value | None]  # with prev_value (None while no registration wants diffs)
    sizes: list[int]  # the budget bytes each entry holds
    marks: list[tuple[int, Timestamp]]  # (position, resolved): a checkpoint after it
    keys: list[bytes]  # each value's key
    stamps: list[Stamp]  # each value's timestamp, plain (see LoggedValues)


class LoggedValues(list[Value]):
    """Values read from a processor's log, with their keys and their timestamps as plain
    ``(wall, logical)`` tuples, sliced from the log's own columns (in C, no code per
    value). A reader that keeps what it read a while (the multi-range client keeps it
    until a checkpoint passes it, about a second) keeps these, not the values: CPython's
    collector tracks a :class:`Value` or a :class:`Timestamp` (tuple subclasses) for as
    long as it lives, and promotes one kept a second into its oldest generation, whose
    growth sets off full collections of the heap; a plain tuple of ints it stops
    tracking at its first collection."""

    __slots__ = ("keys", "stamps")

    def __init__(self, values: list[Value], keys: list[bytes], stamps: list[Stamp]) -> None:
        super().__init__(values)
        self.keys = keys
        self.stamps = stamps


class LogSlice:
    """Values read from a processor's log, the same object for every reader of the same
    positions: their bounds, which each reader checks against its span and start, are
    worked out once for them all, not once per registration."""

    __slots__ = ("_keys", "_min_ts", "values")

    def __init__(self, values: LoggedValues) -> None:
        self.values = values
        self._keys: tuple[bytes, bytes] | None = None
        self._min_ts: Timestamp | None = None

    def key_bounds(self) -> tuple[bytes, bytes]:
        """The lowest and the highest key (of a non-empty slice)."""
        # NB: readers on several threads may both work it out; they get the same answer.
        if self._keys is None:
            keys = self.values.keys
            self._keys = (min(keys), max(keys))
        return self._keys

    def min_ts(self) -> Timestamp:
        """The lowest timestamp (of a non-empty slice)."""
        if self._min_ts is None:
            self._min_ts = min(self.values, key=_TS).ts
        return self._min_ts
