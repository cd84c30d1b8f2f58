"""Paced wake-ups of the consumers of many streams.

Under CPython's GIL a wake is not free: the consumer's thread is scheduled, takes the GIL
from the threads doing the work and hands it back. A hundred consumers woken on every
commit group (400 a second) cost the writers three quarters of their throughput, and
even one consumer woken on every group of a busy node costs them a tenth. So a
:class:`Waker`, after a wake, wakes no one for a gap (at most ``max_gap_s``) that grows
with what it woke: ``per_wake_s`` per stream woken and ``per_value_s`` per value queued
since the wake before. What comes meanwhile is woken by the waker's own thread when the
gap ends, each consumer then taking everything queued since.

So a light load is delivered at once: a feed taking fewer than ``1 / per_value_s``
values a second (5,000) opens gaps shorter than its values took to come, and a single
watched key's next value finds the gap closed. A busier feed opens longer gaps than its
values took, so its gaps grow to ``max_gap_s`` and it is woken that often, with
everything since, as a busy network card is polled rather than interrupted. A hundred
busy streams are woken every ``max_gap_s`` too, in batches. Measured on two cores (32
writers, `feedkv bench rangefeed`): one embedded feed woken on every commit group cost the
writers 10-16% of their commits; paced by its values, 0-7%.

Two places fan values out to many streams and use one: a node's processors (noted per
command, flushed once per commit group) and the gRPC client (noted per message received).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from feedkv.rangefeed.stream import EventStream

__all__ = ["Waker"]


class Waker:
    """Wakes the consumers of many streams, paced (see the module docstring).

    Producers note the streams they queued for (:meth:`defer`); :meth:`flush` wakes those
    asleep, or leaves them to the waker's thread while a gap is open. A node's
    processors defer on the commit thread under the apply lock, and the engine's group
    hook flushes; the gRPC client does both on its reader thread.
    """

    def __init__(
        self, *, per_wake_s: float = 3e-4, per_value_s: float = 2e-4, max_gap_s: float = 0.05
    ) -> None:
        self._per_wake_s = per_wake_s
        self._per_value_s = per_value_s
        self._max_gap_s = max_gap_s
        self._pending: set[EventStream] = set()
        self._values = 0  # values queued for the pending streams since the last wake
        self._wakes = 0  # times the pending streams were taken to be woken
        self._lock = threading.Lock()  # guards _pending, _wakes and _open_at
        self._open_at = 0.0  # the monotonic time from which a flush may wake
        self._due = threading.Condition(self._lock)  # the thread waits for a gap's end
        self._held = False  # wakes are waiting for the gap to end
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="feedkv-waker", daemon=True)
        self._thread.start()

    def defer(self, streams: Iterable[EventStream], token: int, values: int = 0) -> int:
        """Note ``streams`` for the next wake, with ``values`` queued for them; those
        asleep then are woken (a consumer that falls asleep later finds the news before
        it sleeps). Returns a token: given back with the same streams before they are
        woken, it spares copying them."""
        with self._lock:
            if token != self._wakes:
                self._pending.update(streams)
            self._values += values
            return self._wakes

    def flush(self) -> None:
        if not self._pending:
            return
        with self._lock:
            if time.monotonic() < self._open_at:
                if not self._held:
                    self._held = True
                    self._due.notify()
                return
            pending = self._take()
        for stream in pending:
            stream.wake()

    def close(self) -> None:
        """Stop the thread, waking what waits for a gap's end. Idempotent."""
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, set()
            self._due.notify()
        self._thread.join()
        for stream in pending:
            stream.wake()

    def _take(self) -> set[EventStream]:
        """The pending streams, opening the next gap (the caller holds ``_lock``)."""
        pending, self._pending = self._pending, set()
        self._wakes += 1
        gap = len(pending) * self._per_wake_s + self._values * self._per_value_s
        gap = min(self._max_gap_s, gap)
        self._values = 0
        self._open_at = time.monotonic() + gap
        self._held = False
        return pending

    def _run(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    left = self._open_at - time.monotonic() if self._held else None
                    if left is not None and left <= 0:
                        break
                    self._due.wait(left)
                pending = self._take()
            for stream in pending:
                stream.wake()
