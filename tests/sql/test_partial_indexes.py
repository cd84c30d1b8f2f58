"""Partial indexes over the SQL port: a UNIQUE index WHERE predicate refuses a duplicate
among the rows its predicate holds for (23505) and lets any other through, and reads
answer as without the index (more cases: testdata/partial_indexes.test)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from feedkv import DB


def test_a_partial_unique_index_over_the_wire(db: DB) -> None:
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id INT PRIMARY KEY, email STRING, active BOOL)")
        conn.execute("CREATE UNIQUE INDEX active_email ON users (email) WHERE active")
        conn.execute(
            "INSERT INTO users VALUES (1, 'a@x', true), (2, 'a@x', false), (3, 'a@x', false)"
        )
        with pytest.raises(errors.UniqueViolation) as raised:
            conn.execute("INSERT INTO users VALUES (%s, %s, %s)", (4, "a@x", True))
        assert raised.value.diag.message_primary == (
            'duplicate key value violates unique constraint "active_email"'
        )
        conn.execute("UPDATE users SET active = false WHERE id = 1")
        conn.execute("INSERT INTO users VALUES (%s, %s, %s)", (4, "a@x", True))
        rows = conn.execute(
            "SELECT id FROM users WHERE email = %s ORDER BY id", ("a@x",)
        ).fetchall()
        assert rows == [(1,), (2,), (3,), (4,)]
        active = conn.execute("SELECT id FROM users WHERE email = 'a@x' AND active").fetchall()
        assert active == [(4,)]


def plan_of(db: DB, sql: str) -> str:
    return "\n".join(str(row[0]) for row in db.sql(f"EXPLAIN {sql}").rows)


def test_a_read_uses_a_partial_index_only_when_its_where_implies_the_predicate(
    db: DB,
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a INT, b INT, INDEX pos_b (b) WHERE a > 0)")
    db.sql("INSERT INTO t VALUES (1, 1, 10), (2, -1, 10), (3, NULL, 10), (4, 2, 20)")
    assert "t@pos_b" in plan_of(db, "SELECT k FROM t WHERE b = 10 AND a > 0")
    assert db.sql("SELECT k FROM t WHERE b = 10 AND a > 0").rows == [(1,)]
    # without the predicate (or with a weaker one) the index would miss rows
    for where in ("b = 10", "b = 10 AND a >= 0", "b = 10 OR a > 0"):
        assert "t@pos_b" not in plan_of(db, f"SELECT k FROM t WHERE {where}")
    assert db.sql("SELECT k FROM t WHERE b = 10 ORDER BY k").rows == [(1,), (2,), (3,)]
    db.sql("UPDATE t SET b = 11 WHERE b = 10 AND a > 0")
    db.sql("DELETE FROM t WHERE a > 0 AND b = 20")
    assert db.sql("SELECT k, b FROM t ORDER BY k").rows == [(1, 11), (2, 10), (3, 10)]
