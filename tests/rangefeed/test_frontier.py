"""Tests for feedkv.rangefeed.frontier: the lowest checkpoint over a set of spans.

The property test checks the frontier against a model that keeps one timestamp per key
of a small universe: every span boundary used is a universe key, so each universe key
stands for the whole interval up to the next one.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import pairwise, product

from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.rangefeed.frontier import SpanFrontier
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

ZERO = Timestamp(0, 0)


def t(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


def sp(start: bytes, end: bytes) -> Span:
    return Span(start, end)


# --- one span -------------------------------------------------------------------------


def test_a_new_frontier_sits_at_its_initial_timestamp() -> None:
    assert SpanFrontier([sp(b"a", b"c")]).frontier == ZERO
    frontier = SpanFrontier([sp(b"a", b"c")], initial=t(7))
    assert frontier.frontier == t(7)
    assert frontier.entries() == [(sp(b"a", b"c"), t(7))]


def test_forwarding_the_whole_span_moves_the_frontier() -> None:
    frontier = SpanFrontier([sp(b"a", b"c")])
    assert frontier.forward(sp(b"a", b"c"), t(5)) is True
    assert frontier.frontier == t(5)
    assert frontier.forward(sp(b"a", b"c"), t(5, 1)) is True
    assert frontier.frontier == t(5, 1)


def test_forwarding_to_an_older_or_equal_timestamp_changes_nothing() -> None:
    frontier = SpanFrontier([sp(b"a", b"c")], initial=t(5))
    assert frontier.forward(sp(b"a", b"c"), t(5)) is False
    assert frontier.forward(sp(b"a", b"c"), t(3)) is False
    assert frontier.forward(sp(b"a", b"b"), t(4)) is False
    assert frontier.frontier == t(5)
    assert all(ts == t(5) for _span, ts in frontier.entries())


def test_forwarding_part_of_the_span_does_not_move_the_minimum() -> None:
    frontier = SpanFrontier([sp(b"a", b"d")])
    assert frontier.forward(sp(b"b", b"c"), t(5)) is False
    assert frontier.frontier == ZERO
    assert frontier.entries() == [
        (sp(b"a", b"b"), ZERO),
        (sp(b"b", b"c"), t(5)),
        (sp(b"c", b"d"), ZERO),
    ]
    assert frontier.forward(sp(b"a", b"b"), t(6)) is False
    assert frontier.forward(sp(b"c", b"d"), t(4)) is True
    assert frontier.frontier == t(4)


def test_the_frontier_is_the_lowest_part_even_after_it_moved() -> None:
    frontier = SpanFrontier([sp(b"a", b"c")])
    frontier.forward(sp(b"a", b"b"), t(9))
    assert frontier.forward(sp(b"b", b"c"), t(3)) is True  # 0 -> 3, not 9
    assert frontier.frontier == t(3)
    assert frontier.forward(sp(b"a", b"c"), t(6)) is True
    assert frontier.entries() == [(sp(b"a", b"b"), t(9)), (sp(b"b", b"c"), t(6))]


def test_a_span_reaching_past_the_tracked_span_forwards_only_the_tracked_part() -> None:
    frontier = SpanFrontier([sp(b"b", b"d")])
    assert frontier.forward(sp(b"a", b"c"), t(5)) is False
    assert frontier.entries() == [(sp(b"b", b"c"), t(5)), (sp(b"c", b"d"), ZERO)]
    assert frontier.forward(sp(b"c", b"z"), t(3)) is True
    assert frontier.entries() == [(sp(b"b", b"c"), t(5)), (sp(b"c", b"d"), t(3))]
    assert frontier.forward(sp(KEY_MIN, KEY_MAX), t(8)) is True
    assert frontier.frontier == t(8)
    assert frontier.entries() == [(sp(b"b", b"c"), t(8)), (sp(b"c", b"d"), t(8))]


def test_spans_outside_the_tracked_spans_are_ignored() -> None:
    frontier = SpanFrontier([sp(b"c", b"e")])
    before = frontier.entries()
    assert frontier.forward(sp(b"a", b"c"), t(5)) is False  # ends where tracking starts
    assert frontier.forward(sp(b"e", b"f"), t(5)) is False  # starts where tracking ends
    assert frontier.forward(sp(b"x", b"z"), t(5)) is False
    assert frontier.entries() == before
    assert frontier.frontier == ZERO


# --- several spans --------------------------------------------------------------------


def test_overlapping_and_touching_spans_are_merged() -> None:
    frontier = SpanFrontier([sp(b"b", b"d"), sp(b"a", b"c"), sp(b"d", b"e"), sp(b"x", b"y")])
    assert frontier.spans == [sp(b"a", b"e"), sp(b"x", b"y")]
    assert frontier.entries() == [(sp(b"a", b"e"), ZERO), (sp(b"x", b"y"), ZERO)]


def test_the_frontier_of_disjoint_spans_is_their_minimum() -> None:
    frontier = SpanFrontier([sp(b"a", b"c"), sp(b"e", b"g")])
    assert frontier.forward(sp(b"a", b"c"), t(5)) is False
    assert frontier.frontier == ZERO
    assert frontier.forward(sp(b"e", b"g"), t(3)) is True
    assert frontier.frontier == t(3)


def test_gaps_between_tracked_spans_are_ignored() -> None:
    frontier = SpanFrontier([sp(b"a", b"c"), sp(b"e", b"g")])
    assert frontier.forward(sp(b"a", b"g"), t(5)) is True
    assert frontier.frontier == t(5)
    assert frontier.entries() == [(sp(b"a", b"c"), t(5)), (sp(b"e", b"g"), t(5))]
    assert frontier.forward(sp(b"c", b"e"), t(9)) is False
    assert frontier.forward(sp(b"c\x00", b"d"), t(9)) is False
    assert frontier.frontier == t(5)
    assert all(span.start < b"c" or span.start >= b"e" for span, _ts in frontier.entries())
    assert all(ts == t(5) for _span, ts in frontier.entries())


def test_entries_are_in_key_order_and_cover_exactly_the_tracked_spans() -> None:
    frontier = SpanFrontier([sp(b"m", b"p"), sp(b"a", b"d")])
    frontier.forward(sp(b"b", b"n"), t(2))
    frontier.forward(sp(b"o", b"z"), t(4))
    entries = frontier.entries()
    assert entries == [
        (sp(b"a", b"b"), ZERO),
        (sp(b"b", b"d"), t(2)),
        (sp(b"m", b"n"), t(2)),
        (sp(b"n", b"o"), ZERO),
        (sp(b"o", b"p"), t(4)),
    ]


def test_a_frontier_over_no_spans_stays_at_zero() -> None:
    frontier = SpanFrontier([])
    assert frontier.frontier == ZERO
    assert frontier.forward(sp(b"a", b"b"), t(5)) is False
    assert frontier.entries() == []


def test_the_whole_keyspace_can_be_tracked() -> None:
    frontier = SpanFrontier([sp(KEY_MIN, KEY_MAX)])
    assert frontier.forward(sp(KEY_MIN, b"m"), t(1)) is False
    assert frontier.forward(sp(b"m", KEY_MAX), t(2)) is True
    assert frontier.frontier == t(1)
    assert frontier.entries() == [(sp(KEY_MIN, b"m"), t(1)), (sp(b"m", KEY_MAX), t(2))]


def test_many_pieces_checkpointing_in_turn() -> None:
    keys = [bytes([c]) for c in range(ord("a"), ord("z") + 1)]
    pieces = [sp(a, b) for a, b in pairwise(keys)]
    frontier = SpanFrontier([sp(keys[0], keys[-1])])
    for round_ in range(1, 4):
        moves = [frontier.forward(piece, t(round_)) for piece in pieces]
        assert moves == [False] * (len(pieces) - 1) + [True]
        assert frontier.frontier == t(round_)


# --- against a model ------------------------------------------------------------------

ALPHABET = b"ab\xff"
UNIVERSE: list[bytes] = sorted(
    bytes(combo) for n in range(3) for combo in product(ALPHABET, repeat=n)
)


@st.composite
def spans(draw: st.DrawFn) -> Span:
    pair = draw(st.lists(st.sampled_from(UNIVERSE), min_size=2, max_size=2, unique=True))
    start, end = sorted(pair)
    return Span(start, end)


def cells(span: Span) -> range:
    """The universe keys (by index) whose interval lies in ``span``."""
    return range(bisect_left(UNIVERSE, span.start), bisect_left(UNIVERSE, span.end))


@settings(max_examples=300, deadline=None)
@given(
    tracked=st.lists(spans(), max_size=4),
    initial=st.integers(min_value=0, max_value=3),
    script=st.lists(st.tuples(spans(), st.integers(min_value=0, max_value=8)), max_size=25),
)
def test_frontier_matches_a_brute_force_model(
    tracked: list[Span], initial: int, script: list[tuple[Span, int]]
) -> None:
    frontier = SpanFrontier(tracked, initial=t(initial))
    model: dict[int, Timestamp] = {i: t(initial) for span in tracked for i in cells(span)}

    def model_min() -> Timestamp:
        return min(model.values(), default=ZERO)

    def check_entries() -> None:
        entries = frontier.entries()
        seen: dict[int, Timestamp] = {}
        for (span, _ts), (after, _after_ts) in pairwise(entries):
            assert span.end <= after.start  # in key order, no overlaps
        for span, ts in entries:
            for i in cells(span):
                seen[i] = ts
        assert seen == model

    assert frontier.frontier == model_min()
    check_entries()
    for span, wall in script:
        before = model_min()
        for i in cells(span):
            if i in model:
                model[i] = max(model[i], t(wall))
        moved = frontier.forward(span, t(wall))
        assert frontier.frontier == model_min(), (span, wall)
        assert moved == (model_min() > before), (span, wall)
        check_entries()
