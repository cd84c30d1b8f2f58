"""The pushes waiting at a node for the transactions whose records it holds: the
knowledge that finds deadlocks spanning nodes, as CockroachDB's txn wait queue does.

A waiter on another node pushes the transaction it waits for (the pushee) through the
pushee's record, so pushes arrive at the node serving the record's range. That node
knows who waits for each of its pushees; each pusher also brings the waits it learned of
that end at itself (its *dependents*), so the node knows, transitively, who waits for
whom ending at each pushee. A waiting pusher periodically asks its own record's node for
its dependents (a ``QUERY`` push of itself) and adds its own wait: when the transaction
it waits for is among them, the waits close a cycle, and
:func:`~feedkv.kv.wait_for.is_victim` picks the one member that gives up, as one
store's :class:`~feedkv.kv.wait_for.WaitForGraph` does.

:class:`TxnWaitQueue` is the node's part: pure (time comes in as ``now_ns``), it takes
"waits" and "stopped waiting" events and answers queries. A waiter that stops waiting
without a word (its blocker let go of the lock; its node died) is forgotten once it has
not pushed again for ``ttl_ns``: live waiters push every store's ``push_poll_s``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from feedkv.kv.api import WaitEdge

__all__ = ["WAIT_TTL_NS", "TxnWaitQueue"]

WAIT_TTL_NS = 1_000_000_000  # a waiter not heard from this long has stopped waiting


@dataclass(frozen=True, slots=True)
class _Wait:
    pushee: bytes
    priority: int  # the pusher's
    dependents: tuple[WaitEdge, ...]  # the waits ending at the pusher, as it knew them
    at_ns: int  # when it last pushed


class TxnWaitQueue:
    """The waits of the pushes that arrived here and failed. Thread-safe (one lock, held
    briefly); costs one entry a waiting pusher, none when nobody waits."""

    def __init__(self, ttl_ns: int) -> None:
        self.ttl_ns = ttl_ns
        self._waits: dict[bytes, _Wait] = {}  # pusher -> its wait
        self._mu = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._waits)

    def waits(
        self,
        pusher: bytes,
        priority: int,
        pushee: bytes,
        dependents: tuple[WaitEdge, ...],
        now_ns: int,
    ) -> None:
        """``pusher`` (of ``priority``) waits for ``pushee``, and ``dependents`` for it."""
        with self._mu:
            self._waits[pusher] = _Wait(pushee, priority, dependents, now_ns)

    def stopped(self, txn: bytes) -> None:
        """``txn`` waits for nobody now (its push went through, or it ended)."""
        if self._waits:
            with self._mu:
                self._waits.pop(txn, None)

    def dependents(self, txn: bytes, now_ns: int) -> tuple[WaitEdge, ...]:
        """The waits known here that end at ``txn``, directly or through others: one
        ``(waiter, blocker, waiter's priority)`` a waiter, the freshest a waiter had."""
        if not self._waits:
            return ()
        with self._mu:
            for pusher in [p for p, w in self._waits.items() if now_ns - w.at_ns > self.ttl_ns]:
                del self._waits[pusher]
            waits = dict(self._waits)
        found: dict[bytes, WaitEdge] = {}
        at: dict[bytes, int] = {}
        frontier = [txn]
        reached = {txn}
        while frontier:
            blocker = frontier.pop()
            for pusher, wait in waits.items():
                if wait.pushee != blocker:
                    continue
                found[pusher], at[pusher] = (pusher, blocker, wait.priority), wait.at_ns
                for edge in wait.dependents:
                    # NB: a waiter's own wait seen here is fresher than one relayed
                    if edge[0] not in at:
                        found[edge[0]] = edge
                        at[edge[0]] = -1
                if pusher not in reached:
                    reached.add(pusher)
                    frontier.append(pusher)
        return tuple(found.values())
