"""The lock table: a store's exclusive, unreplicated locks on keys, with their wait queues.

A locking read (an UPDATE's or DELETE's row read: :class:`~feedkv.kv.api.Scan` with
``lock``, CockroachDB's implicit SELECT FOR UPDATE) takes an exclusive lock on each key it
returns, held by its transaction until the transaction ends: its ``EndTxn`` releases its
locks in the store that evaluates it, and a ``ResolveIntent`` of its outcome those in the
span it resolves (the other stores'). While a transaction holds a key, another's locking
read or write of it waits in the key's queue; when the holder lets go, the key is kept
for the waiter at the head of the queue, so waiters are served in the order they came
(a batch outside a transaction, which holds nothing, only waits for the holder). A read
that takes no lock ignores the table.

The locks make hot rows queue instead of failing, and are never needed for
serializability: they live in memory on the store that evaluates the range's commands,
and are gone once its lease moves or the node restarts. A transaction whose lock went is
no worse off than one that took none (its writes meet newer versions and its refresh
fails, as without the lock).

A live holder keeps its locks however long it holds them. A waiter held up by a holder
pushes it through its record (a ``TOUCH`` push, every store's ``push_poll_s``), which
its coordinator heartbeats: once the record is finished, or expired (not heartbeated for
the store's ``txn_liveness_ns``: its coordinator died), the holder's locks here go to
their queues. A cycle of waits is a deadlock: among one store's waiters
:class:`~feedkv.kv.wait_for.WaitForGraph` finds it, across nodes
:mod:`feedkv.kv.txn_wait`; its victim gives up.

Cost: a write checks the table only when it is not empty (one truth test per key when no
transaction holds a lock). The holders are indexed by transaction, so a transaction's end
releases its locks without a scan.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from feedkv.errors import FeedKVError
from feedkv.storage.intent import TxnMeta
from feedkv.util.keys import Span

__all__ = ["LockConflictError", "LockTable"]

MAX_LOCKS_PER_SCAN = 1000  # a locking read of more keys than this takes none (see scan)


class LockConflictError(FeedKVError):
    """Evaluation met ``key``, held by ``holder`` (or kept for the waiter ``ahead``): the
    store waits in the key's queue and runs the batch again. Never leaves the store."""

    def __init__(self, key: bytes, holder: bytes | None, ahead: bytes | None = None) -> None:
        self.key = key
        self.holder = holder
        self.ahead = ahead
        who = holder if holder is not None else ahead
        super().__init__(f"key {key!r} is locked by txn {who.hex()[:8] if who else '?'}")


@dataclass(slots=True)
class _Lock:
    holder: TxnMeta | None
    queue: list[bytes]  # waiting transactions, first first


class LockTable:
    """One store's locks. Thread-safe: evaluation (commit thread or a reader's) checks,
    takes and releases; waiters queue and wait on other threads."""

    def __init__(self) -> None:
        self._locks: dict[bytes, _Lock] = {}
        self._held: dict[bytes, set[bytes]] = {}  # txn id -> keys it holds
        self._cond = threading.Condition()
        self.generation = 0  # moves whenever a key is let go or a waiter leaves

    def __bool__(self) -> bool:
        return bool(self._locks)

    def __len__(self) -> int:
        return len(self._locks)

    def check(self, key: bytes, txn_id: bytes | None) -> None:
        """Raise :class:`LockConflictError` unless ``txn_id`` (``None``: a batch outside
        a transaction) may read-lock or write ``key`` now."""
        lock = self._locks.get(key)
        if lock is None:
            return
        holder = lock.holder
        if holder is not None:
            if holder.id != txn_id:
                raise LockConflictError(key, holder.id)
            return
        queue = lock.queue
        if txn_id is not None and queue and queue[0] != txn_id:
            raise LockConflictError(key, None, queue[0])

    def check_span(self, span: Span, txn_id: bytes | None) -> None:
        """:meth:`check` of every locked key in ``span``."""
        if not self._locks:
            return
        for key in [k for k in self._locks if span.start <= k < span.end]:
            self.check(key, txn_id)

    def refused_in(self, span: Span, txn_id: bytes) -> list[bytes]:
        """The locked keys in ``span`` :meth:`check` refuses ``txn_id`` (those a
        ``SKIP LOCKED`` read leaves out)."""
        if not self._locks:
            return []
        refused = []
        for key in [k for k in self._locks if span.start <= k < span.end]:
            try:
                self.check(key, txn_id)
            except LockConflictError:
                refused.append(key)
        return refused

    def acquire(self, keys: list[bytes], txn: TxnMeta) -> None:
        """Lock ``keys`` for ``txn``, all or none: raises :class:`LockConflictError` if
        :meth:`check` refuses one (another evaluation took it since the caller checked:
        the reads of a replicated range run beside each other). Idempotent."""
        locks = self._locks
        with self._cond:
            for key in keys:
                if key in locks:
                    self.check(key, txn.id)
            held = self._held.setdefault(txn.id, set())
            for key in keys:
                lock = locks.get(key)
                if lock is None:
                    locks[key] = _Lock(txn, [])
                else:
                    lock.holder = txn
                    if txn.id in lock.queue:
                        lock.queue.remove(txn.id)
            held.update(keys)

    def release(self, txn_id: bytes, span: Span | None = None) -> int:
        """Let go of ``txn_id``'s locks (those in ``span``, if given), waking the waiters;
        returns how many. Idempotent."""
        if txn_id not in self._held:
            return 0
        with self._cond:
            keys = self._held.get(txn_id)
            if not keys:
                return 0
            gone = keys if span is None else {k for k in keys if span.start <= k < span.end}
            for key in gone:
                lock = self._locks.get(key)
                if lock is None or lock.holder is None or lock.holder.id != txn_id:
                    continue
                lock.holder = None
                if not lock.queue:
                    del self._locks[key]
            count = len(gone)
            if gone is keys:
                del self._held[txn_id]
            else:
                keys -= gone
                if not keys:
                    del self._held[txn_id]
            if count:
                self._wake()
            return count

    def waiters(self) -> int:
        """How many waits are queued, over all keys."""
        with self._cond:
            return sum(len(lock.queue) for lock in self._locks.values())

    def holder(self, key: bytes) -> bytes | None:
        lock = self._locks.get(key)
        return lock.holder.id if lock is not None and lock.holder is not None else None

    def holder_meta(self, key: bytes) -> TxnMeta | None:
        """``key``'s holder as it took the lock (its record's anchor key: to push it)."""
        lock = self._locks.get(key)
        return lock.holder if lock is not None else None

    def blocker(self, key: bytes, txn_id: bytes | None) -> bytes | None:
        """The transaction ``txn_id`` waits for at ``key``: its holder, or the waiter
        ahead that the key is kept for; ``None`` when it may go."""
        try:
            self.check(key, txn_id)
        except LockConflictError as exc:
            return exc.holder if exc.holder is not None else exc.ahead
        return None

    def enqueue(self, key: bytes, txn_id: bytes) -> None:
        """Put ``txn_id`` at the back of ``key``'s queue (nothing if the key is free or
        it is there already)."""
        with self._cond:
            lock = self._locks.get(key)
            if lock is not None and txn_id not in lock.queue:
                lock.queue.append(txn_id)

    def dequeue(self, key: bytes, txn_id: bytes) -> None:
        """Take ``txn_id`` out of ``key``'s queue (it stopped waiting). Idempotent."""
        with self._cond:
            lock = self._locks.get(key)
            if lock is None or txn_id not in lock.queue:
                return
            lock.queue.remove(txn_id)
            if lock.holder is None and not lock.queue:
                del self._locks[key]
            self._wake()

    def clear(self, span: Span) -> int:
        """Forget every lock and queue in ``span``, waking the waiters: the range there
        left this store, or arrived (its lease) after an earlier stay whose locks were
        never let go here. Returns how many keys were held or kept."""
        with self._cond:
            keys = [k for k in self._locks if span.start <= k < span.end]
            for key in keys:
                lock = self._locks.pop(key)
                if lock.holder is not None:
                    held = self._held.get(lock.holder.id)
                    if held is not None:
                        held.discard(key)
                        if not held:
                            del self._held[lock.holder.id]
            if keys:
                self._wake()
            return len(keys)

    def wait(self, seen: int, timeout: float) -> None:
        """Block until the generation moves past ``seen`` or ``timeout`` seconds pass."""
        with self._cond:
            if self.generation == seen:
                self._cond.wait(timeout)

    def _wake(self) -> None:
        self.generation += 1
        self._cond.notify_all()
