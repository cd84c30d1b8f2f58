"""The changefeed progress machine's rules, as tables (no node, no Spark, no threads):
windows and their ends (``end_time``, a schema change that stops the feed, backfills),
which values are emitted, when the sink is flushed and when a resolved marker is due."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import pytest

from feedkv.changefeed.frontier import (
    Admission,
    Advance,
    Ended,
    Frontier,
    SchemaPlan,
    Window,
    plan_schema_changes,
)
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.schema_history import SchemaChange
from feedkv.sql.descriptor import Column, Family, TableDescriptor
from feedkv.sql.types import ColumnType, Kind
from feedkv.util.hlc import Timestamp

T1, T2 = 1, 2  # table ids

INT = ColumnType(Kind.INT)
TABLE = TableDescriptor(
    id=T1,
    name="t",
    database_id=50,
    columns=(Column(1, "k", INT, nullable=False),),
    primary_key=(1,),
    families=(Family(0, "primary", ()),),
)


def ts(wall: int) -> Timestamp:
    return Timestamp(wall)


def added(at: int, *, default: str | None = None, table: int = T1) -> SchemaChange:
    """A column added: with a ``default`` it rewrites every row; without, it changes the
    columns and rewrites none."""
    after = replace(TABLE, columns=(*TABLE.columns, Column(2, "n", INT, default=default)))
    return SchemaChange(ts(at), replace(TABLE, id=table), replace(after, id=table, version=2))


def dropped(at: int, *, table: int = T1) -> SchemaChange:
    return SchemaChange(ts(at), replace(TABLE, id=table), replace(TABLE, id=table, dropped=True))


def rewriting(at: int, *, table: int = T1) -> SchemaChange:
    return added(at, default="7", table=table)


def nullable(at: int, *, table: int = T1) -> SchemaChange:
    return added(at, table=table)


@dataclass
class History:
    """A table's schema changes, as :class:`SchemaHistory` reports them; counts reads."""

    found: list[SchemaChange]
    reads: int = 0

    def changes(self, lo: Timestamp, hi: Timestamp) -> list[SchemaChange]:
        self.reads += 1
        return [c for c in self.found if lo < c.ts <= hi]


def histories(*changes: SchemaChange) -> dict[int, History]:
    tables: dict[int, History] = {T1: History([]), T2: History([])}
    for change in changes:
        tables[change.after.id].found.append(change)
    return tables


def options(**fields: Any) -> ChangefeedOptions:
    if "end_time" in fields:
        fields["end_time"] = ts(fields["end_time"])
    return ChangefeedOptions(**fields)


# Which schema changes count, and what each policy does about them.

ADD_VALUE, ADD_NULL, DROP = rewriting(10), nullable(10), dropped(10)

PLANS = [
    # (events, policy, change, plan)
    ("default", "backfill", ADD_VALUE, SchemaPlan()),  # its rows come through the feed
    ("default", "backfill", ADD_NULL, SchemaPlan()),  # does not count
    ("column_changes", "backfill", ADD_NULL, SchemaPlan(backfills=((T1, ADD_NULL),))),
    ("column_changes", "backfill", ADD_VALUE, SchemaPlan()),
    ("default", "nobackfill", ADD_VALUE, SchemaPlan(skipped=frozenset({(T1, ts(10))}))),
    ("column_changes", "nobackfill", ADD_NULL, SchemaPlan()),  # rewrote nothing to leave out
    ("default", "stop", ADD_VALUE, SchemaPlan(stop=ADD_VALUE)),
    ("default", "stop", ADD_NULL, SchemaPlan()),
    ("column_changes", "stop", ADD_NULL, SchemaPlan(stop=ADD_NULL)),
    ("default", "backfill", DROP, SchemaPlan(stop=DROP)),  # a dropped table always stops
    ("default", "nobackfill", DROP, SchemaPlan(stop=DROP)),
]


@pytest.mark.parametrize(("events", "policy", "change", "plan"), PLANS)
def test_a_schema_change_is_planned_by_the_events_that_count_and_the_policy(
    events: str, policy: str, change: SchemaChange, plan: SchemaPlan
) -> None:
    o = options(schema_change_events=events, schema_change_policy=policy)
    assert plan_schema_changes(o, histories(change), ts(0), ts(20)) == plan


def test_a_plan_ends_at_the_first_change_that_stops_the_feed() -> None:
    before, stop, after = nullable(5, table=T2), dropped(10), nullable(15, table=T2)
    o = options(schema_change_events="column_changes")
    plan = plan_schema_changes(o, histories(before, stop, after), ts(0), ts(20))
    assert plan == SchemaPlan(stop=stop, backfills=((T2, before),))


def test_a_plan_covers_its_window_only() -> None:
    o = options(schema_change_events="column_changes")
    history = histories(nullable(10))
    assert plan_schema_changes(o, history, ts(10), ts(20)) == SchemaPlan()  # lo is exclusive
    assert plan_schema_changes(o, history, ts(0), ts(10)).backfills  # hi is inclusive


# The next batch (the Spark job's windows).

STOP = rewriting(30)
BACKFILL = nullable(20)

WINDOWS = [
    # (options, changes, high water, resolved, next)
    ({}, (), 10, 10, None),  # nothing new resolved
    ({}, (), 10, 5, None),  # the follower behind the offset
    ({}, (), 10, 40, Window(ts(10), ts(40))),
    ({"end_time": 25}, (), 10, 40, Window(ts(10), ts(25), final=True)),
    ({"end_time": 25}, (), 10, 25, Window(ts(10), ts(25), final=True)),
    ({"end_time": 25}, (), 10, 20, Window(ts(10), ts(20))),
    ({"end_time": 25}, (), 25, 40, Ended()),
    (
        {"schema_change_policy": "stop"},
        (STOP,),
        10,
        40,
        Window(ts(10), STOP.ts.prev(), final=True),
    ),
    ({"schema_change_policy": "stop"}, (STOP,), 29, 29, None),  # not resolved past it yet
    ({"schema_change_policy": "stop"}, (STOP,), 10, 29, Window(ts(10), ts(29))),
    ({"schema_change_policy": "stop"}, (STOP,), 29, 40, Window(ts(29), STOP.ts.prev(), True)),
    (
        {"schema_change_policy": "stop", "end_time": 25},
        (STOP,),
        10,
        40,
        Window(ts(10), ts(25), True),
    ),
    ({"schema_change_events": "column_changes"}, (BACKFILL,), 10, 40, Window(ts(10), ts(20))),
    ({"schema_change_events": "column_changes"}, (BACKFILL,), 20, 40, Window(ts(20), ts(40))),
    (
        {"schema_change_events": "column_changes", "schema_change_policy": "backfill"},
        (BACKFILL, dropped(25, table=T2)),
        10,
        40,
        Window(ts(10), ts(20)),
    ),
    ({"schema_change_policy": "nobackfill"}, (rewriting(20),), 10, 40, Window(ts(10), ts(40))),
]


@pytest.mark.parametrize(("fields", "changes", "high_water", "resolved", "expected"), WINDOWS)
def test_the_next_window(
    fields: dict[str, Any],
    changes: tuple[SchemaChange, ...],
    high_water: int,
    resolved: int,
    expected: Window | Ended | None,
) -> None:
    frontier = Frontier(options(**fields), histories(*changes), Timestamp(high_water))
    assert frontier.next_window(ts(resolved)) == expected


def test_after_the_window_before_a_stop_the_feed_ends_with_the_change() -> None:
    o = options(schema_change_policy="stop")
    frontier = Frontier(o, histories(STOP), STOP.ts.prev())
    assert frontier.next_window(ts(40)) == Ended(STOP)


def test_a_stop_after_end_time_ends_the_feed_at_end_time_without_an_error() -> None:
    o = options(schema_change_policy="stop", end_time=25)
    frontier = Frontier(o, histories(STOP), ts(25))
    assert frontier.next_window(ts(40)) == Ended()


# The stream (the thread runner): values.


def test_a_value_after_end_time_is_not_emitted_and_plans_nothing() -> None:
    history = histories(nullable(30))
    frontier = Frontier(options(end_time=25, schema_change_events="column_changes"), history, ts(0))
    assert frontier.admit(ts(35)) == Admission((), False)
    assert history[T1].reads == 0


def test_a_value_past_a_backfill_change_follows_its_scan() -> None:
    o = options(schema_change_events="column_changes")
    frontier = Frontier(o, histories(BACKFILL), ts(0))
    assert frontier.admit(ts(15)) == Admission((), True)
    assert frontier.admit(ts(20)) == Admission(((T1, BACKFILL),), True)
    assert frontier.admit(ts(25)) == Admission((), True)  # each backfill once


def test_values_at_or_after_a_change_that_stops_are_not_emitted() -> None:
    frontier = Frontier(options(schema_change_policy="stop"), histories(STOP), ts(0))
    assert frontier.admit(STOP.ts.prev()) == Admission((), True)
    assert frontier.admit(STOP.ts) == Admission((), False)
    assert frontier.admit(ts(35)) == Admission((), False)


def test_nobackfill_leaves_out_the_rows_a_change_rewrote() -> None:
    change = rewriting(20)
    frontier = Frontier(options(schema_change_policy="nobackfill"), histories(change), ts(0))
    assert frontier.admit(ts(20)) == Admission((), True)
    assert frontier.rewritten(T1, ts(20))
    assert not frontier.rewritten(T2, ts(20))
    assert not frontier.rewritten(T1, ts(21))


# The stream: checkpoints, flushes and markers. Each row: a checkpoint at `at` seen at
# `now` seconds, and what the driver is told to do (None: hold).

CADENCES = [
    (
        "flushes at least every min_checkpoint_frequency",
        {"min_checkpoint_frequency": 5.0},
        [(10, 1.0, None), (11, 4.9, None), (12, 5.0, Advance(ts(12))), (13, 9.0, None)],
    ),
    (
        "a marker at most every resolved, each with a flush",
        {"min_checkpoint_frequency": 5.0, "resolved": 10.0},
        [
            (10, 9.9, Advance(ts(10))),
            (11, 10.0, Advance(ts(11), marker=True)),
            (12, 15.0, Advance(ts(12))),
            (13, 20.0, Advance(ts(13), marker=True)),
        ],
    ),
    (
        # CockroachDB's docs: resolved messages "cannot be emitted more frequently" than
        # min_checkpoint_frequency, whatever resolved asks
        "a marker never more often than min_checkpoint_frequency",
        {"min_checkpoint_frequency": 30.0, "resolved": 10.0},
        [
            (10, 10.0, None),
            (11, 29.9, None),
            (12, 30.0, Advance(ts(12), marker=True)),
            (13, 50.0, None),
            (14, 60.0, Advance(ts(14), marker=True)),
        ],
    ),
    (
        "flushes between markers carry none",
        {"min_checkpoint_frequency": 2.0, "resolved": 10.0},
        [(10, 2.0, Advance(ts(10))), (11, 10.0, Advance(ts(11), marker=True))],
    ),
    (
        "a checkpoint at or below the high-water mark moves nothing",
        {"min_checkpoint_frequency": 0.0},
        [(0, 50.0, None), (10, 50.0, Advance(ts(10))), (10, 60.0, None), (9, 60.0, None)],
    ),
    (
        "end_time: the final window, with its marker whatever the cadence",
        {"min_checkpoint_frequency": 30.0, "resolved": 60.0, "end_time": 25},
        [(20, 1.0, None), (40, 2.0, Advance(ts(25), marker=True, final=True))],
    ),
    (
        "end_time without markers",
        {"min_checkpoint_frequency": 30.0, "end_time": 25},
        [(25, 1.0, Advance(ts(25), final=True))],
    ),
]


@pytest.mark.parametrize(
    ("fields", "steps"), [c[1:] for c in CADENCES], ids=[c[0] for c in CADENCES]
)
def test_checkpoints_flush_and_mark_on_their_cadences(
    fields: dict[str, Any], steps: list[tuple[int, float, Advance | None]]
) -> None:
    frontier = Frontier(options(**fields), histories(), ts(0), marker_at=0.0, flushed_at=0.0)
    for at, now, expected in steps:
        assert frontier.reach(ts(at)) == ()
        assert (at, frontier.advance(now)) == (at, expected)


def test_a_stop_ends_the_stream_one_tick_before_the_change_with_its_marker() -> None:
    o = options(schema_change_policy="stop", resolved=60.0)
    frontier = Frontier(o, histories(STOP), ts(0), marker_at=0.0, flushed_at=0.0)
    assert frontier.reach(ts(40)) == ()
    assert frontier.advance(1.0) == Advance(STOP.ts.prev(), marker=True, final=True, error=STOP)
    assert frontier.high_water == STOP.ts.prev()


def test_a_checkpoint_one_tick_before_a_stop_is_final_once_a_later_one_shows_the_change() -> None:
    o = options(schema_change_policy="stop", min_checkpoint_frequency=0.0)
    frontier = Frontier(o, histories(STOP), ts(0), flushed_at=0.0)
    frontier.reach(STOP.ts.prev())
    assert frontier.advance(1.0) == Advance(STOP.ts.prev())
    frontier.reach(ts(40))
    assert frontier.advance(2.0) == Advance(STOP.ts.prev(), final=True, error=STOP)


def test_a_stop_after_end_time_ends_the_stream_at_end_time_without_an_error() -> None:
    o = options(schema_change_policy="stop", end_time=STOP.ts.wall)
    frontier = Frontier(o, histories(STOP), ts(0), flushed_at=0.0)
    frontier.reach(ts(40))
    assert frontier.advance(1.0) == Advance(STOP.ts.prev(), final=True, error=STOP)

    o = options(schema_change_policy="stop", end_time=25)
    frontier = Frontier(o, histories(STOP), ts(0), flushed_at=0.0)
    frontier.reach(ts(40))
    assert frontier.advance(1.0) == Advance(ts(25), final=True)


def test_a_checkpoint_past_a_backfill_change_is_due_its_scan_first() -> None:
    o = options(schema_change_events="column_changes")
    frontier = Frontier(o, histories(BACKFILL), ts(0), flushed_at=0.0)
    assert frontier.reach(ts(25)) == ((T1, BACKFILL),)
    assert frontier.reach(ts(30)) == ()


def test_no_backfill_is_due_for_a_change_after_end_time() -> None:
    # NB: the thread runner used to scan it when a checkpoint passed end_time.
    o = options(schema_change_events="column_changes", end_time=15)
    frontier = Frontier(o, histories(BACKFILL), ts(0), flushed_at=0.0)
    assert frontier.reach(ts(25)) == ()
    assert frontier.advance(1.0) == Advance(ts(15), final=True)


# Batches committed (the Spark job's markers).


def committed(frontier: Frontier, *batches: tuple[int, float]) -> list[bool]:
    return [frontier.committed(ts(hi), now) for hi, now in batches]


def test_batch_markers_come_first_at_once_then_at_most_every_resolved() -> None:
    frontier = Frontier(options(resolved=10.0, min_checkpoint_frequency=1.0), histories(), ts(0))
    batches = [(1, 0.0), (2, 4.0), (3, 9.9), (4, 10.0), (5, 15.0), (6, 20.0)]
    assert committed(frontier, *batches) == [True, False, False, True, False, True]


def test_batch_markers_come_no_more_often_than_min_checkpoint_frequency() -> None:
    frontier = Frontier(options(resolved=1.0), histories(), ts(0))  # the default: 30 s
    batches = [(1, 0.0), (2, 1.0), (3, 29.9), (4, 30.0), (5, 31.0)]
    assert committed(frontier, *batches) == [True, False, False, True, False]


def test_no_batch_marker_without_the_resolved_option() -> None:
    frontier = Frontier(options(), histories(), ts(0))
    assert committed(frontier, (1, 0.0), (2, 100.0)) == [False, False]


def test_the_batch_marker_at_end_time_is_always_due() -> None:
    frontier = Frontier(options(resolved=3600.0, end_time=25), histories(), ts(0))
    assert committed(frontier, (10, 0.0), (20, 1.0), (25, 2.0)) == [True, False, True]


def test_the_batch_marker_one_tick_before_a_stop_is_always_due() -> None:
    o = options(resolved=3600.0, schema_change_policy="stop")
    history = histories(STOP)
    frontier = Frontier(o, history, ts(0))
    assert committed(frontier, (10, 0.0), (20, 1.0)) == [True, False]
    assert frontier.committed(STOP.ts.prev(), 2.0)


def test_a_due_batch_marker_reads_no_schema_history() -> None:
    history = histories(STOP)
    o = options(resolved=1.0, min_checkpoint_frequency=1.0, schema_change_policy="stop")
    frontier = Frontier(o, history, ts(0))
    assert committed(frontier, (10, 0.0), (20, 5.0)) == [True, True]
    assert history[T1].reads == 0


# Seeded simulations: random schedules of checkpoints, end times and schema changes.


def stream_run(frontier: Frontier, checkpoints: list[int]) -> tuple[list[Advance], bool]:
    """Drives ``frontier`` as the thread runner does; the advances, and whether it ended."""
    advances = []
    for now, at in enumerate(checkpoints):
        frontier.reach(ts(at))
        advance = frontier.advance(float(now))
        if advance is not None:
            advances.append(advance)
            if advance.final:
                return advances, True
    return advances, False


def batch_run(frontier: Frontier, checkpoints: list[int]) -> tuple[list[Window], Ended | None]:
    """Drives ``frontier`` as the Spark job does, a batch per resolved timestamp."""
    windows = []
    for at in [*checkpoints, checkpoints[-1]]:  # once more: does the job end?
        window = frontier.next_window(ts(at))
        if isinstance(window, Ended):
            return windows, window
        if window is not None:
            windows.append(window)
            frontier.high_water = window.hi
    return windows, None


@pytest.mark.parametrize("seed", range(300))
def test_the_stream_and_the_batches_end_at_the_same_place_with_the_same_error(seed: int) -> None:
    rng = random.Random(seed)
    changes = [rewriting(rng.randint(2, 60))] if rng.random() < 0.7 else []
    fields: dict[str, Any] = {
        "schema_change_policy": rng.choice(["stop", "backfill"]),
        "resolved": rng.choice([None, 1.0, 3.0]),
        "min_checkpoint_frequency": rng.choice([0.0, 2.0]),
    }
    if rng.random() < 0.5:
        fields["end_time"] = rng.randint(2, 60)
    o = options(**fields)
    checkpoints = sorted(rng.sample(range(1, 80), rng.randint(1, 12)))

    advances, stream_ended = stream_run(
        Frontier(o, histories(*changes), ts(0), marker_at=0.0, flushed_at=0.0), checkpoints
    )
    windows, ended = batch_run(Frontier(o, histories(*changes), ts(0)), checkpoints)

    marks = [a.to for a in advances]
    assert marks == sorted(set(marks)), "the high-water mark only moves forward"
    assert [w.lo for w in windows[1:]] == [w.hi for w in windows[:-1]], "windows abut"
    limits = [ts(o.end_time.wall)] if o.end_time is not None else []
    if o.schema_change_policy == "stop":
        limits += [c.ts.prev() for c in changes]
    limit = min(limits, default=ts(80))
    assert all(a.to <= limit for a in advances) and all(w.hi <= limit for w in windows)
    assert (ended is not None) == stream_ended
    if stream_ended:
        final = advances[-1]
        assert windows and windows[-1] == Window(windows[-1].lo, final.to, final=True)
        assert ended is not None and ended.error == final.error
        assert final.marker == (o.resolved is not None)
    assert [w for w in windows if w.final] == (windows[-1:] if ended is not None else [])
