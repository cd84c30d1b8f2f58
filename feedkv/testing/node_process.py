"""A feedkv node in a subprocess (``feedkv start``), for crash and end-to-end tests."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TextIO

__all__ = ["NodeProcess", "free_port"]

_URL = re.compile(r"feedkv://\S+")


def free_port() -> int:
    """A loopback port that was free a moment ago (for a node restarted on one port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class NodeProcess:
    """Starts ``feedkv start`` on an ephemeral loopback port and waits for its URL.
    Its stderr (logs; Spark's are many) goes to :attr:`log`, beside the store."""

    def __init__(self, store: Path, *extra_args: str, start_timeout_s: float = 30.0) -> None:
        self.store = store
        self.log = store.parent / f"{store.name}.stderr"
        with self.log.open("a") as log:
            self.process = self._start(store, extra_args, log)
        stdout = self.process.stdout
        line = stdout.readline() if stdout is not None else ""
        match = _URL.search(line)
        if match is None:
            self.process.kill()
            self.process.wait(timeout=start_timeout_s)
            raise RuntimeError(f"the node did not start: {line!r} {self.log.read_text()[-2000:]}")
        self.url = match.group(0)

    @staticmethod
    def _start(store: Path, extra_args: tuple[str, ...], log: TextIO) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "feedkv.cli.main",
                "start",
                "--store",
                str(store),
                "--listen",
                "127.0.0.1:0",
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )

    def kill(self) -> None:
        """SIGKILL: no drain, no clean close."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: returns the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)
