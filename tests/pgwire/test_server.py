"""The SQL port under bad clients: garbage, truncated and oversized messages end only
their own connection with a clear error, nothing half-written commits, and the server
keeps serving the others."""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator

import psycopg
import pytest

from feedkv import DB
from feedkv.pgwire.server import PGServer
from feedkv.testing.pgwire_client import RawClient, error_fields, frontend, startup
from feedkv.testing.waiting import wait_until

# NB: the raw protocol beneath the TLS step: plaintext nodes (tests/pgwire/conftest.py)
pytestmark = pytest.mark.insecure


def query(text: str) -> bytes:
    return frontend(b"Q", text.encode() + b"\0")


@pytest.fixture
def bystander(pg_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A connection in the middle of a transaction while others misbehave."""
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        conn.commit()
        conn.execute("INSERT INTO t VALUES (100)")
        yield conn


def ready_client(server: PGServer) -> RawClient:
    client = RawClient(server.host, server.port)
    client.send(startup())
    client.until(b"Z")
    return client


def fatal_code(data: bytes) -> str:
    """The SQLSTATE of the FATAL ErrorResponse that ends ``data``."""
    assert data[:1] == b"E", data
    fields = error_fields(data[5:])
    assert fields["S"] == "FATAL", fields
    return fields["C"]


@pytest.mark.parametrize(
    ("garbage", "code"),
    [
        (frontend(b"\x00", b"junk"), "08P01"),
        (frontend(b"z"), "08P01"),
        (b"Q" + struct.pack("!i", 2), "08P01"),
        (b"Q" + struct.pack("!i", 0x7FFFFFFF), "54000"),
        (frontend(b"Q", b"SELECT 1"), "08P01"),  # no terminator
        (frontend(b"B", b"\0\0\0\x01"), "08P01"),  # truncated fields
    ],
    ids=["type-0", "unknown-type", "short-length", "huge-length", "unterminated", "truncated"],
)
def test_a_bad_message_closes_only_its_connection_and_the_server_serves_on(
    pg_server: PGServer,
    bystander: psycopg.Connection[tuple[object, ...]],
    garbage: bytes,
    code: str,
) -> None:
    with ready_client(pg_server) as client:
        client.send(query("BEGIN") + query("INSERT INTO t VALUES (1)"))
        client.until(b"Z")
        client.until(b"Z")
        client.send(garbage)
        assert fatal_code(client.read_closed()) == code
    # the bystander's transaction is untouched, and the half-done one left nothing
    bystander.execute("INSERT INTO t VALUES (101)")
    bystander.commit()
    assert bystander.execute("SELECT id FROM t ORDER BY id").fetchall() == [(100,), (101,)]
    with ready_client(pg_server) as again:
        again.send(query("SELECT 1"))
        assert [kind for kind, _ in again.until(b"Z")] == [b"T", b"D", b"C", b"Z"]


@pytest.mark.parametrize(
    "packet",
    [
        struct.pack("!ii", 8, 1 << 16),  # protocol 1.0
        struct.pack("!ii", 8, 4 << 16),  # protocol 4.0
        struct.pack("!i", 3) + b"\0" * 8,  # a length under the minimum
        struct.pack("!ii", 1 << 24, 3 << 16),  # far over the startup limit
    ],
    ids=["protocol-1", "protocol-4", "short", "huge"],
)
def test_a_bad_startup_packet_gets_a_fatal_error(pg_server: PGServer, packet: bytes) -> None:
    with RawClient(pg_server.host, pg_server.port) as client:
        client.send(packet)
        assert fatal_code(client.read_closed()) in ("08P01", "0A000")


def test_a_message_cut_off_by_a_closed_socket_runs_nothing(
    pg_server: PGServer, db: DB, bystander: psycopg.Connection[tuple[object, ...]]
) -> None:
    whole = query("INSERT INTO t VALUES (7)")
    with ready_client(pg_server) as client:
        client.send(whole[:-3])
        client.sock.shutdown(socket.SHUT_WR)
        assert client.read_closed() == b""
    wait_until(lambda: pg_server.connections == 1, what="the cut-off connection to close")
    assert db.sql("SELECT count(*) FROM t WHERE id = 7").rows == [(0,)]


def test_random_garbage_after_startup_never_takes_the_server_down(pg_server: PGServer) -> None:
    rng = random.Random(39)
    for _ in range(30):
        garbage = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200)))
        with ready_client(pg_server) as client:
            client.send(garbage)
            client.sock.shutdown(socket.SHUT_WR)
            data = client.read_closed()
            assert data == b"" or data[:1] in (b"E", b"T", b"1", b"2", b"3", b"Z", b"I")
    wait_until(lambda: pg_server.connections == 0, what="the garbage connections to close")
    with ready_client(pg_server) as client:
        client.send(query("SELECT 1"))
        assert client.until(b"Z")[-1] == (b"Z", b"I")


def test_an_ssl_request_is_declined_and_the_client_goes_on_in_plaintext(
    pg_server: PGServer,
) -> None:
    with RawClient(pg_server.host, pg_server.port) as client:
        client.send(struct.pack("!ii", 8, 80877103))
        assert client.sock.recv(1) == b"N"
        client.send(startup())
        assert client.until(b"Z")[-1] == (b"Z", b"I")


def test_sslmode_require_is_refused_until_the_node_has_tls(pg_url: str) -> None:
    with pytest.raises(psycopg.OperationalError, match="server does not support SSL"):
        psycopg.connect(pg_url.replace("sslmode=disable", "sslmode=require"))


def test_a_cancel_request_with_a_wrong_secret_is_ignored(pg_server: PGServer) -> None:
    with ready_client(pg_server) as client, RawClient(pg_server.host, pg_server.port) as cancel:
        cancel.send(struct.pack("!iiii", 16, 80877102, 1, 12345))
        assert cancel.read_closed() == b""
        client.send(query("SELECT 1"))
        assert client.until(b"Z")[-1] == (b"Z", b"I")


def test_stopping_the_server_closes_its_connections_and_rolls_back(
    db: DB, pg_server: PGServer
) -> None:
    with ready_client(pg_server) as client:
        client.send(query("CREATE TABLE s (id INT PRIMARY KEY)"))
        client.until(b"Z")
        client.send(query("BEGIN") + query("INSERT INTO s VALUES (1)"))
        client.until(b"Z")
        client.until(b"Z")
        pg_server.stop()
        assert fatal_code(client.read_closed()) == "57P01"
    assert db.sql("SELECT count(*) FROM s").rows == [(0,)]


def test_many_clients_at_once_each_get_their_own_session(pg_url: str) -> None:
    conns = [psycopg.connect(pg_url) for _ in range(20)]
    try:
        pids = {conn.info.backend_pid for conn in conns}
        assert len(pids) == 20
        for i, conn in enumerate(conns):
            assert conn.execute("SELECT %s", [i]).fetchone() == (i,)
    finally:
        for conn in conns:
            conn.close()


def test_an_answer_larger_than_the_socket_buffers_reaches_a_client_that_reads_late(
    pg_server: PGServer,
) -> None:
    """What does not fit in the socket buffers waits for the reader, and arrives whole."""
    size = 8_000_000  # past the send and receive buffers of a loopback connection
    with ready_client(pg_server) as client:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        client.send(query(f"SELECT repeat('x', {size})"))
        messages = client.until(b"Z")
    rows = [body for kind, body in messages if kind == b"D"]
    assert len(rows) == 1
    (columns, length) = struct.unpack_from("!hi", rows[0])
    assert (columns, length) == (1, size)
    assert rows[0][6:] == b"x" * size
    assert messages[-1] == (b"Z", b"I")
