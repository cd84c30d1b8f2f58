"""Keeping a transaction record alive, with no thread for a transaction that ends soon.

A transaction that writes its record must heartbeat it every ``interval_s`` until it
ends, or pushers find it expired and abort it. Most transactions end within
milliseconds, long before their first heartbeat is due, so a thread started for each
one (what this replaced) cost more than the transaction's own work: creating, starting
and joining a thread is hundreds of microseconds of CPU and two context switches.

A :class:`TxnHeartbeat` therefore starts as an entry in a process-wide
:class:`HeartbeatTimer`: one thread that ticks ``interval_s / 10`` apart and, once an
entry has waited ``interval_s``, starts that heartbeat's own thread, which beats at once
and then every ``interval_s``. The timer thread never sends anything itself, so a beat
that blocks (a node down) delays no other transaction's. The first beat comes between
``interval_s`` and ``1.1 * interval_s`` after the record was written.

:meth:`TxnHeartbeat.stop` returns only when no beat of that transaction is in flight or
will be sent, as joining the old thread did: a beat landing after the transaction ended
must not find its record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["HeartbeatTimer", "TxnHeartbeat"]


class HeartbeatTimer:
    """Starts each :class:`TxnHeartbeat` still waiting ``interval_s`` after it was added.
    Thread-safe; its thread starts with the first heartbeat and is a daemon."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        # waiting heartbeats by when they are due; added in due order, so oldest first
        self._waiting: dict[TxnHeartbeat, float] = {}
        self._thread: threading.Thread | None = None

    def add(self, heartbeat: TxnHeartbeat) -> None:
        with self._lock:
            self._waiting[heartbeat] = time.monotonic() + self.interval_s
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="feedkv-txn-heartbeats", daemon=True
                )
                self._thread.start()

    def discard(self, heartbeat: TxnHeartbeat) -> None:
        with self._lock:
            self._waiting.pop(heartbeat, None)

    def due(self, now: float) -> list[TxnHeartbeat]:
        """Take the heartbeats due at ``now`` (monotonic seconds) out of the wait."""
        taken = []
        with self._lock:
            for heartbeat, due in self._waiting.items():
                if due > now:
                    break
                taken.append(heartbeat)
            for heartbeat in taken:
                del self._waiting[heartbeat]
        return taken

    def _run(self) -> None:
        tick = threading.Event()  # never set: a wait on it is the tick
        while True:
            tick.wait(self.interval_s / 10)
            for heartbeat in self.due(time.monotonic()):
                heartbeat.start()


class TxnHeartbeat:
    """One transaction's heartbeat: ``beat()`` (``False``: stop beating) every
    ``timer.interval_s`` from ``timer.interval_s`` after it was made, until :meth:`stop`."""

    __slots__ = ("_beat", "_lock", "_stop", "_stopped", "_thread", "_timer")

    def __init__(self, timer: HeartbeatTimer, beat: Callable[[], bool]) -> None:
        self._timer = timer
        self._beat = beat
        self._lock = threading.Lock()
        self._stopped = False
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        timer.add(self)

    def start(self) -> None:
        """Its first beat is due: beat from a thread of its own (the timer calls this)."""
        with self._lock:
            if self._stopped:
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name="feedkv-txn-heartbeat", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """No beat after this returns. Idempotent."""
        with self._lock:
            self._stopped = True
            # NB: its beat is its transaction's bound method, which holds it: let go of
            # it, so the two are not a cycle only the cyclic GC frees
            self._beat = _stopped
            stop, thread = self._stop, self._thread
        if thread is None:
            self._timer.discard(self)
            return
        if stop is not None:
            stop.set()
        if thread is not threading.current_thread():
            thread.join()

    def _run(self, stop: threading.Event) -> None:
        while self._beat() and not stop.wait(self._timer.interval_s):
            pass


def _stopped() -> bool:
    return False
