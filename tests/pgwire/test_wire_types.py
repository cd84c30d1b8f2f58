"""Type OIDs and the text and binary formats of feedkv's values on the wire."""

from __future__ import annotations

import datetime
import decimal
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from feedkv.errors import SQLError
from feedkv.pgwire.types import (
    OID,
    column_oid,
    decode_param,
    encode_binary,
    encode_text,
)
from feedkv.sql import jsonb
from feedkv.sql.types import format_value

UTC = datetime.UTC


@pytest.mark.parametrize(
    ("values", "oid"),
    [
        ([1, None, 2], OID.INT8),
        ([1, decimal.Decimal("1.5")], OID.NUMERIC),
        ([1, 2.5], OID.FLOAT8),
        ([None, None], OID.TEXT),
        ([], OID.TEXT),
        ([{"a": 1}, [1]], OID.JSONB),
        ([1, "x"], OID.TEXT),
        ([datetime.datetime(2024, 1, 1, tzinfo=UTC)], OID.TIMESTAMPTZ),
        ([datetime.datetime(2024, 1, 1)], OID.TIMESTAMP),
        ([datetime.date(2024, 1, 1)], OID.DATE),
        ([True], OID.BOOL),
        ([b""], OID.BYTEA),
        ([uuid.UUID(int=0)], OID.UUID),
    ],
)
def test_a_columns_type_follows_its_values(values: list[Any], oid: int) -> None:
    assert column_oid(values) == oid


@pytest.mark.parametrize(
    ("value", "oid", "text"),
    [
        (True, OID.BOOL, "t"),
        (b"\x00\xab", OID.BYTEA, "\\x00ab"),
        # DECIMAL as CockroachDB sends it (its to-scientific-string, not PostgreSQL's)
        (decimal.Decimal("1E+3"), OID.NUMERIC, "1E+3"),
        (decimal.Decimal("5E-17"), OID.NUMERIC, "5E-17"),
        (decimal.Decimal("0.00001"), OID.NUMERIC, "0.00001"),
        (1e20, OID.FLOAT8, "1e+20"),
        (float("nan"), OID.FLOAT8, "NaN"),
        (datetime.datetime(2024, 5, 1, 12, 0, 0, 500000), OID.TIMESTAMP, "2024-05-01 12:00:00.5"),
        (
            datetime.datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
            OID.TIMESTAMPTZ,
            "2024-05-01 12:00:00+00",
        ),
        ({"b": 1, "a": [True, None]}, OID.JSONB, '{"a": [true, null], "b": 1}'),
        ("json string", OID.JSONB, '"json string"'),
    ],
)
def test_text_formats_are_postgresqls(value: Any, oid: int, text: str) -> None:
    assert encode_text(value, oid) == text.encode()


@given(
    hs.one_of(
        hs.integers(),
        hs.text(hs.characters(exclude_categories=("Cs",))),
        hs.decimals(),
    )
)
def test_ints_strings_and_decimals_send_the_text_format_value_gives(value: Any) -> None:
    """encode_text's shortcut for these types says what format_value says (a JSON
    column still sends JSON)."""
    oid = {int: OID.INT8, str: OID.TEXT, decimal.Decimal: OID.NUMERIC}[type(value)]
    assert encode_text(value, oid) == format_value(value).encode()
    if isinstance(value, str):
        assert encode_text(value, OID.JSONB) == jsonb.dumps(value, spaced=True).encode()


@pytest.mark.parametrize(
    ("value", "oid"),
    [
        (-(1 << 63), OID.INT8),
        (-0.25, OID.FLOAT8),
        (False, OID.BOOL),
        (b"\x00\x01", OID.BYTEA),
        (datetime.date(1969, 12, 31), OID.DATE),
        (datetime.datetime(1999, 12, 31, 23, 59, 59, 999999), OID.TIMESTAMP),
        (datetime.datetime(2038, 1, 19, 3, 14, 8, 1, tzinfo=UTC), OID.TIMESTAMPTZ),
        (uuid.UUID("12345678-1234-5678-1234-567812345678"), OID.UUID),
        ({"k": [1, "two"]}, OID.JSONB),
        (decimal.Decimal("-0.000100"), OID.NUMERIC),
        (decimal.Decimal("NaN"), OID.NUMERIC),
    ],
)
def test_binary_values_read_back_as_they_were_sent(value: Any, oid: int) -> None:
    back = decode_param(encode_binary(value, oid), oid, True, 1)
    if isinstance(value, decimal.Decimal) and value.is_nan():
        assert back.is_nan()
    else:
        assert back == value
        assert str(back) == str(value)  # the scale too


@given(hs.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_every_decimal_survives_numeric_binary_with_its_scale(value: decimal.Decimal) -> None:
    back = decode_param(encode_binary(value, OID.NUMERIC), OID.NUMERIC, True, 1)
    assert back == value
    if value.as_tuple().exponent <= 0:  # type: ignore[operator]
        assert back.as_tuple().exponent == value.as_tuple().exponent


def test_numeric_binary_is_postgresqls_base_10000_layout() -> None:
    # 12345.678: digits 1, 2345, 6780; weight 1; scale 3
    assert encode_binary(decimal.Decimal("12345.678"), OID.NUMERIC) == struct.pack(
        "!hhHh3h", 3, 1, 0, 3, 1, 2345, 6780
    )


@pytest.mark.parametrize(
    ("raw", "oid", "value"),
    [
        (b"42", OID.INT4, 42),
        (b"t", OID.BOOL, True),
        (b"2.5", OID.NUMERIC, decimal.Decimal("2.5")),
        (b"\\x0102", OID.BYTEA, b"\x01\x02"),
        (b"a\\\\b\\001", OID.BYTEA, b"a\\b\x01"),
        (b"2024-05-01 12:00:00+02", OID.TIMESTAMPTZ, datetime.datetime(2024, 5, 1, 10, tzinfo=UTC)),
        (b'{"a": 1}', OID.JSONB, {"a": 1}),
        # a time zone after a date, a time or a TIMESTAMP is ignored (pgjdbc sends one)
        (b"2024-02-29 +00", OID.DATE, datetime.date(2024, 2, 29)),
        (b"2024-01-01 -05:30", OID.DATE, datetime.date(2024, 1, 1)),
        (b"2024-01-01", OID.DATE, datetime.date(2024, 1, 1)),
        (b"01:02:03+05:30", OID.TIME, datetime.time(1, 2, 3)),
        (
            b"2024-01-02 03:04:05.5+00",
            OID.TIMESTAMP,
            datetime.datetime(2024, 1, 2, 3, 4, 5, 500000),
        ),
        (b"{1,2}", 1028, [1, 2]),  # oid[] (asyncpg's introspection sends one)
        (b"{1,NULL}", 1005, [1, None]),  # int2[], as psycopg sends a list as text
        (b"anything", OID.UNSPECIFIED, "anything"),
        (b"7", OID.TEXT, "7"),
    ],
)
def test_text_parameters_become_values_of_their_type(raw: bytes, oid: int, value: Any) -> None:
    assert decode_param(raw, oid, False, 1) == value


@pytest.mark.parametrize(
    ("raw", "oid", "binary", "code", "message"),
    [
        (b"abc", OID.INT8, False, "22P02", "parameter $3: invalid input for type int8"),
        (b"maybe", OID.BOOL, False, "22P02", "type bool"),
        (b"\x01\x02", OID.INT8, True, "22P03", "invalid binary input for type int8"),
        (b"\x02{}", OID.JSONB, True, "22P03", "jsonb version byte"),
        (b"x", 600, True, "22P03", "no binary format for type oid 600"),
    ],
)
def test_parameters_that_do_not_read_as_their_type_are_refused(
    raw: bytes, oid: int, binary: bool, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as caught:
        decode_param(raw, oid, binary, 3)
    assert caught.value.code == code
    assert message in caught.value.message
