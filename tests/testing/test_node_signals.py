"""Signals to a node process: SIGTERM stops it whichever of its threads the kernel hands
it to, and SIGUSR1 prints every thread's stack (a node that does not stop fails its
test with them, so a hang in CI says where it hangs)."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
from pathlib import Path

from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

# tgkill(2): a signal to one thread of a process (Linux's system call numbers)
_SYS_TGKILL = {"x86_64": 234, "aarch64": 131}[platform.machine()]


def test_a_running_node_prints_its_threads_stacks(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "n1")
    try:
        stacks = node.stacks()
        assert "most recent call first" in stacks
        assert "feedkv/cli/start.py" in stacks  # the main thread, waiting for a signal
    finally:
        assert node.terminate() == 0


def test_a_sigterm_handed_to_another_thread_stops_the_node(tmp_path: Path) -> None:
    """The kernel may deliver a process's signal to any of its threads; Python runs the
    handler on the main thread, which must wake for it (a node once ignored SIGTERM so)."""
    node = NodeProcess(tmp_path / "n1")
    pid = node.process.pid
    try:
        # NB: once its main thread waits for a signal (before, it would run the handler anyway)
        wait_until(lambda: "in _wait_for" in node.stacks(), timeout_s=60, what="the node to wait")
        threads = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(_SYS_TGKILL, pid, threads[-1], signal.SIGTERM) == 0
        assert node.process.wait(timeout=60) == 0
    finally:
        if node.process.poll() is None:
            node.kill()
