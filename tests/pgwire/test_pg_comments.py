"""Comments through a real client (psycopg), where PostgreSQL tools read them:
``obj_description``, ``col_description``, ``shobj_description`` and ``pg_description``."""

from __future__ import annotations

import psycopg


def test_descriptions_of_a_table_its_column_its_index_and_the_database(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE c (a INT PRIMARY KEY, b INT, INDEX c_b_idx (b))")
        assert conn.execute("SELECT obj_description('c'::regclass, 'pg_class')").fetchall() == [
            (None,)
        ]
        conn.execute("COMMENT ON TABLE c IS 'the table'")
        conn.execute("COMMENT ON COLUMN c.b IS 'the column'")
        conn.execute("COMMENT ON INDEX c@c_b_idx IS 'the index'")
        conn.execute("COMMENT ON DATABASE defaultdb IS 'the database'")
        row = conn.execute(
            "SELECT obj_description('c'::regclass, 'pg_class'), obj_description('c'::regclass),"
            " col_description('c'::regclass, 2), col_description('c'::regclass, 1)"
        ).fetchone()
        assert row == ("the table", "the table", "the column", None)
        indexes = conn.execute(
            "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c "
            "WHERE c.relkind = 'i' ORDER BY c.relname"
        ).fetchall()
        assert indexes == [("c_b_idx", "the index"), ("c_pkey", None)]
        databases = conn.execute(
            "SELECT shobj_description(oid, 'pg_database'), obj_description(oid, 'pg_database') "
            "FROM pg_database WHERE datname = 'defaultdb'"
        ).fetchall()
        assert databases == [("the database", None)]
        described = conn.execute(
            "SELECT objsubid, description FROM pg_description WHERE objoid = 'c'::regclass "
            "ORDER BY objsubid"
        ).fetchall()
        assert described == [(0, "the table"), (2, "the column")]
