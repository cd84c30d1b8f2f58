"""What a window function gives at each row of one partition, its rows in the window's
order and grouped into peers (rows equal in that order).

Rankings ignore the frame: ``row_number``, ``rank``, ``dense_rank``, ``percent_rank``
(``(rank - 1) / (rows - 1)``, 0 for one row), ``cume_dist`` (the rows up to the current
one's last peer, over the rows), ``ntile(n)`` (buckets as even as can be, the first
ones a row larger), ``lag`` / ``lead`` (the value ``offset`` rows before / after, else
``default``). ``first_value``, ``last_value``, ``nth_value`` and the aggregates take the
rows of the *frame*: ``ROWS`` counts rows, ``RANGE`` moves peers together; the default
is ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`` (with no ORDER BY every row is
a peer: the whole partition). So ``last_value`` with the default frame is the current
row's last peer, as in PostgreSQL.

Cost: a frame that starts at the partition's first row runs its aggregate once over
the partition, reading each result as it goes; any other frame runs it again per row
(rows x frame size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from feedkv.errors import SQLError
from feedkv.sql.aggregate import AggregateCall
from feedkv.sql.expr import Compiled, Context

__all__ = ["DEFAULT_FRAME", "Frame", "Function", "Partition"]

Bound = tuple[Literal["unbounded", "current", "preceding", "following"], int]


@dataclass(frozen=True, slots=True)
class Frame:
    """``ROWS`` (``rows``) or ``RANGE`` ``BETWEEN start AND end``; an offset counts rows
    (RANGE takes none: it is refused when planned)."""

    rows: bool
    start: Bound
    end: Bound

    def bounds(self, position: int, peers: tuple[int, int], size: int) -> tuple[int, int]:
        """The first and last position of the frame of the row at ``position`` (its
        peers at ``peers``, inclusive) in a partition of ``size`` rows; empty when the
        first is after the last."""
        return self._place(self.start, position, peers, size, True), self._place(
            self.end, position, peers, size, False
        )

    def _place(
        self, bound: Bound, position: int, peers: tuple[int, int], size: int, start: bool
    ) -> int:
        kind, offset = bound
        if kind == "unbounded":
            return 0 if start else size - 1
        if kind == "current":
            if self.rows:
                return position
            return peers[0] if start else peers[1]
        moved = position - offset if kind == "preceding" else position + offset
        return max(moved, 0) if start else min(moved, size - 1)


DEFAULT_FRAME = Frame(rows=False, start=("unbounded", 0), end=("current", 0))


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition: its rows (``envs``, in the window's order) and, for each, the
    positions of its first and last peer."""

    envs: list[tuple[Any, ...]]
    peers: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Function:
    """A window function: its ``name``, its arguments (``args``, over a row) or, for an
    aggregate, its ``call``, and its frame."""

    name: str
    args: list[Compiled]
    call: AggregateCall | None
    frame: Frame

    def values(self, part: Partition, context: Context) -> list[Any]:
        """The function's value at each row of ``part``."""
        if self.call is not None:
            return self._aggregate(self.call, part, context)
        ranking = _RANKINGS.get(self.name)
        if ranking is not None:
            return ranking(self, part, context)
        return self._framed_value(part, context)

    def _aggregate(self, call: AggregateCall, part: Partition, context: Context) -> list[Any]:
        frame = self.frame
        size = len(part.envs)
        out: list[Any] = [None] * size
        if frame.start[0] == "unbounded" and frame.end[0] in ("current", "unbounded"):
            # One running state: add each row once, read the result at each frame end.
            state = call.state()
            added = -1
            for position in range(size):
                _first, last = frame.bounds(position, part.peers[position], size)
                while added < last:
                    added += 1
                    state.add(part.envs[added], context)
                out[position] = state.result()
            return out
        for position in range(size):
            first, last = frame.bounds(position, part.peers[position], size)
            state = call.state()
            for i in range(first, last + 1):
                state.add(part.envs[i], context)
            out[position] = state.result()
        return out

    def _framed_value(self, part: Partition, context: Context) -> list[Any]:
        """first_value, last_value, nth_value: a row of the frame's value."""
        size = len(part.envs)
        out: list[Any] = [None] * size
        value = self.args[0]
        for position in range(size):
            first, last = self.frame.bounds(position, part.peers[position], size)
            if first > last:
                continue
            if self.name == "first_value":
                chosen = first
            elif self.name == "last_value":
                chosen = last
            else:  # nth_value
                nth = self.args[1](part.envs[position], context)
                if nth is None:
                    continue
                if not isinstance(nth, int) or isinstance(nth, bool) or nth < 1:
                    raise SQLError("22016", "argument of nth_value must be greater than zero")
                chosen = first + nth - 1
                if chosen > last:
                    continue
            out[position] = value(part.envs[chosen], context)
        return out


def _row_number(f: Function, part: Partition, context: Context) -> list[Any]:
    return list(range(1, len(part.envs) + 1))


def _rank(f: Function, part: Partition, context: Context) -> list[Any]:
    return [first + 1 for first, _last in part.peers]


def _dense_rank(f: Function, part: Partition, context: Context) -> list[Any]:
    out, rank, last = [], 0, None
    for peers in part.peers:
        if peers != last:
            rank, last = rank + 1, peers
        out.append(rank)
    return out


def _percent_rank(f: Function, part: Partition, context: Context) -> list[Any]:
    size = len(part.envs)
    return [first / (size - 1) if size > 1 else 0.0 for first, _last in part.peers]


def _cume_dist(f: Function, part: Partition, context: Context) -> list[Any]:
    size = len(part.envs)
    return [(last + 1) / size for _first, last in part.peers]


def _ntile(f: Function, part: Partition, context: Context) -> list[Any]:
    size = len(part.envs)
    out: list[Any] = []
    for position, env in enumerate(part.envs):
        buckets = f.args[0](env, context)
        if buckets is None:
            out.append(None)
            continue
        if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 1:
            raise SQLError("22014", "argument of ntile must be greater than zero")
        small, larger = divmod(size, buckets)  # the first ``larger`` buckets hold small + 1
        if position < larger * (small + 1):
            out.append(position // (small + 1) + 1)
        else:
            out.append(larger + (position - larger * (small + 1)) // small + 1)
    return out


def _shifted(f: Function, part: Partition, context: Context, sign: int) -> list[Any]:
    """lag (sign -1) and lead (+1): the value ``offset`` rows away, else ``default``."""
    value = f.args[0]
    offset = f.args[1] if len(f.args) > 1 else None
    default = f.args[2] if len(f.args) > 2 else None
    out: list[Any] = []
    for position, env in enumerate(part.envs):
        step = offset(env, context) if offset is not None else 1
        if step is None:
            out.append(None)
            continue
        if not isinstance(step, int) or isinstance(step, bool):
            raise SQLError("42883", f"unknown signature: {f.name}() takes an INT offset")
        target = position + sign * step
        if 0 <= target < len(part.envs):
            out.append(value(part.envs[target], context))
        else:
            out.append(default(env, context) if default is not None else None)
    return out


def _lag(f: Function, part: Partition, context: Context) -> list[Any]:
    return _shifted(f, part, context, -1)


def _lead(f: Function, part: Partition, context: Context) -> list[Any]:
    return _shifted(f, part, context, 1)


_RANKINGS = {
    "row_number": _row_number,
    "rank": _rank,
    "dense_rank": _dense_rank,
    "percent_rank": _percent_rank,
    "cume_dist": _cume_dist,
    "ntile": _ntile,
    "lag": _lag,
    "lead": _lead,
}
