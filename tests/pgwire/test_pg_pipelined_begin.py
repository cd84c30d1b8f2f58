"""A BEGIN with transaction modes in a psycopg pipeline (several Executes before one
Sync: one implicit transaction), after writes: as in PostgreSQL and CockroachDB it makes
the implicit transaction explicit, the writes before it part of it, and its modes apply
to that transaction (CockroachDB sets them as SET TRANSACTION does, so a change SET
TRANSACTION refuses fails the BEGIN and the batch rolls back)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors


def _table(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")


def test_writes_before_a_begin_read_only_are_the_explicit_transactions(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _table(conn)
        with conn.pipeline():
            conn.execute("INSERT INTO t VALUES (%s)", [1])
            conn.execute("BEGIN TRANSACTION READ ONLY")
            read_only = conn.execute("SHOW transaction_read_only")
            conn.execute("ROLLBACK")
        assert read_only.fetchall() == [("on",)]
        assert conn.execute("SELECT id FROM t").fetchall() == []  # rolled back with it
        with conn.pipeline():
            conn.execute("INSERT INTO t VALUES (%s)", [2])
            conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            conn.execute("INSERT INTO t VALUES (%s)", [3])
            conn.execute("COMMIT")
        assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(2,), (3,)]


def test_a_write_after_a_pipelined_begin_read_only_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _table(conn)
        with pytest.raises(errors.ReadOnlySqlTransaction), conn.pipeline():
            conn.execute("INSERT INTO t VALUES (%s)", [1])
            conn.execute("BEGIN READ ONLY")
            conn.execute("INSERT INTO t VALUES (%s)", [2])
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT id FROM t").fetchall() == []


def test_a_pipelined_begin_whose_priority_cannot_apply_fails_the_batch(pg_url: str) -> None:
    """As CockroachDB: a running transaction's priority is fixed (25001), and the failed
    BEGIN leaves the batch's implicit transaction, which rolls back at the Sync."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _table(conn)
        with pytest.raises(errors.ActiveSqlTransaction, match="priority"), conn.pipeline():
            conn.execute("INSERT INTO t VALUES (%s)", [1])
            conn.execute("BEGIN PRIORITY HIGH")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT id FROM t").fetchall() == []
