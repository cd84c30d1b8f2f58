"""An expression index's hidden column is not a column tools see: CockroachDB lists only a
table's accessible columns in information_schema.columns and pg_attribute. feedkv keeps
its pg_attribute row as a dropped attribute (which psql's ``\\d``, JDBC and ORMs skip),
so the index's own attribute, named by its expression, is still there."""

from __future__ import annotations

import psycopg


def test_an_expression_indexs_column_is_hidden_from_the_catalog(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE people (k INT PRIMARY KEY, name STRING)")
        conn.execute("CREATE INDEX people_lower ON people (lower(name))")
        columns = conn.execute(
            "SELECT column_name, ordinal_position FROM information_schema.columns "
            "WHERE table_name = 'people' ORDER BY ordinal_position"
        ).fetchall()
        assert columns == [("k", 1), ("name", 2)]
        attributes = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'people'::regclass "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
        ).fetchall()
        assert attributes == [("k",), ("name",)]
        index = conn.execute(
            "SELECT a.attname, i.indkey FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relname = 'people_lower' ORDER BY a.attnum"
        ).fetchall()
        assert [name for name, _ in index] == ["lower(name)"]
        assert str(index[0][1]).split()[0] == "0"  # NB: an expression key, as PostgreSQL
