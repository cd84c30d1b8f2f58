"""moto's S3 server in a process of its own on a free loopback port, for tests of sinks
that write into buckets.

NB: a process of its own, not moto's in-process ``ThreadedMotoServer``: delta-rs holds
the GIL while it waits on some of its reads, so a server on a thread of the same process
never answers them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from feedkv.testing.waiting import wait_until

__all__ = ["S3_KEYS", "moto_s3_server"]

# moto takes any keys; these are the ones the tests' sink URIs and clients give it.
S3_KEYS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}


@contextmanager
def moto_s3_server(start_timeout_s: float = 60.0) -> Iterator[str]:
    """Run ``moto_server`` (installed beside this interpreter) on a free loopback port;
    yields its URL (``http://127.0.0.1:PORT``) and stops it on exit."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [Path(sys.executable).parent / "moto_server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        if server.poll() is not None:
            raise RuntimeError(f"moto_server exited with {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    try:
        wait_until(listening, timeout_s=start_timeout_s, what="moto's S3 server to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)
