"""A transaction's heartbeat starts a thread only once its first beat is due, and sends
nothing after it is stopped (see feedkv.kv.txn_heartbeat). The timers here have an hour
long interval: their own thread never finds anything due, and the tests take what is
due at a time they choose."""

from __future__ import annotations

import threading
import time

from feedkv.kv.txn_heartbeat import HeartbeatTimer, TxnHeartbeat

HOUR_S = 3600.0


def test_due_takes_only_the_heartbeats_whose_wait_is_over() -> None:
    timer = HeartbeatTimer(HOUR_S)
    first = TxnHeartbeat(timer, lambda: True)
    second = TxnHeartbeat(timer, lambda: True)
    now = time.monotonic()
    assert timer.due(now) == []
    assert timer.due(now + 2 * HOUR_S) == [first, second]
    assert timer.due(now + 2 * HOUR_S) == []  # taken once
    first.stop()
    second.stop()


def test_a_heartbeat_stopped_before_it_is_due_never_beats() -> None:
    timer = HeartbeatTimer(HOUR_S)
    beats: list[int] = []
    heartbeat = TxnHeartbeat(timer, lambda: bool(beats.append(1)))
    heartbeat.stop()
    assert timer.due(time.monotonic() + 2 * HOUR_S) == []
    heartbeat.start()  # as the timer would, had it taken it just before the stop
    heartbeat.stop()
    assert beats == []


def test_a_due_heartbeat_beats_from_a_thread_of_its_own_until_stopped() -> None:
    timer = HeartbeatTimer(HOUR_S)
    beaten = threading.Event()
    threads: list[threading.Thread] = []

    def beat() -> bool:
        threads.append(threading.current_thread())
        beaten.set()
        return True

    heartbeat = TxnHeartbeat(timer, beat)
    [due] = timer.due(time.monotonic() + 2 * HOUR_S)
    due.start()
    assert beaten.wait(30)
    heartbeat.stop()
    assert len(threads) == 1  # at once, then an hour later
    assert threads[0] is not threading.current_thread()
    assert not threads[0].is_alive()  # stop joined it


def test_a_beat_that_fails_ends_its_thread() -> None:
    timer = HeartbeatTimer(HOUR_S)
    beats: list[int] = []
    heartbeat = TxnHeartbeat(timer, lambda: bool(beats.append(1)))  # False: stop
    for due in timer.due(time.monotonic() + 2 * HOUR_S):
        due.start()
    heartbeat.stop()  # joins the thread, which ended after its one beat
    assert beats == [1]
