"""Connecting to a node: a refused connection fails at once, a silent host costs the
connect timeout (real sockets on loopback)."""

from __future__ import annotations

import socket

import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.testing.node_process import free_port


def test_a_port_nothing_listens_on_fails_the_connect_at_once() -> None:
    """As a SIGKILLed node's port on a live host: the refusal is the answer (a wait for
    the timeout would say "nothing within 600 s")."""
    port = free_port()
    with pytest.raises(NodeUnavailableError, match="failed at once") as raised:
        GrpcTransport("127.0.0.1", port, connect_timeout_s=600.0)
    assert str(raised.value).startswith(f"no feedkv node answered at 127.0.0.1:{port}")


def test_a_host_that_never_answers_costs_the_connect_timeout() -> None:
    """A listener that never speaks gRPC (a hung node): the connection is not refused,
    so only the timeout ends the wait."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with pytest.raises(NodeUnavailableError, match=r"nothing within 0\.2 s"):
            GrpcTransport("127.0.0.1", port, connect_timeout_s=0.2)
