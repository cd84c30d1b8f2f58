"""Descending index columns over the SQL port: pg_indexes' indexdef and
pg_get_indexdef write DESC after such a column, pg_index.indoption flags it (bit 1, as
PostgreSQL's), and SHOW INDEXES gives its direction."""

from __future__ import annotations

import psycopg

from feedkv import DB


def test_catalogs_show_descending_columns(db: DB) -> None:
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (a INT, b STRING, PRIMARY KEY (a DESC, b))")
        conn.execute("CREATE INDEX t_ba ON t (b DESC, a)")
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 't' ORDER BY indexname"
        ).fetchall()
        assert rows == [
            ("t_ba", "CREATE INDEX t_ba ON public.t USING btree (b DESC, a)"),
            ("t_pkey", "CREATE UNIQUE INDEX t_pkey ON public.t USING btree (a DESC, b)"),
        ]
        options = conn.execute(
            "SELECT c.relname, i.indoption FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE i.indrelid = 't'::regclass ORDER BY c.relname"
        ).fetchall()
        assert options == [("t_ba", "1 0"), ("t_pkey", "1 0")]
        shown = conn.execute("SHOW INDEXES FROM t").fetchall()
        assert [(r[1], r[4], r[5]) for r in shown if r[5] != "N/A"] == [
            ("t_pkey", "a", "DESC"),
            ("t_pkey", "b", "ASC"),
            ("t_ba", "b", "DESC"),
            ("t_ba", "a", "ASC"),
        ]
