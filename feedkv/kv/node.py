"""A node: a store served over gRPC.

``feedkv start`` runs one in the foreground; tests and embedded users that need a URL
(Spark executors are other processes) start one with ``Node(path, listen="127.0.0.1:0")``.
Stopping drains: the server refuses new calls, lets calls in flight finish, then the
store closes (its side loops stop and every observer is told ``NODE_SHUTDOWN``).
"""

from __future__ import annotations

import re
from pathlib import Path

from feedkv.errors import InvalidArgumentError
from feedkv.kv.address import host_port, split_host_port
from feedkv.kv.server import NodeServer
from feedkv.kv.store import Store, StoreConfig
from feedkv.util.hlc import Clock

__all__ = ["Node", "parse_duration_ns", "parse_listen", "parse_size"]

_DURATION = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>ns|us|µs|ms|s|m)?$")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9}
_SIZE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>B|KiB|MiB|GiB|KB|MB|GB)?$", re.IGNORECASE)
_UNIT_BYTES = {
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
}


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host means 127.0.0.1)."""
    address = split_host_port(text)
    if address is None:
        raise InvalidArgumentError(
            f"cannot listen on {text!r}: expected HOST:PORT with a port from 0 to 65535"
        )
    return address[0] or "127.0.0.1", address[1]


def parse_duration_ns(text: str) -> int:
    """A duration such as ``1s``, ``200ms``, ``1.5s`` or ``500us`` (bare numbers: seconds)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise InvalidArgumentError(
            f"bad duration {text!r}: expected a number with a unit (ns, us, ms, s, m), e.g. 1s"
        )
    return int(float(match["num"]) * _UNIT_NS[match["unit"] or "s"])


def parse_size(text: str) -> int:
    """A size such as ``64MiB``, ``512KiB``, ``1GB`` or ``4096`` (bare numbers: bytes)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise InvalidArgumentError(
            f"bad size {text!r}: expected a number with a unit (B, KiB, MiB, GiB), e.g. 64MiB"
        )
    return int(float(match["num"]) * _UNIT_BYTES[(match["unit"] or "b").lower()])


class Node:
    def __init__(
        self,
        store_path: str | Path,
        *,
        listen: str = "127.0.0.1:26257",
        config: StoreConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        host, port = parse_listen(listen)
        self.store = Store(store_path, clock=clock, config=config)
        try:
            self.server = NodeServer(self.store, host, port)
        except BaseException:
            self.store.close()
            raise
        self.server.start()
        self.host = host

    @property
    def url(self) -> str:
        return f"feedkv://{host_port(self.host, self.server.port)}"

    def stop(self, grace_s: float = 10.0) -> None:
        """Drain calls in flight, then close the store. Idempotent."""
        self.server.stop(grace_s)
        self.store.close()

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
