"""COPY FROM STDIN and COPY TO STDOUT: the statement and data formats (pure), then
psycopg's and psql's COPY against a node: all rows or none, bad rows named by line."""

from __future__ import annotations

import datetime
import decimal
import shutil
import subprocess
from typing import Any

import psycopg
import pytest
from psycopg import errors

from feedkv.pgwire.copy import CopyError, decode_columns, decode_rows, encode_row, parse_copy

# The statement and the formats.


def test_copy_statements_are_parsed_with_their_options() -> None:
    copy = parse_copy("COPY t (a, \"B\") FROM STDIN WITH (FORMAT csv, HEADER true, NULL 'x')")
    assert (copy.direction, copy.table, copy.columns) == ("in", "t", ("a", "B"))
    assert (copy.csv, copy.delimiter, copy.null, copy.header) == (True, ",", "x", True)
    old = parse_copy("copy t from stdin with csv header delimiter ';'")
    assert (old.csv, old.header, old.delimiter) == (True, True, ";")
    text = parse_copy("COPY (SELECT 1) TO STDOUT")
    assert (text.direction, text.query, text.csv, text.null) == ("out", "SELECT 1", False, "\\N")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("COPY t FROM '/etc/passwd'", "42601"),
        ("COPY t FROM STDIN WITH (FORMAT parquet)", "0A000"),
        ("COPY t FROM STDIN WITH (FORMAT binary, DELIMITER ',')", "42601"),
        ("COPY t FROM STDIN WITH (FORMAT binary, NULL 'x')", "42601"),
        ("COPY t FROM STDIN WITH (FREEZE true)", "0A000"),
        ("COPY t FROM STDIN WITH (DELIMITER '||')", "42601"),
        ("COPY (SELECT 1) FROM STDIN", "42601"),
        ("COPY t FROM STDIN WITH (HEADER true)", "0A000"),
    ],
)
def test_bad_copy_statements_say_what_is_wrong(text: str, code: str) -> None:
    with pytest.raises(CopyError) as caught:
        parse_copy(text)
    assert caught.value.code == code


def test_text_format_rows_unescape_and_read_nulls() -> None:
    copy = parse_copy("COPY t FROM STDIN")
    data = b"1\ta\\tb\\\\c\t\\N\n2\t\\x41\\101\t\n\\.\n"
    assert list(decode_rows(copy, data, 3)) == [
        (1, ["1", "a\tb\\c", None]),
        (2, ["2", "AA", ""]),
    ]


def test_csv_rows_keep_quoted_delimiters_newlines_and_empty_strings() -> None:
    copy = parse_copy("COPY t FROM STDIN WITH (FORMAT csv, HEADER true)")
    data = b'id,s\n1,"a,b"\n2,"two\nlines"\n3,""\n4,\n5,"say ""hi"""\r\n'
    assert list(decode_rows(copy, data, 2)) == [
        (2, ["1", "a,b"]),
        (3, ["2", "two\nlines"]),
        (5, ["3", ""]),
        (6, ["4", None]),
        (7, ["5", 'say "hi"']),
    ]


@pytest.mark.parametrize(
    ("statement", "data", "message"),
    [
        ("COPY t FROM STDIN", b"1\ta\n2\n", "line 2: missing data"),
        ("COPY t FROM STDIN", b"1\ta\tb\n", "line 1: extra data"),
        ("COPY t FROM STDIN WITH (FORMAT csv)", b'1,"open\n', "line 1: unterminated"),
        ("COPY t FROM STDIN WITH (FORMAT csv)", b'1,"a"b\n', "line 1: unexpected 'b'"),
    ],
)
def test_malformed_rows_are_refused_with_their_line(
    statement: str, data: bytes, message: str
) -> None:
    with pytest.raises(CopyError) as caught:
        list(decode_rows(parse_copy(statement), data, 2))
    assert caught.value.code == "22P04"
    assert message in caught.value.message


@pytest.mark.parametrize("options", ["", "WITH (FORMAT csv)", "WITH (FORMAT csv, NULL 'N')"])
def test_encoded_rows_read_back_as_they_were(options: str) -> None:
    copy = parse_copy(f"COPY t FROM STDIN {options}")
    rows = [["1", "tab\there", None], ["2", 'q"uote,comma\nline\\', ""]]
    data = b"".join(encode_row(copy, row) for row in rows)
    assert [values for _, values in decode_rows(copy, data, 3)] == rows


def _columns(copy_text: str, data: bytes, width: int) -> list[list[Any]]:
    rows = [values for _, values in decode_rows(parse_copy(copy_text), data, width)]
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


@pytest.mark.parametrize(
    ("statement", "data"),
    [
        ("COPY t FROM STDIN", b"1\ta\t\\N\n2\t\t7\n3\tc d\tx\n"),
        ("COPY t FROM STDIN", b"1\ta\t9"),  # no newline after the last row
        ("COPY t FROM STDIN WITH (DELIMITER '|', NULL '')", b"1|a|\n2||x\n"),
        ("COPY t FROM STDIN WITH (FORMAT csv)", b"1,a,\n2,,b\\c\n"),
        ("COPY t FROM STDIN WITH (FORMAT csv, HEADER true)", b"id,s,n\n1,x,2\n"),
        ("COPY t FROM STDIN WITH (FORMAT csv, NULL 'N')", b"1,N,\n"),
    ],
)
def test_columns_split_in_bulk_are_the_rows_split_one_by_one(statement: str, data: bytes) -> None:
    assert decode_columns(parse_copy(statement), data, 3) == _columns(statement, data, 3)


@pytest.mark.parametrize(
    ("statement", "data"),
    [
        ("COPY t FROM STDIN", b"1\ta\\tb\t\\N\n"),  # an escape
        ("COPY t FROM STDIN", b"1\ta\\Nb\t\\N\n"),  # \N inside a field
        ("COPY t FROM STDIN", b"1\ta\tb\r\n"),
        ("COPY t FROM STDIN", b"1\ta\tb\n\\.\n"),  # the end marker
        ("COPY t FROM STDIN", b"1\ta\n"),  # a field missing
        ("COPY t FROM STDIN", b"1\ta\t\xff\n"),  # not UTF-8
        ("COPY t FROM STDIN WITH (FORMAT csv)", b'1,"a,b",c\n'),  # a quote
        ("COPY t FROM STDIN WITH (FORMAT csv)", b"1,a,b\n\\.\n"),
    ],
)
def test_what_bulk_splitting_would_read_otherwise_is_left_to_the_rows(
    statement: str, data: bytes
) -> None:
    assert decode_columns(parse_copy(statement), data, 3) is None


def test_int_columns_are_parsed_in_bulk_unless_a_field_is_no_int() -> None:
    copy = parse_copy("COPY t FROM STDIN")
    ints = [True, False, True]
    assert decode_columns(copy, b"1\ta\t-7\n2\tb\t\\N\n", 3, ints) == [
        [1, 2],
        ["a", "b"],
        [-7, None],
    ]
    assert decode_columns(copy, b"1\ta\t7x\n", 3, ints) == [["1"], ["a"], ["7x"]]


# Against a node.


@pytest.fixture
def conn(pg_url: str) -> Any:
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, d DECIMAL, day DATE)")
        yield c


def test_psycopg_copies_text_rows_in_and_out(conn: psycopg.Connection[Any]) -> None:
    with conn.cursor().copy("COPY t FROM STDIN") as copy:
        for i in range(450):  # several INSERT batches
            copy.write_row((i, f"row {i}\twith tab" if i % 2 else None, decimal.Decimal(i), None))
    assert conn.execute("SELECT count(*), max(id) FROM t").fetchone() == (450, 449)
    assert conn.execute("SELECT s FROM t WHERE id = 3").fetchone() == ("row 3\twith tab",)
    out = []
    with conn.cursor().copy("COPY t (id, s) TO STDOUT") as copy:
        out = list(copy.rows())
    assert out[:2] == [("0", None), ("1", "row 1\twith tab")]
    assert len(out) == 450


def test_psycopg_copies_csv_with_a_header(conn: psycopg.Connection[Any]) -> None:
    data = 'id,day,s\n1,2024-02-29,"a, b"\n2,,""\n'
    with conn.cursor().copy("COPY t (id, day, s) FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
        copy.write(data)
    rows = conn.execute("SELECT id, day, s FROM t ORDER BY id").fetchall()
    assert rows == [(1, datetime.date(2024, 2, 29), "a, b"), (2, None, "")]
    with conn.cursor().copy("COPY (SELECT id, s FROM t ORDER BY id) TO STDOUT CSV HEADER") as copy:
        text = b"".join(bytes(chunk) for chunk in copy).decode()
    assert text == 'id,s\n1,"a, b"\n2,""\n'


def test_a_bad_value_names_its_line_and_nothing_is_written(conn: psycopg.Connection[Any]) -> None:
    with (
        pytest.raises(errors.InvalidTextRepresentation) as caught,
        conn.cursor().copy("COPY t (id, s) FROM STDIN") as copy,
    ):
        copy.write("1\ta\n2\tb\nthree\tc\n")
    assert "line 3" in str(caught.value)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    with (
        pytest.raises(errors.UniqueViolation),  # a duplicate key: the whole COPY fails
        conn.cursor().copy("COPY t (id) FROM STDIN") as copy,
    ):
        copy.write("1\n2\n1\n")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on


def test_a_copy_of_many_batches_and_a_partial_one_loads_every_row(
    conn: psycopg.Connection[Any],
) -> None:
    with conn.cursor() as cur:
        with cur.copy("COPY t (id, s) FROM STDIN") as copy:
            copy.write("".join(f"{i}\tv{i}\n" for i in range(2345)))
        assert cur.statusmessage == "COPY 2345"
    found = conn.execute("SELECT count(*), min(id), max(id), max(s) FROM t").fetchone()
    assert found == (2345, 0, 2344, "v999")


def test_a_copy_meeting_an_existing_row_fails_whole_and_keeps_it(
    conn: psycopg.Connection[Any],
) -> None:
    conn.execute("INSERT INTO t (id, s) VALUES (1500, 'old')")
    with (
        pytest.raises(errors.UniqueViolation) as caught,
        conn.cursor().copy("COPY t (id, s) FROM STDIN") as copy,
    ):
        copy.write("".join(f"{i}\tnew\n" for i in range(2000)))
    assert "1500" in str(caught.value)
    assert conn.execute("SELECT count(*), max(s) FROM t").fetchone() == (1, "old")
    conn.execute("BEGIN")  # in a transaction, the statement reports it the same way
    with (
        pytest.raises(errors.UniqueViolation),
        conn.cursor().copy("COPY t (id, s) FROM STDIN") as copy,
    ):
        copy.write("1499\tnew\n1500\tnew\n")
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_a_copy_inside_a_transaction_rolls_back_with_it(conn: psycopg.Connection[Any]) -> None:
    conn.execute("BEGIN")
    with conn.cursor().copy("COPY t (id) FROM STDIN") as copy:
        copy.write("1\n2\n")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_client_that_aborts_its_copy_writes_nothing(conn: psycopg.Connection[Any]) -> None:
    with (
        pytest.raises(RuntimeError),  # psycopg sends CopyFail, then raises it again
        conn.cursor().copy("COPY t (id) FROM STDIN") as copy,
    ):
        copy.write("1\n")
        raise RuntimeError("the client gives up")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_copy_into_a_missing_table_or_column_fails_before_any_data(
    conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(errors.UndefinedTable), conn.cursor().copy("COPY nowhere FROM STDIN"):
        pass
    with pytest.raises(errors.UndefinedColumn), conn.cursor().copy("COPY t (nope) FROM STDIN"):
        pass


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_backslash_copy_loads_a_csv_file(
    conn: psycopg.Connection[Any], pg_url: str, tmp_path: Any
) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("1,one\n2,two\n")
    done = subprocess.run(
        ["psql", pg_url, "-v", "ON_ERROR_STOP=1", "-c", f"\\copy t (id, s) FROM '{path}' CSV"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "COPY 2" in done.stdout
    assert conn.execute("SELECT s FROM t ORDER BY id").fetchall() == [("one",), ("two",)]
