"""The resolved timestamp of a range: the time up to which its history is final.

Two promises combine into it:

- the **closed timestamp** (from the KV layer): no *new* write will land at or below it;
- the **unresolved intents**: a transaction with an intent at ``t`` may still commit at
  ``t`` or later, so nothing at or above ``t`` is final while it is unresolved.

``resolved = min(closed, oldest unresolved intent - 1 tick)``. Once every intent below
the closed timestamp is resolved, no value at or below ``resolved`` can ever appear, which
is exactly what a checkpoint promises.

:class:`ResolvedTimestamp` is a pure state machine: it consumes logical ops, closed
timestamps and the result of an initial intent scan, and answers whether the resolved
timestamp moved. It never reads storage, sleeps or sends. Until the intent scan is in, the
resolved timestamp stays zero: the queue does not yet know every intent. Because writes
land above the closed timestamp, an intent can never appear at or below the resolved
timestamp; if one does, or the value would go backwards, :class:`InvariantViolation`
is raised with both values.

The :class:`UnresolvedIntentQueue` counts each transaction's intents (``WriteIntent``
+1; ``CommitIntent``/``AbortIntent`` -1; their bulk forms ``WriteIntents``,
``CommitIntents`` and ``AbortIntents`` by their counts; ``UpdateIntent`` moves its
timestamp forward; ``AbortTxn`` drops it) and keeps a min-heap by timestamp with lazy
deletion, so the oldest transaction is found in O(log n).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from feedkv.errors import InvariantViolation
from feedkv.storage.logical_ops import (
    AbortIntent,
    AbortIntents,
    AbortTxn,
    CommitIntent,
    CommitIntents,
    DeleteRange,
    IngestValues,
    LogicalOp,
    UpdateIntent,
    WriteIntent,
    WriteIntents,
    WriteValue,
)
from feedkv.util.hlc import Timestamp

__all__ = ["ResolvedTimestamp", "UnresolvedIntentQueue", "UnresolvedTxn"]

ZERO = Timestamp(0, 0)


@dataclass(slots=True)
class UnresolvedTxn:
    """A transaction with intents in the range: its record's key, the timestamp of its
    oldest possible commit, and how many intents it has here."""

    txn_id: bytes
    txn_key: bytes
    ts: Timestamp
    refcount: int


class UnresolvedIntentQueue:
    def __init__(self) -> None:
        self._txns: dict[bytes, UnresolvedTxn] = {}
        self._heap: list[tuple[Timestamp, bytes]] = []  # stale entries are skipped lazily

    def __len__(self) -> int:
        return len(self._txns)

    def get(self, txn_id: bytes) -> UnresolvedTxn | None:
        return self._txns.get(txn_id)

    def add(self, txn_id: bytes, txn_key: bytes, ts: Timestamp, count: int = 1) -> None:
        """``count`` more intents of ``txn_id`` at ``ts``."""
        txn = self._txns.get(txn_id)
        if txn is None:
            self._txns[txn_id] = UnresolvedTxn(txn_id, txn_key, ts, count)
            heapq.heappush(self._heap, (ts, txn_id))
            return
        txn.refcount += count
        self.forward(txn_id, ts)

    def forward(self, txn_id: bytes, ts: Timestamp) -> None:
        """The transaction can no longer commit below ``ts`` (a no-op if already higher
        or unknown)."""
        txn = self._txns.get(txn_id)
        if txn is not None and ts > txn.ts:
            txn.ts = ts
            heapq.heappush(self._heap, (ts, txn_id))

    def release(self, txn_id: bytes, count: int = 1) -> None:
        """``count`` intents of ``txn_id`` were resolved."""
        txn = self._txns.get(txn_id)
        if txn is None:
            return  # resolved twice, or written before the intent scan saw it
        txn.refcount -= count
        if txn.refcount <= 0:
            del self._txns[txn_id]

    def remove(self, txn_id: bytes) -> None:
        self._txns.pop(txn_id, None)

    def oldest(self) -> UnresolvedTxn | None:
        heap = self._heap
        while heap:
            ts, txn_id = heap[0]
            txn = self._txns.get(txn_id)
            if txn is not None and txn.ts == ts:
                return txn
            heapq.heappop(heap)
        return None

    def older_than(self, ts: Timestamp) -> list[UnresolvedTxn]:
        """Transactions whose timestamp is below ``ts`` (for the pusher), oldest first."""
        return sorted((t for t in self._txns.values() if t.ts < ts), key=lambda t: t.ts)


class ResolvedTimestamp:
    def __init__(self) -> None:
        self.intents = UnresolvedIntentQueue()
        self.closed = ZERO
        self.resolved = ZERO
        self.initialized = False

    def init(self, intents: Iterable[tuple[bytes, bytes, Timestamp]]) -> bool:
        """Take in the initial intent scan as ``(txn id, txn key, ts)`` per intent; from now
        on the resolved timestamp can move. Returns whether it moved."""
        if self.initialized:
            raise InvariantViolation("the resolved timestamp was initialized twice")
        for txn_id, txn_key, ts in intents:
            self.intents.add(txn_id, txn_key, ts)
        self.initialized = True
        return self._recompute()

    def forward_closed(self, closed: Timestamp) -> bool:
        if closed <= self.closed:
            return False
        self.closed = closed
        return self._recompute()

    def consume(self, op: LogicalOp) -> bool:
        """Apply one logical op of the range; returns whether the resolved timestamp moved."""
        if type(op) is WriteValue:  # the common op, first and without a call
            if self.initialized and op.ts <= self.resolved:
                self._check_above_resolved(op.ts, op)
            return False
        queue = self.intents
        if isinstance(op, DeleteRange | IngestValues):  # one check for the batch
            self._check_above_resolved(op.ts, op)
            return False
        if isinstance(op, WriteIntent):
            # NB: a later intent of a known txn forwards the whole txn (it cannot commit
            # below its newest write), which may raise the resolved timestamp.
            self._check_above_resolved(op.ts, op)
            queue.add(op.txn_id, op.txn_key, op.ts)
        elif isinstance(op, UpdateIntent):
            queue.forward(op.txn_id, op.ts)
        elif isinstance(op, CommitIntent):
            self._check_above_resolved(op.ts, op)
            queue.release(op.txn_id)
        elif isinstance(op, AbortIntent):
            queue.release(op.txn_id)
        elif isinstance(op, AbortTxn):
            queue.remove(op.txn_id)
        elif isinstance(op, WriteIntents):
            self._check_above_resolved(op.ts, op)
            queue.add(op.txn_id, op.txn_key, op.ts, op.count)
        elif isinstance(op, CommitIntents):
            self._check_above_resolved(op.ts, op)
            queue.release(op.txn_id, len(op.keys))
        elif isinstance(op, AbortIntents):
            queue.release(op.txn_id, op.count)
        return self._recompute()

    def forward_txn(self, txn_id: bytes, ts: Timestamp) -> bool:
        """A push moved ``txn_id``'s earliest commit to ``ts`` (without touching intents)."""
        self.intents.forward(txn_id, ts)
        return self._recompute()

    def _check_above_resolved(self, ts: Timestamp, op: LogicalOp) -> None:
        if self.initialized and ts <= self.resolved:
            raise InvariantViolation(
                f"{type(op).__name__} at {ts} is at or below the resolved timestamp "
                f"{self.resolved}: a checkpoint already promised nothing would land there"
            )

    def _recompute(self) -> bool:
        if not self.initialized:
            return False
        new = self.closed
        oldest = self.intents.oldest()
        if oldest is not None and oldest.ts <= new:
            new = oldest.ts.prev()
        if new < self.resolved:
            raise InvariantViolation(
                f"the resolved timestamp would go back from {self.resolved} to {new}"
            )
        moved = new > self.resolved
        self.resolved = new
        return moved
