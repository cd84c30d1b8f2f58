"""The CPU time this process has used, in all and thread by thread.

A node is one process whose Python threads share one GIL, so where its CPU goes is a
question of threads: the commit thread, the replica loop, the threads reading and
writing each connection. :func:`threads_cpu_ns` answers it from Linux's ``/proc``
(``/proc/self/task/<tid>/stat``, each thread's user and system clock ticks), naming each
thread as Python does (``threading.Thread.name``) and each other thread (gRPC's C core,
the allocator's) by the name the kernel keeps for it. Threads of one name are summed,
with a trailing index dropped (``feedkv-rpc_3`` counts as ``feedkv-rpc``, each
connection's ``batch-in`` as one). Threads that ended are not counted: the figures are
of the threads running now.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

__all__ = ["process_cpu_ns", "threads_cpu_ns"]

_TASKS = Path("/proc/self/task")
_INDEX = re.compile(r"_\d+$|^Thread-\d+ ")  # "feedkv-rpc_3", "Thread-7 (_serve)"


def process_cpu_ns() -> tuple[float, float]:
    """This process's user and system CPU time so far, in nanoseconds."""
    times = os.times()
    return times.user * 1e9, times.system * 1e9


def threads_cpu_ns() -> dict[str, float]:
    """Each running thread's CPU time (user and system) in nanoseconds, summed by name;
    empty where ``/proc`` is not Linux's."""
    names = {t.native_id: _INDEX.sub("", t.name) for t in threading.enumerate()}
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    try:
        tasks = list(_TASKS.iterdir())
    except OSError:
        return {}
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
