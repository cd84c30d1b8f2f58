"""Tests for feedkv.util.keys: key validation, key successors and span algebra.

The span properties compare every operation against a brute-force model: a span is the
set of keys it holds out of a small finite universe (every key of length <= 3 over the
bytes 0x00, 0x01 and 0xff). Span endpoints are drawn from the same universe, and a
span always holds its own start, so "equal as sets of universe keys" is exact.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import pairwise, product
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from feedkv.errors import InvalidArgumentError, InvalidKeyError, InvalidSpanError
from feedkv.util.keys import (
    KEY_MAX,
    KEY_MIN,
    MAX_KEY_BYTES,
    Span,
    check_key,
    key_next,
    merge_spans,
    prefix_end,
)

ALPHABET = b"\x00\x01\xff"
UNIVERSE: list[bytes] = sorted(
    bytes(combo) for n in range(4) for combo in product(ALPHABET, repeat=n)
)

small_keys = st.sampled_from(UNIVERSE)


@st.composite
def small_spans(draw: st.DrawFn) -> Span:
    start, end = sorted(draw(st.lists(small_keys, min_size=2, max_size=2, unique=True)))
    return Span(start, end)


span_lists = st.lists(small_spans(), max_size=8)


def model(span: Span) -> frozenset[bytes]:
    """The universe keys in ``span``, found by position in the sorted universe."""
    return frozenset(UNIVERSE[bisect_left(UNIVERSE, span.start) : bisect_left(UNIVERSE, span.end)])


def model_union(spans: list[Span]) -> frozenset[bytes]:
    return frozenset().union(*(model(s) for s in spans))


# --- check_key ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [b"a", b"\x00", b"users/42", b"\xff", b"\xff\xfe", b"\xff\xfe\xff\xff", b"k" * MAX_KEY_BYTES],
    ids=["letter", "nul", "path", "ff", "fffe", "fffeffff", "longest"],
)
def test_check_key_returns_valid_keys_unchanged(key: bytes) -> None:
    assert check_key(key) is key


def test_check_key_rejects_the_empty_key() -> None:
    with pytest.raises(InvalidKeyError, match="empty key"):
        check_key(b"")


def test_check_key_rejects_a_key_one_byte_over_the_limit() -> None:
    with pytest.raises(InvalidKeyError, match=f"{MAX_KEY_BYTES + 1} bytes is longer than"):
        check_key(b"k" * (MAX_KEY_BYTES + 1))


@pytest.mark.parametrize(
    "key",
    [KEY_MAX, KEY_MAX + b"\x00", b"\xff\xff\xff", b"\xff\xff" + b"a" * 100],
    ids=["KEY_MAX", "after-KEY_MAX", "ffffff", "long-after-KEY_MAX"],
)
def test_check_key_rejects_keys_at_or_above_key_max(key: bytes) -> None:
    with pytest.raises(InvalidKeyError, match="not below KEY_MAX"):
        check_key(key)


@pytest.mark.parametrize(
    "key",
    [bytearray(b"a"), memoryview(b"a"), "a", 1, None],
    ids=["bytearray", "memoryview", "str", "int", "None"],
)
def test_check_key_rejects_non_bytes_naming_the_type(key: Any) -> None:
    with pytest.raises(InvalidKeyError, match=f"not {type(key).__name__}"):
        check_key(key)


def test_invalid_key_error_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        check_key(b"")
    with pytest.raises(ValueError):
        check_key(b"")


def test_keyspace_bounds() -> None:
    assert KEY_MIN == b""
    assert KEY_MAX == b"\xff\xff"
    assert KEY_MIN < b"\x00" < KEY_MAX


# --- key_next and prefix_end ----------------------------------------------------------


def test_key_next_appends_a_zero_byte() -> None:
    assert key_next(b"a") == b"a\x00"
    assert key_next(b"\xff") == b"\xff\x00"
    assert key_next(b"") == b"\x00"


@given(small_keys)
def test_key_next_is_the_immediate_successor(key: bytes) -> None:
    nxt = key_next(key)
    assert nxt > key
    assert not any(key < other < nxt for other in UNIVERSE)


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"a", b"b"),
        (b"users/", b"users0"),
        (b"\x00", b"\x01"),
        (b"a\xfe", b"a\xff"),
        (b"a\xff", b"b"),
        (b"a\xff\xff\xff", b"b"),
        (b"\x01\xff", b"\x02"),
        (b"ab\xff", b"ac"),
    ],
)
def test_prefix_end_increments_the_last_byte_below_0xff(prefix: bytes, end: bytes) -> None:
    assert prefix_end(prefix) == end


@pytest.mark.parametrize("prefix", [b"", b"\xff", b"\xff\xff", b"\xff\xff\xff"])
def test_prefix_end_of_empty_or_all_0xff_prefix_is_key_max(prefix: bytes) -> None:
    assert prefix_end(prefix) == KEY_MAX


@given(small_keys)
@example(b"")
@example(b"\xff")
@example(b"\x01\xff\xff")
def test_prefix_span_holds_exactly_the_keys_with_that_prefix(prefix: bytes) -> None:
    end = prefix_end(prefix)
    for key in UNIVERSE:
        if key < KEY_MAX:
            assert (prefix <= key < end) == key.startswith(prefix), key


def test_span_for_prefix_covers_the_prefix_keys() -> None:
    span = Span.for_prefix(b"users/")
    assert span == Span(b"users/", b"users0")
    assert span.contains_key(b"users/")
    assert span.contains_key(b"users/\xff\xff")
    assert not span.contains_key(b"users0")
    assert not span.contains_key(b"users")


def test_span_for_all_0xff_prefix_reaches_key_max() -> None:
    assert Span.for_prefix(b"\xff") == Span(b"\xff", KEY_MAX)
    assert Span.for_prefix(b"") == Span(KEY_MIN, KEY_MAX)


def test_span_for_key_holds_only_that_key() -> None:
    span = Span.for_key(b"k")
    assert span == Span(b"k", b"k\x00")
    assert span.contains_key(b"k")
    assert not span.contains_key(b"k\x00")
    assert not span.contains_key(b"j\xff")


@given(small_keys)
def test_span_for_key_models_as_a_single_key(key: bytes) -> None:
    assert model(Span.for_key(key)) == {key}


# --- Span validation ------------------------------------------------------------------


def test_span_starting_at_key_min_is_valid() -> None:
    assert Span(KEY_MIN, b"a").contains_key(KEY_MIN)


def test_empty_span_is_rejected() -> None:
    with pytest.raises(InvalidSpanError, match="must sort after the start"):
        Span(b"a", b"a")


def test_inverted_span_is_rejected_naming_both_bounds() -> None:
    with pytest.raises(InvalidSpanError) as info:
        Span(b"b", b"a")
    assert "b'b'" in str(info.value)
    assert "b'a'" in str(info.value)


@pytest.mark.parametrize(
    ("start", "end"),
    [("a", "b"), (b"a", "b"), (bytearray(b"a"), b"b"), (None, b"b"), (b"a", None)],
)
def test_span_with_non_bytes_bounds_is_rejected(start: Any, end: Any) -> None:
    with pytest.raises(InvalidSpanError, match="bytes"):
        Span(start, end)


def test_invalid_span_error_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        Span(b"b", b"a")


def test_spans_are_frozen_and_hashable() -> None:
    span = Span(b"a", b"b")
    with pytest.raises(AttributeError):
        span.start = b"0"  # type: ignore[misc]
    assert {span, Span(b"a", b"b")} == {span}


def test_spans_sort_by_start_then_end() -> None:
    spans = [Span(b"b", b"c"), Span(b"a", b"c"), Span(b"a", b"b")]
    assert sorted(spans) == [Span(b"a", b"b"), Span(b"a", b"c"), Span(b"b", b"c")]


def test_span_str_shows_a_half_open_interval() -> None:
    assert str(Span(b"a", b"b")) == "[b'a', b'b')"


# --- span algebra: examples -----------------------------------------------------------


def test_contains_key_includes_start_and_excludes_end() -> None:
    span = Span(b"b", b"d")
    assert span.contains_key(b"b")
    assert span.contains_key(b"c\xff")
    assert not span.contains_key(b"d")
    assert not span.contains_key(b"a\xff")


def test_contains_is_inclusive_of_equal_bounds() -> None:
    outer = Span(b"b", b"f")
    assert outer.contains(outer)
    assert outer.contains(Span(b"c", b"d"))
    assert not outer.contains(Span(b"a", b"c"))
    assert not outer.contains(Span(b"e", b"g"))


def test_adjacent_spans_do_not_overlap() -> None:
    assert not Span(b"a", b"b").overlaps(Span(b"b", b"c"))
    assert Span(b"a", b"b\x00").overlaps(Span(b"b", b"c"))


def test_intersect_returns_the_shared_part_or_none() -> None:
    assert Span(b"a", b"c").intersect(Span(b"b", b"d")) == Span(b"b", b"c")
    assert Span(b"a", b"b").intersect(Span(b"b", b"c")) is None


def test_subtract_can_split_a_span_in_two() -> None:
    assert Span(b"a", b"z").subtract(Span(b"m", b"n")) == [Span(b"a", b"m"), Span(b"n", b"z")]
    assert Span(b"a", b"z").subtract(Span(b"0", b"m")) == [Span(b"m", b"z")]
    assert Span(b"a", b"z").subtract(Span(b"a", b"z")) == []
    assert Span(b"a", b"b").subtract(Span(b"b", b"c")) == [Span(b"a", b"b")]


def test_merge_spans_joins_overlapping_and_adjacent_spans() -> None:
    spans = [Span(b"e", b"f"), Span(b"a", b"c"), Span(b"b", b"d"), Span(b"d", b"e\x00")]
    assert merge_spans(spans) == [Span(b"a", b"f")]
    assert merge_spans([Span(b"a", b"b"), Span(b"c", b"d")]) == [
        Span(b"a", b"b"),
        Span(b"c", b"d"),
    ]
    assert merge_spans([]) == []


def test_merge_spans_accepts_any_iterable() -> None:
    assert merge_spans(iter([Span(b"b", b"c"), Span(b"a", b"b")])) == [Span(b"a", b"c")]


# --- span algebra: properties against the brute-force model ---------------------------


@given(small_spans(), small_keys)
def test_contains_key_matches_the_model(span: Span, key: bytes) -> None:
    assert span.contains_key(key) == (key in model(span))


@given(small_spans())
def test_a_span_holds_its_start_but_not_its_end(span: Span) -> None:
    assert span.start in model(span)
    assert span.end not in model(span)


@given(small_spans(), small_spans())
def test_contains_matches_subset_in_the_model(a: Span, b: Span) -> None:
    assert a.contains(b) == (model(b) <= model(a))


@given(small_spans(), small_spans())
def test_overlaps_matches_a_shared_key_in_the_model(a: Span, b: Span) -> None:
    assert a.overlaps(b) == bool(model(a) & model(b))
    assert a.overlaps(b) == b.overlaps(a)


@given(small_spans(), small_spans())
def test_intersect_matches_set_intersection_in_the_model(a: Span, b: Span) -> None:
    inter = a.intersect(b)
    expected = model(a) & model(b)
    if inter is None:
        assert not expected
        assert not a.overlaps(b)
    else:
        assert model(inter) == expected
        assert a.contains(inter)
        assert b.contains(inter)
    assert b.intersect(a) == inter


@given(small_spans(), small_spans())
def test_subtract_matches_set_difference_in_the_model(a: Span, b: Span) -> None:
    parts = a.subtract(b)
    assert len(parts) <= 2
    assert model_union(parts) == model(a) - model(b)
    for part in parts:
        assert a.contains(part)
        assert not part.overlaps(b)
    assert all(x.end < y.start for x, y in pairwise(parts))
    if not a.overlaps(b):
        assert parts == [a]


@given(span_lists)
@example([Span(b"\x00", b"\x01"), Span(b"\x01", b"\xff")])
def test_merge_spans_matches_set_union_in_the_model(spans: list[Span]) -> None:
    merged = merge_spans(spans)
    assert model_union(merged) == model_union(spans)
    # Sorted, disjoint and not even touching: touching spans would have been joined.
    assert all(x.end < y.start for x, y in pairwise(merged))
    starts = {s.start for s in spans}
    ends = {s.end for s in spans}
    assert all(m.start in starts and m.end in ends for m in merged)


@given(span_lists)
def test_merge_spans_is_idempotent_and_order_insensitive(spans: list[Span]) -> None:
    merged = merge_spans(spans)
    assert merge_spans(merged) == merged
    assert merge_spans(reversed(spans)) == merged
    assert merge_spans(spans + spans) == merged


@given(span_lists)
def test_merge_spans_does_not_mutate_its_input(spans: list[Span]) -> None:
    before = list(spans)
    merge_spans(spans)
    assert spans == before
