"""Partial indexes over the SQL port: pg_indexes' indexdef and pg_get_indexdef end in
the index's ``WHERE (predicate)``, as CockroachDB's do, so psql's ``\\d`` and ORMs'
introspection tell a partial index from a whole one; SHOW CREATE TABLE shows it too."""

from __future__ import annotations

import subprocess

import psycopg


def _make_table(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b STRING)")
        conn.execute("CREATE INDEX t_a_pos ON t (a) WHERE a > 0")
        conn.execute("CREATE UNIQUE INDEX t_b ON t (b) STORING (a) WHERE b != 'x'")
        conn.execute("CREATE INDEX t_whole ON t (b)")


def test_indexdef_ends_in_the_predicate(pg_url: str) -> None:
    _make_table(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 't' ORDER BY indexname"
        ).fetchall()
        assert rows == [
            ("t_a_pos", "CREATE INDEX t_a_pos ON public.t USING btree (a) WHERE (a > 0)"),
            (
                "t_b",
                "CREATE UNIQUE INDEX t_b ON public.t USING btree (b) INCLUDE (a) WHERE (b <> 'x')",
            ),
            ("t_pkey", "CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)"),
            ("t_whole", "CREATE INDEX t_whole ON public.t USING btree (b)"),
        ]
        predicates = conn.execute(
            "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 't'::regclass "
            "ORDER BY c.relname"
        ).fetchall()
        assert predicates == [
            ("t_a_pos", "a > 0"),
            ("t_b", "b <> 'x'"),
            ("t_pkey", None),
            ("t_whole", None),
        ]
        [(_name, created)] = conn.execute("SHOW CREATE TABLE t").fetchall()
        assert "INDEX t_a_pos (a ASC) WHERE a > 0" in created


def test_psql_describes_a_partial_index_with_its_predicate(pg_url: str) -> None:
    _make_table(pg_url)
    done = subprocess.run(
        ["psql", pg_url, "-X", "-v", "ON_ERROR_STOP=1", "-c", "\\d t"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"t_a_pos" btree (a) WHERE (a > 0)' in done.stdout
    assert '"t_whole" btree (b)\n' in done.stdout
