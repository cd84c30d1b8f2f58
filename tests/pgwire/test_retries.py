"""Transaction retries over the wire, with psycopg: a real conflict between two
connections is a 40001 as CockroachDB sends it, a retry from the start succeeds, and
CockroachDB's client-side retry protocol (SAVEPOINT cockroach_restart) works."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import errors


@pytest.fixture
def url(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE acc (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO acc VALUES (1, 0)")
    return pg_url


def balance(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT v FROM acc WHERE id = 1").fetchone()
        assert row is not None
        return int(row[0])


def read_then_conflict(loser: psycopg.Connection[Any], url: str) -> None:
    """``loser`` reads the row; another connection then commits a write to it, so the
    write ``loser`` makes next cannot be serialized after its read."""
    assert loser.execute("SELECT v FROM acc WHERE id = 1").fetchone() == (0,)
    with psycopg.connect(url) as winner:
        winner.execute("UPDATE acc SET v = v + 10 WHERE id = 1")
        winner.commit()


def increment(conn: psycopg.Connection[Any]) -> None:
    (v,) = conn.execute("SELECT v FROM acc WHERE id = 1").fetchone() or (None,)
    conn.execute("UPDATE acc SET v = %s WHERE id = 1", [v + 1])


def test_a_conflict_between_two_connections_is_a_40001_and_a_retry_succeeds(url: str) -> None:
    with psycopg.connect(url) as conn:
        read_then_conflict(conn, url)
        with pytest.raises(errors.SerializationFailure) as caught:
            conn.execute("UPDATE acc SET v = 1 WHERE id = 1")
            conn.commit()
        assert caught.value.sqlstate == "40001"
        # worded as CockroachDB's, the key printed as it prints keys (the family id last)
        assert str(caught.value).startswith(
            "restart transaction: TransactionRetryWithProtoRefreshError: TransactionRetryError: "
            "retry txn (RETRY_SERIALIZABLE - failed preemptive refresh due to a conflict: "
            "committed value on key /Table/"
        )
        assert str(caught.value).count("restart transaction") == 1
        assert "/1/1/0)" in str(caught.value) and "b'" not in str(caught.value)
        hint = caught.value.diag.message_hint or ""
        assert "cockroach_restart" in hint
        assert hint.endswith("transaction-retry-error-reference.html#retry_serializable")
        conn.rollback()
        increment(conn)  # the retry, from the start of the transaction
        conn.commit()
    assert balance(url) == 11  # the winner's write and one increment; nothing lost


def test_the_cockroach_restart_savepoint_retries_inside_the_open_transaction(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("SAVEPOINT cockroach_restart")
        read_then_conflict(conn, url)
        with pytest.raises(errors.SerializationFailure):
            conn.execute("UPDATE acc SET v = 1 WHERE id = 1")
            conn.execute("RELEASE SAVEPOINT cockroach_restart")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.execute("ROLLBACK TO SAVEPOINT cockroach_restart")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        increment(conn)
        conn.execute("RELEASE SAVEPOINT cockroach_restart")
        with pytest.raises(errors.InvalidTransactionState):  # committed: only COMMIT now
            conn.execute("SELECT 1")
        conn.rollback()
    assert balance(url) == 11


def test_a_driver_retry_loop_with_the_savepoint_converges_under_contention(url: str) -> None:
    """Two connections each add 1 five times, interleaved so that they conflict; the
    loop is the one CockroachDB documents for client-side retries."""
    conns = [psycopg.connect(url) for _ in range(2)]
    try:
        retries = 0
        for _ in range(5):
            for conn in conns:
                conn.execute("SAVEPOINT cockroach_restart")
                conn.execute("SELECT v FROM acc WHERE id = 1")  # both read first
            for conn in conns:
                while True:
                    try:
                        increment(conn)
                        conn.execute("RELEASE SAVEPOINT cockroach_restart")
                        break
                    except errors.SerializationFailure:
                        retries += 1
                        conn.execute("ROLLBACK TO SAVEPOINT cockroach_restart")
                conn.commit()
        assert retries >= 1
    finally:
        for conn in conns:
            conn.close()
    assert balance(url) == 10


@pytest.mark.parametrize(
    ("statements", "code"),
    [
        (["SAVEPOINT cockroach_restart"], "25P01"),
        (["BEGIN", "ROLLBACK TO SAVEPOINT mine"], "3B001"),
        (["BEGIN", "RELEASE SAVEPOINT cockroach_restart"], "3B001"),
        (["BEGIN", "SELECT 1", "SAVEPOINT cockroach_restart"], "42601"),
    ],
)
def test_savepoint_mistakes_get_their_sqlstate(url: str, statements: list[str], code: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        *before, last = statements
        for text in before:
            conn.execute(text)
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(last)
        assert caught.value.sqlstate == code
