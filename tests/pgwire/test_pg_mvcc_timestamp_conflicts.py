"""``crdb_internal_mvcc_timestamp`` in INSERT ... ON CONFLICT DO UPDATE (the existing
row's, in SET and WHERE, named bare or by the table), UPDATE ... FROM and DELETE ...
USING (each table's; named bare, ambiguous), as CockroachDB's system_columns logic test
has it, also over the extended protocol; writing the column stays 42P10. feedkv
answered 42703 in these statements (and any UPDATE ... FROM with a placeholder 42P01)."""

from __future__ import annotations

import decimal

import psycopg
import pytest
from psycopg import errors


def _stamp(conn: psycopg.Connection, k: int) -> decimal.Decimal:
    [(stamp,)] = conn.execute(
        "SELECT crdb_internal_mvcc_timestamp FROM t WHERE k = %s", (k,)
    ).fetchall()
    return stamp


@pytest.fixture
def conn(pg_url: str) -> psycopg.Connection:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, z DECIMAL)")
        connection.execute("INSERT INTO t VALUES (1, 10, NULL)")
        connection.execute("INSERT INTO t VALUES (2, 20, NULL)")
        yield connection


def test_on_conflict_do_update_reads_the_existing_rows_timestamp(
    conn: psycopg.Connection,
) -> None:
    first = _stamp(conn, 1)
    rows = conn.execute(
        "INSERT INTO t VALUES (1, 11, NULL) ON CONFLICT (k) "
        "DO UPDATE SET z = crdb_internal_mvcc_timestamp, v = excluded.v RETURNING k, v, z"
    ).fetchall()
    assert rows == [(1, 11, first)]
    assert _stamp(conn, 1) > first
    # WHERE keeps the row only when it has not changed since the timestamp given
    stale = conn.execute(
        "INSERT INTO t VALUES (1, 12, NULL) ON CONFLICT (k) DO UPDATE SET v = excluded.v "
        "WHERE t.crdb_internal_mvcc_timestamp = %s RETURNING v",
        (first,),
    ).fetchall()
    assert stale == []
    fresh = conn.execute(
        "INSERT INTO t VALUES (1, 12, NULL) ON CONFLICT (k) DO UPDATE SET v = excluded.v "
        "WHERE t.crdb_internal_mvcc_timestamp = %s RETURNING v",
        (_stamp(conn, 1),),
    ).fetchall()
    assert fresh == [(12,)]
    # a row without conflict is inserted as it is
    rows = conn.execute(
        "INSERT INTO t VALUES (3, 30, NULL) ON CONFLICT (k) "
        "DO UPDATE SET z = crdb_internal_mvcc_timestamp RETURNING k, z"
    ).fetchall()
    assert rows == [(3, None)]


def test_update_from_and_delete_using_read_the_tables_row_timestamp(
    conn: psycopg.Connection,
) -> None:
    conn.execute("CREATE TABLE u (k INT PRIMARY KEY, w INT)")
    conn.execute("INSERT INTO u VALUES (1, 100), (2, 200)")
    first, second = _stamp(conn, 1), _stamp(conn, 2)
    assert first < second
    updated = conn.execute(
        "UPDATE t SET v = u.w, z = t.crdb_internal_mvcc_timestamp FROM u "
        "WHERE t.k = u.k AND t.crdb_internal_mvcc_timestamp = %s RETURNING t.k, t.v, t.z",
        (second,),
    ).fetchall()
    assert updated == [(2, 200, second)]
    joined = conn.execute(
        "UPDATE t SET z = u.crdb_internal_mvcc_timestamp FROM u WHERE t.k = u.k AND t.k = 2 "
        "RETURNING t.z"
    ).fetchall()
    assert (
        joined == conn.execute("SELECT crdb_internal_mvcc_timestamp FROM u WHERE k = 2").fetchall()
    )
    with pytest.raises(errors.AmbiguousColumn):
        conn.execute("DELETE FROM t USING u WHERE t.k = u.k AND crdb_internal_mvcc_timestamp > 0")
    deleted = conn.execute(
        "DELETE FROM t USING u WHERE t.k = u.k AND t.crdb_internal_mvcc_timestamp <= %s "
        "RETURNING t.k",
        (first,),
    ).fetchall()
    assert deleted == [(1,)]
    assert conn.execute("SELECT k FROM t").fetchall() == [(2,)]


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO t VALUES (1, 1, NULL) ON CONFLICT (k) "
        "DO UPDATE SET crdb_internal_mvcc_timestamp = 1",
        "UPDATE t SET crdb_internal_mvcc_timestamp = 1 FROM u WHERE t.k = u.k",
    ],
)
def test_writing_the_column_is_still_refused(conn: psycopg.Connection, statement: str) -> None:
    conn.execute("CREATE TABLE u (k INT PRIMARY KEY)")
    with pytest.raises(errors.InvalidColumnReference, match="cannot modify system column"):
        conn.execute(statement)


def test_update_from_and_delete_using_take_placeholders(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE u (k INT PRIMARY KEY, w INT)")
    conn.execute("INSERT INTO u VALUES (1, 100), (2, 200)")
    updated = conn.execute(
        "UPDATE t SET v = u.w + %s FROM u WHERE t.k = u.k AND u.w = %s RETURNING t.k, t.v, u.w",
        (1, 200),
    ).fetchall()
    assert updated == [(2, 201, 200)]
    deleted = conn.execute(
        "DELETE FROM t USING u WHERE t.k = u.k AND u.w < %s RETURNING t.k", (150,)
    ).fetchall()
    assert deleted == [(1,)]
