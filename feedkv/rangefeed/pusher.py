"""The txn pusher: keeps old transactions from holding a range's resolved timestamp back.

A transaction with an unresolved intent holds the resolved timestamp just below it. Every
``push_interval_s`` each processor's transactions older than ``push_age`` (default 10 s)
are pushed to now through their records, with the highest priority:

- still **pending**: the push moved its commit timestamp up, so the processor forwards
  the transaction (its intents stay where they are; it can no longer commit below);
- **committed**: its intents in the range are resolved, which publishes them;
- **aborted** (or expired: abandoned transactions are aborted by the push): its intents
  in the range are removed and the processor forgets it.

So an abandoned transaction can never stall checkpoints for longer than its liveness
plus the push age.
"""

from __future__ import annotations

from typing import Protocol

from feedkv.errors import PushFailedError
from feedkv.kv.api import MAX_PRIORITY, PushTxn, PushType, ResolveIntent
from feedkv.kv.store import Store
from feedkv.kv.txn_record import TxnRecord
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["StorePusher", "TxnPusher"]


class TxnPusher(Protocol):
    def push(self, txn: TxnMeta, push_to: Timestamp) -> TxnRecord | None:
        """Push ``txn`` to ``push_to``; its record afterwards, or ``None`` if it outranks
        the pusher (try again later). Blocks on a write."""
        ...

    def resolve(self, span: Span, txn: TxnMeta, status: TxnStatus) -> None:
        """Resolve ``txn``'s intents in ``span`` as ``status``. Blocks on a write."""
        ...


class StorePusher:
    """Pushes and resolves through a store in this process."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def push(self, txn: TxnMeta, push_to: Timestamp) -> TxnRecord | None:
        request = PushTxn(txn, PushType.TIMESTAMP, push_to, MAX_PRIORITY, None)
        try:
            return self.store.push(request).record
        except PushFailedError:
            return None

    def resolve(self, span: Span, txn: TxnMeta, status: TxnStatus) -> None:
        # NB: range by range: a processor's span is its range's when it started, and the
        # range may have split since (the processor then ends, but a push may be under way).
        self.store.resolve(ResolveIntent(span, txn, status))
