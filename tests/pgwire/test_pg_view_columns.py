"""A view's columns in pg_attribute and information_schema.columns, with the types a
read of the view gives them, as CockroachDB's view descriptor keeps them: psql's
``\\d view`` and an ORM's introspection see them."""

from __future__ import annotations

import psycopg
from psql_helpers import psql


def _make_view(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20), d DECIMAL(10,2))")
        conn.execute("CREATE VIEW v (key, label, amount, next) AS SELECT id, s, d, id + 1 FROM t")


def test_pg_attribute_has_a_views_columns_with_their_types(pg_url: str) -> None:
    _make_view(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
            "a.attnotnull FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
            "ON c.oid = a.attrelid WHERE c.relname = 'v' AND a.attnum > 0 ORDER BY a.attnum"
        ).fetchall()
        assert rows == [
            (1, "key", "bigint", False),
            (2, "label", "character varying(20)", False),
            (3, "amount", "numeric(10,2)", False),
            (4, "next", "bigint", False),
        ]
        info = conn.execute(
            "SELECT column_name, ordinal_position, data_type, is_nullable "
            "FROM information_schema.columns WHERE table_name = 'v' ORDER BY ordinal_position"
        ).fetchall()
        assert info == [
            ("key", 1, "bigint", "YES"),
            ("label", 2, "character varying", "YES"),
            ("amount", 3, "numeric", "YES"),
            ("next", 4, "bigint", "YES"),
        ]


def test_psql_describes_a_views_columns(pg_url: str) -> None:
    _make_view(pg_url)
    described = psql(pg_url, "\\d v")
    assert 'View "public.v"' in described
    lines = [line.split("|")[:2] for line in described.splitlines() if "|" in line]
    assert [[cell.strip() for cell in line] for line in lines[1:]] == [
        ["key", "bigint"],
        ["label", "character varying(20)"],
        ["amount", "numeric(10,2)"],
        ["next", "bigint"],
    ]
