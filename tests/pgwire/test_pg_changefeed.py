"""Sinkless changefeeds over the SQL port: rows are sent as they happen, not at the
end; a cancel ends the feed with 57014 and frees it; so does a client going away,
even when no row comes to find it gone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.pgwire.server import PGServer
from feedkv.sql.interrupt import QueryCanceled
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.pgwire_client import RawClient, frontend, startup
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import LateClock

DEADLINE_S = 60.0


def feeds_running() -> int:
    return sum(t.name == "sinkless-changefeed" and t.is_alive() for t in threading.enumerate())


@pytest.fixture
def table(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")


@pytest.mark.usefixtures("table")
def test_psycopg_streams_a_changefeeds_rows_as_they_happen_until_cancelled(
    db: DB, pg_url: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        stream = conn.cursor().stream("EXPERIMENTAL CHANGEFEED FOR t")
        assert next(stream) == ("t", "[1]", '{"after": {"id": 1, "s": "a"}}')
        db.sql("INSERT INTO t VALUES (2, 'b')")  # after the first row was read
        assert next(stream) == ("t", "[2]", '{"after": {"id": 2, "s": "b"}}')
        # NB: cancel_safe, not cancel: libpq's old blocking cancel holds the GIL in
        # psycopg, and the server answering it runs in this process
        conn.cancel_safe(timeout=10)
        with pytest.raises(errors.QueryCanceled):
            next(stream)
        wait_until(lambda: feeds_running() == 0, what="the cancelled changefeed to stop")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_a_sinkless_changefeeds_notice_comes_before_its_rows(tmp_path: Path) -> None:
    """CockroachDB's notice of a cursor over five hours old reaches the client before
    the rows, which never end."""
    notices: list[str] = []
    clock = LateClock(7 * 3600 * 10**9)  # NB: the table must be older than the cursor
    old = feedkv.connect(
        tmp_path / "old",
        config=StoreConfig(sync=False),
        changefeed_runner="thread",
        certs_dir=shared_certs_dir(),
        clock=clock,
    )
    old.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    clock.catch_up()
    old.sql("INSERT INTO t VALUES (1, 'a')")  # NB: after the cursor: news
    with old, psycopg.connect(old.serve_sql(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        stream = conn.cursor().stream("EXPERIMENTAL CHANGEFEED FOR t WITH cursor = '-6h'")
        assert next(stream) == ("t", "[1]", '{"after": {"id": 1, "s": "a"}}')
        assert notices == [
            "the provided cursor is 6 hours old; older cursors can result in increased "
            "changefeed latency"
        ]
        conn.cancel_safe(timeout=10)
        with pytest.raises(errors.QueryCanceled):
            next(stream)
    wait_until(lambda: feeds_running() == 0, what="the cancelled changefeed to stop")


@pytest.mark.usefixtures("table")
@pytest.mark.insecure  # a raw client: the message layer beneath TLS
def test_the_simple_protocol_sends_each_row_before_the_feed_ends(
    db: DB, pg_server: PGServer
) -> None:
    with RawClient(pg_server.host, pg_server.port) as client:
        client.send(startup())
        client.until(b"Z")
        client.send(frontend(b"Q", b"CREATE CHANGEFEED FOR t\0"))
        assert [kind for kind, _ in client.until(b"D")] == [b"T", b"D"]
        db.sql("UPDATE t SET s = 'z' WHERE id = 1")
        [(kind, body)] = client.until(b"D")  # the update alone: nothing else came
        assert (kind, b'"s": "z"' in body) == (b"D", True)
    # no row comes: the feed's check of its client finds it gone
    wait_until(lambda: feeds_running() == 0, what="the orphaned changefeed to stop")


@pytest.mark.usefixtures("table")
@pytest.mark.insecure  # a raw client: the message layer beneath TLS
def test_stopping_the_server_ends_a_streaming_changefeed(db: DB, pg_server: PGServer) -> None:
    with RawClient(pg_server.host, pg_server.port) as client:
        client.send(startup())
        client.until(b"Z")
        client.send(frontend(b"Q", b"EXPERIMENTAL CHANGEFEED FOR t\0"))
        client.until(b"D")
        pg_server.stop()
        client.read_closed()
    wait_until(lambda: feeds_running() == 0, what="the changefeed to stop with the server")


@pytest.mark.usefixtures("table")
def test_a_feed_ended_by_a_schema_change_is_no_internal_error(db: DB, pg_url: str) -> None:
    """Under schema_change_policy='stop' the feed ends with its own message (and
    CockroachDB's uncategorized SQLSTATE), not as an internal error of the server."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        stream = conn.cursor().stream(
            "EXPERIMENTAL CHANGEFEED FOR t WITH schema_change_policy = 'stop'"
        )
        assert next(stream) == ("t", "[1]", '{"after": {"id": 1, "s": "a"}}')
        db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 1")
        with pytest.raises(psycopg.Error) as raised:
            next(stream)
        assert raised.value.sqlstate == "XXUUU"
        assert str(raised.value).startswith("schema change occurred at ")


@pytest.mark.usefixtures("table")
@pytest.mark.timeout(DEADLINE_S)  # NB: without the timeout the feed, and next(), never end
def test_statement_timeout_ends_a_sinkless_changefeed(db: DB, pg_url: str) -> None:
    """As CockroachDB's: ``statement_timeout`` bounds a sinkless changefeed from psql,
    rows and all (the statement returned before its rows streamed: its timer used to
    stop there, and the feed ran for ever)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '500ms'")
        stream = conn.cursor().stream("EXPERIMENTAL CHANGEFEED FOR t")
        assert next(stream) == ("t", "[1]", '{"after": {"id": 1, "s": "a"}}')
        with pytest.raises(errors.QueryCanceled) as caught:
            next(stream)
        assert str(caught.value) == "query execution canceled due to statement timeout"
        wait_until(lambda: feeds_running() == 0, what="the timed-out changefeed to stop")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_statement_timeout_ends_a_changefeed_whose_rows_keep_coming(db: DB) -> None:
    """Rows that keep coming (a resolved timestamp every 10 ms) do not keep the feed
    past its statement's time: the reader looks at the deadline at each take, not
    only when it waits."""
    db.sql("CREATE TABLE busy (id INT PRIMARY KEY)")
    db.sql("SET statement_timeout = '500ms'")
    give_up = time.monotonic() + DEADLINE_S
    with pytest.raises(QueryCanceled, match="statement timeout"):
        for _row in db.sql("EXPERIMENTAL CHANGEFEED FOR busy WITH resolved = '10ms'"):
            assert time.monotonic() < give_up, "the feed outlived its statement_timeout"
    db.sql("SET statement_timeout = 0")
    wait_until(lambda: feeds_running() == 0, what="the timed-out changefeed to stop")
