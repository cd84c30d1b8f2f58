"""Binary COPY: PostgreSQL's binary copy format in and out for every type feedkv has,
with psycopg's binary copy; a malformed stream is refused whole and writes nothing."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import ipaddress
import struct
import uuid
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as strats
from psycopg import errors
from psycopg.types.json import Jsonb

from feedkv import DB
from feedkv.pgwire.copy import (
    BINARY_HEADER,
    BINARY_TRAILER,
    CopyError,
    decode_binary_rows,
    encode_binary_row,
    parse_copy,
)
from feedkv.pgwire.types import OID, binary_reader, encode_binary
from feedkv.sql.types import ColumnType, Kind

COLUMNS = (
    "id INT PRIMARY KEY, s STRING, f FLOAT, d DECIMAL, b BYTES, ok BOOL, day DATE, "
    "ts TIMESTAMP, tstz TIMESTAMPTZ, u UUID, j JSONB, at TIME, span INTERVAL, addr INET, "
    "nums INT[], tags STRING[], m mood"
)
TYPES = [
    "int8",
    "text",
    "float8",
    "numeric",
    "bytea",
    "bool",
    "date",
    "timestamp",
    "timestamptz",
    "uuid",
    "jsonb",
    "time",
    "interval",
    "inet",
    "int8[]",
    "text[]",
    "text",
]
ROWS: list[tuple[Any, ...]] = [
    (
        1,
        "tab\there, ünïcode",
        -1.5,
        decimal.Decimal("-12345.678900"),
        b"\x00\xff\r\n",
        True,
        datetime.date(2024, 2, 29),
        datetime.datetime(2024, 5, 1, 12, 30, 45, 123456),
        datetime.datetime(2024, 5, 1, 12, 30, 45, 500000, tzinfo=datetime.UTC),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        {"a": [1, 2, {"b": None}], "c": "d"},
        datetime.time(23, 59, 58, 7),
        datetime.timedelta(days=3, hours=4, microseconds=5),
        ipaddress.ip_address("192.168.0.1"),
        [3, None, 1],
        ["a", 'b "c"', ""],
        "happy",
    ),
    (2, *([None] * 16)),
]


@pytest.fixture
def url(db: DB, pg_url: str) -> str:
    db.sql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    db.sql(f"CREATE TABLE t ({COLUMNS})")
    return pg_url


def write_rows(conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]]) -> None:
    with conn.cursor().copy("COPY t FROM STDIN WITH (FORMAT binary)") as copy:
        copy.set_types(TYPES)
        for row in rows:
            copy.write_row([Jsonb(v) if isinstance(v, dict) else v for v in row])


def test_psycopg_binary_copy_in_and_out_round_trips_every_type(db: DB, url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        write_rows(conn, ROWS)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)
        selected = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
        with conn.cursor().copy("COPY t TO STDOUT (FORMAT binary)") as copy:
            copy.set_types(TYPES)
            copied = list(copy.rows())
    assert copied == selected
    assert copied == ROWS


def test_binary_copy_out_of_a_query(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        write_rows(conn, ROWS)
        with conn.cursor().copy("COPY (SELECT id, s FROM t ORDER BY id) TO STDOUT BINARY") as copy:
            copy.set_types(["int8", "text"])
            assert list(copy.rows()) == [(1, ROWS[0][1]), (2, None)]


def test_an_int4_column_value_sent_as_int4_is_taken(db: DB, url: str) -> None:
    with (
        psycopg.connect(url, autocommit=True) as conn,
        conn.cursor().copy("COPY t (id, f) FROM STDIN (FORMAT binary)") as copy,
    ):
        copy.set_types(["int4", "float4"])
        copy.write_row([7, 0.5])
    assert db.sql("SELECT id, f FROM t").rows == [(7, 0.5)]


def malformed(url: str, data: bytes, code: str, *, in_transaction: bool = False) -> psycopg.Error:
    with psycopg.connect(url, autocommit=not in_transaction) as conn:
        if in_transaction:
            conn.execute("INSERT INTO t (id) VALUES (100)")
        with (
            pytest.raises(psycopg.Error) as caught,
            conn.cursor().copy("COPY t (id, s) FROM STDIN (FORMAT binary)") as copy,
        ):
            copy.write(data)
        assert caught.value.sqlstate == code, caught.value
        if in_transaction:
            with pytest.raises(errors.InFailedSqlTransaction):
                conn.execute("SELECT 1")
            conn.rollback()
        return caught.value


def good_row(k: int, s: str | None) -> bytes:
    return encode_binary_row([struct.pack("!q", k), None if s is None else s.encode()])


@pytest.mark.parametrize(
    ("data", "code", "names"),
    [
        (b"PGCOPY\nXXX", "22P04", "signature"),
        (BINARY_HEADER + good_row(1, "a") + good_row(2, "b")[:-1], "22P04", "row 2"),
        (BINARY_HEADER + good_row(1, "a") + struct.pack("!h", 3), "22P04", "row 2"),
        (BINARY_HEADER + good_row(1, "a") + BINARY_TRAILER + b"x", "22P04", "EOF marker"),
        (BINARY_HEADER + encode_binary_row([b"\x00" * 3, None]), "22P03", "column id"),
        (BINARY_HEADER + encode_binary_row([struct.pack("!q", 1), b"\xff"]), "22P03", "row 1"),
        (b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 1 << 16, 0), "0A000", "OIDs"),
    ],
)
def test_a_malformed_binary_copy_is_refused_and_writes_nothing(
    db: DB, url: str, data: bytes, code: str, names: str
) -> None:
    error = malformed(url, data, code)
    assert names in str(error)
    assert db.sql("SELECT count(*) FROM t").rows == [(0,)]


def test_a_malformed_binary_copy_in_a_transaction_fails_it_whole(db: DB, url: str) -> None:
    malformed(url, BINARY_HEADER + good_row(1, "a") + b"\x00", "22P04", in_transaction=True)
    assert db.sql("SELECT count(*) FROM t").rows == [(0,)]


def test_a_valid_stream_without_a_trailer_is_taken(db: DB, url: str) -> None:
    with (
        psycopg.connect(url, autocommit=True) as conn,
        conn.cursor().copy("COPY t (id, s) FROM STDIN (FORMAT binary)") as copy,
    ):
        copy.write(BINARY_HEADER + good_row(1, "a") + good_row(2, None))
    assert db.sql("SELECT id, s FROM t ORDER BY id").rows == [(1, "a"), (2, None)]


# The format alone (pure).

KINDS = [ColumnType(Kind.INT), ColumnType(Kind.STRING), ColumnType(Kind.FLOAT)]
OIDS = [OID.INT8, OID.TEXT, OID.FLOAT8]
READERS = [binary_reader(t) for t in KINDS]
NAMES = ["a", "b", "c"]
_rows = strats.lists(
    strats.tuples(
        strats.one_of(strats.none(), strats.integers(-(2**63), 2**63 - 1)),
        strats.one_of(strats.none(), strats.text()),
        strats.one_of(strats.none(), strats.floats(allow_nan=False)),
    ),
    max_size=5,
)


def encode(rows: list[tuple[Any, ...]]) -> bytes:
    body = b"".join(
        encode_binary_row(
            [None if v is None else encode_binary(v, oid) for v, oid in zip(row, OIDS, strict=True)]
        )
        for row in rows
    )
    return BINARY_HEADER + body + BINARY_TRAILER


@given(rows=_rows)
def test_encoded_rows_decode_to_themselves(rows: list[tuple[Any, ...]]) -> None:
    decoded = [tuple(values) for _n, values in decode_binary_rows(encode(rows), READERS, NAMES)]
    assert decoded == rows


@settings(max_examples=300)
@given(rows=_rows, cut=strats.integers(min_value=0), noise=strats.binary(max_size=8))
def test_a_damaged_stream_fails_with_a_copy_error_never_anything_else(
    rows: list[tuple[Any, ...]], cut: int, noise: bytes
) -> None:
    data = encode(rows)
    cut %= len(data) + 1
    damaged = data[:cut] + noise + data[cut + len(noise) :]
    try:
        decoded = list(decode_binary_rows(damaged, READERS, NAMES))
    except CopyError as exc:
        assert exc.code in ("22P04", "22P03", "0A000")
        return
    assert len(decoded) <= len(rows) + len(noise)


@given(data=strats.binary(max_size=64))
def test_garbage_after_a_valid_header_fails_with_a_copy_error(data: bytes) -> None:
    with contextlib.suppress(CopyError):
        list(decode_binary_rows(BINARY_HEADER + data, READERS, NAMES))


def test_the_statement_says_binary() -> None:
    assert parse_copy("COPY t FROM STDIN WITH (FORMAT binary)").binary
    assert parse_copy("COPY t TO STDOUT BINARY").binary
    assert parse_copy("COPY t TO STDOUT WITH BINARY").binary
    assert not parse_copy("COPY t TO STDOUT").binary
