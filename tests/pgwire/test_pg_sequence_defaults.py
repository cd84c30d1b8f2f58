"""``DEFAULT nextval('s')`` over the SQL port: the sequence is resolved when the column
is made, as CockroachDB keeps a reference to it, so an INSERT from a session in another
database takes values from the same sequence; SHOW CREATE TABLE and
information_schema show the reference as CockroachDB does,
``nextval('public.s'::REGCLASS)``, which CREATE TABLE reads back."""

from __future__ import annotations

import psycopg


def test_a_sequence_default_names_the_sequence_it_was_made_with(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE s START 10")
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY DEFAULT nextval('s'), v STRING)")
        conn.execute("CREATE DATABASE other")
        conn.execute("CREATE SEQUENCE other.s START 500")
        conn.execute("INSERT INTO t (v) VALUES ('home')")
        conn.execute("SET database = other")
        conn.execute("INSERT INTO defaultdb.t (v) VALUES ('away')")
        rows = conn.execute("SELECT k, v FROM defaultdb.t ORDER BY k").fetchall()
        assert rows == [(10, "home"), (11, "away")]
        assert conn.execute("SELECT nextval('s')").fetchone() == (500,)  # untouched


def test_show_create_and_information_schema_show_the_reference(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE s")
        conn.execute("CREATE DATABASE other")
        conn.execute("CREATE SEQUENCE other.o")
        conn.execute(
            "CREATE TABLE t (k INT PRIMARY KEY DEFAULT nextval('s'), "
            "n INT DEFAULT nextval('other.o'))"
        )
        [(_name, created)] = conn.execute("SHOW CREATE TABLE t").fetchall()
        assert "k INT8 NOT NULL DEFAULT nextval('public.s'::REGCLASS)" in created
        assert "n INT8 NULL DEFAULT nextval('other.public.o'::REGCLASS)" in created
        defaults = conn.execute(
            "SELECT column_name, column_default FROM information_schema.columns "
            "WHERE table_name = 't' ORDER BY ordinal_position"
        ).fetchall()
        assert defaults == [
            ("k", "nextval('public.s'::REGCLASS)"),
            ("n", "nextval('other.public.o'::REGCLASS)"),
        ]
        # CockroachDB's text reads back into the same table
        conn.execute("DROP TABLE t")
        conn.execute(created.rstrip(";"))
        assert conn.execute("INSERT INTO t (n) VALUES (7) RETURNING k, n").fetchone() == (1, 7)
