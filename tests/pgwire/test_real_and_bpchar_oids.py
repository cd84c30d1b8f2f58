"""FLOAT4 (REAL) and CHAR(n) columns on the wire as PostgreSQL and CockroachDB send
them: float4 (700; binary, a 4-byte IEEE float) and bpchar (1042, its type modifier
n + 4 in RowDescription and pg_attribute), not float8 and text. Read by psycopg (text
and binary), psql's ``\\d`` and SQLAlchemy's inspector (sqlalchemy-cockroachdb, which
reads information_schema.columns' data_type: a CHAR(n) was a VARCHAR(n) to it)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

FLOAT4 = 700
FLOAT8 = 701
BPCHAR = 1042


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE w (k INT PRIMARY KEY, r REAL, c CHAR(4), g FLOAT)")
        connection.execute("INSERT INTO w VALUES (1, 0.7, 'ab', 0.7), (2, NULL, NULL, NULL)")
        yield connection


def float4(value: float) -> float:
    return float(struct.unpack("!f", struct.pack("!f", value))[0])


@pytest.mark.parametrize("binary", [False, True])
def test_real_and_char_columns_go_out_as_float4_and_bpchar(
    conn: psycopg.Connection, binary: bool
) -> None:
    cur = conn.cursor(binary=binary)
    cur.execute("SELECT r, c, g FROM w ORDER BY k")
    assert cur.description is not None
    assert [(d.type_code, d.internal_size) for d in cur.description] == [
        (FLOAT4, 4),
        (BPCHAR, None),
        (FLOAT8, 8),
    ]
    # psycopg's own field: the type modifier (n + 4) of the CHAR(4)
    assert cur.pgresult is not None and cur.pgresult.fmod(1) == 8
    rows = cur.fetchall()
    # text: float32's shortest digits; binary: the float32 itself
    assert rows == [(0.7 if not binary else float4(0.7), "ab  ", 0.7), (None, None, None)]


@pytest.mark.parametrize("binary", [False, True])
def test_a_float4_parameter_is_read_as_a_float4(conn: psycopg.Connection, binary: bool) -> None:
    cur = conn.cursor(binary=binary)
    # a REAL parameter is described as float4: psycopg sends its value with 4 bytes
    cur.execute("SELECT k FROM w WHERE r = %s", [0.7])
    assert cur.fetchall() == [(1,)]
    cur.execute("SELECT k FROM w WHERE c = %s", ["ab"])
    assert cur.fetchall() == [(1,)]
    cur.execute("INSERT INTO w (k, r, c) VALUES (%s, %s, %s)", [3, 1.5, "x"])
    cur.execute("SELECT r, c FROM w WHERE k = 3")
    assert cur.fetchall() == [(1.5, "x   ")]


def test_a_prepared_statement_describes_its_columns_before_running(
    conn: psycopg.Connection,
) -> None:
    cur = conn.cursor()
    cur.execute("SELECT r, c FROM w WHERE k = %s", [1], prepare=True)
    assert cur.description is not None
    assert [d.type_code for d in cur.description] == [FLOAT4, BPCHAR]
    assert cur.fetchall() == [(0.7, "ab  ")]


def test_the_catalog_shows_real_and_character(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT attname, atttypid::INT, atttypmod, format_type(atttypid, atttypmod) "
        "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON a.attrelid = c.oid "
        "WHERE c.relname = 'w' AND attnum > 0 ORDER BY attnum"
    ).fetchall()
    assert rows == [
        ("k", 20, -1, "bigint"),
        ("r", FLOAT4, -1, "real"),
        ("c", BPCHAR, 8, "character(4)"),
        ("g", FLOAT8, -1, "double precision"),
    ]
    info = conn.execute(
        "SELECT column_name, data_type, character_maximum_length, numeric_precision "
        "FROM information_schema.columns WHERE table_name = 'w' ORDER BY ordinal_position"
    ).fetchall()
    assert info == [
        ("k", "bigint", None, 64),
        ("r", "real", None, 24),
        ("c", "character", 4, None),
        ("g", "double precision", None, 53),
    ]


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_describes_real_and_character_columns(conn: psycopg.Connection, pg_url: str) -> None:
    done = subprocess.run(
        ["psql", pg_url, "-X", "-v", "ON_ERROR_STOP=1", "-c", "\\d w"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert " r      | real             |" in done.stdout
    assert " c      | character(4)     |" in done.stdout


def test_sqlalchemy_reflects_real_and_char(conn: psycopg.Connection, pg_url: str) -> None:
    engine = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    try:
        columns = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns("w")}
    finally:
        engine.dispose()
    assert isinstance(columns["c"], sa.CHAR) and columns["c"].length == 4
    # NB: sqlalchemy-cockroachdb maps both 'real' and 'double precision' to FLOAT, as
    # it does against CockroachDB (the catalog test above tells them apart)
    assert type(columns["r"]) is sa.FLOAT


def test_min_and_max_of_real_and_char_keep_their_types(conn: psycopg.Connection) -> None:
    cur = conn.execute("SELECT max(r), min(c), max(g), r + 0 FROM w GROUP BY r")
    assert cur.description is not None
    assert [d.type_code for d in cur.description] == [FLOAT4, BPCHAR, FLOAT8, FLOAT8]


def test_binary_copy_moves_real_as_float4_and_char_padded(conn: psycopg.Connection) -> None:
    cur = conn.cursor()
    with cur.copy("COPY w (k, r, c) FROM STDIN WITH (FORMAT binary)") as copy:
        copy.set_types(["int8", "float4", "text"])  # NB: psycopg has no binary bpchar dumper
        copy.write_row((10, 2.5, "xy"))
    with cur.copy("COPY (SELECT r, c FROM w WHERE k IN (1, 10) ORDER BY k) TO STDOUT "
                  "WITH (FORMAT binary)") as copy:  # fmt: skip
        copy.set_types(["float4", "bpchar"])
        assert list(copy.rows()) == [(float4(0.7), "ab  "), (2.5, "xy  ")]
