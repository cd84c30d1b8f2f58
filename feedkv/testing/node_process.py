"""A feedkv node in a subprocess (``feedkv start``), for crash and end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.waiting import wait_until

__all__ = ["NodeProcess", "free_port"]

_URL = re.compile(r"feedkv://[^\s,]+")
_SQL_URL = re.compile(r"postgresql://\S+")
_HTTP_URL = re.compile(r"https?://[^\s,]+")


def free_port() -> int:
    """A loopback port that was free a moment ago (for a node restarted on one port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class NodeProcess:
    """Starts ``feedkv start`` on ephemeral loopback ports and waits for its URLs:
    :attr:`url` (gRPC), :attr:`sql_url` (PostgreSQL clients) and :attr:`http_url`
    (metrics). Its stderr (logs;
    Spark's are many) goes to :attr:`log`, beside the store.

    The node is secure, as ``feedkv start`` is by default: with the certs directory
    ``extra_args`` give (``--certs-dir``), else this process's shared one
    (:func:`~feedkv.testing.certs.shared_certs_dir`); ``--insecure`` in ``extra_args``
    makes it insecure. :attr:`url` then names the certs directory (``?certs_dir=``), so
    ``feedkv.connect(node.url)`` connects as root with TLS, :attr:`sql_url` logs in
    with root's client certificate, and :attr:`http_url` is https (:attr:`http_verify`
    is what to verify it with). Its ``file://`` sinks may write anywhere below the
    system's temporary directory (where tests keep their outputs) unless ``extra_args``
    give ``--external-io-dir``."""

    def __init__(
        self,
        store: Path,
        *extra_args: str,
        start_timeout_s: float = 30.0,
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> None:
        """``env``: variables added to the node's environment (testing knobs).
        ``wait=False``: return once the process runs; :meth:`wait_started` waits for
        its URLs (a node that waits for ``feedkv init`` prints them after it)."""
        self.store = store
        self.log = store.parent / f"{store.name}.stderr"
        self.certs_dir = _certs_dir(extra_args)
        self._start_timeout_s = start_timeout_s
        self.address = self.url = self.sql_url = self.http_url = ""
        if self.certs_dir is not None and "--certs-dir" not in extra_args:
            extra_args = ("--certs-dir", str(self.certs_dir), *extra_args)
        with self.log.open("a") as log:
            self.process = self._start(store, extra_args, log, env)
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        """Read the line the node prints once it serves, with its URLs (blocks until
        then; RuntimeError, the node killed, when it exits first)."""
        stdout = self.process.stdout
        line = stdout.readline() if stdout is not None else ""
        match = _URL.search(line)
        if match is None:
            self.process.kill()
            self.process.wait(timeout=self._start_timeout_s)
            raise RuntimeError(f"the node did not start: {line!r} {self.log.read_text()[-2000:]}")
        self.address = match.group(0).removeprefix("feedkv://")
        self.url = match.group(0)
        if self.certs_dir is not None:
            self.url += f"?certs_dir={quote(str(self.certs_dir))}"
        sql = _SQL_URL.search(line)
        self.sql_url = sql.group(0) if sql is not None else ""
        http = _HTTP_URL.search(line)
        self.http_url = http.group(0) if http is not None else ""

    @property
    def http_verify(self) -> ssl.SSLContext | bool:
        """What an https client verifies :attr:`http_url` with (``httpx.get(url,
        verify=node.http_verify)``): the CA of the node's certs directory."""
        if self.certs_dir is None:
            return True
        return ssl.create_default_context(cafile=str(self.certs_dir / "ca.crt"))

    @staticmethod
    def _start(
        store: Path, extra_args: tuple[str, ...], log: TextIO, env: dict[str, str] | None
    ) -> subprocess.Popen[str]:
        if not any(a.startswith("--external-io-dir") for a in extra_args):
            extra_args = ("--external-io-dir", tempfile.gettempdir(), *extra_args)
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
                "--sql-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, **env} if env else None,
        )

    def kill(self) -> None:
        """SIGKILL: no drain, no clean close."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def kill_all(self, timeout_s: float = 60.0) -> list[int]:
        """SIGKILL the node; the processes it started (Spark's JVM, which watches its
        parent's pipe, and its Python workers) must follow. Returns the ones that had
        not exited within ``timeout_s``, now killed too."""
        family = _descendants(self.process.pid)
        self.kill()
        with contextlib.suppress(TimeoutError):
            wait_until(
                lambda: not any(_alive(p) for p in family),
                timeout_s=timeout_s,
                poll_s=0.1,
                what="the node's children to exit",
            )
        orphans = [p for p in family if _alive(p)]
        for pid in orphans:
            with contextlib.suppress(OSError):  # it exited since
                os.kill(pid, signal.SIGKILL)
        return orphans

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: returns the exit code. A node still running after
        ``timeout_s`` fails the caller with its threads' stacks (``feedkv start`` prints
        them on SIGUSR1), then is killed."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stacks = self.stacks()
            self.kill_all()
            raise AssertionError(
                f"the node did not stop within {timeout_s:.0f} s of SIGTERM; its threads:\n"
                + stacks
            ) from None

    def stacks(self, timeout_s: float = 10.0) -> str:
        """Every thread's stack, as the running node prints it on SIGUSR1 (to :attr:`log`)."""
        before = self.log.stat().st_size
        self.process.send_signal(signal.SIGUSR1)
        sizes = [before]

        def printed() -> bool:  # NB: the dump is written at once; done once it stops growing
            sizes.append(self.log.stat().st_size)
            return sizes[-1] > before and sizes[-1] == sizes[-2]

        with contextlib.suppress(TimeoutError):
            wait_until(printed, timeout_s=timeout_s, poll_s=0.2, what="the node's stacks")
        with self.log.open("rb") as log:
            log.seek(before)
            return log.read().decode(errors="replace")


def _certs_dir(extra_args: tuple[str, ...]) -> Path | None:
    """The certs directory a node started with ``extra_args`` uses (``None``:
    ``--insecure``)."""
    for index, arg in enumerate(extra_args):
        if arg.startswith("--certs-dir="):
            return Path(arg.partition("=")[2])
        if arg == "--certs-dir" and index + 1 < len(extra_args):
            return Path(extra_args[index + 1])
    if "--insecure" in extra_args:
        return None
    return shared_certs_dir()


def _descendants(pid: int) -> set[int]:
    """The processes under ``pid``, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
