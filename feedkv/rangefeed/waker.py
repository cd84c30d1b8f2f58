"""Paced wake-ups of the consumers of many streams.

Under CPython's GIL a wake is not free: the consumer's thread is scheduled, takes the GIL
from the threads doing the work and hands it back. A hundred consumers woken on every
commit group (400 a second) cost the writers three quarters of their throughput, and
even one busy consumer woken on every group costs them a tenth. So a :class:`Waker`
paces wakes two ways:

- after waking ``n`` streams it wakes no one for ``(n - 1) * per_wake_s`` (at most
  ``max_gap_s``); what comes meanwhile is woken by the waker's own thread when the gap
  ends, each consumer then taking everything queued since. The first stream of a wake is
  free: a node flushes once per commit group, so a lone stream is woken at most once a
  group, and its consumer, if busy, rests (below);
- a stream *rests* after each take for ``per_value_s`` per value it took beyond the
  first (at most ``max_gap_s``), and is woken only when its rest is over: by the waker's
  thread, or by a flush that finds the gap closed, a wake that counts toward the gap as
  any.

So a light load is delivered at once, or within ``(n - 1) * per_wake_s`` of the last
wake of ``n`` streams: a consumer that takes one value at a time (a watched key's) never
rests, and alone it never waits for a gap (a key written every millisecond or so would
otherwise have each value held for most of the gap its previous value opened). A
consumer taking more than ``1 / per_value_s`` values a second (1,000) rests longer than
its values took to come, so its rests grow to ``max_gap_s`` and it is woken that often,
with everything since, as a busy network card is polled rather than interrupted; other
streams on the node are not held back by it. A wake costs the process about 0.1 ms, so
wakes of up to 50 streams at a time take at most a tenth of the GIL's time; beyond 50,
the gap stops at ``max_gap_s`` and their share grows (a fifth for 100 streams).

Measured on two cores (32 writers, `feedkv bench rangefeed`): one embedded feed woken on
every commit group cost the writers 10-16% of their commits; paced, the writers keep
0.93 of their commits beside one embedded feed and 0.81 beside 100 (medians of five
rounds), and a watched key's value reaches its consumer 0.04 ms (p99) after its put is
acknowledged.

A wake is spared where the flushing thread can deliver the news itself: a stream whose
:attr:`~feedkv.rangefeed.stream.EventStream.deliver_now` is set (a remote client's stream
of feeds on the node: its consumer is the thread writing to the connection) is taken and
sent on the flushing thread when it is *light*, its last take at most one value, one such
stream a flush; the others are woken first. So the commit thread sends a watched key's
value itself, before its writer is acknowledged: measured at the client, the value comes
0.13 ms ahead of the answer (p50), where a wake of the sending thread put it 14 µs
behind (82 µs at p99). The writer's answer waits for that send: on loopback a watched
key's put took 0.60 ms p50 against 0.56. A busy stream, whose takes are many values, is
woken as before, and what one light stream got in one group is encoded on the commit
thread only up to a bound (:data:`~feedkv.rangefeed.service.DIRECT_MAX_VALUES`).

Two places fan values out to many streams and use one: a node's processors (noted per
command and per closed timestamp published, both on the commit thread; flushed once per
commit group) and a remote client's stream of feeds (noted per message received).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable

from feedkv.rangefeed.stream import EventStream

__all__ = ["Waker"]


class Waker:
    """Wakes the consumers of many streams, paced (see the module docstring).

    Producers note the streams they queued for (:meth:`defer`); :meth:`flush` wakes those
    asleep, or leaves them to the waker's thread while a gap or their rest lasts. A
    node's processors defer on the commit thread under the apply lock, and the engine's
    group hook flushes; a remote client does both on its reader thread.
    """

    def __init__(
        self, *, per_wake_s: float = 1e-3, per_value_s: float = 1e-3, max_gap_s: float = 0.05
    ) -> None:
        self._per_wake_s = per_wake_s
        self._per_value_s = per_value_s
        self._max_gap_s = max_gap_s
        # _lock guards every field below it
        self._lock = threading.Lock()
        self._pending: set[EventStream] = set()
        self._resting: dict[EventStream, float] = {}  # to wake when its rest ends
        self._wakes = 0  # times the pending streams were taken to be woken
        self._open_at = 0.0  # the monotonic time from which a flush may wake
        self._held = False  # wakes are waiting for the gap to end
        self._closed = False
        self._due = threading.Condition(self._lock)  # the thread waits for a gap or a rest
        self._thread = threading.Thread(target=self._run, name="feedkv-waker", daemon=True)
        self._thread.start()

    def defer(self, streams: Iterable[EventStream], token: int) -> int:
        """Note ``streams`` for the next wake; those asleep then are woken (a consumer
        that falls asleep later finds the news before it sleeps). Returns a token: given
        back with the same streams before they are woken, it makes the call free."""
        if token == self._wakes:
            # NB: read without the lock. The streams are pending since wake ``token``, and
            # a wake counts itself before it reads whether they sleep or rest, so the wake
            # that takes them reads them after the caller's news was queued.
            return token
        with self._lock:
            if token != self._wakes:
                self._pending.update(streams)
            return self._wakes

    def flush(self) -> None:
        """Wake the pending streams asleep, and the resting whose rest is over, unless a
        gap is open: then leave them to the thread, which wakes them when it ends; a
        light stream that can deliver itself does, on this thread (see the module
        docstring). Never blocks beyond the locks (a delivery sends only what its
        connection takes at once); after :meth:`close` wakes the pending at once."""
        if not self._pending:
            return
        with self._lock:
            now = time.monotonic()
            if self._closed:
                woken, self._pending = self._pending, set()
            elif now < self._open_at:
                if not self._held:
                    self._held = True
                    self._due.notify()
                return
            else:
                woken = self._due_now(now)
        # NB: the first light stream that can deliver itself does, here, after the others
        # are woken: its news leaves with no wake of another thread (see the module doc)
        light: EventStream | None = None
        for stream in woken:
            if light is None and stream.deliver_now is not None and stream.taken <= 1:
                light = stream
            else:
                stream.wake()
        if light is not None:
            delivered = False
            try:
                delivered = light.deliver_now is not None and light.deliver_now()
            finally:
                if not delivered:
                    light.wake()

    def close(self) -> None:
        """Stop the thread, waking what waits for a gap's or a rest's end. Idempotent."""
        with self._lock:
            self._closed = True
            self._wakes += 1  # a token given before now no longer spares a defer the lock
            waiting = self._pending | self._resting.keys()
            self._pending, self._resting = set(), {}
            self._due.notify()
        self._thread.join()
        for stream in waiting:
            stream.wake()

    def rest_end(self, stream: EventStream) -> float:
        """When ``stream``'s rest after its last take ends (``time.monotonic``)."""
        beyond_first = max(0, stream.taken - 1)
        return stream.taken_at + min(self._max_gap_s, beyond_first * self._per_value_s)

    def _due_now(self, now: float) -> set[EventStream]:
        """Takes the pending streams and returns those to wake at ``now`` (no gap open):
        the asleep among the pending and the resting whose rest is over. The pending still
        resting join ``_resting``, the thread notified if one rests less than it waits for;
        awake streams leave ``_resting`` unwoken. Opens the gap for the streams returned.
        The caller holds ``_lock`` and wakes the streams after releasing it."""
        pending, self._pending = self._pending, set()
        # NB: counted before any stream's ``taken``, ``taken_at`` or ``waiting`` is read
        # below: :meth:`defer` relies on it
        self._wakes += 1
        self._held = False
        woken = set()
        sooner = False
        for stream in pending:
            until = self.rest_end(stream)
            if until <= now:
                woken.add(stream)
            elif until < self._resting.get(stream, math.inf):
                self._resting[stream] = until
                sooner = True
        woken.update(stream for stream, until in self._resting.items() if until <= now)
        for stream in woken:
            self._resting.pop(stream, None)
        # NB: one awake needs no wake: it finds the news before it sleeps
        woken = {stream for stream in woken if stream.waiting}
        self._open_at = now + min(self._max_gap_s, max(0, len(woken) - 1) * self._per_wake_s)
        if sooner:  # else the thread already waits for these rests: let it sleep
            self._due.notify()
        return woken

    def _run(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    if now < self._open_at:  # a gap: what is due waits for its end
                        due = [self._open_at] if self._held or self._resting else []
                    elif self._held or any(until <= now for until in self._resting.values()):
                        break
                    else:
                        due = list(self._resting.values())
                    self._due.wait(min(due) - now if due else None)
                woken = self._due_now(now)
            for stream in woken:
                stream.wake()
