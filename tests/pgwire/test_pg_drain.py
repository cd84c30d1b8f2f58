"""A node's SQL port stopping (its drain) as a driver sees it: a connection waiting for
its next statement is told ``57P01 server is shutting down``, and a statement running
when the stop begins is answered before its connection is closed, never cut off midway
(which leaves the client not knowing whether it ran)."""

from __future__ import annotations

import threading

import psycopg
import psycopg.errors
import pytest

from feedkv import DB
from feedkv.pgwire.server import PGServer
from feedkv.testing.waiting import wait_until

# TLS connections and plaintext ones wait for their clients' bytes differently (see
# feedkv.pgwire.server): each is woken by the drain
BOTH = pytest.mark.parametrize(
    "wire", ["tls", pytest.param("plaintext", marks=pytest.mark.insecure)]
)


@BOTH
def test_an_idle_connection_is_told_the_server_is_shutting_down(
    pg_url: str, pg_server: PGServer, wire: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
        pg_server.stop()
        try:
            conn.execute("SELECT 1")
        except psycopg.Error as exc:
            error: psycopg.Error = exc
        assert isinstance(error, psycopg.errors.AdminShutdown), error
        assert error.sqlstate == "57P01"
        assert "server is shutting down" in str(error)


def test_a_statement_running_when_the_server_stops_is_answered_first(
    db: DB, pg_url: str, pg_server: PGServer
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    outcome: list[object] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:

        def write() -> None:
            try:
                outcome.append(
                    conn.execute(
                        "INSERT INTO t SELECT 1, 2 FROM (SELECT pg_sleep(1)) RETURNING v"
                    ).fetchall()
                )
            except psycopg.Error as exc:
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        wait_until(lambda: pg_server.running == 1, what="the INSERT to run")
        pg_server.stop()
        writer.join()
        assert outcome == [[(2,)]]
        try:
            conn.execute("SELECT 1")
        except psycopg.Error as exc:
            error: psycopg.Error = exc
        assert error.sqlstate == "57P01", error
    assert db.sql("SELECT id, v FROM t").rows == [(1, 2)]


def test_a_streaming_changefeed_ends_saying_the_server_is_shutting_down(
    db: DB, pg_url: str, pg_server: PGServer
) -> None:
    """A feed never ends by itself, so the stop ends it at once, with 57P01 (reconnect,
    to another node) rather than 57014, which would say that someone cancelled it."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1)")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        stream = conn.cursor().stream("EXPERIMENTAL CHANGEFEED FOR t")
        assert next(stream) == ("t", "[1]", '{"after": {"id": 1}}')
        pg_server.stop()
        try:
            next(stream)
        except psycopg.Error as exc:
            error: psycopg.Error = exc
        assert isinstance(error, psycopg.errors.AdminShutdown), error


def test_a_draining_node_refuses_new_clients_until_its_port_closes(
    db: DB, pg_url: str, pg_server: PGServer
) -> None:
    """A drained node stays up with its SQL port open, telling each new client that it
    takes none (57P01, as CockroachDB's drain does), so that the client learns why and
    tries another node; its port closes when the node stops."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        node = db.node
        assert node is not None
        assert node.drain() == 0
        assert pg_server.draining
        try:
            conn.execute("SELECT 1")
        except psycopg.Error as exc:
            error: psycopg.Error = exc
        assert error.sqlstate == "57P01" and "server is shutting down" in str(error)
    for _ in range(2):  # the port goes on refusing
        try:
            psycopg.connect(pg_url, connect_timeout=10)
        except psycopg.OperationalError as exc:
            refused: psycopg.OperationalError = exc
        assert "server is not accepting clients, try another node" in str(refused)
    wait_until(lambda: pg_server.connections == 0, what="the refused connections to end")
    pg_server.stop()
    try:
        psycopg.connect(pg_url, connect_timeout=10)
    except psycopg.OperationalError as exc:
        closed: psycopg.OperationalError = exc
    assert "Connection refused" in str(closed)
