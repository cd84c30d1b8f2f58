"""Closed timestamps: each range's promise that no write will ever land at or below it.

A range closes ``now - target`` (``target`` defaults to 1 s): every command advances its
range's closed timestamp before it evaluates, and writes at or below it are pushed above.
A side loop (:class:`feedkv.kv.store.Store`) closes idle ranges every 200 ms so their
closed timestamps keep moving without traffic; the RangeFeed turns these into resolved
timestamps (resolved = min(closed, oldest unresolved intent - 1 tick)).

A range may close at a target of its own (a table's zone configuration,
``closed_timestamp_target``: :meth:`ClosedTimestamps.set_targets`), so a table of short
transactions gets fast checkpoints without imposing them on every range.

A new tracker starts every range at the clock's time when the store opened: the previous
process's promises are not persisted, and its clock could not have closed anything later.

Only commands move closed timestamps, under the engine's ``eval_lock`` (the commit
thread's, and reads evaluated beside it), so a write and a close of the same range are
ordered. Any thread may read them.
"""

from __future__ import annotations

import functools

from feedkv.errors import InvariantViolation
from feedkv.util.hlc import Timestamp

__all__ = ["ClosedTimestamps"]

_new_timestamp = functools.partial(tuple.__new__, Timestamp)


class ClosedTimestamps:
    def __init__(self, target_ns: int, initial: Timestamp) -> None:
        if target_ns < 0:
            raise InvariantViolation(f"closed timestamp target must be >= 0, got {target_ns}")
        self.target_ns = target_ns
        self._initial = initial
        self._closed: dict[int, Timestamp] = {}
        self._targets: dict[int, int] = {}  # ranges with a target of their own

    def target(self, range_id: int) -> int:
        """How far behind now ``range_id`` closes (ns)."""
        return self._targets.get(range_id, self.target_ns)

    def set_targets(self, targets: dict[int, int]) -> None:
        """Per-range targets (ns), replacing the previous ones; a range without one
        closes at the default target. A range's closed timestamp never goes back: a
        longer target only holds it until ``now - target`` passes it."""
        for range_id, target_ns in targets.items():
            if target_ns < 0:
                raise InvariantViolation(
                    f"range {range_id}'s closed timestamp target must be >= 0, got {target_ns}"
                )
        self._targets = dict(targets)

    def get(self, range_id: int) -> Timestamp:
        return self._closed.get(range_id, self._initial)

    def close(self, range_id: int, now: Timestamp) -> Timestamp:
        """Advance ``range_id``'s closed timestamp to ``now - target`` if that is higher."""
        # NB: get, target and tuple.__new__ (not the NamedTuple's Python __new__) inline:
        # every write's evaluation calls this
        closed = self._closed.get(range_id, self._initial)
        candidate = _new_timestamp((now.wall - self._targets.get(range_id, self.target_ns), 0))
        if candidate > closed:
            self._closed[range_id] = closed = candidate
        return closed

    def forward(self, range_id: int, ts: Timestamp) -> Timestamp:
        """Close ``range_id`` up to ``ts`` if that is higher (a range about to move closes
        up to now: it takes no more writes here; a range arriving keeps its old node's
        promise)."""
        closed = max(self.get(range_id), ts)
        self._closed[range_id] = closed
        return closed

    def restart(self, range_id: int, ts: Timestamp) -> None:
        """Start ``range_id`` at ``ts``, even below where it stands: a replicated range's
        promises arrive through its Raft log, and a replica must not assume one of its
        own (the store's opening time) that the lease holder never made."""
        self._closed[range_id] = ts

    def forget(self, range_id: int) -> None:
        self._closed.pop(range_id, None)

    def split(self, left: int, right: int) -> None:
        """The right-hand side of a split inherits its parent's promise."""
        self._closed[right] = self.get(left)

    def merge(self, left: int, right: int) -> None:
        """A merged range keeps the stronger promise of the two."""
        self._closed[left] = max(self.get(left), self.get(right))
        self._closed.pop(right, None)
