"""The CPU time this process has used, in all and thread by thread.

A node is one process whose Python threads share one GIL, so where its CPU goes is a
question of threads: the commit thread, the replica loop, the threads reading and
writing each connection. :func:`threads_cpu_ns` answers it from Linux's ``/proc``
(``/proc/self/task/<tid>/stat``, each thread's user and system clock ticks), naming each
thread as Python does (``threading.Thread.name``) and each other thread (gRPC's C core,
the allocator's) by the name the kernel keeps for it. Threads of one name are summed,
with a trailing index dropped (``feedkv-rpc_3`` counts as ``feedkv-rpc``, each
connection's ``batch-in`` as one). A thread that ended still counts if it ran a target
wrapped in :func:`counted` (each connection's threads do); others count while they run.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

__all__ = ["counted", "process_cpu_ns", "threads_cpu_ns"]

P = ParamSpec("P")

_TASKS = Path("/proc/self/task")
_INDEX = re.compile(r"[-_]\d+$|^Thread-\d+ ")  # "feedkv-rpc_3", "Thread-7 (_serve)"

_ended_lock = threading.Lock()
_ended: dict[str, float] = {}  # CPU nanoseconds of the counted threads that ended, by name


def process_cpu_ns() -> tuple[float, float]:
    """This process's user and system CPU time so far, in nanoseconds."""
    times = os.times()
    return times.user * 1e9, times.system * 1e9


def counted(target: Callable[P, None]) -> Callable[P, None]:
    """``target``, for a thread that ends while its process runs on (a connection's):
    what it spent stays in :func:`threads_cpu_ns` once it ended."""

    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            target(*args, **kwargs)
        finally:
            name = _INDEX.sub("", threading.current_thread().name)
            spent = time.thread_time_ns()
            with _ended_lock:
                _ended[name] = _ended.get(name, 0.0) + spent

    return run


def threads_cpu_ns() -> dict[str, float]:
    """Each thread's CPU time (user and system) in nanoseconds, summed by name: the
    running ones and the :func:`counted` ones that ended; only the latter where
    ``/proc`` is not Linux's."""
    names = {t.native_id: _INDEX.sub("", t.name) for t in threading.enumerate()}
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    with _ended_lock:
        out = dict(_ended)
    try:
        tasks = list(_TASKS.iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
            name = names.get(int(task.name)) or (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue  # NB: the thread ended while this read
        # NB: the kernel's name for the thread (field 2) may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) * tick_ns
    return out
