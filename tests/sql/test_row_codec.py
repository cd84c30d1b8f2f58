"""Tests for feedkv.sql.row_codec: rows of every column type survive the trip to KV pairs
and back, and row keys sort in the SQL order of the primary key."""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import math
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.sql.arrays import Array
from feedkv.sql.bits import BitString
from feedkv.sql.descriptor import Column, Family, TableDescriptor
from feedkv.sql.enums import EnumValue, first_codes
from feedkv.sql.inet import Inet
from feedkv.sql.interval import Interval
from feedkv.sql.row_codec import (
    CATALOG_PREFIX,
    RowAssembler,
    decode_columns,
    decode_family_value,
    decode_row_key,
    decode_row_values,
    decode_rows,
    encode_family_value,
    family_key,
    row_kvs,
    row_prefix,
    row_span,
    rows_pairs,
    table_id_of_key,
    table_prefix,
    table_span,
)
from feedkv.sql.types import ColumnType, Kind
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import Timestamp

UTC = datetime.UTC
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
TS = Timestamp(1)
TABLE_ID = 52

FAST = settings(max_examples=100, deadline=None)
ORDER = settings(max_examples=150, deadline=None)

Row = dict[int, Any]


# Values of each column type, already coerced (what the executor hands to the codec).

ints = st.integers(INT64_MIN, INT64_MAX)
floats = st.floats(allow_nan=True, allow_infinity=True)
decimals = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False),
    # Wide digit strings and both signs of exponent: far beyond the 28-digit context.
    st.builds(
        lambda sign, digits, exponent: Decimal((sign, tuple(digits), exponent)),
        st.integers(0, 1),
        st.lists(st.integers(0, 9), min_size=1, max_size=60),
        st.integers(-80, 80),
    ),
)
texts = st.text()  # includes NUL and astral code points, never lone surrogates
blobs = st.binary()
bools = st.booleans()
dates = st.dates()
timestamps = st.datetimes()
timestamptzs = st.datetimes(timezones=st.just(UTC))
uuids = st.uuids()
json_docs = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.decimals(
        allow_nan=False, allow_infinity=False, places=2
    )  # a JSON number's digits (jsonb.loads)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
).filter(lambda doc: doc is not None)  # a top-level JSON null is a SQL NULL

times = st.times()
intervals = st.builds(
    Interval,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(INT64_MIN, INT64_MAX),
)
inets = st.one_of(
    st.builds(
        lambda a, p: Inet(ipaddress.ip_interface((a, p))),
        st.ip_addresses(v=4),
        st.integers(0, 32),
    ),
    st.builds(
        lambda a, p: Inet(ipaddress.ip_interface((a, p))),
        st.ip_addresses(v=6),
        st.integers(0, 128),
    ),
)

MOOD = ColumnType(Kind.ENUM, type_name="mood", labels=("sad", "ok", "happy"), codes=first_codes(3))
moods = st.sampled_from(
    [
        EnumValue(label, MOOD.labels or (), "mood", MOOD.codes or ())
        for label in ("sad", "ok", "happy")
    ]
)


INTS = ColumnType(Kind.ARRAY, element=ColumnType(Kind.INT))
int_arrays = st.lists(st.none() | ints, max_size=5).map(
    lambda items: Array(tuple(items), ColumnType(Kind.INT))
)


def _typed(kind: Kind) -> ColumnType:
    return MOOD if kind is Kind.ENUM else INTS if kind is Kind.ARRAY else ColumnType(kind)


VALUES: dict[Kind, st.SearchStrategy[Any]] = {
    Kind.INT: ints,
    Kind.FLOAT: floats,
    Kind.DECIMAL: decimals,
    Kind.STRING: texts,
    Kind.BYTES: blobs,
    Kind.BOOL: bools,
    Kind.DATE: dates,
    Kind.TIMESTAMP: timestamps,
    Kind.TIMESTAMPTZ: timestamptzs,
    Kind.UUID: uuids,
    Kind.JSONB: json_docs,
    Kind.TIME: times,
    Kind.INTERVAL: intervals,
    Kind.INET: inets,
    Kind.ENUM: moods,
    Kind.ARRAY: int_arrays,
    Kind.BIT: st.sampled_from([BitString("0"), BitString("1")]),  # BIT is BIT(1)
    Kind.VARBIT: st.text(alphabet="01", max_size=20).map(BitString),
}
KEY_KINDS = [kind for kind in Kind if kind not in (Kind.JSONB, Kind.INTERVAL, Kind.ARRAY)]


def sql_sort_key(kind: Kind, value: Any) -> Any:
    """A Python sort key that orders values of ``kind`` as SQL does: NaN is the smallest
    float and -0.0 equals 0.0; decimals compare by value whatever their scale."""
    if kind is Kind.FLOAT:
        return (0, 0.0) if math.isnan(value) else (1, value)
    return value


def assert_same_value(kind: Kind, expected: Any, actual: Any, *, key: bool) -> None:
    """``actual`` is what decoding must give back for ``expected``: exactly it, except
    that a float -0.0 key column comes back as 0.0 and a DECIMAL key column comes back
    normalized (equal in value, its scale not kept)."""
    if kind is Kind.FLOAT:
        assert isinstance(actual, float)
        if math.isnan(expected):
            assert math.isnan(actual)
            return
        canonical = 0.0 if key and expected == 0 else expected
        assert actual == canonical
        assert math.copysign(1.0, actual) == math.copysign(1.0, canonical)
        return
    if kind is Kind.DECIMAL:
        assert isinstance(actual, Decimal)
        assert actual == expected
        if not key:
            assert actual.as_tuple() == expected.as_tuple()
        return
    if kind is Kind.TIMESTAMPTZ:
        assert actual == expected
        assert actual.utcoffset() == datetime.timedelta(0)
        return
    if kind is Kind.TIMESTAMP:
        assert actual == expected
        assert actual.tzinfo is None
        return
    if kind is Kind.JSONB:
        assert actual == expected
        return
    if kind is Kind.INTERVAL:  # NB: == compares spans; storage keeps the parts
        assert (actual.months, actual.days, actual.micros) == (
            expected.months,
            expected.days,
            expected.micros,
        )
        return
    assert type(actual) is type(expected)
    assert actual == expected


# Descriptors.


def table(
    kinds: Sequence[Kind],
    primary_key: Sequence[int] = (1,),
    families: Sequence[Family] | None = None,
    table_id: int = TABLE_ID,
) -> TableDescriptor:
    """Columns ``c1..cN`` of ``kinds``; key columns NOT NULL; one family unless given."""
    columns = tuple(
        Column(
            i,
            f"c{i}",
            MOOD if kind is Kind.ENUM else ColumnType(kind),
            nullable=i not in primary_key,
        )
        for i, kind in enumerate(kinds, start=1)
    )
    if families is None:
        families = (Family(0, "primary", tuple(c.id for c in columns)),)
    return TableDescriptor(
        id=table_id,
        name="t",
        database_id=50,
        columns=columns,
        primary_key=tuple(primary_key),
        families=tuple(families),
        next_column_id=len(columns) + 1,
        next_family_id=max(f.id for f in families) + 1,
    )


def key_table(kinds: Sequence[Kind]) -> TableDescriptor:
    """A table whose primary key is all of its columns, in order."""
    return table(kinds, primary_key=tuple(range(1, len(kinds) + 1)))


@st.composite
def tables(draw: st.DrawFn) -> TableDescriptor:
    """A table with columns of random types in random places, a primary key of one to
    three of them in any order, and its other columns spread over one to three families
    (family ids may have gaps, as after a dropped family)."""
    kinds = draw(st.lists(st.sampled_from(list(Kind)), min_size=1, max_size=8))
    kinds.insert(draw(st.integers(0, len(kinds))), draw(st.sampled_from(KEY_KINDS)))
    keyable = [i for i, kind in enumerate(kinds, start=1) if kind in KEY_KINDS]
    primary_key = draw(st.lists(st.sampled_from(keyable), min_size=1, max_size=3, unique=True))
    family_ids = [0, *draw(st.lists(st.integers(1, 9), max_size=2, unique=True))]
    members: dict[int, list[int]] = {family_id: [] for family_id in family_ids}
    for column_id in range(1, len(kinds) + 1):
        # As CREATE TABLE does, the key columns are listed in the first family.
        family_id = 0 if column_id in primary_key else draw(st.sampled_from(family_ids))
        members[family_id].append(column_id)
    families = [
        Family(family_id, "primary" if family_id == 0 else f"f{family_id}", tuple(ids))
        for family_id, ids in members.items()
    ]
    return table(kinds, primary_key, families)


@st.composite
def rows_of(draw: st.DrawFn, desc: TableDescriptor) -> Row:
    row: Row = {}
    for column in desc.columns:
        values = VALUES[column.type.kind]
        row[column.id] = draw(values if column.id in desc.primary_key else st.none() | values)
    return row


@st.composite
def tables_with_rows(draw: st.DrawFn, max_rows: int) -> tuple[TableDescriptor, list[Row]]:
    desc = draw(tables())
    return desc, draw(st.lists(rows_of(desc), min_size=1, max_size=max_rows))


def key_values(desc: TableDescriptor, row: Row) -> list[Any]:
    return [row[column_id] for column_id in desc.primary_key]


def stored_columns(desc: TableDescriptor, family: Family, row: Row) -> Row:
    """The columns a family's value holds: its non-key, non-NULL ones, and in family 0
    the DECIMAL key columns whose key would not give back their scale (as CockroachDB's
    composite encoding)."""
    stored = {
        i: row[i] for i in family.column_ids if i not in desc.primary_key and row[i] is not None
    }
    if family.id == 0:
        for column in desc.key_columns:
            value = row[column.id]
            if column.type.kind is not Kind.DECIMAL or not value.is_finite():
                continue
            # a key reads back with no exponent, no trailing zero and no negative zero
            exact = decimal.Context(prec=decimal.MAX_PREC)  # normalize() rounds to 28 digits
            plain = Decimal(format(exact.normalize(value), "f")) if value else Decimal(0)
            if plain.as_tuple() != value.as_tuple():
                stored[column.id] = value
    return stored


def present_pairs(kvs: dict[bytes, bytes | None]) -> list[KeyValue]:
    """The pairs a scan would return after writing ``kvs``, in key order."""
    return [KeyValue(key, value, TS) for key, value in sorted(kvs.items()) if value is not None]


def assert_same_row(desc: TableDescriptor, expected: Row, actual: Row) -> None:
    assert actual.keys() == expected.keys()
    for column in desc.columns:
        want, got = expected[column.id], actual[column.id]
        if want is None:
            assert got is None
        else:
            # NB: a whole row keeps a DECIMAL key's scale (family 0 stores it)
            key = column.id in desc.primary_key and column.type.kind is not Kind.DECIMAL
            assert_same_value(column.type.kind, want, got, key=key)


# Round trips.


@FAST
@given(tables_with_rows(max_rows=1))
def test_every_family_pair_decodes_to_the_key_and_the_columns_it_stores(
    case: tuple[TableDescriptor, list[Row]],
) -> None:
    desc, [row] = case
    prefix = row_prefix(desc, key_values(desc, row))
    kvs = row_kvs(desc, row)
    assert set(kvs) == {family_key(prefix, family.id) for family in desc.families}
    for family in desc.families:
        key = family_key(prefix, family.id)
        value = kvs[key]
        stored = stored_columns(desc, family, row)
        if family.id != 0 and not stored:
            assert value is None  # an all-NULL family other than 0 has no pair
            continue
        assert value is not None
        assert value == encode_family_value(desc, family, row)
        decoded_key, family_id, decoded_prefix = decode_row_key(desc, key)
        assert family_id == family.id
        assert decoded_prefix == prefix
        for column, expected, actual in zip(
            desc.key_columns, key_values(desc, row), decoded_key, strict=True
        ):
            assert_same_value(column.type.kind, expected, actual, key=True)
        decoded = decode_family_value(desc, value)
        assert decoded.keys() == stored.keys()
        for column_id, expected in stored.items():
            kind = desc.column_by_id(column_id).type.kind  # type: ignore[union-attr]
            assert_same_value(kind, expected, decoded[column_id], key=False)


@FAST
@given(tables_with_rows(max_rows=1))
def test_row_assembler_rebuilds_the_row_with_nulls_filled_in(
    case: tuple[TableDescriptor, list[Row]],
) -> None:
    desc, [row] = case
    pairs = present_pairs(row_kvs(desc, row))
    [(assembled, keys)] = list(RowAssembler(desc).rows(pairs))
    assert_same_row(desc, row, assembled)
    assert keys == {kv.key: kv.value for kv in pairs}


@FAST
@given(tables_with_rows(max_rows=6))
def test_rows_encoded_column_by_column_are_the_pairs_row_kvs_makes(
    case: tuple[TableDescriptor, list[Row]],
) -> None:
    """rows_pairs (a bulk load's encoding) gives exactly row_kvs's pairs, or declines
    (None) for a layout or a NULL it does not encode."""
    desc, rows = case
    columns = {c.id: [row[c.id] for row in rows] for c in desc.columns}
    encoded = rows_pairs(desc, columns)
    if encoded is None:
        return
    expected = [pair for row in rows for pair in row_kvs(desc, row).items()]
    assert list(zip(*encoded, strict=True)) == expected


def test_rows_pairs_encodes_common_tables_and_declines_the_rest() -> None:
    plain = table([Kind.INT, Kind.STRING, Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.BYTES])
    rows = [{1: k, 2: f"v{k}", 3: -k, 4: k / 3, 5: k % 2 == 0, 6: b"\x00"} for k in range(5)]
    columns = {i: [row[i] for row in rows] for i in range(1, 7)}
    encoded = rows_pairs(plain, columns)
    assert encoded is not None
    assert list(zip(*encoded, strict=True)) == [
        pair for row in rows for pair in row_kvs(plain, row).items()
    ]
    with_null = {**columns, 2: [None, *columns[2][1:]]}
    assert rows_pairs(plain, with_null) is None
    two_families = table(
        [Kind.INT, Kind.STRING], families=(Family(0, "primary", (1,)), Family(1, "f", (2,)))
    )
    assert rows_pairs(two_families, {1: [1], 2: ["a"]}) is None


@FAST
@given(tables_with_rows(max_rows=6))
def test_row_assembler_splits_a_scan_of_several_rows_in_primary_key_order(
    case: tuple[TableDescriptor, list[Row]],
) -> None:
    desc, rows = case
    by_prefix = {row_prefix(desc, key_values(desc, row)): row for row in rows}
    kvs: dict[bytes, bytes | None] = {}
    for row in by_prefix.values():
        kvs.update(row_kvs(desc, row))
    assembled = list(RowAssembler(desc).rows(present_pairs(kvs)))
    expected = [by_prefix[prefix] for prefix in sorted(by_prefix)]
    assert len(assembled) == len(expected)
    for want, (got, keys) in zip(expected, assembled, strict=True):
        assert_same_row(desc, want, got)
        prefix = row_prefix(desc, key_values(desc, want))
        assert keys and all(key.startswith(prefix) for key in keys)
    kinds = [column.type.kind for column in desc.key_columns]
    sql_keys = [
        tuple(sql_sort_key(kind, v) for kind, v in zip(kinds, key_values(desc, row), strict=True))
        for row in expected
    ]
    assert sql_keys == sorted(sql_keys)


@FAST
@given(tables_with_rows(max_rows=6))
def test_row_values_are_the_decoded_rows_in_column_order(
    case: tuple[TableDescriptor, list[Row]],
) -> None:
    desc, rows = case
    kvs: dict[bytes, bytes | None] = {}
    for row in rows:
        kvs.update(row_kvs(desc, row))
    pairs = present_pairs(kvs)
    decoded = list(decode_rows(desc, pairs))
    as_values = list(decode_row_values(desc, pairs))
    assert len(as_values) == len(decoded)
    for (row, _families, ts), (key, values, values_ts) in zip(decoded, as_values, strict=True):
        assert_same_row(desc, row, dict(zip([c.id for c in desc.columns], values, strict=True)))
        for column, want, got in zip(desc.key_columns, key_values(desc, row), key, strict=True):
            assert_same_value(column.type.kind, want, got, key=True)
        assert values_ts == ts


@FAST
@given(tables_with_rows(max_rows=6))
def test_rows_decoded_by_column_are_the_row_values_by_column(
    case: tuple[TableDescriptor, list[Row]],
) -> None:
    """decode_columns (a columnar copy's decoding) gives decode_row_values's values,
    column by column, for a table of one family; it refuses one of more."""
    desc, rows = case
    kvs: dict[bytes, bytes | None] = {}
    for row in rows:
        kvs.update(row_kvs(desc, row))
    pairs = present_pairs(kvs)
    ids = [c.id for c in reversed(desc.columns)]
    if len(desc.families) != 1:
        with pytest.raises(InvalidArgumentError, match="more than one column family"):
            decode_columns(desc, pairs, ids)
        return
    keys, columns = decode_columns(desc, pairs, ids)
    assert keys == [kv.key for kv in pairs]
    expected = [values for _key, values, _ts in decode_row_values(desc, pairs)]
    position = {c.id: n for n, c in enumerate(desc.columns)}
    for column_id, column in zip(ids, columns, strict=True):
        kind = desc.column_by_id(column_id).type.kind  # type: ignore[union-attr]
        assert len(column) == len(expected)
        for values, got in zip(expected, column, strict=True):
            want = values[position[column_id]]
            if want is None:
                assert got is None
            else:
                assert_same_value(kind, want, got, key=False)


def test_rows_of_another_layout_decode_by_column_among_usual_ones() -> None:
    """NULLs, a row written before a column was dropped or added, and a row of no
    stored column sit among rows of the usual layout; each decodes to its own values."""
    old = table([Kind.INT, Kind.STRING, Kind.INT])
    new = old.bumped(
        columns=(old.columns[0], old.columns[2], Column(4, "added", ColumnType(Kind.BOOL))),
        families=(Family(0, "primary", (1, 3, 4)),),
    )
    pairs = [
        *present_pairs(row_kvs(old, {1: 1, 2: "gone", 3: 10})),
        *present_pairs(row_kvs(new, {1: 2, 3: 20, 4: True})),
        *present_pairs(row_kvs(new, {1: 3, 3: None, 4: False})),
        *present_pairs(row_kvs(new, {1: 4, 3: None, 4: None})),
        *present_pairs(row_kvs(new, {1: 5, 3: 50, 4: True})),
    ]
    keys, columns = decode_columns(new, pairs, [4, 1, 3])
    assert keys == [kv.key for kv in pairs]
    assert columns == [
        [None, True, False, None, True],
        [1, 2, 3, 4, 5],
        [10, 20, None, None, 50],
    ]
    with pytest.raises(SQLError, match="cannot decode a row value"):
        decode_columns(new, [KeyValue(pairs[0].key, b"\xc1", TS)], [3])


def test_family_zero_has_a_pair_even_when_every_column_is_null() -> None:
    desc = table(
        [Kind.INT, Kind.STRING, Kind.JSONB],
        families=(Family(0, "primary", (1, 2)), Family(1, "doc", (3,))),
    )
    kvs = row_kvs(desc, {1: 7, 2: None, 3: None})
    prefix = row_prefix(desc, [7])
    assert kvs == {family_key(prefix, 0): b"", family_key(prefix, 1): None}
    [(assembled, _)] = list(RowAssembler(desc).rows(present_pairs(kvs)))
    assert assembled == {1: 7, 2: None, 3: None}


def test_nul_and_ff_bytes_and_unicode_survive_in_key_and_value_columns() -> None:
    desc = table(
        [Kind.STRING, Kind.BYTES, Kind.STRING, Kind.BYTES],
        primary_key=(1, 2),
    )
    row = {1: "a\x00b\U0001f600é", 2: b"\x00\xff\x00\x01", 3: "\x00\x00\x00", 4: b"\xff\x00"}
    pairs = present_pairs(row_kvs(desc, row))
    [(assembled, _)] = list(RowAssembler(desc).rows(pairs))
    assert assembled == row


@pytest.mark.parametrize(
    ("value", "key_sign"),
    [(-0.0, 1.0), (0.0, 1.0), (math.inf, 1.0), (-math.inf, -1.0)],
)
def test_a_key_stores_signed_zero_as_zero_and_a_value_keeps_its_sign(
    value: float, key_sign: float
) -> None:
    # NB: the key encoding is canonical (-0.0 == 0.0 must be one key); value columns are
    # msgpack floats and keep -0.0, as PostgreSQL's float8 does.
    desc = table([Kind.FLOAT, Kind.FLOAT])
    [(assembled, _)] = list(
        RowAssembler(desc).rows(present_pairs(row_kvs(desc, {1: value, 2: value})))
    )
    assert assembled[1] == value
    assert math.copysign(1.0, assembled[1]) == key_sign
    assert assembled[2] == value
    assert math.copysign(1.0, assembled[2]) == math.copysign(1.0, value)


def test_nan_round_trips_in_key_and_value_columns() -> None:
    desc = table([Kind.FLOAT, Kind.FLOAT])
    [(assembled, _)] = list(
        RowAssembler(desc).rows(present_pairs(row_kvs(desc, {1: math.nan, 2: math.nan})))
    )
    assert math.isnan(assembled[1])
    assert math.isnan(assembled[2])


def test_decimal_key_and_value_columns_keep_their_scale() -> None:
    """As CockroachDB: a DECIMAL key's key is its value (1.50 and 1.5 are one key), and
    the row keeps the scale it was written with."""
    desc = table([Kind.DECIMAL, Kind.DECIMAL])
    row = {1: Decimal("1.50"), 2: Decimal("1.50")}
    kvs = row_kvs(desc, row)
    assert list(kvs) == list(row_kvs(desc, {1: Decimal("1.5"), 2: None}))
    [(assembled, _)] = list(RowAssembler(desc).rows(present_pairs(kvs)))
    assert assembled[1].as_tuple() == Decimal("1.50").as_tuple()
    assert assembled[2].as_tuple() == Decimal("1.50").as_tuple()
    [(key, values, _ts)] = list(decode_row_values(desc, present_pairs(kvs)))
    assert key[0].as_tuple() == values[0].as_tuple() == Decimal("1.50").as_tuple()


def test_timestamps_at_the_ends_of_the_calendar_round_trip() -> None:
    desc = table([Kind.TIMESTAMP, Kind.TIMESTAMPTZ, Kind.DATE], primary_key=(1, 2, 3))
    for naive, day in [
        (datetime.datetime.min, datetime.date.min),
        (datetime.datetime.max, datetime.date.max),
        (datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999), datetime.date(1969, 12, 31)),
    ]:
        row = {1: naive, 2: naive.replace(tzinfo=UTC), 3: day}
        values, _, _ = decode_row_key(desc, family_key(row_prefix(desc, row.values()), 0))
        assert values == (naive, naive.replace(tzinfo=UTC), day)
        assert values[1].tzinfo is not None


def test_decoding_skips_columns_the_descriptor_no_longer_has() -> None:
    desc = table([Kind.INT, Kind.STRING, Kind.INT])
    value = encode_family_value(desc, desc.families[0], {1: 1, 2: "gone", 3: 3})
    dropped = desc.bumped(
        columns=desc.columns[:1] + desc.columns[2:],
        families=(Family(0, "primary", (1, 3)),),
    )
    assert decode_family_value(desc, value) == {2: "gone", 3: 3}
    assert decode_family_value(dropped, value) == {3: 3}


def test_family_value_leaves_out_key_columns_nulls_and_unknown_column_ids() -> None:
    desc = table([Kind.INT, Kind.STRING, Kind.BOOL])
    family = Family(0, "primary", (1, 2, 3, 99))
    value = encode_family_value(desc, family, {1: 5, 2: None, 3: False, 99: "stray"})
    assert decode_family_value(desc, value) == {3: False}


# Key order.


def assert_key_order_matches_sql_order(
    kinds: Sequence[Kind], tuples: list[tuple[Any, ...]]
) -> None:
    """Sorting ``tuples`` by SQL order sorts their row prefixes, and two tuples get the
    same prefix exactly when SQL calls them equal."""
    desc = key_table(kinds)

    def sql(values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(sql_sort_key(kind, v) for kind, v in zip(kinds, values, strict=True))

    by_sql = sorted(tuples, key=sql)
    prefixes = [row_prefix(desc, values) for values in by_sql]
    assert prefixes == sorted(prefixes)
    for (a, prefix_a), (b, prefix_b) in pairwise(zip(by_sql, prefixes, strict=True)):
        assert (prefix_a == prefix_b) == (sql(a) == sql(b)), (a, b)


def assert_keys_sort_like_sql(kind: Kind, values: list[Any]) -> None:
    assert_key_order_matches_sql_order([kind], [(v,) for v in values])


def sql_values(kind: Kind) -> st.SearchStrategy[list[Any]]:
    return st.lists(VALUES[kind], min_size=2, max_size=12)


@ORDER
@given(sql_values(Kind.INT))
def test_key_order_matches_sql_order_for_ints(values: list[int]) -> None:
    assert_keys_sort_like_sql(Kind.INT, [*values, INT64_MIN, -1, 0, 255, 256, INT64_MAX])


@ORDER
@given(sql_values(Kind.FLOAT))
def test_key_order_matches_sql_order_for_floats_with_nan_first_and_zeros_equal(
    values: list[float],
) -> None:
    assert_keys_sort_like_sql(Kind.FLOAT, [*values, math.nan, -math.inf, -0.0, 0.0, math.inf])


def with_trailing_zeros(value: Decimal) -> Decimal:
    """``value`` with two more digits of scale: equal, but a different representation."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    return Decimal((sign, (*digits, 0, 0), exponent - 2))


@ORDER
@given(sql_values(Kind.DECIMAL))
def test_key_order_matches_sql_order_for_decimals(values: list[Decimal]) -> None:
    rescaled = [with_trailing_zeros(v) for v in values[:3]]
    extremes = [Decimal("-1E+100"), Decimal("-1.5"), Decimal("-1.50"), Decimal("-0")]
    extremes += [Decimal("0.000"), Decimal("1E-100"), Decimal("0.1"), Decimal("0.15")]
    assert_keys_sort_like_sql(Kind.DECIMAL, [*values, *rescaled, *extremes])


@ORDER
@given(sql_values(Kind.STRING))
def test_key_order_matches_sql_order_for_strings(values: list[str]) -> None:
    assert_keys_sort_like_sql(
        Kind.STRING, [*values, "", "\x00", "a", "a\x00", "a\x01", "\U0010ffff"]
    )


@ORDER
@given(sql_values(Kind.BYTES))
def test_key_order_matches_sql_order_for_bytes(values: list[bytes]) -> None:
    assert_keys_sort_like_sql(
        Kind.BYTES, [*values, b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\xff"]
    )


def test_key_order_matches_sql_order_for_bools() -> None:
    assert_keys_sort_like_sql(Kind.BOOL, [True, False, True, False])
    assert row_prefix(key_table([Kind.BOOL]), [False]) < row_prefix(key_table([Kind.BOOL]), [True])


@ORDER
@given(sql_values(Kind.DATE))
def test_key_order_matches_sql_order_for_dates(values: list[datetime.date]) -> None:
    assert_keys_sort_like_sql(Kind.DATE, [*values, datetime.date.min, datetime.date(1970, 1, 1)])


@ORDER
@given(sql_values(Kind.TIMESTAMP))
def test_key_order_matches_sql_order_for_timestamps(values: list[datetime.datetime]) -> None:
    assert_keys_sort_like_sql(Kind.TIMESTAMP, [*values, datetime.datetime(1970, 1, 1)])


@ORDER
@given(sql_values(Kind.TIMESTAMPTZ))
def test_key_order_matches_sql_order_for_timestamptzs(values: list[datetime.datetime]) -> None:
    assert_keys_sort_like_sql(
        Kind.TIMESTAMPTZ, [*values, datetime.datetime(1970, 1, 1, tzinfo=UTC)]
    )


@ORDER
@given(sql_values(Kind.UUID))
def test_key_order_matches_sql_order_for_uuids(values: list[uuid.UUID]) -> None:
    assert_keys_sort_like_sql(Kind.UUID, [*values, uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1)])


@st.composite
def composite_keys(draw: st.DrawFn) -> tuple[list[Kind], list[tuple[Any, ...]]]:
    kinds = draw(st.lists(st.sampled_from(KEY_KINDS), min_size=2, max_size=3))
    # Few distinct leading values, so that later columns decide the order often.
    firsts = draw(st.lists(VALUES[kinds[0]], min_size=1, max_size=3))
    rows = draw(
        st.lists(
            st.tuples(st.sampled_from(firsts), *(VALUES[kind] for kind in kinds[1:])),
            min_size=2,
            max_size=12,
        )
    )
    return kinds, rows


@ORDER
@given(composite_keys())
def test_key_order_matches_tuple_order_for_composite_keys(
    case: tuple[list[Kind], list[tuple[Any, ...]]],
) -> None:
    kinds, rows = case
    assert_key_order_matches_sql_order(kinds, rows)


def test_key_order_matches_tuple_order_when_a_string_column_is_a_prefix_of_another() -> None:
    # The string terminator must sort below any continuation, else ("a", 9) > ("ab", 0).
    assert_key_order_matches_sql_order(
        [Kind.STRING, Kind.INT], [("ab", 0), ("a", 9), ("a\x00", -1), ("", INT64_MAX)]
    )


def test_equal_decimals_with_different_scales_share_one_row_key() -> None:
    desc = key_table([Kind.DECIMAL, Kind.INT])
    assert row_prefix(desc, [Decimal("1.5"), 1]) == row_prefix(desc, [Decimal("1.50"), 1])
    assert row_prefix(desc, [Decimal("100"), 1]) == row_prefix(desc, [Decimal("1E+2"), 1])
    assert row_prefix(desc, [Decimal("-0.0"), 1]) == row_prefix(desc, [Decimal("0"), 1])


@FAST
@given(composite_keys())
def test_a_leading_subset_of_the_key_spans_every_row_that_starts_with_it(
    case: tuple[list[Kind], list[tuple[Any, ...]]],
) -> None:
    kinds, rows = case
    desc = key_table(kinds)
    for values in rows:
        key = family_key(row_prefix(desc, values), 3)
        span = row_span(desc, values[:1])
        assert key.startswith(row_prefix(desc, values[:1]))
        assert span.start <= key < span.end
        table_keys = table_span(desc.id)
        assert table_keys.start <= key < table_keys.end
        assert table_id_of_key(key) == desc.id


# Malformed keys.


def test_decode_row_key_rejects_a_key_of_another_table() -> None:
    desc = key_table([Kind.INT])
    other = key_table([Kind.INT]).bumped(id=TABLE_ID + 1)
    key = family_key(row_prefix(other, [1]), 0)
    with pytest.raises(SQLError) as info:
        decode_row_key(desc, key)
    assert info.value.code == "XX000"
    assert "'t'" in info.value.message


@pytest.mark.parametrize(
    ("mangle", "why"),
    [
        (lambda key: key + b"\x80", "trailing bytes after the family id"),
        (lambda key: key[:-1], "no family id"),
        (lambda key: key[:-3], "truncated key column"),
        (lambda key: key[:-1] + b"\x13x\x00\x01", "a string family id"),
    ],
)
def test_decode_row_key_rejects_a_malformed_key(mangle: Callable[[bytes], bytes], why: str) -> None:
    desc = key_table([Kind.INT, Kind.STRING])
    key = mangle(family_key(row_prefix(desc, [1, "ab"]), 0))
    with pytest.raises(SQLError) as info:
        decode_row_key(desc, key)
    assert info.value.code == "XX000", why


def test_decode_family_value_rejects_a_truncated_value() -> None:
    desc = table([Kind.INT, Kind.STRING])
    value = encode_family_value(desc, desc.families[0], {1: 1, 2: "hello"})
    with pytest.raises(SQLError) as info:
        decode_family_value(desc, value[:-1])
    assert info.value.code == "XX000"


def test_table_id_of_key_is_none_outside_the_tables() -> None:
    assert table_id_of_key(CATALOG_PREFIX + b"\x81") is None
    assert table_id_of_key(b"") is None
    assert table_id_of_key(table_prefix(7)[:1]) is None
    assert table_id_of_key(table_prefix(7)) == 7
