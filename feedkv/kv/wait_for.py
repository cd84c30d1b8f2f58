"""Waits between transactions, and the victim of a cycle of them.

A transaction waits for a lock's holder (or the waiter ahead of it in the key's queue,
:mod:`feedkv.kv.lock_table`) or for an intent's writer. Waits that close a cycle are a
deadlock, which no wait ends: the member of the cycle with the lowest ``(priority, id)``
is its victim, and only the victim gives up (:func:`is_victim`), so exactly one
transaction of the cycle fails and the others go on once it has let go. Every member
asks whether it is the victim each time it wakes (at most a store's ``push_poll_s``
apart), so a deadlock is broken within one poll of its closing.

:class:`WaitForGraph` holds the waits of one store's waiters. A cycle through waits on
other stores (nodes) is found from the waits the pushees' record nodes know of
(:mod:`feedkv.kv.txn_wait`), handed to the same :func:`is_victim`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

__all__ = ["WaitForGraph", "is_victim"]

# waiter -> (the transaction it waits for, the waiter's priority)
Edges = Mapping[bytes, tuple[bytes, int]]


def is_victim(edges: Edges, waiter: bytes) -> bool:
    """Whether ``waiter`` is in a cycle of ``edges`` and is the one of it to give up (the
    lowest ``(priority, id)``). Pure."""
    if waiter not in edges:
        return False
    cycle = [waiter]
    current = edges[waiter][0]
    seen = {waiter}
    while current != waiter:
        step = edges.get(current)
        if step is None or current in seen:
            return False  # a chain that ends, or a cycle waiter is only led into
        seen.add(current)
        cycle.append(current)
        current = step[0]
    victim = min(cycle, key=lambda txn: (edges[txn][1], txn))
    return victim == waiter


class WaitForGraph:
    """Which transaction each waiting transaction of one store waits for (a lock's holder,
    the waiter ahead of it, or an intent's writer), to find deadlocks (:func:`is_victim`).
    Thread-safe (one lock, held briefly)."""

    def __init__(self) -> None:
        self._edges: dict[bytes, tuple[bytes, int]] = {}  # waiter -> (blocker, priority)
        self._mu = threading.Lock()

    def waits(self, waiter: bytes, priority: int, blocker: bytes) -> None:
        with self._mu:
            self._edges[waiter] = (blocker, priority)

    def done(self, waiter: bytes) -> None:
        with self._mu:
            self._edges.pop(waiter, None)

    def is_victim(self, waiter: bytes) -> bool:
        """Whether ``waiter`` is in a cycle of waits and is the one of it to give up."""
        with self._mu:
            return is_victim(self._edges, waiter)
