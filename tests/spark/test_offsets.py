"""Tests for feedkv.spark.offsets: the stream's offsets as JSON and how a micro-batch
between two offsets is cut into pieces. Pure logic: no Spark session, no node.

A scan batch reads ``[scan_key, end.scan_key or span.end)`` as of the scan's timestamp;
a changes batch reads ``(start.resolved, end.resolved]`` over the whole span. Either is
cut at the range boundaries strictly inside what it reads, and the pieces cover it
exactly, in key order, with no overlap.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.errors import InvalidArgumentError, TimestampParseError
from feedkv.spark.offsets import FeedOffset, Piece, plan_pieces
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

T1 = Timestamp(1_700_000_000_000_000_000, 3)
T2 = Timestamp(1_700_000_005_000_000_000, 0)
SPAN = Span(b"b", b"p")


def spans_of(pieces: list[Piece]) -> list[tuple[bytes, bytes]]:
    return [(p.span.start, p.span.end) for p in pieces]


# FeedOffset as JSON.


@pytest.mark.parametrize(
    "offset",
    [
        FeedOffset(T1),
        FeedOffset(T1, b"\x00\xffkey"),
        FeedOffset(Timestamp(0, 0), b""),
        FeedOffset(Timestamp(5, 0)),
        FeedOffset(T2, None, (7,), T1),
    ],
    ids=["no-scan", "scanning", "zero-ts-empty-key", "logical-zero", "moved-cursor"],
)
def test_an_offset_survives_a_round_trip_through_json_text(offset: FeedOffset) -> None:
    text = json.dumps(offset.to_json())
    back = FeedOffset.from_json(json.loads(text))
    assert back == offset
    assert back.scanning == offset.scanning


def test_an_offset_as_json_names_resolved_then_scan_key() -> None:
    assert list(FeedOffset(T1, b"k").to_json()) == ["resolved", "scan_key"]
    assert list(FeedOffset(T1).to_json()) == ["resolved", "scan_key"]


def test_the_same_offset_always_gives_the_same_json_text() -> None:
    first = json.dumps(FeedOffset(T1, b"\x01\x02").to_json())
    again = json.dumps(FeedOffset(Timestamp(T1.wall, T1.logical), bytes([1, 2])).to_json())
    assert first == again
    assert first == '{"resolved": "1700000000000000000.0000000003", "scan_key": "0102"}'


def test_a_finished_scan_is_written_with_a_null_scan_key() -> None:
    assert FeedOffset(T2).to_json() == {"resolved": str(T2), "scan_key": None}


def test_an_offset_without_a_scan_key_field_reads_as_a_finished_scan() -> None:
    assert FeedOffset.from_json({"resolved": str(T1)}) == FeedOffset(T1)


@pytest.mark.parametrize(
    "data",
    [
        None,
        "1700000000000000000.0000000003",
        [str(T1), None],
        {},
        {"scan_key": None},
        {"resolved": None, "scan_key": None},
        {"resolved": 1700000000000000000, "scan_key": None},
    ],
    ids=["none", "string", "list", "empty-dict", "no-resolved", "null-resolved", "int-resolved"],
)
def test_reading_something_that_is_not_an_offset_is_rejected(data: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="not a feedkv offset"):
        FeedOffset.from_json(data)


@pytest.mark.parametrize(
    "scan_key", ["zz", "abc", 12, ["00"]], ids=["non-hex", "odd", "int", "list"]
)
def test_an_offset_with_a_scan_key_that_is_not_hex_is_rejected(scan_key: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="bad scan_key"):
        FeedOffset.from_json({"resolved": str(T1), "scan_key": scan_key})


def test_the_added_tables_scanned_are_in_the_offset_only_when_there_are_some() -> None:
    """A job's tables added ``WITH initial_scan`` (ALTER CHANGEFEED ... ADD): the offset
    says which are scanned as of ``resolved``; an offset with none reads as before."""
    offset = FeedOffset(T1, None, (7, 12))
    assert list(offset.to_json()) == ["resolved", "scan_key", "added_scans"]
    assert json.dumps(offset.to_json()).endswith('"added_scans": [7, 12]}')
    assert FeedOffset.from_json(json.loads(json.dumps(offset.to_json()))) == offset
    assert FeedOffset.from_json({"resolved": str(T1), "added_scans": [12, 7, 7]}) == offset
    assert FeedOffset.from_json({"resolved": str(T1), "added_scans": []}) == FeedOffset(T1)


@pytest.mark.parametrize("added", ["7", [7, "8"], [True], [0], [-3], {"7": 1}, [7.5]], ids=repr)
def test_an_offset_with_bad_added_scans_is_rejected(added: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="bad added_scans"):
        FeedOffset.from_json({"resolved": str(T1), "scan_key": None, "added_scans": added})


@pytest.mark.parametrize(
    "resolved",
    ["", "yesterday", "1.23", "-5.0000000000", "1700000000000000000.0000000003x"],
)
def test_an_offset_with_a_malformed_timestamp_is_rejected(resolved: str) -> None:
    with pytest.raises(TimestampParseError, match="invalid timestamp"):
        FeedOffset.from_json({"resolved": resolved, "scan_key": None})


# plan_pieces: the initial scan.


def test_a_scan_batch_reads_from_its_scan_key_to_the_span_end_when_the_scan_finishes() -> None:
    pieces = plan_pieces(FeedOffset(T1, b"d"), FeedOffset(T1), SPAN, [])
    assert pieces == [Piece(Span(b"d", b"p"), T1)]
    assert all(p.is_scan for p in pieces)


def test_a_scan_batch_reads_up_to_the_end_offsets_scan_key() -> None:
    pieces = plan_pieces(FeedOffset(T1, b"b"), FeedOffset(T1, b"g"), SPAN, [])
    assert pieces == [Piece(Span(b"b", b"g"), T1)]


def test_a_scan_batch_is_cut_at_the_range_boundaries_inside_it() -> None:
    pieces = plan_pieces(FeedOffset(T1, b"d"), FeedOffset(T1), SPAN, [b"f", b"k"])
    assert spans_of(pieces) == [(b"d", b"f"), (b"f", b"k"), (b"k", b"p")]
    assert all(p.hi == T1 and p.lo is None for p in pieces)


def test_a_scan_batch_ignores_boundaries_at_or_outside_what_it_reads() -> None:
    boundaries = [b"a", b"b", b"c", b"d", b"h", b"p", b"q"]
    pieces = plan_pieces(FeedOffset(T1, b"d"), FeedOffset(T1, b"m"), SPAN, boundaries)
    assert spans_of(pieces) == [(b"d", b"h"), (b"h", b"m")]


def test_a_scan_batch_that_reads_no_keys_has_no_pieces() -> None:
    assert plan_pieces(FeedOffset(T1, b"g"), FeedOffset(T1, b"g"), SPAN, [b"c"]) == []
    assert plan_pieces(FeedOffset(T1, b"p"), FeedOffset(T1), SPAN, [b"c"]) == []
    assert plan_pieces(FeedOffset(T1, b"x"), FeedOffset(T1), SPAN, [b"c"]) == []


def test_a_scan_batch_must_end_at_the_scans_timestamp() -> None:
    with pytest.raises(InvalidArgumentError, match="scan batch ends at the scan's timestamp"):
        plan_pieces(FeedOffset(T1, b"d"), FeedOffset(T2), SPAN, [])
    with pytest.raises(InvalidArgumentError, match="scan batch ends at the scan's timestamp"):
        plan_pieces(FeedOffset(T1, b"d"), FeedOffset(T2, b"g"), SPAN, [])


# plan_pieces: windows of changes.


def test_a_changes_batch_reads_the_window_from_start_to_end_over_every_range() -> None:
    pieces = plan_pieces(FeedOffset(T1), FeedOffset(T2), SPAN, [b"k", b"f"])
    assert pieces == [
        Piece(Span(b"b", b"f"), T2, T1),
        Piece(Span(b"f", b"k"), T2, T1),
        Piece(Span(b"k", b"p"), T2, T1),
    ]
    assert not any(p.is_scan for p in pieces)


def test_a_changes_batch_ignores_boundaries_at_or_outside_the_span() -> None:
    boundaries = [b"a", b"b", b"p", b"z", b"h", b"h"]
    pieces = plan_pieces(FeedOffset(T1), FeedOffset(T2), SPAN, boundaries)
    assert spans_of(pieces) == [(b"b", b"h"), (b"h", b"p")]


def test_a_changes_batch_with_no_boundaries_inside_is_one_piece() -> None:
    assert plan_pieces(FeedOffset(T1), FeedOffset(T2), SPAN, []) == [Piece(SPAN, T2, T1)]


def test_a_batch_between_equal_offsets_has_no_pieces() -> None:
    assert plan_pieces(FeedOffset(T1), FeedOffset(T1), SPAN, [b"f"]) == []


def test_a_changes_batch_cannot_go_backwards() -> None:
    with pytest.raises(InvalidArgumentError, match="offsets go backwards") as info:
        plan_pieces(FeedOffset(T2), FeedOffset(T1), SPAN, [])
    assert str(T1) in str(info.value) and str(T2) in str(info.value)


def test_a_batch_cannot_go_from_a_finished_scan_back_into_a_scan() -> None:
    with pytest.raises(InvalidArgumentError, match="finished scan back to"):
        plan_pieces(FeedOffset(T1), FeedOffset(T1, b"d"), SPAN, [])
    with pytest.raises(InvalidArgumentError, match="finished scan back to"):
        plan_pieces(FeedOffset(T1), FeedOffset(T2, b"d"), SPAN, [])


# Pieces cover what a batch reads exactly.

_keys = st.binary(min_size=0, max_size=3)


@st.composite
def spans(draw: st.DrawFn) -> Span:
    a, b = draw(st.lists(_keys, min_size=2, max_size=2, unique=True))
    return Span(min(a, b), max(a, b))


def assert_tiles(pieces: list[Piece], start: bytes, end: bytes, boundaries: list[bytes]) -> None:
    """``pieces`` cover ``[start, end)`` in key order, back to back, cut exactly at the
    boundaries strictly inside it."""
    assert pieces, "a non-empty key range gives at least one piece"
    assert pieces[0].span.start == start
    assert pieces[-1].span.end == end
    for before, after in itertools.pairwise(pieces):
        assert before.span.end == after.span.start
    cuts = [p.span.start for p in pieces[1:]]
    assert cuts == sorted({b for b in boundaries if start < b < end})


@settings(max_examples=300, deadline=None)
@given(span=spans(), boundaries=st.lists(_keys, max_size=12))
def test_the_pieces_of_a_changes_batch_tile_the_span(span: Span, boundaries: list[bytes]) -> None:
    pieces = plan_pieces(FeedOffset(T1), FeedOffset(T2), span, boundaries)
    assert_tiles(pieces, span.start, span.end, boundaries)
    assert all(p.lo == T1 and p.hi == T2 for p in pieces)


@settings(max_examples=300, deadline=None)
@given(
    span=spans(),
    boundaries=st.lists(_keys, max_size=12),
    scan_from=_keys,
    scan_to=st.none() | _keys,
)
def test_the_pieces_of_a_scan_batch_tile_the_keys_it_reads(
    span: Span, boundaries: list[bytes], scan_from: bytes, scan_to: bytes | None
) -> None:
    pieces = plan_pieces(FeedOffset(T1, scan_from), FeedOffset(T1, scan_to), span, boundaries)
    stop = span.end if scan_to is None else scan_to
    if scan_from >= stop:
        assert pieces == []
        return
    assert_tiles(pieces, scan_from, stop, boundaries)
    assert all(p.is_scan and p.hi == T1 for p in pieces)


@settings(max_examples=100, deadline=None)
@given(span=spans(), boundaries=st.lists(_keys, max_size=12))
def test_the_order_of_the_boundaries_does_not_change_the_pieces(
    span: Span, boundaries: list[bytes]
) -> None:
    forward = plan_pieces(FeedOffset(T1), FeedOffset(T2), span, sorted(boundaries))
    backward = plan_pieces(FeedOffset(T1), FeedOffset(T2), span, sorted(boundaries, reverse=True))
    assert forward == backward


def test_an_offset_of_a_moved_cursor_names_it_last() -> None:
    text = json.dumps(FeedOffset(T2, None, (7,), T1).to_json())
    assert text == (
        f'{{"resolved": "{T2}", "scan_key": null, "added_scans": [7], "cursor": "{T1}"}}'
    )


def test_a_batch_reads_from_its_end_offsets_cursor_when_the_cursor_moved() -> None:
    """ALTER CHANGEFEED ... SET cursor: the query's checkpoint ends at the old high-water
    mark (T2); the batch after it reads every change after the new cursor (T1), back (or
    forward) from there, and later batches from their own start again."""
    checkpointed = FeedOffset(T2)
    moved = FeedOffset(T2, None, (), T1)
    assert checkpointed.window_start(moved) == FeedOffset(T1, None, (), T1)
    later = FeedOffset(Timestamp(T2.wall + 1, 0), None, (), T1)
    assert moved.window_start(later) is moved
    assert checkpointed.window_start(FeedOffset(T2)) is checkpointed


def test_an_offset_with_a_cursor_that_is_not_a_timestamp_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="bad cursor"):
        FeedOffset.from_json({"resolved": str(T1), "scan_key": None, "cursor": 5})


def test_a_piece_names_its_files_after_the_least_timestamp_of_its_rows() -> None:
    # a scan's rows are at hi; a window's are above lo, so its files sort after the
    # .RESOLVED marker at lo, which an earlier batch may have written
    assert Piece(Span(b"a", b"b"), T2).first_ts == T2
    assert Piece(Span(b"a", b"b"), T2, T1).first_ts == T1.next()


# A first batch replayed after a restart (FeedOffset.replayed_from).


def test_a_first_batch_replayed_reads_from_the_first_start_s_origin() -> None:
    """The restart's first offset is made later than the one the logged end offset
    followed: the batch reads from the end's origin (a scan's from its timestamp)."""
    later = Timestamp(T2.wall + 9_000_000_000, 0)
    assert FeedOffset(later).replayed_from(FeedOffset(T2, origin=T1)) == FeedOffset(T1)
    scan = FeedOffset(later, SPAN.start)
    assert scan.replayed_from(FeedOffset(T1, b"h", origin=T1)) == FeedOffset(T1, SPAN.start)
    # logged before offsets had an origin: a scan's end still holds the scan's timestamp
    assert scan.replayed_from(FeedOffset(T1)) == FeedOffset(T1, SPAN.start)
    # nothing to go on: unchanged (plan_pieces then refuses it, as before)
    assert FeedOffset(later).replayed_from(FeedOffset(T2)) == FeedOffset(later)
    assert plan_pieces(FeedOffset(T1), FeedOffset(T2, origin=T1), SPAN, []) == [Piece(SPAN, T2, T1)]
    assert FeedOffset.from_json(FeedOffset(T2, origin=T1).to_json()).origin == T1
