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
