"""``crdb_internal_mvcc_timestamp`` in UPDATE and DELETE over the SQL port, as
CockroachDB's system_columns logic test has it: WHERE, SET and ORDER BY read the
timestamp of the row version the statement read; RETURNING names only the table's own
columns (42703); writing the column fails with 42P10."""

from __future__ import annotations

import decimal

import psycopg
import pytest
from psycopg import errors


def _stamps(conn: psycopg.Connection) -> dict[int, decimal.Decimal]:
    rows = conn.execute("SELECT k, crdb_internal_mvcc_timestamp FROM t").fetchall()
    return dict(rows)


def test_update_and_delete_filter_on_a_rows_mvcc_timestamp(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, INDEX (v))")
        conn.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        conn.execute("INSERT INTO t VALUES (3, 30)")
        before = _stamps(conn)
        assert before[1] == before[2] < before[3]

        updated = conn.execute(
            "UPDATE t SET v = v + 1 WHERE crdb_internal_mvcc_timestamp = %s RETURNING k, v",
            (before[3],),
        ).fetchall()
        assert updated == [(3, 31)]
        after = _stamps(conn)
        assert after[3] > before[3] and after[1] == before[1]

        # through the index on v, then the row's own version
        found = conn.execute(
            "UPDATE t SET v = 0 WHERE v = 10 AND crdb_internal_mvcc_timestamp > %s RETURNING k",
            (after[3],),
        ).fetchall()
        assert found == []

        deleted = conn.execute(
            "DELETE FROM t WHERE crdb_internal_mvcc_timestamp < %s RETURNING k, v",
            (after[3],),
        ).fetchall()
        assert sorted(deleted) == [(1, 10), (2, 20)]
        assert conn.execute("SELECT k FROM t").fetchall() == [(3,)]


def test_update_set_reads_the_old_versions_timestamp(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, d DECIMAL)")
        conn.execute("INSERT INTO t VALUES (1, 0)")
        [old] = _stamps(conn).values()
        conn.execute("UPDATE t SET d = crdb_internal_mvcc_timestamp + 1 WHERE k = 1")
        assert conn.execute("SELECT d FROM t").fetchone() == (old + 1,)


def test_returning_and_writing_the_column_fail_as_cockroachdb(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 1)")
        for sql in (
            "UPDATE t SET v = 2 RETURNING crdb_internal_mvcc_timestamp",
            "DELETE FROM t RETURNING crdb_internal_mvcc_timestamp",
            "INSERT INTO t VALUES (2, 2) RETURNING crdb_internal_mvcc_timestamp",
        ):
            with pytest.raises(errors.UndefinedColumn, match="crdb_internal_mvcc_timestamp"):
                conn.execute(sql)
        for sql in (
            "UPDATE t SET crdb_internal_mvcc_timestamp = 1.0 WHERE k = 1",
            "INSERT INTO t (k, crdb_internal_mvcc_timestamp) VALUES (3, 0)",
        ):
            with pytest.raises(errors.InvalidColumnReference, match="cannot modify system"):
                conn.execute(sql)
        assert conn.execute("SELECT k, v FROM t").fetchall() == [(1, 1)]
