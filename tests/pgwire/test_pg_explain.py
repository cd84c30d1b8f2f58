"""EXPLAIN over the wire, as CockroachDB answers it: one STRING column ``info``, one row
a line, through the extended protocol (psycopg) and psql."""

from __future__ import annotations

import shutil
import subprocess

import psycopg

PSQL = shutil.which("psql")


def test_psycopg_reads_explain_as_rows_of_one_info_column(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        cur = conn.execute("EXPLAIN SELECT * FROM t WHERE k = %s", (3,))
        assert cur.description is not None
        assert [c.name for c in cur.description] == ["info"]
        assert [line for (line,) in cur.fetchall()] == [
            "distribution: local",
            "vectorized: true",
            "",
            "• scan",
            "  missing stats",
            "  table: t@t_pkey",
            "  spans: [/3 - /3]",
        ]


def test_psql_prints_the_plan(pg_url: str) -> None:
    assert PSQL is not None, "psql is missing: `make` installs Debian's postgresql-client"
    done = subprocess.run(
        [
            PSQL,
            pg_url,
            "-X",
            "-A",
            "-t",
            "-c",
            "CREATE TABLE t (k INT PRIMARY KEY)",
            "-c",
            "EXPLAIN SELECT k FROM t ORDER BY k DESC",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:7] == [
        "distribution: local",
        "vectorized: true",
        "",
        "• sort",
        "│ order: -k",
        "│",
    ]
