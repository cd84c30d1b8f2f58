"""Tests for feedkv.util.hlc: timestamp order and stepping, the string form, and clocks."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from feedkv.errors import (
    ClockOffsetError,
    FeedKVError,
    InvalidArgumentError,
    TimestampParseError,
)
from feedkv.util.hlc import (
    MAX_LOGICAL,
    MAX_TIMESTAMP,
    TOP_LOGICAL,
    ZERO_TIMESTAMP,
    Clock,
    ManualClock,
    Timestamp,
    run_ends,
    timestamps_of,
)

MAX_WALL = (1 << 63) - 1
T0 = 1_700_000_000_000_000_000

walls = st.integers(min_value=0, max_value=MAX_WALL)
logicals = st.integers(min_value=0, max_value=MAX_LOGICAL)
timestamps = st.builds(Timestamp, walls, logicals)
# Walls and logicals near the edges, where next/prev carry between the two parts.
edge_timestamps = st.builds(
    Timestamp,
    st.sampled_from([0, 1, 2, T0, MAX_WALL - 1, MAX_WALL]),
    st.sampled_from([0, 1, 2, MAX_LOGICAL - 1, MAX_LOGICAL]),
)
any_timestamp = st.one_of(timestamps, edge_timestamps)
# The timestamps feedkv makes: logical parts up to TOP_LOGICAL, as CockroachDB's int32.
made_timestamps = st.one_of(
    st.builds(Timestamp, walls, st.integers(min_value=0, max_value=TOP_LOGICAL)),
    st.builds(
        Timestamp,
        st.sampled_from([0, 1, 2, T0, MAX_WALL - 1, MAX_WALL]),
        st.sampled_from([0, 1, 2, TOP_LOGICAL - 1, TOP_LOGICAL]),
    ),
)
LAST_MADE = Timestamp(MAX_WALL, TOP_LOGICAL)


def physical_from(readings: list[int]) -> Callable[[], int]:
    """A physical clock that returns ``readings`` in turn, then repeats the last one."""
    it: Iterator[int] = iter(readings)
    last = readings[0]

    def read() -> int:
        nonlocal last
        last = next(it, last)
        return last

    return read


# --- Timestamp: order, hash, stepping -------------------------------------------------


@given(any_timestamp, any_timestamp)
def test_timestamps_order_by_wall_then_logical(a: Timestamp, b: Timestamp) -> None:
    assert (a < b) == ((a.wall, a.logical) < (b.wall, b.logical))
    assert (a == b) == ((a.wall, a.logical) == (b.wall, b.logical))
    assert sum([a < b, a == b, a > b]) == 1


@given(st.lists(any_timestamp, max_size=20))
def test_sorting_timestamps_is_a_total_order(tss: list[Timestamp]) -> None:
    ordered = sorted(tss)
    assert all(x <= y for x, y in pairwise(ordered))
    assert sorted(reversed(ordered)) == ordered


def test_equal_timestamps_hash_equal_and_dedupe_in_sets() -> None:
    a = Timestamp(5, 7)
    b = Timestamp(5, 7)
    assert a is not b
    assert hash(a) == hash(b)
    assert {a, b, Timestamp(5, 8), Timestamp(6, 7)} == {a, Timestamp(5, 8), Timestamp(6, 7)}
    assert {a: "x"}[b] == "x"


def test_logical_defaults_to_zero() -> None:
    assert Timestamp(9) == Timestamp(9, 0)
    assert Timestamp(9) < Timestamp(9, 1) < Timestamp(10)


def test_timestamps_are_immutable() -> None:
    ts = Timestamp(1, 2)
    with pytest.raises(AttributeError):
        ts.wall = 3  # type: ignore[misc]


def test_next_bumps_logical_within_one_wall_tick() -> None:
    assert Timestamp(10, 0).next() == Timestamp(10, 1)
    assert Timestamp(10, 41).next() == Timestamp(10, 42)


def test_next_of_the_top_logical_overflows_into_wall() -> None:
    assert Timestamp(10, TOP_LOGICAL).next() == Timestamp(11, 0)
    assert Timestamp(10, TOP_LOGICAL - 1).next() == Timestamp(10, TOP_LOGICAL)


def test_next_of_an_older_versions_step_back_overflows_into_wall() -> None:
    # NB: versions before TOP_LOGICAL stepped back to the encodings' largest logical part
    assert Timestamp(10, MAX_LOGICAL).next() == Timestamp(11, 0)
    assert Timestamp(10, TOP_LOGICAL + 1).next() == Timestamp(11, 0)


def test_prev_of_logical_zero_borrows_from_wall_as_cockroachdb_does() -> None:
    assert Timestamp(11, 0).prev() == Timestamp(10, TOP_LOGICAL)
    assert Timestamp(1, 0).prev() == Timestamp(0, TOP_LOGICAL)
    # CockroachDB's logical part is an int32: its Prev() prints as math.MaxInt32
    assert str(Timestamp(1796092923424659117, 0).prev()) == "1796092923424659116.2147483647"


def test_prev_decrements_logical() -> None:
    assert Timestamp(10, 5).prev() == Timestamp(10, 4)
    assert Timestamp(0, 1).prev() == ZERO_TIMESTAMP


def test_prev_of_zero_timestamp_raises() -> None:
    with pytest.raises(InvalidArgumentError, match="zero timestamp has no predecessor"):
        ZERO_TIMESTAMP.prev()


@given(made_timestamps)
def test_next_and_prev_are_inverse_and_adjacent(ts: Timestamp) -> None:
    if ts != LAST_MADE:
        nxt = ts.next()
        assert nxt > ts
        assert nxt.prev() == ts
        assert 0 <= nxt.logical <= TOP_LOGICAL
    if not ts.is_zero():
        prv = ts.prev()
        assert prv < ts
        assert prv.next() == ts
        assert 0 <= prv.logical <= TOP_LOGICAL


@given(made_timestamps, made_timestamps)
def test_no_made_timestamp_lies_strictly_between_ts_and_next(
    ts: Timestamp, other: Timestamp
) -> None:
    if ts != LAST_MADE:
        assert not ts < other < ts.next()


def test_is_zero_only_for_the_zero_timestamp() -> None:
    assert ZERO_TIMESTAMP.is_zero()
    assert Timestamp(0).is_zero()
    assert not Timestamp(0, 1).is_zero()
    assert not Timestamp(1, 0).is_zero()


def test_zero_and_max_timestamps_bound_every_valid_timestamp() -> None:
    assert Timestamp(0, 0) == ZERO_TIMESTAMP
    assert Timestamp(MAX_WALL, MAX_LOGICAL) == MAX_TIMESTAMP


@given(timestamps)
def test_every_valid_timestamp_lies_between_zero_and_max(ts: Timestamp) -> None:
    assert ZERO_TIMESTAMP <= ts <= MAX_TIMESTAMP


def test_checked_accepts_parts_in_range() -> None:
    assert Timestamp.checked(0, 0) == ZERO_TIMESTAMP
    assert Timestamp.checked(MAX_WALL, MAX_LOGICAL) == MAX_TIMESTAMP
    assert Timestamp.checked(5) == Timestamp(5, 0)


@pytest.mark.parametrize(
    ("wall", "logical"),
    [(-1, 0), (0, -1), (MAX_WALL + 1, 0), (0, MAX_LOGICAL + 1)],
)
def test_checked_rejects_parts_out_of_range(wall: int, logical: int) -> None:
    with pytest.raises(InvalidArgumentError, match="out of range"):
        Timestamp.checked(wall, logical)


def test_repr_shows_both_parts() -> None:
    assert repr(Timestamp(12, 3)) == "Timestamp(12, 3)"


# --- string form ----------------------------------------------------------------------


def test_string_form_pads_logical_to_ten_digits() -> None:
    assert str(Timestamp(1_700_000_000_000_000_000, 3)) == "1700000000000000000.0000000003"
    assert str(ZERO_TIMESTAMP) == "0.0000000000"
    assert str(MAX_TIMESTAMP) == f"{MAX_WALL}.{MAX_LOGICAL}"


@given(any_timestamp)
@example(ZERO_TIMESTAMP)
@example(MAX_TIMESTAMP)
def test_string_form_round_trips(ts: Timestamp) -> None:
    text = str(ts)
    wall_text, dot, logical_text = text.partition(".")
    assert dot == "."
    assert wall_text == str(ts.wall)
    assert len(logical_text) == 10
    assert Timestamp.parse(text) == ts


@given(any_timestamp, any_timestamp)
def test_string_form_of_same_wall_length_sorts_like_timestamps(a: Timestamp, b: Timestamp) -> None:
    # With the logical part fixed-width, equal-width walls make the strings sort in order.
    if len(str(a.wall)) == len(str(b.wall)):
        assert (str(a) < str(b)) == (a < b)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", ZERO_TIMESTAMP),
        ("7", Timestamp(7, 0)),
        ("1700000000000000000", Timestamp(1_700_000_000_000_000_000, 0)),
        (str(MAX_WALL), Timestamp(MAX_WALL, 0)),
    ],
)
def test_parse_accepts_a_bare_wall_as_logical_zero(text: str, expected: Timestamp) -> None:
    assert Timestamp.parse(text) == expected


def test_parse_accepts_the_largest_logical() -> None:
    assert Timestamp.parse(f"5.{MAX_LOGICAL:010d}") == Timestamp(5, MAX_LOGICAL)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param(" ", id="space"),
        pytest.param(" 1.0000000000", id="leading-space"),
        pytest.param("1.0000000000 ", id="trailing-space"),
        pytest.param("1 .0000000000", id="inner-space"),
        pytest.param("1.00000 00000", id="space-in-logical"),
        pytest.param("1\n", id="newline"),
        pytest.param("+1", id="plus-sign"),
        pytest.param("-1", id="minus-sign"),
        pytest.param("-1.0000000000", id="negative-wall"),
        pytest.param("1.-000000001", id="negative-logical"),
        pytest.param("1.+000000001", id="plus-logical"),
        pytest.param("1.2", id="short-logical"),
        pytest.param("1.00000000001", id="eleven-digit-logical"),
        pytest.param("1.", id="empty-logical"),
        pytest.param(".0000000001", id="empty-wall"),
        pytest.param(".", id="only-dot"),
        pytest.param("1.0000000000.0", id="two-dots"),
        pytest.param("abc", id="letters"),
        pytest.param("1e9", id="exponent"),
        pytest.param("0x10", id="hex"),
        pytest.param("1_000", id="underscore"),
        pytest.param("1.00000000a1", id="letter-in-logical"),
        pytest.param("1,0000000000", id="comma"),
        pytest.param("\u0661\u0662", id="arabic-indic-digits"),
        pytest.param("1." + "\u0660" * 9 + "\u0661", id="arabic-indic-logical"),
        pytest.param("\uff11\uff12", id="fullwidth-digits"),
        pytest.param("\u00b2", id="superscript-digit"),
        pytest.param("Timestamp(1, 2)", id="repr"),
    ],
)
def test_parse_rejects_malformed_text(text: str) -> None:
    with pytest.raises(TimestampParseError) as info:
        Timestamp.parse(text)
    message = str(info.value)
    assert repr(text) in message
    assert "wall" in message or "10 digits" in message


def test_parse_rejection_message_shows_the_expected_form() -> None:
    with pytest.raises(TimestampParseError, match=r"1700000000000000000\.0000000003"):
        Timestamp.parse("yesterday")


def test_parse_rejects_a_logical_part_of_the_wrong_width_naming_the_rule() -> None:
    with pytest.raises(TimestampParseError, match="exactly 10 digits"):
        Timestamp.parse("1.2")


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1795810558000000000.0", Timestamp(1795810558000000000, 0)),
        ("1795810558000000000", Timestamp(1795810558000000000, 0)),
        ("7.0000000003", Timestamp(7, 3)),
        ("7.2", Timestamp(7, 2_000_000_000)),
        ("7.000001", Timestamp(7, 10_000)),
    ],
)
def test_parse_decimal_reads_the_logical_part_as_cockroachdb_reads_its_decimal_form(
    text: str, parsed: Timestamp
) -> None:
    """As CockroachDB's decimal timestamps (cluster_logical_timestamp(), cursor): the
    fraction is the logical part to 10 places, so fewer digits are padded on the right."""
    assert Timestamp.parse_decimal(text) == parsed


@pytest.mark.parametrize("text", ["1.00000000001", "1.", "1.x", "-1.5", "", "1.5.5"])
def test_parse_decimal_rejects_what_is_no_decimal_timestamp(text: str) -> None:
    with pytest.raises(TimestampParseError):
        Timestamp.parse_decimal(text)


@pytest.mark.parametrize(
    "text",
    [str(MAX_WALL + 1), "9" * 20, "9" * 40 + ".0000000000"],
)
def test_parse_rejects_a_wall_beyond_int64(text: str) -> None:
    with pytest.raises(TimestampParseError, match="wall time out of range"):
        Timestamp.parse(text)


def test_parse_rejects_a_wall_with_thousands_of_digits_as_a_parse_error() -> None:
    with pytest.raises(TimestampParseError):
        Timestamp.parse("9" * 5000)


@pytest.mark.parametrize("logical", [MAX_LOGICAL + 1, 9_999_999_999])
def test_parse_rejects_a_logical_part_above_the_32_bit_range(logical: int) -> None:
    with pytest.raises(TimestampParseError, match=f"logical part exceeds {MAX_LOGICAL}"):
        Timestamp.parse(f"1.{logical:010d}")


@pytest.mark.parametrize(
    "value",
    [None, 1, 1.5, b"1.0000000000", Timestamp(1, 0), ["1"]],
    ids=["None", "int", "float", "bytes", "Timestamp", "list"],
)
def test_parse_rejects_non_strings_naming_the_type(value: Any) -> None:
    with pytest.raises(TimestampParseError, match=f"not {type(value).__name__}"):
        Timestamp.parse(value)


def test_timestamp_parse_error_is_a_value_error_and_a_feedkv_error() -> None:
    with pytest.raises(ValueError):
        Timestamp.parse("x")
    with pytest.raises(FeedKVError):
        Timestamp.parse("x")


@given(st.text(max_size=30))
@example("1.0000000000")
@example("\u0661." + "\u0660" * 10)
def test_parse_either_returns_a_valid_timestamp_or_raises_a_parse_error(text: str) -> None:
    try:
        ts = Timestamp.parse(text)
    except TimestampParseError:
        return
    assert ZERO_TIMESTAMP <= ts <= MAX_TIMESTAMP
    assert text.isascii()
    assert Timestamp.parse(str(ts)) == ts


# --- Clock ----------------------------------------------------------------------------


def test_now_uses_physical_time_when_it_moves_forward() -> None:
    clock = Clock(physical_from([100, 200, 300]))
    assert [clock.now(), clock.now(), clock.now()] == [
        Timestamp(100, 0),
        Timestamp(200, 0),
        Timestamp(300, 0),
    ]


def test_now_bumps_logical_while_physical_time_stands_still() -> None:
    clock = ManualClock(T0)
    assert [clock.now() for _ in range(3)] == [
        Timestamp(T0, 0),
        Timestamp(T0, 1),
        Timestamp(T0, 2),
    ]
    clock.advance(1)
    assert clock.now() == Timestamp(T0 + 1, 0)


def test_now_stays_monotone_when_the_physical_clock_goes_backwards() -> None:
    clock = Clock(physical_from([1_000, 400, 999, 1_000, 1_001, 5]))
    stamps = [clock.now() for _ in range(6)]
    assert stamps == [
        Timestamp(1_000, 0),
        Timestamp(1_000, 1),
        Timestamp(1_000, 2),
        Timestamp(1_000, 3),
        Timestamp(1_001, 0),
        Timestamp(1_001, 1),
    ]


@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=40))
def test_now_is_strictly_increasing_for_any_physical_readings(readings: list[int]) -> None:
    clock = Clock(physical_from(readings), max_offset_ns=None)
    stamps = [clock.now() for _ in readings]
    assert all(a < b for a, b in pairwise(stamps))
    assert all(ts.wall >= r for ts, r in zip(stamps, readings, strict=True))


def test_now_carries_logical_overflow_into_the_wall() -> None:
    clock = ManualClock(T0)
    clock.update(Timestamp(T0, MAX_LOGICAL))
    assert clock.now() == Timestamp(T0 + 1, 0)
    assert clock.now() == Timestamp(T0 + 1, 1)


def test_update_makes_later_now_exceed_the_remote_timestamp() -> None:
    clock = ManualClock(T0, max_offset_ns=1_000)
    remote = Timestamp(T0 + 500, 7)
    clock.update(remote)
    first = clock.now()
    assert first > remote
    assert first == Timestamp(T0 + 500, 8)
    assert clock.now() > first


def test_update_with_an_older_remote_leaves_the_clock_alone() -> None:
    clock = ManualClock(T0)
    clock.now()
    clock.update(Timestamp(T0 - 10, 3))
    assert clock.now() == Timestamp(T0, 1)


def test_update_accepts_a_remote_exactly_max_offset_ahead() -> None:
    clock = ManualClock(T0, max_offset_ns=1_000)
    clock.update(Timestamp(T0 + 1_000, MAX_LOGICAL))
    assert clock.now() == Timestamp(T0 + 1_001, 0)


def test_update_rejects_a_remote_beyond_max_offset_and_leaves_the_clock_unchanged() -> None:
    clock = ManualClock(T0, max_offset_ns=1_000)
    before = clock.now()
    remote = Timestamp(T0 + 1_001, 0)
    with pytest.raises(ClockOffsetError, match="max offset") as info:
        clock.update(remote)
    assert str(remote) in str(info.value)
    after = clock.now()
    assert after == before.next()
    assert after < remote


def test_default_clock_rejects_a_remote_far_in_the_future() -> None:
    physical = physical_from([T0])
    clock = Clock(physical)
    assert clock.max_offset_ns == 500_000_000
    with pytest.raises(ClockOffsetError, match="500 ms max offset"):
        clock.update(Timestamp(T0 + 10 * 1_000_000_000))
    assert clock.now() == Timestamp(T0, 0)


def test_clock_offset_error_is_not_the_callers_mistake_nor_retryable() -> None:
    assert issubclass(ClockOffsetError, FeedKVError)
    assert not issubclass(ClockOffsetError, InvalidArgumentError)


def test_physical_now_reads_the_injected_physical_clock() -> None:
    clock = ManualClock(T0)
    assert clock.physical_now() == T0
    clock.advance(5)
    assert clock.physical_now() == T0 + 5


def test_default_clock_reads_wall_time_in_nanoseconds() -> None:
    # 2020-01-01 in ns: a unit slip (s, ms, us) would land far below this.
    assert Clock().now().wall > 1_577_836_800 * 10**9


@pytest.mark.parametrize("fixed_physical", [True, False], ids=["frozen-time", "real-time"])
def test_concurrent_now_calls_return_distinct_increasing_timestamps(
    fixed_physical: bool,
) -> None:
    clock: Clock = ManualClock(T0) if fixed_physical else Clock()
    n_threads, per_thread = 8, 2_000
    start = threading.Barrier(n_threads)
    results: list[list[Timestamp]] = [[] for _ in range(n_threads)]

    def worker(out: list[Timestamp]) -> None:
        start.wait()
        for _ in range(per_thread):
            out.append(clock.now())

    threads = [threading.Thread(target=worker, args=(out,)) for out in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    for out in results:
        assert len(out) == per_thread
        assert all(a < b for a, b in pairwise(out))
    everything = [ts for out in results for ts in out]
    assert len(set(everything)) == n_threads * per_thread
    if fixed_physical:
        assert sorted(everything) == [Timestamp(T0, i) for i in range(n_threads * per_thread)]


# --- ManualClock ----------------------------------------------------------------------


def test_manual_clock_starts_at_the_given_wall_time() -> None:
    assert ManualClock(42).now() == Timestamp(42, 0)
    assert ManualClock().physical_now() == T0


def test_manual_clock_advance_moves_physical_time_forward() -> None:
    clock = ManualClock(100)
    clock.advance(0)
    assert clock.physical_now() == 100
    clock.advance(25)
    assert clock.physical_now() == 125
    assert clock.now() == Timestamp(125, 0)


def test_manual_clock_set_jumps_to_a_later_time() -> None:
    clock = ManualClock(100)
    clock.set(100)
    assert clock.physical_now() == 100
    clock.set(1_000)
    assert clock.now() == Timestamp(1_000, 0)


def test_manual_clock_refuses_to_advance_backwards() -> None:
    clock = ManualClock(100)
    with pytest.raises(InvalidArgumentError, match="only moves forward"):
        clock.advance(-1)
    assert clock.physical_now() == 100


def test_manual_clock_refuses_to_be_set_backwards() -> None:
    clock = ManualClock(100)
    with pytest.raises(InvalidArgumentError, match="only moves forward"):
        clock.set(99)
    assert clock.physical_now() == 100


def test_manual_clock_is_a_clock() -> None:
    assert isinstance(ManualClock(), Clock)


def test_timestamps_of_columns_are_timestamps() -> None:
    made = timestamps_of([T0, T0, MAX_WALL], [0, 7, MAX_LOGICAL])
    assert made == [Timestamp(T0), Timestamp(T0, 7), MAX_TIMESTAMP]
    assert all(type(ts) is Timestamp for ts in made)
    assert made[1].next() == Timestamp(T0, 8)
    with pytest.raises(ValueError):
        timestamps_of([T0, T0], [0])  # columns that do not line up are refused
    with pytest.raises(InvalidArgumentError, match="negative timestamp"):
        timestamps_of([T0, -1, T0], [0, 0, 1])


@given(
    st.lists(st.tuples(st.sampled_from([0, 1, T0, MAX_WALL]), logicals, st.integers(1, 30))),
    st.booleans(),
)
def test_timestamps_of_runs_in_any_order_are_made_once_a_run(
    runs: list[tuple[int, int, int]], ordered: bool
) -> None:
    """Runs (a transaction's values) long and short, in timestamp order (an index, a
    catch-up scan) or not (live values): the decoder bisects for runs while they pay."""
    if ordered:
        runs.sort()
    pairs = [(wall, logical) for wall, logical, length in runs for _ in range(length)]
    made = timestamps_of([wall for wall, _ in pairs], [logical for _, logical in pairs])
    assert made == [Timestamp(*pair) for pair in pairs]
    assert all(type(ts) is Timestamp for ts in made)
    row = 0
    for _, _, length in runs:
        assert len({id(ts) for ts in made[row : row + length]}) == 1
        row += length


def run(wall: int, length: int) -> list[Timestamp]:
    return [Timestamp(T0 + wall)] * length


@pytest.mark.parametrize(
    ("column", "ends"),
    [
        ([], []),
        (run(1, 8), [8]),
        (run(1, 7), []),  # too short to pay
        (run(1, 30) + run(2, 20) + run(3, 1) + run(4, 1), [30, 50, 51, 52]),
        (run(7, 20) + run(5, 20) + run(6, 9), [20, 40, 49]),  # out of order: galloped
        (run(5, 20) + run(3, 1) + run(5, 20), [20, 21, 41]),  # a timestamp comes back
        ([Timestamp(T0 + i) for i in range(40)], []),  # single-key writes
        ((run(1, 4) + run(2, 4)) * 5, []),  # runs too short, out of order
    ],
    ids=[
        "empty",
        "one run",
        "one short run",
        "runs then single writes",
        "out of order",
        "a timestamp that comes back",
        "single writes",
        "short runs out of order",
    ],
)
def test_runs_are_found_in_order_or_not_while_they_pay(
    column: list[Timestamp], ends: list[int]
) -> None:
    assert run_ends(column) == ends
    assert run_ends([bytes(str(ts), "ascii") for ts in sorted(column)], bytes) == run_ends(
        sorted(column)
    )
