"""A range's rangefeed processor: turns the range's logical ops into events for its
registrations, and its closed timestamps and intents into checkpoints.

The store calls a processor as a :class:`~feedkv.kv.observer.RangeObserver`: on the
commit thread, under the apply lock, in apply order. Every other method is called under
the same lock by :class:`~feedkv.rangefeed.store_feeds.StoreFeeds`, which owns the
threads (catch-up scans, the txn pusher). So a processor needs no lock of its own and
never blocks: events go into bounded streams, and a registration without room is ended.

- ``WriteValue`` and ``CommitIntent`` ops become :class:`Value` events for every
  registration covering the key (with ``prev_value`` for those that asked for diffs)
  except checkpoint-only ones, which are skipped before any event is built for them;
  intents themselves are never published, so aborted and intermediate writes never are.
- Every op feeds the :class:`ResolvedTimestamp`; when it moves, each live registration
  gets a :class:`Checkpoint` of its span.
- When the range splits, merges or the node stops, every registration gets an
  :class:`Error` with the reason and the processor is finished.

An invariant violation (an intent below the resolved timestamp) ends every registration
with ``INVARIANT_VIOLATION`` and is logged as an error; the write that revealed it is
already durable and is not failed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from feedkv.errors import InvariantViolation
from feedkv.kv.observer import RangeEndReason
from feedkv.rangefeed.event import Checkpoint, ErrorReason, Value
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.registry import Registry
from feedkv.rangefeed.resolved_timestamp import ResolvedTimestamp, UnresolvedTxn
from feedkv.storage.logical_ops import AbortTxn, CommitIntent, LogicalOp, WriteValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["Processor"]

log = logging.getLogger(__name__)


class Processor:
    def __init__(self, range_id: int, span: Span) -> None:
        self.range_id = range_id
        self.span = span
        self.registry: Registry[Registration] = Registry()
        self.rts = ResolvedTimestamp()
        self.ended: ErrorReason | None = None

    # Set-up (under the apply lock).

    def init(self, intents: Iterable[tuple[bytes, bytes, Timestamp]], closed: Timestamp) -> None:
        """Start resolving: the range's intents from a snapshot taken under the apply
        lock, and its closed timestamp at that moment."""
        self.rts.forward_closed(closed)
        self.rts.init(intents)

    def register(self, reg: Registration) -> None:
        self.registry.add(reg)

    def unregister(self, reg: Registration) -> None:
        self.registry.remove(reg)

    def finish_catch_up(self, reg: Registration) -> None:
        if not reg.finish_catch_up(self.rts.resolved):
            self.registry.remove(reg)

    # RangeObserver (the commit thread, under the apply lock).

    def on_ops(self, ops: Sequence[LogicalOp]) -> None:
        if self.ended is not None:
            return
        rts = self.rts
        moved = False
        try:
            for op in ops:
                if isinstance(op, WriteValue | CommitIntent):
                    regs = self.registry.covering(op.key)
                    if regs:
                        self._publish_value(regs, op)
                if rts.consume(op):
                    moved = True
        except InvariantViolation as exc:
            self._violated(exc)
            return
        if moved:
            self._checkpoint()

    def on_closed(self, closed_ts: Timestamp) -> None:
        if self.ended is not None:
            return
        try:
            moved = self.rts.forward_closed(closed_ts)
        except InvariantViolation as exc:
            self._violated(exc)
            return
        if moved:
            self._checkpoint()

    def on_range_ended(self, reason: RangeEndReason) -> None:
        self.end(ErrorReason(reason.value), f"r{self.range_id} ended: {reason.value}")

    # The pusher's view (under the apply lock).

    def txns_to_push(self, older_than: Timestamp) -> list[UnresolvedTxn]:
        """Unresolved transactions below ``older_than``, oldest first."""
        return self.rts.intents.older_than(older_than) if self.ended is None else []

    def forward_txn(self, txn_id: bytes, ts: Timestamp) -> None:
        """A push moved the transaction's earliest commit to ``ts``."""
        if self.ended is None and self.rts.forward_txn(txn_id, ts):
            self._checkpoint()

    def forget_txn(self, txn_id: bytes) -> None:
        """The transaction is aborted: none of its intents can commit."""
        if self.ended is None and self.rts.consume(AbortTxn(txn_id)):
            self._checkpoint()

    # Ending.

    def end(self, reason: ErrorReason, message: str) -> None:
        """End every registration with ``reason``; the processor stops."""
        if self.ended is not None:
            return
        self.ended = reason
        for reg in self.registry:
            reg.end(reason, message)
            self.registry.remove(reg)

    def _violated(self, exc: InvariantViolation) -> None:
        log.error("rangefeed processor of r%d stopped: %s", self.range_id, exc)
        self.end(ErrorReason.INVARIANT_VIOLATION, f"r{self.range_id}: {exc}")

    # Fan-out.

    def _publish_value(self, regs: tuple[Registration, ...], op: WriteValue | CommitIntent) -> None:
        plain: Value | None = None
        with_diff: Value | None = None
        for reg in regs:
            if not reg.values:
                continue
            if reg.with_diff:
                if with_diff is None:
                    with_diff = Value(op.key, op.value, op.ts, op.prev_value)
                event = with_diff
            else:
                if plain is None:
                    plain = Value(op.key, op.value, op.ts)
                event = plain
            if not reg.publish(event):
                self.registry.remove(reg)

    def _checkpoint(self) -> None:
        resolved = self.rts.resolved
        for reg in self.registry:
            if not reg.catching_up and not reg.publish(Checkpoint(reg.span, resolved)):
                self.registry.remove(reg)
