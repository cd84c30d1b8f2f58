"""``INSERT INTO t AS a``: ON CONFLICT DO UPDATE and RETURNING name the table by its
alias (which hides its name), as in CockroachDB and PostgreSQL, also with placeholders
(described at Parse). feedkv dropped the alias: ``a.v`` failed with 42P01."""

from __future__ import annotations

import psycopg
import pytest


@pytest.fixture
def conn(pg_url: str) -> psycopg.Connection:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        connection.execute("INSERT INTO t VALUES (1, 10)")
        yield connection


def test_on_conflict_and_returning_name_the_alias(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "INSERT INTO t AS a VALUES (%s, %s) ON CONFLICT (k) DO UPDATE "
        "SET v = a.v + excluded.v WHERE a.v < %s RETURNING a.k, a.v",
        (1, 5, 100),
    ).fetchall()
    assert rows == [(1, 15)]
    rows = conn.execute(
        "INSERT INTO t AS a VALUES (1, 1) ON CONFLICT (k) DO UPDATE SET v = 0 "
        "WHERE a.crdb_internal_mvcc_timestamp > 0 RETURNING v"
    ).fetchall()
    assert rows == [(0,)]
    assert conn.execute("INSERT INTO t AS a VALUES (2, 2) RETURNING a.v").fetchall() == [(2,)]


def test_the_alias_hides_the_tables_name(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("INSERT INTO t AS a VALUES (1, 1) ON CONFLICT (k) DO UPDATE SET v = t.v")
    assert conn.execute("SELECT k, v FROM t").fetchall() == [(1, 10)]
