"""The SQL port's TLS step on a secure node: SSLRequest answered S and the socket
wrapped; GSSENCRequest answered N; plaintext startups refused with 28000; a bad
handshake dropped; none of them leaves a connection thread behind."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedkv.pgwire.server import PGServer
from feedkv.security.tls import ClientTLS, ServerTLS
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.waiting import wait_until

SSL_REQUEST = struct.pack("!ii", 8, 80877103)
GSSENC_REQUEST = struct.pack("!ii", 8, 80877104)


def _no_sessions(user: str, database: str) -> Any:
    raise AssertionError("no session may start in these tests")


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return make_certs_dir(tmp_path, users=("root",))


@pytest.fixture
def server(certs: Path) -> Iterator[PGServer]:
    tls = ServerTLS.load(certs).ssl_context(client_certs=True)
    with PGServer(_no_sessions, "127.0.0.1", 0, tls=tls) as started:
        yield started


def _connection_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pgwire-conn-")]


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:  # the server dropped it without a goodbye
        pass
    return data


def test_a_plaintext_startup_is_refused_with_28000(server: PGServer) -> None:
    startup = struct.pack("!i", 196608) + b"user\0root\0\0"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(struct.pack("!i", len(startup) + 4) + startup)
        answer = _read_all(sock)
    assert answer[:1] == b"E"
    assert b"C28000\0" in answer and b"takes TLS connections only" in answer
    wait_until(lambda: not _connection_threads(), what="the thread to end")
    assert not server._threads  # NB: nor is it kept in the server's books


def test_gssenc_is_declined_and_ssl_then_wraps_the_socket(server: PGServer, certs: Path) -> None:
    context = ClientTLS.load(certs, "root").ssl_context()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(GSSENC_REQUEST)
        assert sock.recv(1) == b"N"
        sock.sendall(SSL_REQUEST)
        assert sock.recv(1) == b"S"
        with context.wrap_socket(sock, server_hostname="127.0.0.1") as wrapped:
            assert wrapped.version() is not None
            peer = wrapped.getpeercert()
            assert peer is not None
            assert ("commonName", "node") in [pair for rdn in peer["subject"] for pair in rdn]


def test_a_client_that_does_not_trust_the_node_fails_its_handshake(
    server: PGServer, tmp_path: Path
) -> None:
    foreign = ClientTLS.load(make_certs_dir(tmp_path / "other"), "root").ssl_context()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(SSL_REQUEST)
        assert sock.recv(1) == b"S"
        with pytest.raises(ssl.SSLCertVerificationError):
            foreign.wrap_socket(sock, server_hostname="127.0.0.1")
    wait_until(lambda: not _connection_threads(), what="the thread to end")


@pytest.mark.parametrize(
    "garbage", [b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n", b"\0" * 64]
)
def test_garbage_after_the_ssl_request_is_dropped(server: PGServer, garbage: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(SSL_REQUEST)
        assert sock.recv(1) == b"S"
        with contextlib.suppress(OSError):  # the server may have hung up already
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
        _read_all(sock)  # the server ends the connection (maybe with a TLS alert)
    wait_until(lambda: not _connection_threads(), what="the thread to end")
