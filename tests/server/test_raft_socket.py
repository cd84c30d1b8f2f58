"""The Raft connection between nodes: frames read back as written, a torn or oversized
one fails the connection, a secure listener takes only a node's connection (TLS, its
hello checked as a gRPC call between nodes is), stopping it ends its connections, and a
node behind a proxy connects through it."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from feedkv.security.tls import ClientTLS, ServerTLS
from feedkv.server.raft_socket import MAX_FRAME, RaftListener, dial, frame, read_frame
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.partition import Network
from feedkv.testing.waiting import wait_until


def test_frames_read_back_in_order_and_an_end_between_frames_is_none() -> None:
    bodies = [b"", b"one", bytes(range(256)) * 40]
    reader = io.BytesIO(b"".join(frame(body) for body in bodies))
    assert [read_frame(reader) for _ in bodies] == bodies
    assert read_frame(reader) is None


@pytest.mark.parametrize(
    "wire",
    [frame(b"whole")[:-1], frame(b"whole")[:2], (MAX_FRAME + 1).to_bytes(4, "big") + b"x"],
    ids=["inside-a-body", "inside-a-length", "beyond-the-limit"],
)
def test_a_torn_or_oversized_frame_fails_the_connection(wire: bytes) -> None:
    with pytest.raises(ConnectionError):
        read_frame(io.BytesIO(wire))


class _Taken:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(request)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("alice",))


@pytest.fixture
def secure(certs: Path) -> Iterator[tuple[RaftListener, ServerTLS, _Taken]]:
    tls = ServerTLS.load(certs)
    taken = _Taken()
    listener = RaftListener("127.0.0.1", tls, taken)
    try:
        yield listener, tls, taken
    finally:
        listener.stop()


def test_a_secure_listener_takes_a_nodes_requests_and_refuses_a_users_or_no_credentials(
    secure: tuple[RaftListener, ServerTLS, _Taken], certs: Path
) -> None:
    listener, tls, taken = secure
    node = tls.client()
    alice = ClientTLS.load(certs, "alice")
    audience = tls.verifier.audience
    callers = [
        ("alice", alice.claims().metadata(audience), alice),
        ("nobody", None, node),
        ("node", node.claims().metadata(audience), node),
    ]
    for name, auth, client in callers:
        connection = dial("127.0.0.1", listener.port, 2, auth, client, 5.0)
        try:
            connection.sendall(frame(msgpack.packb({"from": 2, "who": name})))
            # NB: a refused connection is closed by the listener: the read ends
            connection.settimeout(30)
            if name != "node":
                assert connection.recv(1) == b""
        finally:
            connection.close()
    wait_until(lambda: len(taken.requests) == 1, timeout_s=30, what="the node's request")
    assert [request["who"] for request in taken.requests] == ["node"]


def test_a_plaintext_sender_is_refused_by_a_secure_listener(
    secure: tuple[RaftListener, ServerTLS, _Taken],
) -> None:
    listener, tls, taken = secure
    auth = tls.client().claims().metadata(tls.verifier.audience)
    connection = dial("127.0.0.1", listener.port, 2, auth, None, 5.0)
    try:
        connection.sendall(frame(msgpack.packb({"from": 2})))
        connection.settimeout(30)
        assert connection.recv(1) == b""  # closed: not a TLS handshake
    except ConnectionResetError:
        pass  # NB: or reset, when the listener closed with our bytes unread
    finally:
        connection.close()
    assert taken.requests == []


def test_stopping_a_listener_ends_its_connections() -> None:
    taken = _Taken()
    listener = RaftListener("127.0.0.1", None, taken)
    connection = dial("127.0.0.1", listener.port, 2, None, None, 5.0)
    try:
        connection.sendall(frame(msgpack.packb({"from": 2})))
        wait_until(lambda: len(taken.requests) == 1, timeout_s=30, what="the request")
        assert listener.connections == 1
        listener.stop()
        assert listener.connections == 0
        connection.settimeout(30)
        assert connection.recv(1) == b""
    finally:
        connection.close()
        listener.stop()


def test_a_node_behind_grpc_proxy_connects_through_it_as_its_grpc_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """So a partition the test network cuts holds Raft messages too."""
    taken = _Taken()
    listener = RaftListener("127.0.0.1", None, taken)
    with Network(2) as network:
        network.locate(lambda address: 1 if address == f"127.0.0.1:{listener.port}" else None)
        for name, value in network.env(0).items():
            monkeypatch.setenv(name, value)
        connection = dial("127.0.0.1", listener.port, 1, None, None, 5.0)
        try:
            request = frame(msgpack.packb({"from": 1}))
            connection.sendall(request)
            wait_until(lambda: len(taken.requests) == 1, timeout_s=30, what="the request")
        finally:
            connection.close()
            listener.stop()
        assert network.bytes_between[(0, 1)] >= len(request)
