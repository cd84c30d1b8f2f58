"""A JSONB column holding JSON ``null`` over the wire, as CockroachDB sends it: the
value ``null`` (text and binary formats), never a SQL NULL; psycopg and psql see it."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

PSQL = shutil.which("psql")


def make_docs(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)")
    conn.execute("""INSERT INTO docs VALUES (1, 'null'), (2, NULL), (3, '{"a": null}')""")


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_psycopg_reads_json_null_apart_from_sql_null(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_docs(conn)
        cur = conn.cursor(binary=binary)
        # psycopg loads JSON null as None too: the raw bytes tell the two apart
        cur.execute(
            "SELECT j::STRING, j IS NULL, j -> 'a', (j -> 'a') IS NULL FROM docs ORDER BY k"
        )
        rows = cur.fetchall()
    assert [(r[0], r[1]) for r in rows] == [("null", False), (None, True), ('{"a": null}', False)]
    assert [r[3] for r in rows] == [True, True, False]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_the_wire_carries_null_as_jsonb_text(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_docs(conn)
        result = conn.pgconn.exec_params(
            b"SELECT j FROM docs ORDER BY k", [], result_format=1 if binary else 0
        )
        values = [result.get_value(i, 0) for i in range(result.ntuples)]
    if binary:
        assert values == [b"\x01null", None, b'\x01{"a": null}']
    else:
        assert values == [b"null", None, b'{"a": null}']


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_json_null_parameter_is_stored_as_json_null(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)")
        cur = conn.cursor(binary=binary)
        cur.execute("INSERT INTO docs VALUES (1, %s), (2, %s)", [Jsonb(None), None])
        rows = conn.execute("SELECT k, j IS NULL, jsonb_typeof(j) FROM docs ORDER BY k").fetchall()
    assert rows == [(1, False, "null"), (2, True, None)]


def test_psql_prints_null_for_json_null_and_nothing_for_sql_null(pg_url: str) -> None:
    assert PSQL is not None, "psql is missing: `make` installs Debian's postgresql-client"
    done = subprocess.run(
        [
            PSQL,
            pg_url,
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)",
            "-c",
            """INSERT INTO docs VALUES (1, 'null'), (2, NULL), (3, '{"a": null}')""",
            "-c",
            "SELECT k, j, j IS NULL, j ->> 'a' IS NULL FROM docs ORDER BY k",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == ["1|null|f|t", "2||t|t", '3|{"a": null}|f|t']
