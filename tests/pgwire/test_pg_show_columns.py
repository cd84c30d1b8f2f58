"""SHOW COLUMNS through a real client (psycopg): its indices column is a text array,
and the statement can be prepared (its shape is known once it runs)."""

from __future__ import annotations

import psycopg


def test_show_columns_over_the_wire(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING, INDEX (v))")
        for prepare in (False, True):
            cur = conn.execute("SHOW COLUMNS FROM t", prepare=prepare)
            assert cur.description is not None
            assert [d.name for d in cur.description] == [
                "column_name",
                "data_type",
                "is_nullable",
                "column_default",
                "generation_expression",
                "indices",
                "is_hidden",
            ]
            assert cur.fetchall() == [
                ("k", "INT8", False, None, "", ["t_pkey", "t_v_idx"], False),
                ("v", "STRING", True, None, "", ["t_pkey", "t_v_idx"], False),
            ]
