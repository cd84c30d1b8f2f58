"""Cancelling a running statement over the wire: psycopg's cancel from another thread
and psql's Ctrl-C (SIGINT) end a pg_sleep mid-statement with 57014, and the session
goes on; what the cancelled statement's transaction wrote is gone."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from typing import Any

import psycopg
import pytest
from psycopg import errors

from feedkv import DB
from feedkv.pgwire.server import PGServer
from feedkv.testing.waiting import wait_until

PSQL = shutil.which("psql")
DEADLINE_S = 30.0


def cancel_until_done(conn: psycopg.Connection[Any], done: threading.Event) -> threading.Thread:
    """Send cancels until ``done``: a cancel that arrives before the statement starts
    cancels nothing, so one is sent every 50 ms until the statement has ended."""

    def run() -> None:
        while not done.wait(0.05):
            conn.cancel_safe(timeout=10)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_psycopg_cancels_a_running_pg_sleep_and_the_connection_goes_on(db: DB, pg_url: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        done = threading.Event()
        canceller = cancel_until_done(conn, done)
        try:
            with pytest.raises(errors.QueryCanceled) as caught:
                conn.execute("INSERT INTO t SELECT 1 FROM (SELECT pg_sleep(600)) AS s")
        finally:
            done.set()
            canceller.join(DEADLINE_S)
        assert caught.value.sqlstate == "57014"
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        assert conn.execute("SELECT pg_sleep(0), 2").fetchone() == (True, 2)


def test_psycopg_cancels_an_update_waiting_for_another_transactions_lock(
    db: DB, pg_url: str
) -> None:
    """Ctrl-C on an UPDATE stuck behind an open transaction: the wait ends at once, the
    holder's lock stands (it commits), and the cancelled UPDATE wrote nothing."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    assert db.node is not None
    locks = db.node.store.locks
    with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as conn:
        holder.execute("UPDATE t SET v = 2 WHERE k = 1")  # psycopg opened a transaction
        canceller = threading.Thread(
            target=lambda: wait_until(locks.waiters, timeout_s=DEADLINE_S) and conn.cancel_safe()
        )
        canceller.start()
        try:
            with pytest.raises(errors.QueryCanceled):
                conn.execute("UPDATE t SET v = 3 WHERE k = 1")
        finally:
            canceller.join(DEADLINE_S)
        holder.commit()
        assert conn.execute("SELECT v FROM t").fetchone() == (2,)
        assert locks.waiters() == 0


def test_a_cancel_inside_a_transaction_fails_it_until_rollback(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("SELECT 1")
        done = threading.Event()
        canceller = cancel_until_done(conn, done)
        try:
            with pytest.raises(errors.QueryCanceled):
                conn.execute("SELECT pg_sleep(600)")
        finally:
            done.set()
            canceller.join(DEADLINE_S)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.rollback()
        assert conn.execute("SELECT 3").fetchone() == (3,)


@pytest.mark.skipif(PSQL is None, reason="psql is missing: `make` installs postgresql-client")
def test_psql_ctrl_c_cancels_the_running_statement(pg_url: str, pg_server: PGServer) -> None:
    assert PSQL is not None
    psql = subprocess.Popen(
        [PSQL, pg_url, "-X", "-c", "SELECT pg_sleep(600)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # NB: once the statement runs: a SIGINT before psql has its handler would kill it
        wait_until(lambda: pg_server.running == 1, what="psql's statement to start")
        while True:  # as a user presses Ctrl-C until the statement ends
            psql.send_signal(signal.SIGINT)
            try:
                _out, err = psql.communicate(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        if psql.poll() is None:
            psql.kill()
            psql.wait(DEADLINE_S)
    assert "query execution canceled" in err
    assert psql.returncode == 1


def test_statement_timeout_cancels_a_statement_that_runs_past_it(db: DB, pg_url: str) -> None:
    """CockroachDB's and PostgreSQL's ``statement_timeout`` (it was an unknown
    variable, 42704): SET, or the connection's ``options``; shown in milliseconds."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '100ms'")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("100",)
        with pytest.raises(errors.QueryCanceled) as caught:
            conn.execute("INSERT INTO t SELECT 1 FROM (SELECT pg_sleep(600)) AS s")
        assert str(caught.value) == "query execution canceled due to statement timeout"
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.execute("SET statement_timeout = 0")
        assert conn.execute("SELECT pg_sleep(0.2)").fetchone() == (True,)
    options = "options=-c%20statement_timeout%3D1min&application_name=shop"
    with psycopg.connect(f"{pg_url}&{options}", autocommit=True) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("60000",)
        assert conn.execute("SHOW application_name").fetchone() == ("shop",)
        assert conn.info.parameter_status("application_name") == "shop"
    with pytest.raises(psycopg.OperationalError, match="statement_timeout: 'soon'"):
        psycopg.connect(f"{pg_url}&options=-c%20statement_timeout%3Dsoon")
    with pytest.raises(psycopg.OperationalError, match='parameter "nope"'):
        psycopg.connect(f"{pg_url}&options=-c%20nope%3D1")


def test_pg_backend_pid_is_the_process_id_of_the_cancel_key(pg_url: str) -> None:
    """As CockroachDB's, pg_backend_pid() is the number BackendKeyData gave the client
    (its cancel key's process id): an INT, the same for every statement of the session,
    another for another connection's."""
    seen = []
    for _ in range(2):
        with psycopg.connect(pg_url, autocommit=True) as conn:
            [(pid,)] = conn.execute("SELECT pg_backend_pid()").fetchall()
            cursor = conn.execute("SELECT pg_backend_pid()", prepare=True)
            assert cursor.description is not None
            assert cursor.description[0].type_code == 20  # int8
            assert cursor.fetchall() == [(pid,)] and pid == conn.info.backend_pid
            seen.append(pid)
    assert seen[0] != seen[1]
