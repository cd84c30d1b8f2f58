"""The queue between registrations and one consumer.

A consumer (a client's feed in this process, or a gRPC stream to a remote client) owns one
:class:`EventStream`; every registration it makes delivers into it, tagged with the
consumer's tag for that registration, so one stream multiplexes many range feeds.

Processors push on the commit thread and must never block: :meth:`EventStream.push`
either queues the event or refuses it, when the registration already has
``per_registration`` events queued or the node's budget is spent. The registration then
ends with ``SLOW_CONSUMER``: a consumer that falls behind is cut off, never silently
skipped. Catch-up scans are not on the commit thread, so they wait for room instead
(:meth:`EventStream.push_wait`). An ending :class:`~feedkv.rangefeed.event.Error` is
always queued (:meth:`EventStream.push_final`).

:meth:`EventStream.take` hands the consumer everything queued, in order, and gives the
memory back.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from typing import Protocol

from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Error, Event

__all__ = ["EventStream", "Queued"]


class Queued(Protocol):
    """What the stream needs of a registration: its tag, a count of its queued events,
    and whether it has ended (nothing is queued after its final error)."""

    tag: Hashable
    queued: int
    done: bool


class EventStream:
    def __init__(self, budget: Budget, *, per_registration: int = 4096) -> None:
        self.budget = budget
        self.per_registration = per_registration
        self._items: deque[tuple[Queued, Event, int]] = deque()
        self._cond = threading.Condition()
        self._waiting = False
        self._closed = False

    def push(self, reg: Queued, event: Event, size: int) -> bool:
        """Queue ``event`` for ``reg`` without blocking; ``False`` if there is no room."""
        with self._cond:
            if not self._accepts(reg):
                return False
            if reg.queued >= self.per_registration or not self.budget.try_acquire(size):
                return False
            self._append(reg, event, size)
            return True

    def push_paid(self, reg: Queued, event: Event, size: int) -> bool:
        """Queue an event whose ``size`` the caller already took from the budget (held
        while catching up), past the per-registration bound; on ``False`` the caller
        still owns the memory."""
        with self._cond:
            if not self._accepts(reg):
                return False
            self._append(reg, event, size)
            return True

    def push_wait(self, reg: Queued, event: Event, size: int, timeout: float) -> bool:
        """Queue ``event``, waiting up to ``timeout`` seconds for room; ``False`` if the
        wait ran out, the stream closed or the registration ended."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: not self._accepts(reg) or reg.queued < self.per_registration, timeout
            ):
                return False
            if not self._accepts(reg):
                return False
        if not self.budget.acquire(size, timeout):
            return False
        with self._cond:
            if not self._accepts(reg):
                self.budget.release(size)
                return False
            self._append(reg, event, size)
            return True

    def push_final(self, reg: Queued, error: Error) -> None:
        """Queue the registration's last event, whatever the bounds."""
        with self._cond:
            if not self._closed:
                self._append(reg, error, 0)

    def _accepts(self, reg: Queued) -> bool:
        return not self._closed and not reg.done

    def _append(self, reg: Queued, event: Event, size: int) -> None:
        reg.queued += 1
        self._items.append((reg, event, size))
        if self._waiting:
            self._cond.notify_all()

    def take(self, timeout: float | None = None) -> list[tuple[Hashable, Event]]:
        """Everything queued, as ``(tag, event)`` in push order; waits up to ``timeout``
        for the first event (an empty list: nothing came, or the stream closed)."""
        with self._cond:
            if not self._items and not self._closed:
                self._waiting = True
                try:
                    self._cond.wait_for(lambda: self._items or self._closed, timeout)
                finally:
                    self._waiting = False
            items, self._items = self._items, deque()
            released = 0
            for reg, _event, size in items:
                reg.queued -= 1
                released += size
            if items:
                self._cond.notify_all()  # catch-up scans waiting for room
        if released:
            self.budget.release(released)
        return [(reg.tag, event) for reg, event, _size in items]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop accepting events, drop what is queued, and wake the consumer and any
        waiting pusher (the consumer is going away)."""
        with self._cond:
            self._closed = True
            released = sum(size for _reg, _event, size in self._items)
            self._items.clear()
            self._cond.notify_all()
        self.budget.release(released)
