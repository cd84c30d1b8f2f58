"""Tests for feedkv.kv.tscache: the timestamp cache that pushes writes above earlier reads.

The property test replays random reads against a small bounded cache, an unbounded cache
and a list of every read. The list answers the question a writer actually needs: "may I
write at ``ts`` without a reader having missed it?". A transaction writes at or above
every timestamp it has read at, so a read by someone else only has to be cleared if it is
not already below the writer's own highest read.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from feedkv.kv.tscache import TimestampCache
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

LOW = Timestamp(100)
A = b"A" * 16
B = b"B" * 16


def ts(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


# --- A fresh cache --------------------------------------------------------------------


def test_a_fresh_cache_answers_its_low_water_for_every_key_and_span() -> None:
    cache = TimestampCache(LOW)

    assert cache.max_read(b"a", None) == LOW
    assert cache.max_read(b"a", A) == LOW
    assert cache.max_read_span(Span(b"a", b"z"), None) == LOW


def test_a_read_at_or_below_the_low_water_leaves_answers_at_the_low_water() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"a", LOW, None)
    cache.add_key(b"a", LOW.prev(), None)
    cache.add_span(Span(b"a", b"z"), LOW, None)

    assert cache.max_read(b"a", None) == LOW
    assert cache.max_read_span(Span(b"a", b"z"), None) == LOW


# --- Point reads ----------------------------------------------------------------------


def test_a_key_read_is_the_floor_for_writes_of_that_key_only() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"b", ts(200), None)

    assert cache.max_read(b"b", None) == ts(200)
    assert cache.max_read(b"a", None) == LOW
    assert cache.max_read(b"b\x00", None) == LOW


def test_the_highest_read_of_a_key_wins_whatever_the_order() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(300), None)
    cache.add_key(b"k", ts(200), None)
    cache.add_key(b"k", ts(300, 1), None)
    cache.add_key(b"k", ts(250), None)

    assert cache.max_read(b"k", None) == ts(300, 1)


def test_a_transaction_may_write_under_its_own_read() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(200), A)

    assert cache.max_read(b"k", A) == LOW
    assert cache.max_read(b"k", B) == ts(200)
    assert cache.max_read(b"k", None) == ts(200)


def test_two_transactions_reading_at_the_same_timestamp_leave_no_owner() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(200), A)
    cache.add_key(b"k", ts(200), B)

    assert cache.max_read(b"k", A) == ts(200)
    assert cache.max_read(b"k", B) == ts(200)


def test_a_shared_read_stays_shared_when_one_of_its_readers_reads_again() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(200), A)
    cache.add_key(b"k", ts(200), B)
    cache.add_key(b"k", ts(200), A)

    assert cache.max_read(b"k", A) == ts(200)


def test_a_non_transactional_read_at_the_owners_timestamp_blocks_the_owner() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(200), A)
    cache.add_key(b"k", ts(200), None)

    assert cache.max_read(b"k", A) == ts(200)


def test_a_transaction_rereading_at_its_own_timestamp_keeps_ownership() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(200), A)
    cache.add_key(b"k", ts(200), A)

    assert cache.max_read(b"k", A) == LOW


def test_a_higher_read_by_another_transaction_takes_ownership() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"k", ts(200), A)
    cache.add_key(b"k", ts(300), B)

    assert cache.max_read(b"k", A) == ts(300)
    assert cache.max_read(b"k", B) == LOW


# --- Span reads -----------------------------------------------------------------------


def test_a_scan_covers_every_key_in_its_span_including_missing_ones() -> None:
    cache = TimestampCache(LOW)

    cache.add_span(Span(b"b", b"d"), ts(200), None)

    assert cache.max_read(b"b", None) == ts(200)
    assert cache.max_read(b"c\xff", None) == ts(200)
    assert cache.max_read(b"a", None) == LOW
    assert cache.max_read(b"d", None) == LOW  # the end is exclusive


def test_a_transaction_may_write_under_its_own_scan() -> None:
    cache = TimestampCache(LOW)

    cache.add_span(Span(b"b", b"d"), ts(200), A)

    assert cache.max_read(b"c", A) == LOW
    assert cache.max_read(b"c", B) == ts(200)


def test_another_transactions_scan_at_the_same_timestamp_still_counts_for_the_owner() -> None:
    cache = TimestampCache(LOW)

    cache.add_span(Span(b"b", b"d"), ts(200), A)
    cache.add_span(Span(b"c", b"e"), ts(200), B)

    assert cache.max_read(b"b", A) == LOW
    assert cache.max_read(b"c", A) == ts(200)


def test_a_scan_by_another_transaction_is_seen_past_the_owners_point_read() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"c", ts(300), A)
    cache.add_span(Span(b"b", b"d"), ts(200), B)

    assert cache.max_read(b"c", A) == ts(200)


def test_max_read_span_sees_point_reads_inside_the_span_only() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"a", ts(500), None)
    cache.add_key(b"c", ts(200), None)
    cache.add_key(b"e", ts(600), None)

    assert cache.max_read_span(Span(b"b", b"e"), None) == ts(200)
    assert cache.max_read_span(Span(b"a", b"e"), None) == ts(500)
    assert cache.max_read_span(Span(b"c\x00", b"e"), None) == LOW


def test_max_read_span_sees_every_scan_that_overlaps_it() -> None:
    cache = TimestampCache(LOW)

    cache.add_span(Span(b"a", b"c"), ts(200), None)
    cache.add_span(Span(b"x", b"z"), ts(900), None)

    assert cache.max_read_span(Span(b"b", b"d"), None) == ts(200)
    assert cache.max_read_span(Span(b"c", b"x"), None) == LOW  # both neighbours only touch it


def test_max_read_span_skips_the_callers_own_reads() -> None:
    cache = TimestampCache(LOW)

    cache.add_key(b"b", ts(300), A)
    cache.add_span(Span(b"c", b"e"), ts(400), A)
    cache.add_key(b"d", ts(200), B)

    assert cache.max_read_span(Span(b"a", b"z"), A) == ts(200)
    assert cache.max_read_span(Span(b"a", b"z"), B) == ts(400)
    assert cache.max_read_span(Span(b"a", b"z"), None) == ts(400)


# --- Overflow -------------------------------------------------------------------------


def test_overflowing_the_points_raises_the_low_water_to_the_highest_forgotten_read() -> None:
    cache = TimestampCache(LOW, max_points=2)

    cache.add_key(b"a", ts(200), None)
    cache.add_key(b"b", ts(400), A)
    cache.add_key(b"c", ts(300), None)

    assert cache.low_water == ts(400)
    assert cache.max_read(b"a", None) == ts(400)
    assert cache.max_read(b"b", A) == ts(400)  # more conservative than before, never lower
    assert cache.max_read(b"never read", None) == ts(400)


def test_overflowing_the_spans_raises_the_low_water_to_the_highest_forgotten_scan() -> None:
    cache = TimestampCache(LOW, max_spans=1)

    cache.add_span(Span(b"a", b"b"), ts(300), None)
    cache.add_span(Span(b"c", b"d"), ts(200), None)

    assert cache.low_water == ts(300)
    assert cache.max_read_span(Span(b"c", b"d"), None) == ts(300)


def test_reads_above_the_raised_low_water_survive_an_overflow_of_the_other_kind() -> None:
    cache = TimestampCache(LOW, max_spans=1)
    cache.add_key(b"old", ts(200), None)
    cache.add_key(b"new", ts(900), None)

    cache.add_span(Span(b"a", b"b"), ts(300), None)
    cache.add_span(Span(b"c", b"d"), ts(500), None)

    assert cache.low_water == ts(500)
    assert cache.max_read(b"old", None) == ts(500)
    assert cache.max_read(b"new", None) == ts(900)


def test_reads_after_an_overflow_count_only_above_the_new_low_water() -> None:
    cache = TimestampCache(LOW, max_points=1)
    cache.add_key(b"a", ts(200), None)
    cache.add_key(b"b", ts(300), None)

    cache.add_key(b"c", ts(250), None)
    cache.add_key(b"d", ts(350), None)

    assert cache.max_read(b"c", None) == ts(300)
    assert cache.max_read(b"d", None) == ts(350)


# --- Properties -----------------------------------------------------------------------


KEYS = [b"a", b"a\x00", b"b", b"c", b"c\xff", b"d"]
TXNS = [None, A, B]


@dataclass(frozen=True)
class Read:
    span: Span  # a point read is the span of its one key
    ts: Timestamp
    txn: bytes | None


@st.composite
def spans(draw: st.DrawFn) -> Span:
    start, end = sorted(draw(st.lists(st.sampled_from(KEYS), min_size=2, max_size=2, unique=True)))
    return Span(start, end)


@st.composite
def reads(draw: st.DrawFn) -> tuple[bool, Read]:
    is_point = draw(st.booleans())
    span = Span.for_key(draw(st.sampled_from(KEYS))) if is_point else draw(spans())
    at = Timestamp(draw(st.integers(90, 120)), draw(st.integers(0, 2)))
    return is_point, Read(span, at, draw(st.sampled_from(TXNS)))


def add(cache: TimestampCache, is_point: bool, read: Read) -> None:
    if is_point:
        cache.add_key(read.span.start, read.ts, read.txn)
    else:
        cache.add_span(read.span, read.ts, read.txn)


def others_high(history: list[Read], span: Span, txn: bytes | None) -> Timestamp:
    """The highest read of any key in ``span`` by anyone but ``txn`` (at least the low water)."""
    return max(
        [LOW, *(r.ts for r in history if r.span.overlaps(span) and (txn is None or r.txn != txn))]
    )


def own_high(history: list[Read], txn: bytes | None) -> Timestamp:
    """The highest timestamp ``txn`` read at: it writes at or above it anyway."""
    return max([LOW, *(r.ts for r in history if txn is not None and r.txn == txn)])


def is_safe_floor(answer: Timestamp, history: list[Read], span: Span, txn: bytes | None) -> bool:
    """Whether a write by ``txn`` above ``answer`` lands above every read of ``span`` by others.

    A read by others below ``txn``'s own highest read needs no help from the cache.
    """
    needed = others_high(history, span, txn)
    return answer >= needed or needed < own_high(history, txn)


QUERY_SPANS = [Span(b"a", b"b"), Span(b"b", b"d"), Span(b"a", b"d\x00")]


@given(st.lists(reads(), max_size=40), st.integers(1, 4), st.integers(1, 4))
def test_a_bounded_cache_never_answers_below_the_reads_it_was_told_about(
    ops: list[tuple[bool, Read]], max_points: int, max_spans: int
) -> None:
    bounded = TimestampCache(LOW, max_points=max_points, max_spans=max_spans)
    unbounded = TimestampCache(LOW)
    history: list[Read] = []
    previous: dict[Span, Timestamp] = {}

    for is_point, read in ops:
        add(bounded, is_point, read)
        add(unbounded, is_point, read)
        history.append(read)

        for txn in TXNS:
            for key in KEYS:
                answer = bounded.max_read(key, txn)
                assert answer >= unbounded.max_read(key, txn)
                assert is_safe_floor(answer, history, Span.for_key(key), txn)
            for query in QUERY_SPANS:
                answer = bounded.max_read_span(query, txn)
                assert answer >= unbounded.max_read_span(query, txn)
                assert is_safe_floor(answer, history, query, txn)
        for query in QUERY_SPANS:
            anyone = bounded.max_read_span(query, None)
            assert anyone >= previous.get(query, LOW), "an answer for everyone went down"
            previous[query] = anyone


@given(st.lists(reads(), max_size=40))
def test_an_unbounded_cache_answers_exactly_the_highest_read_for_everyone(
    ops: list[tuple[bool, Read]],
) -> None:
    cache = TimestampCache(LOW)
    history = []
    for is_point, read in ops:
        add(cache, is_point, read)
        history.append(read)

    for key in KEYS:
        assert cache.max_read(key, None) == others_high(history, Span.for_key(key), None)
    for query in QUERY_SPANS:
        assert cache.max_read_span(query, None) == others_high(history, query, None)
