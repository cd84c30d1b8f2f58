"""``feedkv.util.cpu``: this process's CPU time, thread by thread."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pytest

from feedkv.util.cpu import counted, process_cpu_ns, threads_cpu_ns

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads Linux's /proc")

SPIN_S = 0.3


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_threads_cpu_is_counted_under_its_name_and_indexes_are_dropped() -> None:
    done = threading.Event()
    threads = [
        threading.Thread(target=lambda: (spin(SPIN_S), done.wait()), name=f"spinner_{i}")
        for i in range(2)
    ]
    idle = threading.Thread(target=done.wait, name="sleeper")
    for thread in [*threads, idle]:
        thread.start()
    try:
        # NB: each spinner's own clock says when it spun; this thread waits on theirs
        deadline = time.monotonic() + 30
        while threads_cpu_ns().get("spinner", 0) < 2 * SPIN_S * 1e9 * 0.9:
            assert time.monotonic() < deadline, threads_cpu_ns()
            spin(0.01)
        used = threads_cpu_ns()
    finally:
        done.set()
        for thread in [*threads, idle]:
            thread.join()
    assert "spinner_0" not in used and "spinner_1" not in used
    assert used["spinner"] < 2 * (SPIN_S + 0.1) * 1e9
    assert used.get("sleeper", 0) < 0.1e9
    assert used["MainThread"] > 0


def test_the_process_cpu_grows_with_work() -> None:
    user, system = process_cpu_ns()
    spin(0.1)
    later_user, later_system = process_cpu_ns()
    assert later_user + later_system - user - system >= 0.09e9


def test_a_counted_thread_still_counts_once_it_ended() -> None:
    def run(name: str, target: Callable[[float], None]) -> None:
        thread = threading.Thread(target=target, args=(SPIN_S,), name=name)
        thread.start()
        thread.join()

    run("counted-worker-1", counted(spin))
    run("counted-worker-2", counted(spin))
    run("uncounted-worker", spin)
    used = threads_cpu_ns()
    assert 2 * SPIN_S * 1e9 <= used["counted-worker"] < 2 * (SPIN_S + 0.1) * 1e9
    assert "uncounted-worker" not in used
