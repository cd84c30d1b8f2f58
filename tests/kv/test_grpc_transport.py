"""Connecting to a node: a refused connection fails at once, a silent host costs the
connect timeout (real sockets on loopback)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading

import pytest

from feedkv import DB
from feedkv.errors import NodeUnavailableError
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.testing.node_process import free_port


def test_a_port_nothing_listens_on_fails_the_connect_at_once() -> None:
    """As a SIGKILLed node's port on a live host: the refusal is the answer (a wait for
    the timeout would say "nothing within 600 s")."""
    port = free_port()
    with pytest.raises(NodeUnavailableError, match="refused: nothing listens there") as raised:
        GrpcTransport("127.0.0.1", port, connect_timeout_s=600.0)
    assert str(raised.value).startswith(f"no feedkv node answered at 127.0.0.1:{port}")


def test_a_host_name_that_does_not_resolve_is_named_as_such() -> None:
    """gRPC says only that the dial failed at once; a name that does not resolve was
    reported as a refusal or a TLS handshake that failed."""
    with pytest.raises(NodeUnavailableError, match=r"'nosuchhost\.invalid' does not resolve"):
        GrpcTransport("nosuchhost.invalid", 26258, connect_timeout_s=600.0)


def test_a_port_that_speaks_another_protocol_is_named_as_such() -> None:
    """A node's SQL port given for its gRPC port: something listens, and answers, but
    not as gRPC does (it was reported as a refusal)."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        port = other.getsockname()[1]

        def answer_wrongly() -> None:
            while True:  # gRPC's attempts, then the diagnosis's connection
                try:
                    conn, _addr = other.accept()
                except OSError:
                    return  # the test closed the listener
                with conn, contextlib.suppress(OSError):
                    conn.sendall(b"N" * 64)  # NB: no HTTP/2: gRPC drops the connection

        threading.Thread(target=answer_wrongly, daemon=True).start()
        with pytest.raises(NodeUnavailableError, match="did not answer as a node's gRPC port"):
            GrpcTransport("127.0.0.1", port, connect_timeout_s=600.0)


def test_a_host_that_never_answers_costs_the_connect_timeout() -> None:
    """A listener that never speaks gRPC (a hung node): the connection is not refused,
    so only the timeout ends the wait."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with pytest.raises(NodeUnavailableError, match=r"nothing within 0\.2 s"):
            GrpcTransport("127.0.0.1", port, connect_timeout_s=0.2)


def test_a_script_that_ends_without_closing_its_client_exits(db: DB) -> None:
    """The README's remote connect has no close(): left to the garbage collector at the
    interpreter's exit, the gRPC channel waited for threads that no longer ran, and the
    script never ended. Clients are closed at exit as embedded nodes are."""
    script = "import feedkv, sys; db = feedkv.connect(sys.argv[1]); db.put(b'k', b'v'); print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", script, db.serving_url()],
        capture_output=True,
        text=True,
        timeout=60,  # NB: a deadline for the hang this guards against, not a speed check
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
    assert db.get(b"k") == b"v"
