"""Computed columns through real clients: psycopg's INSERT, COPY and the SQLSTATE of a
write to one; psql's ``\\d`` and information_schema showing them as PostgreSQL shows a
generated column; IMPORT INTO computing them."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors

PSQL = shutil.which("psql")

TABLE = (
    "CREATE TABLE t (k INT PRIMARY KEY, a INT, s STRING, "
    "b INT AS (a * 2) STORED, c STRING AS (lower(s)) VIRTUAL)"
)


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(TABLE)
        yield c


def test_psycopg_inserts_and_reads_computed_values(conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO t (k, a, s) VALUES (%s, %s, %s)", (1, 21, "MiXed"))
    assert conn.execute("SELECT b, c FROM t WHERE k = 1").fetchone() == (42, "mixed")


def test_a_write_to_a_computed_column_fails_with_cockroachdbs_sqlstate(
    conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(errors.ObjectNotInPrerequisiteState) as caught:
        conn.execute("INSERT INTO t (k, a, b) VALUES (1, 2, 3)")
    assert caught.value.sqlstate == "55000"
    assert 'cannot write directly to computed column "b"' in str(caught.value)


def test_copy_without_a_column_list_fills_every_column_but_the_computed_ones(
    conn: psycopg.Connection[Any],
) -> None:
    """As PostgreSQL's COPY FROM: the default column list leaves generated columns
    out, and each row gets them computed."""
    with conn.cursor().copy("COPY t FROM STDIN") as copy:
        for k in range(300):
            copy.write_row((k, k, f"S{k}"))
    assert conn.execute("SELECT count(*), sum(b) FROM t").fetchone() == (300, 2 * sum(range(300)))
    assert conn.execute("SELECT c FROM t WHERE k = 7").fetchone() == ("s7",)
    with (
        pytest.raises(errors.ObjectNotInPrerequisiteState),
        conn.cursor().copy("COPY t (k, b) FROM STDIN") as copy,
    ):
        copy.write_row((1000, 1))


@pytest.mark.parametrize("binary", [False, True])
def test_copy_to_without_a_column_list_sends_the_computed_columns_as_cockroachdb(
    conn: psycopg.Connection[Any], binary: bool
) -> None:
    """CockroachDB runs ``COPY t TO STDOUT`` as ``SELECT * FROM t`` (its copy_to.go),
    so the computed columns go out, stored and virtual, in the table's order (and the
    hidden rowid does not); PostgreSQL would leave its generated columns out. feedkv
    follows CockroachDB. A column list sends what it names."""
    conn.execute("INSERT INTO t (k, a, s) VALUES (1, 21, 'MiXed'), (2, NULL, NULL)")
    cur = conn.cursor()
    fmt = " WITH (FORMAT binary)" if binary else ""
    with cur.copy(f"COPY t TO STDOUT{fmt}") as copy:
        copy.set_types(["int8", "int8", "text", "int8", "text"])
        rows = list(copy.rows())
    assert rows == [(1, 21, "MiXed", 42, "mixed"), (2, None, None, None, None)]
    with cur.copy(f"COPY t (k, c) TO STDOUT{fmt}") as copy:
        copy.set_types(["int8", "text"])
        assert list(copy.rows()) == [(1, "mixed"), (2, None)]
    conn.execute("CREATE TABLE n (a INT, b INT AS (a + 1) STORED)")  # a hidden rowid
    conn.execute("INSERT INTO n (a) VALUES (5)")
    with cur.copy(f"COPY n TO STDOUT{fmt}") as copy:
        copy.set_types(["int8", "int8"])
        assert list(copy.rows()) == [(5, 6)]


def test_information_schema_and_psql_describe_show_the_generation(
    conn: psycopg.Connection[Any], pg_url: str
) -> None:
    rows = conn.execute(
        "SELECT column_name, is_generated, generation_expression "
        "FROM information_schema.columns WHERE table_name = 't' ORDER BY ordinal_position"
    ).fetchall()
    assert rows == [
        ("k", "NEVER", ""),
        ("a", "NEVER", ""),
        ("s", "NEVER", ""),
        ("b", "ALWAYS", "a * 2"),
        ("c", "ALWAYS", "lower(s)"),
    ]
    assert PSQL is not None, "psql is missing: `make` installs Debian's postgresql-client"
    done = subprocess.run(
        [PSQL, pg_url, "-X", "-A", "-c", r"\d t"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "b|bigint|||generated always as (a * 2) stored" in lines, done.stdout
    # NB: not a DEFAULT (psql 15 shows any attgenerated but 's' as one)
    assert "c|text|||generated always as (lower(s)) stored" in lines, done.stdout


def test_import_into_computes_the_stored_columns(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    data = tmp_path / "rows.csv"
    data.write_text("1,5,AB\n2,,\n")
    conn.execute(f"IMPORT INTO t CSV DATA ('file://{data}') WITH nullif = ''")
    assert conn.execute("SELECT k, a, s, b, c FROM t ORDER BY k").fetchall() == [
        (1, 5, "AB", 10, "ab"),
        (2, None, None, None, None),
    ]
    with pytest.raises(errors.ObjectNotInPrerequisiteState):
        conn.execute(f"IMPORT INTO t (k, b) CSV DATA ('file://{data}')")


def test_sqlalchemy_reflects_the_computed_columns(
    conn: psycopg.Connection[Any], pg_url: str
) -> None:
    """sqlalchemy-cockroachdb reads information_schema's is_generated and
    generation_expression (it calls every computed column persisted)."""
    engine = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    try:
        columns = {c["name"]: c.get("computed") for c in sa.inspect(engine).get_columns("t")}
    finally:
        engine.dispose()
    assert columns["a"] is None
    assert columns["b"] == {"sqltext": "a * 2", "persisted": True}
    assert columns["c"] is not None and columns["c"]["sqltext"] == "lower(s)"
