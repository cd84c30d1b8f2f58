"""The log a range's processor keeps of its values, read by its registrations.

The processor (:mod:`feedkv.rangefeed.processor`) appends each value once, on the
commit thread; each registration (:mod:`feedkv.rangefeed.registration`) reads it from
its own cursor, on its consumer's thread. A trim replaces the log whole rather than
editing it, so a reader always holds one consistent version.
"""

from __future__ import annotations

from typing import NamedTuple

from feedkv.rangefeed.event import Value, ValueColumns
from feedkv.util.hlc import Timestamp

__all__ = ["EventLog", "LogSlice"]


class EventLog(NamedTuple):
    """The processor's log, swapped whole when trimmed so readers on other threads always
    see one consistent version: entry ``i`` of each list is at position ``base + i``."""

    base: int
    values: list[Value]  # without prev_value
    diffs: list[Value | None]  # with prev_value (None while no registration wants diffs)
    sizes: list[int]  # the budget bytes each entry holds
    marks: list[tuple[int, Timestamp]]  # (position, resolved): a checkpoint after it


class LogSlice:
    """Values read from a processor's log, the same object for every reader of the same
    positions: their columns, and their bounds, which each reader checks against its span
    and start, are worked out once for them all, not once per registration."""

    __slots__ = ("_keys", "_min_ts", "values")

    def __init__(self, values: list[Value], with_diff: bool) -> None:
        self.values = ValueColumns.of_values(values, with_diff)
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
            self._min_ts = min(self.values.timestamps)
        return self._min_ts
