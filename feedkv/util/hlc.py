"""Hybrid logical clock timestamps.

A :class:`Timestamp` is ``(wall_ns, logical)``: nanoseconds since the Unix epoch plus a
logical counter that orders events within one nanosecond. Timestamps are totally
ordered (tuple order), hashable and immutable; ``next()`` and ``prev()`` step one tick.
The logical part runs to :data:`TOP_LOGICAL`, as CockroachDB's (an int32) does: the tick
before ``(w, 0)`` is ``(w - 1, 2147483647)``, printed as CockroachDB prints its own
``Prev()``. Encodings hold an unsigned 32-bit logical part (:data:`MAX_LOGICAL`), and
older versions stepped back to it, so such timestamps are still read; ``next()`` carries
any logical part at or past :data:`TOP_LOGICAL` into the wall.

The string form is ``"<wall>.<logical as 10 digits>"``, the same shape CockroachDB prints
for ``cluster_logical_timestamp()``: ``1700000000000000000.0000000003``.

A :class:`Clock` hands out timestamps that never go backwards, even if the physical
clock does, and absorbs timestamps seen from other nodes (``update``) unless they are
further ahead than the maximum clock offset, which would let one bad clock drag the
whole cluster into the future.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import compress, count, islice, repeat
from typing import Any, NamedTuple, TypeVar

from feedkv.errors import ClockOffsetError, InvalidArgumentError, TimestampParseError

__all__ = [
    "MAX_LOGICAL",
    "MAX_TIMESTAMP",
    "TOP_LOGICAL",
    "ZERO_TIMESTAMP",
    "Clock",
    "ManualClock",
    "Timestamp",
    "decode_timestamps",
    "run_ends",
    "timestamps_of",
]

MAX_WALL = (1 << 63) - 1
MAX_LOGICAL = (1 << 32) - 1  # the largest logical part an encoding holds
TOP_LOGICAL = (1 << 31) - 1  # the largest one feedkv makes (see the module)


class Timestamp(NamedTuple):
    """A point in hybrid logical time. Compare, hash and sort like a tuple."""

    wall: int
    logical: int = 0

    def next(self) -> Timestamp:
        """The smallest timestamp after this one."""
        if self.logical >= TOP_LOGICAL:
            if self.wall == MAX_WALL:
                raise InvalidArgumentError("the maximum timestamp has no successor")
            return Timestamp(self.wall + 1, 0)
        return Timestamp(self.wall, self.logical + 1)

    def prev(self) -> Timestamp:
        """The largest timestamp before this one."""
        if self.logical:
            return Timestamp(self.wall, self.logical - 1)
        if self.wall == 0:
            raise InvalidArgumentError("the zero timestamp has no predecessor")
        return Timestamp(self.wall - 1, TOP_LOGICAL)

    def is_zero(self) -> bool:
        return self.wall == 0 and self.logical == 0

    def __str__(self) -> str:
        return f"{self.wall}.{self.logical:010d}"

    def __repr__(self) -> str:
        return f"Timestamp({self.wall}, {self.logical})"

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        """Parse ``"<wall>.<10 logical digits>"``, the form ``str`` gives (a bare
        ``"<wall>"`` means logical 0): strict, for what feedkv itself wrote. What people
        type goes through :meth:`parse_decimal`.

        Raises :class:`TimestampParseError` naming what is wrong with ``text``.
        """
        if not isinstance(text, str):
            raise TimestampParseError(f"timestamp must be a string, not {type(text).__name__}")
        shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "..."
        wall_text, dot, logical_text = text.partition(".")
        if not wall_text.isdigit() or not wall_text.isascii():
            raise TimestampParseError(
                f"invalid timestamp {shown}: expected '<wall nanoseconds>.<logical>', "
                f"e.g. '1700000000000000000.0000000003'"
            )
        if len(wall_text) > len(str(MAX_WALL)):
            raise TimestampParseError(f"invalid timestamp {shown}: wall time out of range")
        if dot and (
            len(logical_text) != 10 or not logical_text.isdigit() or not logical_text.isascii()
        ):
            raise TimestampParseError(
                f"invalid timestamp {shown}: the logical part must be exactly 10 digits"
            )
        wall = int(wall_text)
        logical = int(logical_text) if dot else 0
        if wall > MAX_WALL:
            raise TimestampParseError(f"invalid timestamp {shown}: wall time out of range")
        if logical > MAX_LOGICAL:
            raise TimestampParseError(
                f"invalid timestamp {shown}: logical part exceeds {MAX_LOGICAL}"
            )
        return cls(wall, logical)

    @classmethod
    def parse_decimal(cls, text: str) -> Timestamp:
        """Parse a timestamp as CockroachDB reads its decimal form (a cursor, ``--since``):
        the fraction is the logical part to 10 places, so ``.0000000003`` is 3, ``.0``
        and a bare ``"<wall>"`` are 0, and ``.5`` is 5000000000."""
        wall_text, dot, logical_text = text.partition(".") if isinstance(text, str) else ("",) * 3
        if dot and 1 <= len(logical_text) < 10 and logical_text.isdigit():
            text = f"{wall_text}.{logical_text.ljust(10, '0')}"
        return cls.parse(text)

    @classmethod
    def checked(cls, wall: int, logical: int = 0) -> Timestamp:
        """Build a timestamp from untrusted integers, rejecting out-of-range parts."""
        if not 0 <= wall <= MAX_WALL or not 0 <= logical <= MAX_LOGICAL:
            raise InvalidArgumentError(f"timestamp parts out of range: ({wall}, {logical})")
        return cls(wall, logical)


ZERO_TIMESTAMP = Timestamp(0, 0)
MAX_TIMESTAMP = Timestamp(MAX_WALL, MAX_LOGICAL)

_new_timestamp = partial(tuple.__new__, Timestamp)


def timestamps_of(walls: Iterable[int], logicals: Iterable[int]) -> list[Timestamp]:
    """Timestamps from a column of walls and one of logicals (see :func:`decode_timestamps`);
    a negative wall raises :class:`~feedkv.errors.InvalidArgumentError`."""
    return decode_timestamps(list(zip(walls, logicals, strict=True)), _checked_parts)


def _checked_parts(pairs: Sequence[tuple[int, int]]) -> Sequence[tuple[int, int]]:
    if (lowest := min(pairs))[0] < 0:
        raise InvalidArgumentError(f"a negative timestamp, (wall, logical) = {lowest}")
    return pairs


_E = TypeVar("_E", bytes, tuple[int, int])  # an encoded timestamp, ordered as timestamps are
_SHORT_RUN = 8  # runs of fewer values than this on average are not worth finding
_TRIED_RUNS = 4  # runs found before that is judged


def run_ends(column: Sequence[Any], encoded: Callable[[Any], Any] | None = None) -> list[int]:
    """Where each run of equal timestamps at the head of ``column`` ends: a column of
    timestamps or of their encodings, or of items holding them (read by ``encoded``), for
    coders that would otherwise handle one per value.

    A transaction's values share its timestamp, so a column of them is runs. In timestamp
    order (an index, a catch-up scan) each run's end is found by bisection; out of order
    (a commit group's transactions), by reading on from its start in C. A column read
    by ``encoded`` must be in timestamp order (it is not checked). The search stops once
    runs average under ``_SHORT_RUN`` values (single-key writes), and returns only runs
    averaging at least that: the caller handles the rest value by value. A column with
    no run that long at either end is taken for single-key writes without a search."""
    if len(column) < _SHORT_RUN:
        return []
    ends_of_column = [column[0], column[_SHORT_RUN - 1], column[-_SHORT_RUN], column[-1]]
    if encoded is not None:
        ends_of_column = list(map(encoded, ends_of_column))
    head, head_end, tail_start, tail = ends_of_column
    if head != head_end and tail_start != tail:
        return []
    ends: list[int] = []
    start = 0
    while start < len(column):
        if encoded is None:
            end = _run_end(column, start)
        else:
            end = bisect_right(column, encoded(column[start]), start + 1, key=encoded)
        ends.append(end)
        start = end
        if len(ends) >= _TRIED_RUNS and len(ends) * _SHORT_RUN > end:
            break
    while ends and len(ends) * _SHORT_RUN > ends[-1]:
        ends.pop()  # the runs found are too short on average to pay
    return ends


def _run_end(column: Sequence[Any], start: int) -> int:
    first = column[start]
    end = bisect_right(column, first, start + 1)
    if column[start:end].count(first) == end - start:
        return end  # NB: bisection stopped at a value above first, or the column's end
    differs = compress(count(start + 1), map(first.__ne__, islice(column, start + 1, None)))
    return next(differs, len(column))


def decode_timestamps(
    column: Sequence[Any],
    parts: Callable[[Sequence[_E]], Iterable[tuple[int, int]]],
    encoded: Callable[[Any], _E] | None = None,
) -> list[Timestamp]:
    """The timestamps of a column of encoded ones (or of items holding them, read by
    ``encoded``, in timestamp order), ``parts`` giving the ``(wall, logical)`` of a list
    of distinct encodings: without running Python code per value, once per run of equal
    timestamps (see :func:`run_ends`), then once per distinct timestamp of the values
    left."""
    timestamps: list[Timestamp] = []
    ends = run_ends(column, encoded)
    for end in ends:
        start = len(timestamps)
        first = column[start] if encoded is None else encoded(column[start])
        timestamps += repeat(_made(parts, [first])[0], end - start)
    rest = column[ends[-1] :] if ends else column
    if encoded is not None:
        rest = list(map(encoded, rest))
    distinct = dict.fromkeys(rest)
    if len(distinct) == len(rest):
        made = _made(parts, rest) if rest else []
    else:
        made_of = dict(zip(distinct, _made(parts, list(distinct)), strict=True))
        made = list(map(made_of.__getitem__, rest))
    return timestamps + made if timestamps else made


def _made(
    parts: Callable[[Sequence[_E]], Iterable[tuple[int, int]]], encodings: Sequence[_E]
) -> list[Timestamp]:
    # NB: a NamedTuple's own __new__ is a Python function, about three times the cost
    return list(map(_new_timestamp, parts(encodings)))


class Clock:
    """A hybrid logical clock: monotone, thread-safe, and fed by remote timestamps.

    ``physical`` returns wall nanoseconds (``time.time_ns`` by default); it is injected so
    tests can drive time by hand (see :class:`ManualClock`). ``max_offset_ns=None`` turns
    the offset check off.
    """

    def __init__(
        self,
        physical: Callable[[], int] = time.time_ns,
        *,
        max_offset_ns: int | None = 500_000_000,
    ) -> None:
        self._physical = physical
        self.max_offset_ns = max_offset_ns
        self._last = ZERO_TIMESTAMP
        self._lock = threading.Lock()

    def physical_now(self) -> int:
        return self._physical()

    def now(self) -> Timestamp:
        """A timestamp greater than every timestamp this clock has returned or seen."""
        wall = self._physical()
        with self._lock:
            last = self._last
            # NB: tuple.__new__, not the NamedTuple's Python __new__: every write's
            # evaluation asks the time
            ts = _new_timestamp((wall, 0)) if wall > last.wall else last.next()
            self._last = ts
            return ts

    def update(self, remote: Timestamp) -> None:
        """Absorb a timestamp seen from elsewhere so later ``now()`` calls exceed it.

        Raises :class:`ClockOffsetError` if ``remote`` is more than ``max_offset_ns`` ahead
        of this node's physical clock; the clock is left unchanged.
        """
        wall = self._physical()
        if self.max_offset_ns is not None and remote.wall - wall > self.max_offset_ns:
            raise ClockOffsetError(
                f"remote timestamp {remote} is {(remote.wall - wall) / 1e6:.1f} ms ahead of "
                f"the local clock, more than the {self.max_offset_ns / 1e6:.0f} ms max "
                "offset: a clock is off by that much, or the request named a time in the "
                "future (a read's as-of time or an export's end)"
            )
        with self._lock:
            if remote > self._last:
                self._last = remote


class LateClock(Clock):
    """A clock ``late_ns`` behind the wall clock until :meth:`catch_up`: a test makes
    what must be old by then (a table that a cursor hours back may name)."""

    def __init__(self, late_ns: int) -> None:
        self._late_ns = late_ns
        super().__init__(lambda: time.time_ns() - self._late_ns, max_offset_ns=None)

    def catch_up(self) -> None:
        self._late_ns = 0


class ManualClock(Clock):
    """A clock whose physical time moves only when a test says so."""

    def __init__(
        self, wall_ns: int = 1_700_000_000_000_000_000, *, max_offset_ns: int | None = None
    ) -> None:
        self._manual_wall = wall_ns
        super().__init__(lambda: self._manual_wall, max_offset_ns=max_offset_ns)

    def advance(self, ns: int) -> None:
        if ns < 0:
            raise InvalidArgumentError("a manual clock only moves forward")
        self._manual_wall += ns

    def set(self, wall_ns: int) -> None:
        if wall_ns < self._manual_wall:
            raise InvalidArgumentError("a manual clock only moves forward")
        self._manual_wall = wall_ns
