"""How a range's changes reach the code that watches them (the rangefeed processor).

The store hands every command's logical ops to the observers of the command's range in
apply order, on the engine's commit thread, while ``engine.apply_lock`` is held, right
after the command became durable. An observer registered through
:meth:`feedkv.kv.store.Store.observe` gets, under that same lock, a snapshot of the store:
the snapshot holds exactly the commands whose ops it will not be sent, so a catch-up scan
over the snapshot followed by the ops has no gap and no double.

Callbacks must be quick and must not block (queue the work): they run on the commit
thread with the apply lock held.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

from feedkv.storage.logical_ops import LogicalOp
from feedkv.util.hlc import Timestamp

__all__ = ["RangeEndReason", "RangeObserver"]


class RangeEndReason(enum.Enum):
    """Why a range stopped sending to its observers."""

    RANGE_SPLIT = "RANGE_SPLIT"
    RANGE_MERGED = "RANGE_MERGED"
    REPLICA_REMOVED = "REPLICA_REMOVED"
    RAFT_SNAPSHOT = "RAFT_SNAPSHOT"  # a snapshot replaced the replica's data wholesale
    NODE_SHUTDOWN = "NODE_SHUTDOWN"


class RangeObserver(Protocol):
    def on_ops(self, ops: Sequence[LogicalOp]) -> None:
        """The logical ops of one durable command of the range, in apply order."""
        ...

    def on_closed(self, closed_ts: Timestamp) -> None:
        """The range's closed timestamp is now at least ``closed_ts``."""
        ...

    def on_range_ended(self, reason: RangeEndReason) -> None:
        """The range split, merged or shut down; no more callbacks follow."""
        ...
