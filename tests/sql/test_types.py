"""Tests for feedkv.sql.types: type names, assignment coercion, the DECIMAL key encoding,
the storage primitives of each type and how values are displayed."""

from __future__ import annotations

import datetime
import ipaddress
import math
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.arrays import Array
from feedkv.sql.bits import BitString
from feedkv.sql.enums import EnumValue, first_codes
from feedkv.sql.inet import Inet
from feedkv.sql.interval import Interval
from feedkv.sql.types import (
    ColumnType,
    Kind,
    coerce,
    coerce_column,
    decimal_from_key,
    decimal_key,
    format_value,
    from_key,
    from_key_primitive,
    from_value,
    from_value_primitive,
    key_primitive,
    kind_of_value,
    parse_type_name,
    type_of_value,
    value_primitive,
)

UTC = datetime.UTC
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

FAST = settings(max_examples=100, deadline=None)

ints = st.integers(INT64_MIN, INT64_MAX)
decimals = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False),
    st.builds(
        lambda sign, digits, exponent: Decimal((sign, tuple(digits), exponent)),
        st.integers(0, 1),
        st.lists(st.integers(0, 9), min_size=1, max_size=60),
        st.integers(-80, 80),
    ),
)


def sql_error(call: Any, *args: Any) -> SQLError:
    """The SQLError ``call(*args)`` raises (any other outcome fails the test)."""
    with pytest.raises(SQLError) as info:
        call(*args)
    return info.value


def t(kind: Kind, **params: int) -> ColumnType:
    """Short for ``ColumnType``, to keep the tables of conversions below readable."""
    return ColumnType(kind, **params)


# Type names.


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("INT", Kind.INT),
        ("int8", Kind.INT),
        ("Int4", Kind.INT),
        ("INT2", Kind.INT),
        ("integer", Kind.INT),
        ("BIGINT", Kind.INT),
        ("smallint", Kind.INT),
        ("TINYINT", Kind.INT),
        ("FLOAT", Kind.FLOAT),
        ("float8", Kind.FLOAT),
        ("FLOAT4", Kind.FLOAT),
        ("real", Kind.FLOAT),
        ("DOUBLE", Kind.FLOAT),
        ("DECIMAL", Kind.DECIMAL),
        ("numeric", Kind.DECIMAL),
        ("DEC", Kind.DECIMAL),
        ("STRING", Kind.STRING),
        ("text", Kind.STRING),
        ("VARCHAR", Kind.STRING),
        ("char", Kind.STRING),
        ("NVARCHAR", Kind.STRING),
        ("NCHAR", Kind.STRING),
        ("BYTES", Kind.BYTES),
        ("bytea", Kind.BYTES),
        ("BLOB", Kind.BYTES),
        ("VARBINARY", Kind.BYTES),
        ("BINARY", Kind.BYTES),
        ("BOOL", Kind.BOOL),
        ("boolean", Kind.BOOL),
        ("DATE", Kind.DATE),
        ("timestamp", Kind.TIMESTAMP),
        ("DATETIME", Kind.TIMESTAMP),
        ("TimestampTZ", Kind.TIMESTAMPTZ),
        ("uuid", Kind.UUID),
        ("JSONB", Kind.JSONB),
        ("json", Kind.JSONB),
    ],
)
def test_type_aliases_name_their_kind_in_any_case(name: str, kind: Kind) -> None:
    assert parse_type_name(name).kind is kind


@pytest.mark.parametrize(
    ("name", "sql", "largest"),
    [("INT2", "INT2", 32767), ("smallint", "INT2", 32767), ("Int4", "INT4", 2**31 - 1)]
    + [(name, "INT8", 2**63 - 1) for name in ("INT", "integer", "BIGINT", "int8")],
)
def test_narrow_integers_keep_their_width_and_refuse_what_does_not_fit(
    name: str, sql: str, largest: int
) -> None:
    """As CockroachDB: INT and INTEGER are INT8 (its default_int_size); INT2 and INT4
    keep their width and refuse values outside it with 22003."""
    ctype = parse_type_name(name)
    assert ctype.sql() == sql
    assert coerce(largest, ctype, "c") == largest
    assert coerce(-largest - 1, ctype, "c") == -largest - 1
    for outside in (largest + 1, -largest - 2):
        with pytest.raises(SQLError) as caught:
            coerce(outside, ctype, "c")
        assert caught.value.code == "22003"
        assert sql in str(caught.value)


def test_unknown_type_name_is_42704_and_names_the_type() -> None:
    error = sql_error(parse_type_name, "MONEY")
    assert error.code == "42704"
    assert '"money"' in error.message


@pytest.mark.parametrize("name", ["VARCHAR", "STRING", "NCHAR", "nvarchar"])
def test_string_width_parameter_limits_the_length(name: str) -> None:
    ctype = parse_type_name(name, [10])
    assert ctype == ColumnType(Kind.STRING, width=10)
    assert ctype.sql() == "STRING(10)"


def test_char_is_fixed_length_and_one_character_without_a_width() -> None:
    assert parse_type_name("char", [10]) == ColumnType(Kind.STRING, width=10, fixed=True)
    assert parse_type_name("CHAR", [10]).sql() == "CHAR(10)"
    assert parse_type_name("CHAR") == ColumnType(Kind.STRING, width=1, fixed=True)
    assert parse_type_name("CHAR").sql() == "CHAR"


def test_float4_is_a_32_bit_float() -> None:
    assert parse_type_name("real") == ColumnType(Kind.FLOAT, width=32)
    assert parse_type_name("FLOAT4").sql() == "FLOAT4"
    assert parse_type_name("FLOAT8").sql() == "FLOAT8"


def test_string_with_two_parameters_is_a_syntax_error() -> None:
    error = sql_error(parse_type_name, "varchar", [1, 2])
    assert error.code == "42601"
    assert "VARCHAR" in error.message


@pytest.mark.parametrize("width", [0, -1])
def test_string_width_below_one_is_invalid(width: int) -> None:
    error = sql_error(parse_type_name, "STRING", [width])
    assert error.code == "22023"
    assert "at least 1" in error.message


@pytest.mark.parametrize(
    ("params", "expected", "sql"),
    [
        (None, ColumnType(Kind.DECIMAL), "DECIMAL"),
        ([], ColumnType(Kind.DECIMAL), "DECIMAL"),
        ([10], ColumnType(Kind.DECIMAL, precision=10, scale=0), "DECIMAL(10,0)"),
        ([10, 2], ColumnType(Kind.DECIMAL, precision=10, scale=2), "DECIMAL(10,2)"),
        ([5, 5], ColumnType(Kind.DECIMAL, precision=5, scale=5), "DECIMAL(5,5)"),
        ([60, 30], ColumnType(Kind.DECIMAL, precision=60, scale=30), "DECIMAL(60,30)"),
    ],
)
def test_decimal_precision_defaults_scale_to_zero(
    params: list[int] | None, expected: ColumnType, sql: str
) -> None:
    for name in ("DECIMAL", "numeric", "dec"):
        ctype = parse_type_name(name, params)
        assert ctype == expected
        assert ctype.sql() == sql


@pytest.mark.parametrize(
    ("params", "code", "fragment"),
    [
        ([10, 2, 1], "42601", "at most two parameters"),
        ([0], "22023", "precision 0"),
        ([-3, 0], "22023", "precision -3"),
        ([4, 5], "22023", "scale (5)"),
        ([4, -1], "22023", "scale (-1)"),
    ],
)
def test_invalid_decimal_parameters_are_rejected(
    params: list[int], code: str, fragment: str
) -> None:
    error = sql_error(parse_type_name, "DECIMAL", params)
    assert error.code == code
    assert fragment in error.message


@pytest.mark.parametrize(
    ("ctype", "sql"),
    [
        (ColumnType(Kind.INT), "INT8"),
        (ColumnType(Kind.FLOAT), "FLOAT8"),
        (ColumnType(Kind.STRING), "STRING"),
        (ColumnType(Kind.STRING, width=3), "STRING(3)"),
        (ColumnType(Kind.DECIMAL, precision=7), "DECIMAL(7)"),
        (ColumnType(Kind.TIMESTAMPTZ), "TIMESTAMPTZ"),
        (ColumnType(Kind.JSONB), "JSONB"),
    ],
)
def test_column_type_sql_is_its_canonical_name(ctype: ColumnType, sql: str) -> None:
    assert ctype.sql() == sql
    assert str(ctype) == sql


column_types = st.builds(
    ColumnType,
    st.sampled_from(list(Kind)),
    width=st.none() | st.integers(1, 1000),
    precision=st.none() | st.integers(1, 100),
    scale=st.none() | st.integers(0, 100),
)


@FAST
@given(column_types)
def test_column_type_json_round_trips(ctype: ColumnType) -> None:
    data = ctype.to_json()
    assert data["kind"] == ctype.kind.name
    assert ColumnType.from_json(data) == ctype


def test_column_type_json_leaves_out_unset_parameters() -> None:
    assert ColumnType(Kind.UUID).to_json() == {"kind": "UUID"}
    assert ColumnType(Kind.DECIMAL, precision=4, scale=1).to_json() == {
        "kind": "DECIMAL",
        "precision": 4,
        "scale": 1,
    }


# Coercion: accepted conversions.


@pytest.mark.parametrize(
    ("value", "ctype", "expected"),
    [
        (42, t(Kind.INT), 42),
        (" -17 ", t(Kind.INT), -17),
        (2.0, t(Kind.INT), 2),
        (Decimal("7"), t(Kind.INT), 7),
        (str(INT64_MIN), t(Kind.INT), INT64_MIN),
        (3, t(Kind.FLOAT), 3.0),
        (Decimal("0.5"), t(Kind.FLOAT), 0.5),
        (" 1.25 ", t(Kind.FLOAT), 1.25),
        ("-Infinity", t(Kind.FLOAT), -math.inf),
        (7, t(Kind.DECIMAL), Decimal(7)),
        (0.1, t(Kind.DECIMAL), Decimal("0.1")),
        (" 1.50 ", t(Kind.DECIMAL), Decimal("1.50")),
        (Decimal("1.005"), t(Kind.DECIMAL, precision=4, scale=2), Decimal("1.01")),
        (Decimal("-1.005"), t(Kind.DECIMAL, precision=4, scale=2), Decimal("-1.01")),
        (Decimal("0.001"), t(Kind.DECIMAL, precision=1, scale=1), Decimal("0.0")),
        (12, t(Kind.DECIMAL, precision=4, scale=2), Decimal("12.00")),
        ("héllo", t(Kind.STRING), "héllo"),
        ("ééé", t(Kind.STRING, width=3), "ééé"),
        ("a\x00b", t(Kind.STRING), "a\x00b"),
        (b"\x00\xff", t(Kind.BYTES), b"\x00\xff"),
        (bytearray(b"ab"), t(Kind.BYTES), b"ab"),
        (memoryview(b"cd"), t(Kind.BYTES), b"cd"),
        ("\\x00ff", t(Kind.BYTES), b"\x00\xff"),
        ("é", t(Kind.BYTES), "é".encode()),
        (True, t(Kind.BOOL), True),
        (" Yes ", t(Kind.BOOL), True),
        ("off", t(Kind.BOOL), False),
        ("0", t(Kind.BOOL), False),
        (datetime.date(2024, 2, 29), t(Kind.DATE), datetime.date(2024, 2, 29)),
        (datetime.datetime(2024, 2, 29, 23, 59), t(Kind.DATE), datetime.date(2024, 2, 29)),
        ("2024-02-29", t(Kind.DATE), datetime.date(2024, 2, 29)),
        ("2024-02-29T10:00:00", t(Kind.DATE), datetime.date(2024, 2, 29)),
        (
            "2024-01-02 03:04:05.5",
            t(Kind.TIMESTAMP),
            datetime.datetime(2024, 1, 2, 3, 4, 5, 500_000),
        ),
        (datetime.date(2024, 1, 2), t(Kind.TIMESTAMP), datetime.datetime(2024, 1, 2)),
        (
            datetime.datetime(2024, 1, 2, 3, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
            t(Kind.TIMESTAMP),
            datetime.datetime(2024, 1, 2, 1),
        ),
        (
            "2024-01-02T03:04:05Z",
            t(Kind.TIMESTAMPTZ),
            datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        ),
        (
            "2024-01-02T03:04:05-05:00",
            t(Kind.TIMESTAMPTZ),
            datetime.datetime(2024, 1, 2, 8, 4, 5, tzinfo=UTC),
        ),
        (
            datetime.datetime(2024, 1, 2, 3),
            t(Kind.TIMESTAMPTZ),
            datetime.datetime(2024, 1, 2, 3, tzinfo=UTC),
        ),
        (
            datetime.date(2024, 1, 2),
            t(Kind.TIMESTAMPTZ),
            datetime.datetime(2024, 1, 2, tzinfo=UTC),
        ),
        (
            " 12345678-1234-5678-1234-567812345678 ",
            t(Kind.UUID),
            uuid.UUID("12345678-1234-5678-1234-567812345678"),
        ),
        (bytes(range(16)), t(Kind.UUID), uuid.UUID(bytes=bytes(range(16)))),
        ('{"a": [1, 2.5, null]}', t(Kind.JSONB), {"a": [1, 2.5, None]}),
        ('"text"', t(Kind.JSONB), jsonb.JsonString("text")),
        ([1, {"b": False}], t(Kind.JSONB), [1, {"b": False}]),
        (3, t(Kind.JSONB), 3),
        (True, t(Kind.JSONB), True),
    ],
)
def test_coerce_accepts_the_documented_conversions(
    value: object, ctype: ColumnType, expected: Any
) -> None:
    result = coerce(value, ctype, "c")
    assert result == expected
    assert type(result) is type(expected)
    if isinstance(expected, Decimal):
        assert result.as_tuple() == expected.as_tuple()
    if isinstance(expected, datetime.datetime):
        assert result.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("kind", list(Kind))
def test_coerce_keeps_null_null_for_every_type(kind: Kind) -> None:
    assert coerce(None, ColumnType(kind), "c") is None


def test_timestamptz_is_converted_to_utc_from_any_offset() -> None:
    tokyo = datetime.timezone(datetime.timedelta(hours=9))
    result = coerce(datetime.datetime(2024, 1, 1, 9, tzinfo=tokyo), t(Kind.TIMESTAMPTZ), "c")
    assert result == datetime.datetime(2024, 1, 1, tzinfo=UTC)
    assert result.tzinfo is UTC


LABELS = ("sad", "ok", "happy")
MOOD = ColumnType(Kind.ENUM, type_name="mood", labels=LABELS, codes=first_codes(len(LABELS)))
INTS = ColumnType(Kind.ARRAY, element=ColumnType(Kind.INT))


def _typed(kind: Kind) -> ColumnType:
    return MOOD if kind is Kind.ENUM else INTS if kind is Kind.ARRAY else ColumnType(kind)


values_by_kind: dict[Kind, st.SearchStrategy[Any]] = {
    Kind.INT: ints,
    Kind.FLOAT: st.floats(),
    Kind.DECIMAL: decimals,
    Kind.STRING: st.text(),
    Kind.BYTES: st.binary(),
    Kind.BOOL: st.booleans(),
    Kind.DATE: st.dates(),
    Kind.TIMESTAMP: st.datetimes(),
    Kind.TIMESTAMPTZ: st.datetimes(timezones=st.just(UTC)),
    Kind.UUID: st.uuids(),
    Kind.JSONB: st.recursive(
        # NB: a JSON number with a fraction is a Decimal keeping its digits (jsonb.loads)
        st.booleans()
        | st.integers()
        | st.decimals(allow_nan=False, allow_infinity=False, places=2),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    ),
    Kind.TIME: st.times(),
    Kind.INTERVAL: st.builds(
        Interval,
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**62), 2**62),
    ),
    Kind.INET: st.builds(
        lambda a, p: Inet(ipaddress.ip_interface((a, p))),
        st.ip_addresses(v=4),
        st.integers(0, 32),
    ),
    Kind.ENUM: st.sampled_from(
        [EnumValue(label, MOOD.labels or (), "mood", MOOD.codes or ()) for label in LABELS]
    ),
    Kind.ARRAY: st.lists(st.none() | ints, max_size=4).map(
        lambda items: Array(tuple(items), ColumnType(Kind.INT))
    ),
    Kind.BIT: st.sampled_from([BitString("0"), BitString("1")]),  # BIT is BIT(1)
    Kind.VARBIT: st.text(alphabet="01", max_size=20).map(BitString),
}


def test_enum_labels_order_by_declaration_and_refuse_others() -> None:
    sad, happy = coerce("sad", MOOD, "c"), coerce("happy", MOOD, "c")
    assert sad < happy and key_primitive(Kind.ENUM, sad) < key_primitive(Kind.ENUM, happy)
    error = sql_error(coerce, "angry", MOOD, "c")
    assert error.code == "22P02" and "angry" in error.message
    other = ColumnType(Kind.ENUM, type_name="other", labels=("sad",))
    assert sql_error(coerce, sad, other, "c").code == "42804"


coerced_values = st.sampled_from(list(Kind)).flatmap(
    lambda kind: st.tuples(st.just(kind), values_by_kind[kind])
)


@FAST
@given(coerced_values)
def test_coerce_returns_an_already_coerced_value_unchanged(case: tuple[Kind, Any]) -> None:
    kind, value = case
    result = coerce(value, _typed(kind), "c")
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(result)
    else:
        assert result == value
        assert type(result) is type(value)


@FAST
@given(ints)
def test_coerce_parses_the_text_of_every_int64(value: int) -> None:
    assert coerce(str(value), t(Kind.INT), "c") == value


@FAST
@given(st.floats(allow_nan=False))
def test_coerce_parses_the_repr_of_every_float(value: float) -> None:
    result = coerce(repr(value), t(Kind.FLOAT), "c")
    assert result == value
    assert math.copysign(1.0, result) == math.copysign(1.0, value)


@FAST
@given(
    st.decimals(min_value=-(10**20), max_value=10**20, places=6),
    st.integers(0, 6),
)
@example(Decimal("99999999999999.9995"), 3)
@example(Decimal("-99999999999999.9994"), 3)
def test_coerce_rounds_decimals_half_away_from_zero_to_the_scale(
    value: Decimal, scale: int
) -> None:
    ctype = t(Kind.DECIMAL, precision=20, scale=scale)
    unit = Decimal(1).scaleb(-scale)
    # Anything that rounds to 10**(20 - scale) or more has more than 20 digits.
    if abs(value) >= Decimal(10) ** (20 - scale) - unit / 2:
        assert sql_error(coerce, value, ctype, "c").code == "22003"
        return
    result = coerce(value, ctype, "c")
    assert result.as_tuple().exponent == -scale
    assert abs(result - value) <= unit / 2
    if abs(result - value) == unit / 2:
        assert abs(result) > abs(value)  # ties go away from zero


@FAST
@given(st.text(max_size=12), st.integers(1, 8))
def test_coerce_enforces_string_width_in_characters(value: str, width: int) -> None:
    ctype = t(Kind.STRING, width=width)
    if len(value) <= width:
        assert coerce(value, ctype, "c") == value
    else:
        error = sql_error(coerce, value, ctype, "c")
        assert error.code == "22001"
        assert "STRING(" in error.message


# Coercion: rejections.


@pytest.mark.parametrize(
    ("value", "kind", "value_type"),
    [
        (True, Kind.INT, "bool"),
        ([1], Kind.INT, "jsonb"),
        (False, Kind.FLOAT, "bool"),
        (datetime.date(2024, 1, 1), Kind.FLOAT, "date"),
        (True, Kind.DECIMAL, "bool"),
        (1, Kind.STRING, "int"),
        (b"abc", Kind.STRING, "bytes"),
        (1, Kind.BYTES, "int"),
        (1, Kind.BOOL, "int"),
        (1, Kind.DATE, "int"),
        (1.5, Kind.TIMESTAMP, "float"),
        (1, Kind.TIMESTAMPTZ, "int"),
        (b"too short", Kind.UUID, "bytes"),
        (uuid.UUID(int=1), Kind.JSONB, "uuid"),
    ],
)
def test_coerce_rejects_a_value_of_the_wrong_type_with_42804(
    value: object, kind: Kind, value_type: str
) -> None:
    ctype = ColumnType(kind)
    error = sql_error(coerce, value, ctype, "price")
    assert error.code == "42804"
    assert error.message == (
        f'value type {value_type} doesn\'t match type {ctype.sql()} of column "price"'
    )


def test_type_mismatch_outside_a_column_does_not_name_one() -> None:
    error = sql_error(coerce, 1, t(Kind.STRING), None)
    assert error.code == "42804"
    assert error.message == "value type int doesn't match type STRING"


@pytest.mark.parametrize(
    ("value", "ctype"),
    [
        ("abc", t(Kind.INT)),
        ("1.5", t(Kind.INT)),
        ("", t(Kind.INT)),
        ("one", t(Kind.FLOAT)),
        ("1,5", t(Kind.DECIMAL)),
        ("\\xabc", t(Kind.BYTES)),
        ("\\xzz", t(Kind.BYTES)),
        ("maybe", t(Kind.BOOL)),
        ("2024-13-01", t(Kind.DATE)),
        ("yesterday", t(Kind.DATE)),
        ("2024-01-01 25:00", t(Kind.TIMESTAMP)),
        ("noon", t(Kind.TIMESTAMPTZ)),
        ("1234", t(Kind.UUID)),
        ("{", t(Kind.JSONB)),
        ("plain text", t(Kind.JSONB)),
        (math.nan, t(Kind.JSONB)),
        ({"a": math.inf}, t(Kind.JSONB)),
        ({"a": {1, 2}}, t(Kind.JSONB)),
    ],
)
def test_coerce_rejects_unparsable_values_with_22p02(value: object, ctype: ColumnType) -> None:
    error = sql_error(coerce, value, ctype, "c")
    assert error.code == "22P02"
    assert error.message.endswith("(column 'c')")


def test_unparsable_text_outside_a_column_quotes_the_text_and_the_type() -> None:
    error = sql_error(coerce, "abc", t(Kind.INT), None)
    assert error.code == "22P02"
    assert error.message == "could not parse 'abc' as type INT8"


@pytest.mark.parametrize(
    ("value", "ctype"),
    [
        (INT64_MAX + 1, t(Kind.INT)),
        (INT64_MIN - 1, t(Kind.INT)),
        ("9223372036854775808", t(Kind.INT)),
        (1e19, t(Kind.INT)),
        (math.inf, t(Kind.INT)),
        (-math.inf, t(Kind.INT)),
        (math.nan, t(Kind.INT)),
        (Decimal("1E+19"), t(Kind.INT)),
        (Decimal("10"), t(Kind.DECIMAL, precision=3, scale=2)),
        (Decimal("9.995"), t(Kind.DECIMAL, precision=3, scale=2)),
        (Decimal("-100.4"), t(Kind.DECIMAL, precision=2, scale=0)),
    ],
)
def test_coerce_rejects_out_of_range_values_with_22003(value: object, ctype: ColumnType) -> None:
    error = sql_error(coerce, value, ctype, "c")
    assert error.code == "22003"
    assert "(column 'c')" in error.message


def test_too_long_string_is_22001_and_names_the_column() -> None:
    error = sql_error(coerce, "abcd", t(Kind.STRING, width=3), "code")
    assert error.code == "22001"
    assert error.message == "value too long for type STRING(3) (column 'code')"


# Coercion: bugs found by these tests (see the report that came with them).


def test_decimal_with_more_than_28_digits_fits_a_wide_enough_decimal_column() -> None:
    # DECIMAL(40,2) is a valid type, so a 31-digit value with 2 decimals must fit it.
    value = Decimal("12345678901234567890123456789.12")
    ctype = parse_type_name("DECIMAL", [40, 2])
    assert coerce(value, ctype, "d") == value
    assert coerce(str(value), ctype, "d") == value


def test_int_too_large_for_a_float_is_an_out_of_range_error() -> None:
    error = sql_error(coerce, 10**400, t(Kind.FLOAT), "f")
    assert error.code == "22003"


@pytest.mark.parametrize(
    "value", [Decimal("Infinity"), Decimal("-Infinity"), Decimal("NaN")], ids=str
)
def test_non_finite_decimal_is_an_out_of_range_int(value: Decimal) -> None:
    error = sql_error(coerce, value, t(Kind.INT), "i")
    assert error.code == "22003"


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"a": NaN}', "[1, Infinity]"])
def test_jsonb_text_with_non_standard_constants_is_rejected(text: str) -> None:
    # NaN and Infinity are not JSON; the non-text path already rejects them with 22P02.
    error = sql_error(coerce, text, t(Kind.JSONB), "j")
    assert error.code == "22P02"


@pytest.mark.parametrize(
    "value",
    [{1: "a"}, [{"a": (1, 2)}], {"a": {True: None}}],
    ids=["int-key", "tuple", "bool-key"],
)
def test_a_coerced_jsonb_value_is_what_storage_gives_back(value: Any) -> None:
    # Either coerce normalizes the document (int keys become strings, tuples lists) or it
    # rejects it; it must not accept a value that reads back as a different one.
    try:
        coerced = coerce(value, t(Kind.JSONB), "j")
    except SQLError as exc:
        assert exc.code == "22P02"
        return
    stored = from_value_primitive(Kind.JSONB, value_primitive(Kind.JSONB, coerced))
    assert stored == coerced


# DECIMAL keys.


@FAST
@given(decimals)
@example(Decimal("-0"))
@example(Decimal("0E-30"))
@example(Decimal("1E+100"))
@example(Decimal("-1E-100"))
def test_decimal_key_round_trips_to_an_equal_normalized_value(value: Decimal) -> None:
    decoded = decimal_from_key(decimal_key(value))
    assert decoded == value
    assert decimal_key(decoded) == decimal_key(value)
    sign, digits, exponent = decoded.as_tuple()
    assert isinstance(exponent, int)
    if value == 0:
        assert decoded.as_tuple() == Decimal(0).as_tuple()
    elif exponent < 0:
        assert digits[-1] != 0  # normalized: no trailing zeros after the point
    else:
        assert exponent == 0  # an integer is written out, never as 1E+2
    if value != 0:
        assert sign == value.is_signed()


@FAST
@given(decimals, st.integers(1, 5))
def test_equal_decimals_with_different_scales_get_the_same_key(value: Decimal, extra: int) -> None:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    rescaled = Decimal((sign, (*digits, *[0] * extra), exponent - extra))
    assert rescaled == value
    assert decimal_key(rescaled) == decimal_key(value)


@FAST
@given(decimals, decimals)
@example(Decimal("0.1"), Decimal("0.15"))
@example(Decimal("-0.1"), Decimal("-0.15"))
@example(Decimal("-1"), Decimal("-0.99999999999999999999999999999999"))
@example(Decimal("9E-100"), Decimal("1E-99"))
def test_decimal_key_byte_order_is_numeric_order(a: Decimal, b: Decimal) -> None:
    key_a, key_b = decimal_key(a), decimal_key(b)
    assert (key_a < key_b) == (a < b)
    assert (key_a == key_b) == (a == b)


def test_decimal_key_layout_is_pinned() -> None:
    # Keys are persisted: a change here silently reorders stored rows.
    bias = 1 << 31
    assert decimal_key(Decimal(0)) == b"\x02"
    assert decimal_key(Decimal("-0.00")) == b"\x02"
    assert decimal_key(Decimal("1.50")) == b"\x03" + (bias + 1).to_bytes(4, "big") + b"15"
    inverted = bytes(255 - b for b in (bias + 1).to_bytes(4, "big") + b"15\x00")
    assert decimal_key(Decimal("-1.5")) == b"\x01" + inverted


def test_decimal_specials_key_below_and_above_every_number() -> None:
    # As CockroachDB orders them: NaN < -Infinity < every number < Infinity.
    nan, low, high = (decimal_key(Decimal(t)) for t in ("NaN", "-Infinity", "Infinity"))
    assert (nan, low, high) == (b"\x00", b"\x00\x01", b"\x04")
    lowest, highest = decimal_key(Decimal("-9E+2000")), decimal_key(Decimal("9E+2000"))
    assert nan < low < lowest < decimal_key(Decimal(0)) < highest < high
    assert decimal_key(Decimal("-sNaN")) == nan
    for text in ("NaN", "-Infinity", "Infinity"):
        assert str(decimal_from_key(decimal_key(Decimal(text)))) == text


def test_decimal_from_key_drops_fractional_trailing_zeros_and_writes_integers_out() -> None:
    assert decimal_from_key(decimal_key(Decimal("1.50"))).as_tuple() == Decimal("1.5").as_tuple()
    assert decimal_from_key(decimal_key(Decimal("-2.500"))).as_tuple() == (1, (2, 5), -1)
    for integer in (Decimal("100"), Decimal("1E+2"), Decimal("100.00")):
        decoded = decimal_from_key(decimal_key(integer))
        assert decoded.as_tuple() == Decimal(100).as_tuple()
        assert format_value(decoded) == "100"


# Storage primitives.


@FAST
@given(coerced_values)
def test_value_primitives_round_trip_every_coerced_value(case: tuple[Kind, Any]) -> None:
    kind, value = case
    ctype = _typed(kind)
    back = from_value(ctype, value_primitive(kind, value))
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value
    if isinstance(value, Decimal):
        assert back.as_tuple() == value.as_tuple()


@FAST
@given(coerced_values.filter(lambda case: case[0] not in (Kind.JSONB, Kind.INTERVAL, Kind.ARRAY)))
def test_key_primitives_round_trip_every_coerced_value(case: tuple[Kind, Any]) -> None:
    kind, value = case
    ctype = _typed(kind)
    back = from_key(ctype, key_primitive(kind, value))
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value
        assert type(back) is type(value)


@pytest.mark.parametrize("kind", list(Kind))
def test_null_is_none_in_every_primitive(kind: Kind) -> None:
    assert value_primitive(kind, None) is None
    assert from_value_primitive(kind, None) is None
    assert from_key_primitive(kind, None) is None
    if kind is not Kind.JSONB:
        assert key_primitive(kind, None) is None


def test_jsonb_cannot_be_a_key_primitive() -> None:
    error = sql_error(key_primitive, Kind.JSONB, {"a": 1})
    assert error.code == "0A000"


def test_dates_and_timestamps_are_counted_from_the_unix_epoch() -> None:
    assert key_primitive(Kind.DATE, datetime.date(1970, 1, 2)) == 1
    assert key_primitive(Kind.DATE, datetime.date(1969, 12, 31)) == -1
    assert key_primitive(Kind.TIMESTAMP, datetime.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000
    assert key_primitive(Kind.TIMESTAMP, datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)) == -1
    aware = datetime.datetime(1970, 1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert key_primitive(Kind.TIMESTAMPTZ, aware) == 0
    assert key_primitive(Kind.UUID, uuid.UUID(int=1)) == bytes(15) + b"\x01"


# Value kinds and display.


@pytest.mark.parametrize(
    ("value", "name", "kind"),
    [
        (None, "unknown", None),
        (True, "bool", Kind.BOOL),
        (1, "int", Kind.INT),
        (1.0, "float", Kind.FLOAT),
        (Decimal(1), "decimal", Kind.DECIMAL),
        ("a", "string", Kind.STRING),
        (b"a", "bytes", Kind.BYTES),
        (datetime.date(2024, 1, 1), "date", Kind.DATE),
        (datetime.datetime(2024, 1, 1), "timestamp", Kind.TIMESTAMP),
        (datetime.datetime(2024, 1, 1, tzinfo=UTC), "timestamptz", Kind.TIMESTAMPTZ),
        (uuid.UUID(int=0), "uuid", Kind.UUID),
        ({"a": 1}, "jsonb", None),
        ([1], "jsonb", None),
    ],
)
def test_type_and_kind_of_a_python_value(value: object, name: str, kind: Kind | None) -> None:
    assert type_of_value(value) == name
    assert kind_of_value(value) is kind


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "NULL"),
        (True, "true"),
        (False, "false"),
        (-7, "-7"),
        (0.1, "0.1"),
        (-0.0, "-0"),
        # floats as CockroachDB prints them (Go's shortest %g)
        (100.0, "100"),
        (0.1 + 0.2, "0.30000000000000004"),
        (123456.5, "123456.5"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (1.5e-5, "1.5e-05"),
        (-2.5e-7, "-2.5e-07"),
        (1e100, "1e+100"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (Decimal("1.50"), "1.50"),
        ("a'b", "a'b"),
        (b"\x00\xff", "\\x00ff"),
        (b"", "\\x"),
        (datetime.date(2024, 1, 2), "2024-01-02"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02 03:04:05.000006"),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, 500_000), "2024-01-02 03:04:05.5"),
        (datetime.datetime(2024, 1, 2, tzinfo=UTC), "2024-01-02 00:00:00+00"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        ({"b": 1, "a": [True, None]}, '{"a": [true, null], "b": 1}'),
        ([], "[]"),
    ],
)
def test_format_value_prints_values_as_the_shell_does(value: Any, text: str) -> None:
    assert format_value(value) == text


@pytest.mark.parametrize("values", [["1", "-2", "300"], [1, -2, 300]], ids=["text", "parsed ints"])
def test_a_column_converts_whole_as_each_value_would(values: list[Any]) -> None:
    assert coerce_column(values, ColumnType(Kind.INT), "n") == [
        coerce(v, ColumnType(Kind.INT), "n") for v in values
    ]


@pytest.mark.parametrize("values", [["1", "40000"], [1, 40000]], ids=["text", "parsed ints"])
def test_a_column_with_a_value_out_of_its_int_range_is_refused(values: list[Any]) -> None:
    with pytest.raises(SQLError) as caught:
        coerce_column(values, ColumnType(Kind.INT, width=16), "n")
    assert caught.value.code == "22003"


def test_a_jsonb_string_stays_one_when_coerced_to_jsonb_again() -> None:
    # a JSONB value that is a JSON string is not JSON text to parse again: a cast of a
    # cast, an INSERT ... SELECT of a JSONB column, a JSONB parameter "s"
    once = coerce('"s"', t(Kind.JSONB), "c")
    assert coerce(once, t(Kind.JSONB), "c") == "s"
    assert coerce(jsonb.loads('"{}"'), t(Kind.JSONB), "c") == "{}"
    # ->> gives text, which a cast reads as JSON
    assert coerce(jsonb.as_text(jsonb.loads('"[1]"')), t(Kind.JSONB), "c") == [1]
