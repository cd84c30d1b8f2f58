"""Tests for feedkv.util.encoding: order preservation, round trips and strict decoding."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from feedkv.errors import InvalidArgumentError
from feedkv.util.encoding import (
    Direction,
    KeyValue,
    decode_int_keys,
    decode_value,
    decode_values,
    encode_int,
    encode_int_keys,
    encode_value,
    encode_values,
    key_between,
)

ASC = Direction.ASC
DESC = Direction.DESC
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

ints = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text()
blobs = st.binary()
bools = st.booleans()
values_by_type: dict[str, st.SearchStrategy[KeyValue]] = {
    "bool": bools,
    "int": ints,
    "float": floats,
    "str": texts,
    "bytes": blobs,
}
any_value: st.SearchStrategy[KeyValue] = st.one_of(st.none(), *values_by_type.values())
directions = st.sampled_from(Direction)

INT_BOUNDARIES = [
    INT64_MIN,
    INT64_MIN + 1,
    -(1 << 56) - 1,
    -(1 << 56),
    -65537,
    -65536,
    -65535,
    -257,
    -256,
    -255,
    -2,
    -1,
    0,
    1,
    2,
    255,
    256,
    257,
    65535,
    65536,
    (1 << 56) - 1,
    1 << 56,
    INT64_MAX - 1,
    INT64_MAX,
]


def cmp_values(a: KeyValue, b: KeyValue) -> int:
    """SQL order of two values of one type: NULL first, NaN the smallest float."""
    if a is None or b is None:
        return (a is not None) - (b is not None)
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
        return math.isnan(b) - math.isnan(a)
    return (a > b) - (a < b)  # type: ignore[operator]


def cmp_rows(a: Sequence[KeyValue], b: Sequence[KeyValue], dirs: Sequence[Direction]) -> int:
    for x, y, direction in zip(a, b, dirs, strict=True):
        result = cmp_values(x, y)
        if result:
            return result if direction is ASC else -result
    return 0


def cmp_bytes(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


def same_value(a: KeyValue, b: KeyValue) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


# Round trips


@given(value=any_value, direction=directions)
def test_every_value_round_trips_and_decoding_consumes_exactly_its_encoding(
    value: KeyValue, direction: Direction
) -> None:
    key = encode_value(value, direction)
    decoded, end = decode_value(b"junk" + key + b"more", 4, direction)
    assert same_value(decoded, value)
    assert end == 4 + len(key)


@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize("value", INT_BOUNDARIES)
def test_int_boundaries_round_trip(value: int, direction: Direction) -> None:
    assert decode_value(encode_value(value, direction), 0, direction) == (
        value,
        len(encode_value(value)),
    )


@pytest.mark.parametrize("direction", list(Direction))
def test_negative_zero_encodes_and_decodes_as_positive_zero(direction: Direction) -> None:
    key = encode_value(-0.0, direction)
    assert key == encode_value(0.0, direction)
    decoded, _ = decode_value(key, 0, direction)
    assert isinstance(decoded, float)
    assert math.copysign(1.0, decoded) == 1.0


def test_descending_encoding_is_the_inverted_ascending_encoding() -> None:
    for value in [None, True, -257, 1.5, float("nan"), "a\x00", b"\xff"]:
        ascending = encode_value(value)
        assert encode_value(value, DESC) == bytes(b ^ 0xFF for b in ascending)


def test_encoding_layout_is_pinned() -> None:
    # Keys are persisted: a change here silently reorders stored data.
    assert encode_value(None) == b"\x00"
    assert encode_value(False) == b"\x30"
    assert encode_value(True) == b"\x31"
    assert encode_value(0) == b"\x80"
    assert encode_value(1) == b"\x81\x01"
    assert encode_value(255) == b"\x81\xff"
    assert encode_value(256) == b"\x82\x01\x00"
    assert encode_value(-1) == b"\x7f"
    assert encode_value(-256) == b"\x7e\x00"
    assert encode_value(-257) == b"\x7d\xfe\xff"
    assert encode_value(INT64_MAX) == b"\x88\x7f" + b"\xff" * 7
    assert encode_value(INT64_MIN) == b"\x77\x80" + b"\x00" * 7
    assert encode_value(float("nan")) == b"\x20"
    assert encode_value(1.5) == b"\x21\xbf\xf8" + b"\x00" * 6
    assert encode_value(-float("inf")) == b"\x21\x00\x0f" + b"\xff" * 6
    assert encode_value("a\x00b") == b"\x13a\x00\xffb\x00\x01"
    assert encode_value(b"") == b"\x12\x00\x01"


# Order


@pytest.mark.parametrize("type_name", sorted(values_by_type))
@given(data=st.data())
def test_byte_order_of_encodings_matches_value_order(type_name: str, data: st.DataObject) -> None:
    strategy = values_by_type[type_name]
    a = data.draw(strategy, label="a")
    b = data.draw(strategy, label="b")
    expected = cmp_values(a, b)
    assert cmp_bytes(encode_value(a), encode_value(b)) == expected
    assert cmp_bytes(encode_value(a, DESC), encode_value(b, DESC)) == -expected


def test_int_boundaries_sort_in_both_directions() -> None:
    ascending = [encode_value(v) for v in INT_BOUNDARIES]
    descending = [encode_value(v, DESC) for v in INT_BOUNDARIES]
    assert all(x < y for x, y in pairwise(ascending))
    assert all(x > y for x, y in pairwise(descending))


def test_special_floats_sort_nan_first_then_numerically() -> None:
    ordered = [float("nan"), -math.inf, -1e308, -1.0, -5e-324, 0.0, 5e-324, 1.0, 1e308, math.inf]
    keys = [encode_value(v) for v in ordered]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


def test_strings_sort_before_their_extensions_even_with_zero_bytes() -> None:
    ordered = [b"", b"\x00", b"\x00\x00", b"\x00\x01", b"\x00\xff", b"\x01", b"a", b"a\x00", b"ab"]
    keys = [encode_value(v) for v in ordered]
    assert keys == sorted(keys)
    assert [encode_value(v, DESC) for v in ordered] == sorted(
        (encode_value(v, DESC) for v in ordered), reverse=True
    )


@pytest.mark.parametrize("value", [False, 0, -(2**63), 0.0, float("nan"), "", b""])
def test_null_sorts_first_ascending_and_last_descending(value: KeyValue) -> None:
    assert encode_value(None) < encode_value(value)
    assert encode_value(None, DESC) > encode_value(value, DESC)


column_types = st.sampled_from(sorted(values_by_type))


@st.composite
def composite_pairs(
    draw: st.DrawFn,
) -> tuple[list[Direction], list[KeyValue], list[KeyValue]]:
    """A schema (a type and direction per column) and two rows of it, NULLs allowed."""
    schema = draw(st.lists(st.tuples(column_types, directions), min_size=1, max_size=4))
    rows = []
    for _ in range(2):
        row = []
        for type_name, _direction in schema:
            row.append(draw(st.none() | values_by_type[type_name]))
        rows.append(row)
    # Make shared prefixes likely, so later columns decide the order.
    cut = draw(st.integers(min_value=0, max_value=len(schema)))
    rows[1][:cut] = rows[0][:cut]
    return [d for _, d in schema], rows[0], rows[1]


@given(case=composite_pairs())
@example(case=([ASC, ASC], ["a", "b"], ["ab", ""]))
@example(case=([DESC, DESC], [b"a", b"b"], [b"a\x00", b""]))
@example(case=([DESC, ASC], [None, 1], [0, None]))
def test_composite_keys_sort_like_their_tuples(
    case: tuple[list[Direction], list[KeyValue], list[KeyValue]],
) -> None:
    dirs, a, b = case
    key_a = encode_values(a, dirs)
    key_b = encode_values(b, dirs)
    assert cmp_bytes(key_a, key_b) == cmp_rows(a, b, dirs)
    decoded = decode_values(key_a, dirs)
    assert all(same_value(x, y) for x, y in zip(decoded, a, strict=True))


def test_encode_values_defaults_to_ascending_concatenation() -> None:
    values: list[KeyValue] = [None, 1, "x", b"y", 2.5, True]
    assert encode_values(values) == b"".join(encode_value(v) for v in values)
    assert decode_values(encode_values(values), [ASC] * len(values)) == values


def test_decoding_many_descending_columns_reads_each_column_once() -> None:
    values: list[KeyValue] = [f"column-{i}\x00" for i in range(2000)]
    key = encode_values(values, [DESC] * len(values))
    assert decode_values(key, [DESC] * len(values)) == values


# Rejections


@given(value=any_value, direction=directions)
def test_every_proper_prefix_of_an_encoding_is_rejected(
    value: KeyValue, direction: Direction
) -> None:
    key = encode_value(value, direction)
    for end in range(len(key)):
        with pytest.raises(InvalidArgumentError):
            decode_value(key[:end], 0, direction)


@given(buf=st.binary(max_size=24), direction=directions)
@example(buf=b"\x81\x00", direction=ASC)
@example(buf=b"\x21\x7f\xf8" + b"\x00" * 6, direction=ASC)
def test_decoding_arbitrary_bytes_either_fails_cleanly_or_is_canonical(
    buf: bytes, direction: Direction
) -> None:
    try:
        value, end = decode_value(buf, 0, direction)
    except InvalidArgumentError:
        return
    assert encode_value(value, direction) == buf[:end]


@pytest.mark.parametrize(
    ("buf", "direction", "message"),
    [
        (b"", ASC, "position 0"),
        (b"\x01", ASC, "unknown type marker 0x01"),
        (b"\x50", ASC, "unknown type marker 0x50"),
        (b"\xfe", DESC, "unknown type marker 0xfe"),
        (b"\x82\x01", ASC, "expected an int of 2 bytes"),
        (b"\x21\x00\x00", ASC, "expected a float of 8 bytes"),
        (b"\x13abc", ASC, "expected a str ending in 00 01"),
        (b"\xecabc", DESC, "expected a str ending in FF FE"),
        (b"\x12a\x00\x02\x00\x01", ASC, "0x00 at position 2 must be followed by 0xff"),
        (b"\x12\x00\xffa\x00\x00\x01", ASC, "0x00 at position 4 must be followed by 0xff"),
        (b"\xed\x9e\xff\xfd\xff\xfe", DESC, "0xff at position 2 must be followed by 0x00"),
        (b"\x13\xff\x00\x01", ASC, "not valid UTF-8"),
        (b"\x81\x00", ASC, "non-canonical int"),
        (b"\x7e\xff", ASC, "non-canonical int"),
        (b"\x88" + b"\xff" * 8, ASC, "outside int64"),
        (b"\x21\xff\xf8" + b"\x00" * 6, ASC, "non-canonical float"),
        (b"\x21\x7f" + b"\xff" * 7, ASC, "non-canonical float"),
    ],
)
def test_malformed_input_is_rejected_with_position_and_expectation(
    buf: bytes, direction: Direction, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        decode_value(buf, 0, direction)


def test_decode_value_rejects_a_position_outside_the_buffer() -> None:
    with pytest.raises(InvalidArgumentError, match="position 5"):
        decode_value(b"\x80", 5)
    with pytest.raises(InvalidArgumentError, match="position -1"):
        decode_value(b"\x80", -1)


def test_decode_values_rejects_trailing_bytes() -> None:
    key = encode_values([1, "a"]) + b"\x80"
    with pytest.raises(InvalidArgumentError, match="1 unexpected bytes at position 6"):
        decode_values(key, [ASC, ASC])


def test_decode_values_rejects_a_key_with_too_few_columns() -> None:
    with pytest.raises(InvalidArgumentError, match="expected a key column at position 2"):
        decode_values(encode_value(1), [ASC, ASC])


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, 1 << 100, -(1 << 100)])
def test_ints_outside_int64_are_rejected(value: int) -> None:
    with pytest.raises(InvalidArgumentError, match="int64"):
        encode_value(value)


@pytest.mark.parametrize(
    ("value", "type_name"),
    [(bytearray(b"x"), "bytearray"), (1j, "complex"), ((1,), "tuple"), ([], "list")],
)
def test_unsupported_types_are_rejected_by_name(value: object, type_name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"cannot encode a {type_name}"):
        encode_value(value)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=f"cannot encode a {type_name}"):
        encode_values([1, value])  # type: ignore[list-item]


def test_strings_with_lone_surrogates_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="not valid Unicode"):
        encode_value("\ud800")


def test_encode_values_rejects_mismatched_directions() -> None:
    with pytest.raises(InvalidArgumentError, match="2 key values but 1 directions"):
        encode_values([1, 2], [ASC])


def test_non_direction_arguments_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="must be a Direction"):
        encode_value(1, "desc")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="must be a Direction"):
        decode_value(b"\x80", 0, "desc")  # type: ignore[arg-type]


# Cutting key ranges


PREFIX = b"\xf2\x89"  # bytes both keys share, before their columns


@given(
    st.lists(any_value, min_size=1, max_size=3),
    st.lists(any_value, min_size=1, max_size=3),
    st.floats(min_value=0, max_value=1),
)
def test_a_key_between_two_keys_lies_between_them(
    a: list[KeyValue], b: list[KeyValue], fraction: float
) -> None:
    lo, hi = sorted((PREFIX + encode_values(a), PREFIX + encode_values(b)))
    between = key_between(lo, hi, fraction, columns_at=len(PREFIX))
    assert lo <= between <= hi
    assert key_between(lo, hi, 0.0, columns_at=len(PREFIX)) <= key_between(
        lo, hi, 1.0, columns_at=len(PREFIX)
    )


def test_ints_are_cut_by_value_not_by_their_length_marked_bytes() -> None:
    lo, hi = PREFIX + encode_values([0, 5]), PREFIX + encode_values([199_999, 1])
    cuts = [key_between(lo, hi, i / 4, columns_at=len(PREFIX)) for i in (1, 2, 3)]
    assert [decode_value(cut, len(PREFIX))[0] for cut in cuts] == [49_999, 99_999, 149_999]


def test_floats_are_cut_by_value() -> None:
    lo, hi = PREFIX + encode_value(-1.5), PREFIX + encode_value(2.5)
    assert decode_value(key_between(lo, hi, 0.5, columns_at=len(PREFIX)), len(PREFIX))[0] == 0.5


def test_equal_leading_columns_are_kept_and_the_first_difference_is_cut() -> None:
    lo, hi = PREFIX + encode_values([7, "apple"]), PREFIX + encode_values([7, "zebra"])
    between = key_between(lo, hi, 0.5, columns_at=len(PREFIX))
    assert between.startswith(PREFIX + encode_value(7))
    assert lo < between < hi


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
@example(0)
@example(-1)
@example(255)
@example(256)
@example(-257)
def test_an_int_encodes_as_encode_value_encodes_it(value: int) -> None:
    assert encode_int(value) == encode_value(value)


@pytest.mark.parametrize("value", [1 << 63, -(1 << 63) - 1])
def test_an_int_outside_int64_is_refused_by_encode_int_too(value: int) -> None:
    with pytest.raises(InvalidArgumentError):
        encode_int(value)


@given(
    st.lists(st.integers(min_value=0, max_value=2**63 - 1)),
    st.binary(max_size=4),
    st.binary(max_size=2),
)
@example([0, 1, 255, 256, 65535, 65536, 2**63 - 1], b"\x00\xf0", b"")
def test_int_keys_in_bulk_are_the_keys_made_one_by_one(
    values: list[int], prefix: bytes, suffix: bytes
) -> None:
    keys = encode_int_keys(prefix, values, suffix)
    runs = len({encode_int(v)[0] for v in values})
    if keys is None:
        assert runs > 1  # only values whose byte lengths keep changing are declined
    else:
        assert keys == [prefix + encode_int(v) + suffix for v in values]


@given(
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    st.binary(max_size=4),
    st.binary(max_size=2),
)
@example([0, 1, 255, 256, 65535, 65536, 2**63 - 1], b"\x00\xf0", b"")
@example([-1, 0, 1], b"p", b"s")
def test_int_keys_decode_in_bulk_or_not_at_all(
    values: list[int], prefix: bytes, suffix: bytes
) -> None:
    """decode_int_keys gives back the ints of keys made one by one, or declines (None):
    a negative int, or lengths encode_int_keys declines; never a wrong int."""
    keys = [prefix + encode_int(v) + suffix for v in values]
    decoded = decode_int_keys(prefix, keys, suffix)
    if decoded is None:
        assert min(values) < 0 or encode_int_keys(prefix, values, suffix) is None
    else:
        assert decoded == values


def test_int_keys_decode_in_bulk_only_under_their_prefix_and_suffix() -> None:
    keys = [b"p" + encode_int(v) + b"s" for v in range(300)]
    assert decode_int_keys(b"p", keys, b"s") == list(range(300))
    assert decode_int_keys(b"q", keys, b"s") is None
    assert decode_int_keys(b"p", keys, b"t") is None
    assert decode_int_keys(b"p", [*keys, b"p" + encode_int(300) + b"ss"], b"s") is None
    assert decode_int_keys(b"p", [b"p\x82\x00\x05s"], b"s") is None  # not canonical
    assert decode_int_keys(b"p", [], b"s") == []


def test_int_keys_in_bulk_decline_what_encode_int_alone_names() -> None:
    assert encode_int_keys(b"p", [1, -1], b"") is None
    assert encode_int_keys(b"p", [1, 2**63], b"") is None
    shuffled = [(i * 7919) % 100_000 for i in range(100_000)]
    assert encode_int_keys(b"p", shuffled, b"s") is None
    ascending = list(range(100_000))
    assert encode_int_keys(b"p", ascending, b"s") == [
        b"p" + encode_int(v) + b"s" for v in ascending
    ]
