"""What a rangefeed stream carries.

For one registration ``(span, start_ts, with_diff, values)`` a stream sends:

- :class:`Value`: a committed change of one key, at a timestamp above ``start_ts``
  (``value=None``: a deletion). Per key, values come in ascending timestamp order.
  With ``with_diff``, ``prev_value`` is the key's value at ``ts - 1 tick``. Without
  ``values`` (a checkpoint-only registration) none are sent, and there is no catch-up
  scan; ``with_diff`` then is refused.
- :class:`Checkpoint`: ``(span, ts)`` promises that no value in ``span`` at or below
  ``ts`` will follow. The first checkpoint after registration marks the end of the
  catch-up scan.
- :class:`Error`: the stream ended; always the last event. ``reason`` says whether to
  register again (see :attr:`ErrorReason.retryable`).

feedkv deletes a span as one tombstone per key, so a range deletion reaches a feed as
one deleting :class:`Value` per key; there is no range-tombstone event to miss.

:class:`Value` and :class:`Checkpoint` are named tuples: a feed makes one per change,
and a tuple is built in a third of a frozen dataclass's time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import NamedTuple, overload

from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = [
    "Checkpoint",
    "Error",
    "ErrorReason",
    "Event",
    "Value",
    "ValueColumns",
    "new_value",
    "values_of",
]


class Value(NamedTuple):
    """A committed change of ``key`` at ``ts`` (``value=None``: deleted). ``prev_value``
    is the value at ``ts - 1 tick`` for registrations with diffs, else ``None``."""

    key: bytes
    value: bytes | None
    ts: Timestamp
    prev_value: bytes | None = None


# A Value from a (key, value, ts, prev_value) tuple, built in C: a NamedTuple's own
# ``__new__`` is a Python function, about three times the cost.
new_value = partial(tuple.__new__, Value)


def values_of(
    keys: Iterable[bytes],
    values: Iterable[bytes | None],
    timestamps: Iterable[Timestamp],
    prev_values: Iterable[bytes | None] | None = None,
) -> list[Value]:
    """Values from columns (``prev_values`` None: none has one), built with
    :data:`new_value`, so no Python code runs per value."""
    return list(_iter_values(keys, values, timestamps, prev_values))


def _iter_values(
    keys: Iterable[bytes],
    values: Iterable[bytes | None],
    timestamps: Iterable[Timestamp],
    prev_values: Iterable[bytes | None] | None,
) -> Iterator[Value]:
    prevs = repeat(None) if prev_values is None else prev_values
    # NB: tuple.__new__ mapped over the class repeated, not new_value: a partial's call
    # per value costs a fifth more
    return map(tuple.__new__, repeat(Value), zip(keys, values, timestamps, prevs, strict=False))


class ValueColumns(Sequence[Value]):
    """Values kept as the columns a scan or the wire decoded them into (``prev_values``
    None: none has one). A catch-up scan's pages travel this way, so the node's service,
    which sends the columns as they are, never makes the :class:`Value` tuples.

    Iterating makes each tuple as the reader comes to it, and keeps none: a consumer that
    drops each value after reading it never holds a page of them, which the cyclic
    garbage collector would scan and promote at about the cost of making them. Indexing,
    slicing, comparing and ``repr`` make them all and keep them (iterating then reads the
    kept ones). Several threads may read one (a remote client hands a run to every feed
    that registered for it): at worst two make the tuples at once. The columns never
    change once made, so ``size``, the bytes the memory budget counts (see
    :func:`~feedkv.rangefeed.registration.values_size`), is worked out once."""

    __slots__ = ("_made", "keys", "prev_values", "size", "timestamps", "values")

    def __init__(
        self,
        keys: list[bytes],
        values: list[bytes | None],
        timestamps: list[Timestamp],
        prev_values: list[bytes | None] | None = None,
        *,
        size: int | None = None,  # the budget's bytes, when the maker knows them
    ) -> None:
        self.keys = keys
        self.values = values
        self.timestamps = timestamps
        self.prev_values = prev_values
        self._made: list[Value] | None = None
        self.size = size

    def made(self) -> list[Value]:
        """The values, made once."""
        if self._made is None:
            self._made = values_of(self.keys, self.values, self.timestamps, self.prev_values)
        return self._made

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[Value]:
        if self._made is not None:
            return iter(self._made)
        return _iter_values(self.keys, self.values, self.timestamps, self.prev_values)

    @overload
    def __getitem__(self, index: int) -> Value: ...

    @overload
    def __getitem__(self, index: slice) -> list[Value]: ...

    def __getitem__(self, index: int | slice) -> Value | list[Value]:
        return self.made()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ValueColumns | list):
            return self.made() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ValueColumns({self.made()!r})"


class Checkpoint(NamedTuple):
    """No value in ``span`` at or below ``ts`` will follow on this stream."""

    span: Span
    ts: Timestamp  # inclusive: nothing at or below it follows in ``span``


class ErrorReason(enum.Enum):
    """Why a stream ended."""

    RANGE_SPLIT = "RANGE_SPLIT"
    RANGE_MERGED = "RANGE_MERGED"
    REPLICA_REMOVED = "REPLICA_REMOVED"
    RAFT_SNAPSHOT = "RAFT_SNAPSHOT"  # the replica took a snapshot: its ops skipped entries
    NODE_SHUTDOWN = "NODE_SHUTDOWN"
    SLOW_CONSUMER = "SLOW_CONSUMER"
    RANGE_NOT_FOUND = "RANGE_NOT_FOUND"  # the span is no longer (only) on this range
    GC_THRESHOLD = "GC_THRESHOLD"  # the start timestamp is below the GC threshold
    DISCONNECTED = "DISCONNECTED"  # the connection to the node broke
    INVALID_REQUEST = "INVALID_REQUEST"  # the registration itself was malformed
    PERMISSION_DENIED = "PERMISSION_DENIED"  # the user may not read the span
    INVARIANT_VIOLATION = "INVARIANT_VIOLATION"  # a bug: the processor broke a promise
    UNREGISTERED = "UNREGISTERED"  # the consumer asked to stop

    @property
    def retryable(self) -> bool:
        """Whether registering again (from the last checkpoint) can succeed."""
        return self not in _TERMINAL


_TERMINAL = frozenset(
    (
        ErrorReason.GC_THRESHOLD,
        ErrorReason.INVALID_REQUEST,
        ErrorReason.PERMISSION_DENIED,
        ErrorReason.INVARIANT_VIOLATION,
    )
)


@dataclass(frozen=True, slots=True)
class Error:
    """The stream ended (always its last event); ``reason.retryable`` says what to do."""

    reason: ErrorReason
    message: str = ""
    threshold: Timestamp | None = None  # GC_THRESHOLD: the lowest start that would work


Event = Value | Checkpoint | Error
