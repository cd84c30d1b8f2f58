"""psycopg against views, sequences, constraints and indexes over the SQL port: each
constraint's violation arrives as PostgreSQL's exception class (its SQLSTATE), and
the connection stays usable."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors


def test_constraint_violations_arrive_with_their_sqlstates(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE p (k INT PRIMARY KEY, email STRING UNIQUE, n INT CHECK (n > 0))")
        conn.execute("CREATE TABLE c (k INT PRIMARY KEY, p INT NOT NULL REFERENCES p)")
        conn.execute("INSERT INTO p VALUES (1, 'a', 1)")
        conn.execute("INSERT INTO c VALUES (1, 1)")
        cases = [
            ("INSERT INTO p VALUES (2, 'a', 1)", errors.UniqueViolation),
            ("INSERT INTO p VALUES (2, 'b', 0)", errors.CheckViolation),
            ("INSERT INTO c VALUES (2, NULL)", errors.NotNullViolation),
            ("INSERT INTO c VALUES (2, 9)", errors.ForeignKeyViolation),
            ("DELETE FROM p WHERE k = 1", errors.ForeignKeyViolation),
        ]
        for sql, error in cases:
            with pytest.raises(error):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM p").fetchone() == (1,)


def test_views_sequences_and_index_lookups_over_the_wire(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE ids START 10")
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY DEFAULT nextval('ids'), v STRING)")
        conn.execute("CREATE INDEX t_v ON t (v)")
        for v in ("x", "y", "x"):
            conn.execute("INSERT INTO t (v) VALUES (%s)", (v,))
        conn.execute("CREATE VIEW xs AS SELECT k FROM t WHERE v = 'x'")
        assert conn.execute("SELECT k FROM xs ORDER BY k").fetchall() == [(10,), (12,)]
        assert conn.execute("SELECT k FROM t WHERE v = %s", ("y",)).fetchall() == [(11,)]
        cursor = conn.execute("SELECT nextval('ids'), currval('ids')")
        assert cursor.fetchone() == (13, 13)
        assert [d.type_code for d in cursor.description] == [20, 20]  # INT8
