"""Tests for feedkv.rangefeed.registration: one consumer's subscription to one range.

A processor appends each value once to a shared log; a registration reads that log from
its own cursor when its consumer takes. While it catches up it reads nothing, so live
values collect in the log behind its cursor; once live it sends them, then its first
checkpoint, dropping what is at or below its start timestamp or outside its span. Each
logged value is charged to the budget once and released when every reader has read past
it and the log is trimmed. A reader more than ``per_registration`` values behind, or
holding the log when the budget is spent, gets ``SLOW_CONSUMER`` as its last event; an
ending range delivers what was logged before it, then the reason.

Each test drives a real processor, registrations, streams and budget on one thread,
through logical ops and closed timestamps.
"""

from __future__ import annotations

import pytest

from feedkv.kv.observer import RangeEndReason
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import (
    Checkpoint,
    Error,
    ErrorReason,
    Event,
    Value,
    values_of,
)
from feedkv.rangefeed.event_log import LoggedValues
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.registration import Registration, event_size, values_size
from feedkv.rangefeed.stream import EventStream, ValueBatch
from feedkv.storage.logical_ops import CommitIntent, WriteValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

RANGE = Span(b"a", b"z")  # the processor's range
SPAN = Span(b"c", b"m")  # a registration's span, inside it
CLOSED = Timestamp(5, 0)  # the processor's resolved timestamp once initialised
START = Timestamp(10, 0)  # exclusive


def t(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


def value(wall: int, key: bytes = b"k", data: bytes = b"v", prev: bytes | None = None) -> Value:
    return Value(key, data, t(wall), prev)


def size(*values: Value) -> int:
    return sum(event_size(v) for v in values)


def make_processor(*, budget: Budget | None = None) -> Processor:
    """A processor of ``RANGE`` with no intents, resolved at ``CLOSED``."""
    processor = Processor(1, RANGE, budget or Budget(1 << 20))
    processor.init([], CLOSED)
    return processor


def register(
    processor: Processor,
    tag: str = "r",
    *,
    span: Span = SPAN,
    start_ts: Timestamp = START,
    with_diff: bool = False,
    per_registration: int = 100,
    values: bool = True,
) -> Registration:
    """A registration on a stream of its own, catching up."""
    stream = EventStream(processor.budget, per_registration=per_registration)
    reg = Registration(tag, span, start_ts, with_diff, stream, values=values)
    processor.register(reg)
    return reg


def live(
    processor: Processor,
    tag: str = "r",
    *,
    span: Span = SPAN,
    with_diff: bool = False,
    per_registration: int = 100,
) -> Registration:
    """A registration past its catch-up, with its first checkpoint already taken."""
    reg = register(
        processor, tag, span=span, with_diff=with_diff, per_registration=per_registration
    )
    processor.finish_catch_up(reg)
    assert taken(reg) == [Checkpoint(span, processor.resolved)]
    return reg


def log(processor: Processor, *values: Value) -> None:
    """Apply one command writing ``values``."""
    processor.on_ops([WriteValue(v.key, v.ts, v.value, v.prev_value) for v in values])


def push_page(reg: Registration, *values: Value) -> bool:
    """What a catch-up scan does from its worker thread: push a page of history."""
    page = ValueBatch(list(values), max(v.ts for v in values))
    return reg.stream.push_wait(reg, page, size(*values), timeout=0)


def taken(reg: Registration) -> list[Event]:
    """Everything ``reg``'s consumer can take now, without waiting."""
    events = reg.stream.take(timeout=0)
    assert all(tag == reg.tag for tag, _event in events)
    return [event for _tag, event in events]


def is_slow(event: Event) -> bool:
    return isinstance(event, Error) and event.reason is ErrorReason.SLOW_CONSUMER


# --- the start timestamp --------------------------------------------------------------


def test_values_at_or_below_the_start_are_never_sent_while_catching_up() -> None:
    processor = make_processor()
    reg = register(processor)
    log(processor, value(7), value(10), Value(b"k", b"v", START.next()))
    processor.finish_catch_up(reg)
    assert taken(reg) == [Value(b"k", b"v", START.next()), Checkpoint(SPAN, CLOSED)]


def test_values_at_or_below_the_start_are_never_sent_when_live() -> None:
    processor = make_processor()
    reg = live(processor)  # its first checkpoint (CLOSED) is below the start
    log(processor, value(7), value(10), value(11))
    assert taken(reg) == [value(11)]
    assert reg.done is False


# --- catching up ----------------------------------------------------------------------


def test_live_values_wait_in_the_log_while_catching_up() -> None:
    processor = make_processor()
    reg = register(processor)
    log(processor, value(11, b"d"))
    log(processor, value(12, b"e"))
    assert reg.catching_up is True
    assert taken(reg) == []
    assert processor.log.values == [value(11, b"d"), value(12, b"e")]
    # Logged values already count against the budget.
    assert processor.budget.used == size(value(11, b"d"), value(12, b"e"))


def test_finish_catch_up_sends_the_logged_values_then_the_first_checkpoint() -> None:
    processor = make_processor()
    reg = register(processor)
    log(processor, value(11, b"d"))
    log(processor, value(12, b"e"))
    processor.finish_catch_up(reg)
    assert reg.catching_up is False
    assert taken(reg) == [value(11, b"d"), value(12, b"e"), Checkpoint(SPAN, CLOSED)]


def test_checkpoints_are_not_sent_while_catching_up() -> None:
    processor = make_processor()
    reg = register(processor)
    processor.on_closed(t(15))
    log(processor, value(16))
    processor.on_closed(t(17))
    assert taken(reg) == []
    processor.finish_catch_up(reg)
    assert taken(reg) == [value(16), Checkpoint(SPAN, t(17))]


def test_catch_up_pages_come_before_the_logged_values() -> None:
    processor = make_processor()
    reg = register(processor)
    log(processor, value(13, b"live"))
    assert push_page(reg, value(11, b"scan"), value(12, b"scan")) is True
    processor.finish_catch_up(reg)
    assert taken(reg) == [
        value(11, b"scan"),
        value(12, b"scan"),
        value(13, b"live"),
        Checkpoint(SPAN, CLOSED),
    ]
    # The page's memory went back when taken; the logged value stays until trimmed.
    assert processor.budget.used == size(value(13, b"live"))


def test_going_live_needs_no_more_memory() -> None:
    # The logged values were charged when they were logged; a budget they fill exactly
    # must not stop the registration from reading them and its first checkpoint.
    logged = [value(11, b"d"), value(12, b"e")]
    processor = make_processor(budget=Budget(size(*logged)))
    reg = register(processor)
    log(processor, *logged)
    processor.finish_catch_up(reg)
    assert taken(reg) == [*logged, Checkpoint(SPAN, CLOSED)]
    assert reg.done is False


def test_a_reader_exactly_per_registration_values_behind_goes_live_cleanly() -> None:
    processor = make_processor()
    reg = register(processor, per_registration=2)
    log(processor, value(11))
    log(processor, value(12))
    processor.finish_catch_up(reg)
    assert taken(reg) == [value(11), value(12), Checkpoint(SPAN, CLOSED)]
    assert reg.done is False


# --- live -----------------------------------------------------------------------------


def test_a_take_reads_every_logged_value_then_the_newest_checkpoint() -> None:
    processor = make_processor()
    reg = live(processor)
    log(processor, value(21, b"d"))
    processor.on_closed(t(21))
    log(processor, value(22, b"e"))
    processor.on_closed(t(22))
    log(processor, value(23, b"f"))
    # value 23 was logged after the checkpoint at 22, so it is above it: the promise
    # holds with the checkpoint after it, and the one at 21 says nothing more.
    assert taken(reg) == [
        value(21, b"d"),
        value(22, b"e"),
        value(23, b"f"),
        Checkpoint(SPAN, t(22)),
    ]
    processor.on_closed(t(23))
    assert taken(reg) == [Checkpoint(SPAN, t(23))]


def test_registrations_at_the_same_place_read_the_same_list() -> None:
    processor = make_processor()
    first, second = live(processor, "first"), live(processor, "second")
    log(processor, value(21, b"d"), value(22, b"e"))
    [(_, a)] = first.stream.take_batches(timeout=0)
    [(_, b)] = second.stream.take_batches(timeout=0)
    assert isinstance(a, ValueBatch) and isinstance(b, ValueBatch)
    assert a.values is b.values  # so the gRPC service sends it once for both


def test_logged_values_are_taken_as_one_batch_bounded_by_the_newest_timestamp() -> None:
    processor = make_processor()
    reg = live(processor)
    log(processor, value(21, b"d"))
    log(processor, value(22, b"e"))
    assert reg.stream.take_batches(timeout=0) == [
        ("r", ValueBatch([value(21, b"d"), value(22, b"e")], t(22)))
    ]


def test_a_slice_of_the_log_carries_its_keys_and_timestamps_as_plain_tuples() -> None:
    processor = make_processor()
    reg = live(processor, with_diff=True)
    log(processor, value(21, b"d", prev=b"p"), value(22, b"e"))
    [(_, batch)] = reg.stream.take_batches(timeout=0)
    assert isinstance(batch, ValueBatch) and isinstance(batch.values, LoggedValues)
    assert batch.values == [value(21, b"d", prev=b"p"), value(22, b"e")]
    assert batch.values.keys == [b"d", b"e"]
    # plain tuples, which the collector stops tracking, not Timestamps
    assert [type(s) for s in batch.values.stamps] == [tuple, tuple]
    assert batch.values.stamps == [(21, 0), (22, 0)]


def test_values_every_reader_has_read_are_let_go_every_few_hundred_appends() -> None:
    processor = make_processor()
    reg = live(processor, span=RANGE, per_registration=100_000)
    for wall in range(21, 21 + 1000):
        log(processor, value(wall))
        taken(reg)
    # not kept until the log is per_registration long: the collector would see each
    # value survive its young generations
    assert processor.log.base > 1000 - 300
    assert len(processor.log.values) < 300
    assert processor.budget.used == size(*processor.log.values)


# --- span and diffs -------------------------------------------------------------------


def test_values_outside_the_span_are_not_sent() -> None:
    processor = make_processor()
    whole = live(processor, "whole", span=RANGE)
    part = live(processor, "part", span=SPAN)
    keys = [b"b", b"c", b"k", b"m", b"x"]  # SPAN is [c, m)
    log(processor, *(value(21 + i, key) for i, key in enumerate(keys)))
    assert [e.key for e in taken(whole) if isinstance(e, Value)] == keys
    assert [e.key for e in taken(part) if isinstance(e, Value)] == [b"c", b"k"]


def test_the_log_key_bounds_hold_every_key_ever_logged() -> None:
    processor = make_processor()
    reg = live(processor, span=RANGE, per_registration=3)
    assert processor.key_bounds[0] > processor.key_bounds[1]  # nothing logged: empty
    log(processor, value(21, b"k"), value(22, b"d"))
    assert processor.key_bounds == (b"d", b"k")
    log(processor, value(23, b"x"))
    assert processor.key_bounds == (b"d", b"x")
    assert [e.key for e in taken(reg) if isinstance(e, Value)] == [b"k", b"d", b"x"]
    log(processor, value(24, b"e"), value(25, b"f"), value(26, b"a"))  # a trim at e
    assert processor.log.base == 3
    assert processor.key_bounds == (b"a", b"x")


def test_a_part_of_the_range_gets_only_its_keys_before_and_after_the_log_held_others() -> None:
    processor = make_processor()
    whole = live(processor, "whole", span=RANGE, per_registration=3)
    part = live(processor, "part", span=SPAN, per_registration=3)  # [c, m)

    def keys(reg: Registration) -> list[bytes]:
        return [e.key for e in taken(reg) if isinstance(e, Value)]

    log(processor, value(21, b"d"), value(22, b"e"))
    assert (keys(part), keys(whole)) == ([b"d", b"e"], [b"d", b"e"])
    log(processor, value(23, b"b"), value(24, b"k"), value(25, b"y"))
    assert (keys(part), keys(whole)) == ([b"k"], [b"b", b"k", b"y"])
    log(processor, value(26, b"f"), value(27, b"g"))  # a trim: b and y are let go
    assert processor.key_bounds == (b"b", b"y")  # so part's reads check each slice
    assert (keys(part), keys(whole)) == ([b"f", b"g"], [b"f", b"g"])


def test_a_value_no_registration_covers_is_not_logged() -> None:
    processor = make_processor()
    reg = live(processor)
    log(processor, value(21, b"x"))
    assert processor.log.values == []
    assert processor.budget.used == 0
    assert taken(reg) == []


def test_a_diff_registration_gets_prev_value_and_a_plain_one_does_not() -> None:
    processor = make_processor()
    diff = live(processor, "diff", with_diff=True)
    plain = live(processor, "plain")
    log(processor, value(21, data=b"new", prev=b"old"))
    assert taken(diff) == [value(21, data=b"new", prev=b"old")]
    assert taken(plain) == [value(21, data=b"new")]


# --- the budget -----------------------------------------------------------------------


def test_a_value_is_charged_once_however_many_registrations_read_it() -> None:
    processor = make_processor()
    first, second = live(processor, "first"), live(processor, "second")
    log(processor, value(21))
    assert processor.log.values == [value(21)]
    assert processor.budget.used == size(value(21))
    assert taken(first) == [value(21)]
    assert taken(second) == [value(21)]


def test_a_value_is_charged_with_its_prev_value_only_while_a_reader_wants_diffs() -> None:
    big = Value(b"k", b"x" * 100, t(21), b"y" * 50)
    plain = make_processor()
    live(plain)
    log(plain, big)
    assert plain.budget.used == event_size(big._replace(prev_value=None))
    diff = make_processor()
    live(diff, with_diff=True)
    log(diff, big)
    assert diff.budget.used == event_size(big)


def test_a_value_stays_charged_until_every_reader_has_read_past_it() -> None:
    processor = make_processor()
    fast = live(processor, "fast", per_registration=2)  # the log is trimmed every 2 values
    lagging = live(processor, "lagging")
    log(processor, value(21))
    log(processor, value(22))
    assert taken(fast) == [value(21), value(22)]
    log(processor, value(23))  # a trim: the lagging reader holds all three
    assert processor.budget.used == size(value(21), value(22), value(23))
    assert taken(lagging) == [value(21), value(22), value(23)]
    assert taken(fast) == [value(23)]
    log(processor, value(24))  # a trim: both have read past the first three
    assert processor.log.base == 3
    assert processor.budget.used == size(value(24))
    assert (fast.done, lagging.done) == (False, False)


# --- slow consumers -------------------------------------------------------------------


def test_a_reader_more_than_per_registration_values_behind_ends_with_slow_consumer() -> None:
    processor = make_processor()
    reg = live(processor, per_registration=2)
    log(processor, value(21))
    log(processor, value(22))
    assert reg in processor.registry  # two behind: at the limit, not past it
    log(processor, value(23))
    assert reg not in processor.registry
    assert reg.done is True
    events = taken(reg)
    assert len(events) == 1
    assert is_slow(events[0])
    # Nothing follows, and the log it held is given back.
    log(processor, value(24))
    processor.on_closed(t(30))
    assert taken(reg) == []
    assert processor.budget.used == 0


def test_falling_behind_while_catching_up_ends_with_slow_consumer() -> None:
    processor = make_processor()
    reg = register(processor, per_registration=2)
    log(processor, value(11))
    log(processor, value(12))
    log(processor, value(13))
    assert reg.done is True
    assert [is_slow(e) for e in taken(reg)] == [True]
    assert processor.budget.used == 0
    # Nothing follows: not the scan's late pages, not a first checkpoint.
    assert push_page(reg, value(9, b"d")) is False
    processor.finish_catch_up(reg)
    log(processor, value(14))
    assert taken(reg) == []


def test_the_slow_consumer_message_names_the_span_and_the_limit() -> None:
    processor = make_processor()
    reg = live(processor, per_registration=1)
    log(processor, value(21))
    log(processor, value(22))
    [error] = taken(reg)
    assert isinstance(error, Error)
    assert error.reason is ErrorReason.SLOW_CONSUMER
    assert error.reason.retryable
    assert str(SPAN) in error.message
    assert "limit 1" in error.message


def test_a_slow_reader_does_not_affect_the_others_on_its_processor() -> None:
    processor = make_processor()
    slow = live(processor, "slow", per_registration=2)
    fast = live(processor, "fast", per_registration=2)
    delivered: list[Event] = []
    for wall in (21, 22, 23):
        log(processor, value(wall))
        delivered += taken(fast)
    processor.on_closed(t(30))
    delivered += taken(fast)
    assert slow.done is True
    assert fast.done is False
    assert delivered == [value(21), value(22), value(23), Checkpoint(SPAN, t(30))]
    assert [is_slow(e) for e in taken(slow)] == [True]


def test_running_out_of_budget_ends_the_reader_holding_the_log_back() -> None:
    processor = make_processor(budget=Budget(size(value(21), value(22))))
    holding = live(processor, "holding")
    reading = live(processor, "reading")
    log(processor, value(21))
    log(processor, value(22))
    assert taken(reading) == [value(21), value(22)]
    log(processor, value(23))  # the budget is spent: the holding reader gives way
    assert holding.done is True
    assert [is_slow(e) for e in taken(holding)] == [True]
    assert reading.done is False
    assert taken(reading) == [value(23)]
    assert processor.budget.used == size(value(23))


def test_values_of_one_command_that_do_not_all_fit_make_room_one_by_one() -> None:
    processor = make_processor(budget=Budget(size(value(21), value(22))))
    holding = live(processor, "holding")
    reading = live(processor, "reading")
    log(processor, value(21))
    assert taken(reading) == [value(21)]
    log(processor, value(22), value(23))  # 22 fits beside 21; 23 needs 21 gone
    assert holding.done is True
    assert [is_slow(e) for e in taken(holding)] == [True]
    assert taken(reading) == [value(22), value(23)]
    assert processor.budget.used == size(value(22), value(23))


def test_a_budget_spent_elsewhere_ends_the_readers_instead_of_skipping_a_value() -> None:
    budget = Budget(size(value(21)))
    other, processor = make_processor(budget=budget), make_processor(budget=budget)
    live(other)
    reg = live(processor)
    log(other, value(21))  # the other processor's reader holds the whole budget
    log(processor, value(22))
    assert reg.done is True
    assert [is_slow(e) for e in taken(reg)] == [True]
    assert processor.log.values == []


def test_a_reader_cut_off_for_a_value_gets_no_checkpoint_placed_after_its_end() -> None:
    # The value it never got is below that checkpoint, and its feed would resume above it.
    budget = Budget(size(value(21)))
    other, processor = make_processor(budget=budget), make_processor(budget=budget)
    live(other)
    reg = live(processor)
    log(other, value(21))
    log(processor, value(22))  # not logged: the reader, caught up as it was, is cut off
    processor.on_closed(t(30))
    assert [is_slow(e) for e in taken(reg)] == [True]


def test_a_commit_whose_value_is_dropped_for_the_budget_is_not_checkpointed_past() -> None:
    # The command that resolves the intent moves the resolved timestamp past the value the
    # budget (closed here: the node is stopping) kept from the log, in the same breath.
    processor = Processor(1, RANGE, Budget(1 << 20))
    processor.init([(b"txn", b"a", t(20))], t(30))  # resolved just below the intent
    reg = live(processor)
    processor.budget.close()
    processor.on_ops([CommitIntent(b"txn", b"k", t(20), b"v", None)])
    assert processor.resolved == t(30)
    assert [is_slow(e) for e in taken(reg)] == [True]


# --- ending ---------------------------------------------------------------------------


def test_end_sends_the_reason_as_the_last_event_at_once() -> None:
    processor = make_processor()
    reg = live(processor)
    log(processor, value(21))  # not read yet: an end that is not after the log cuts it
    reg.end(ErrorReason.GC_THRESHOLD, "too old", t(5))
    assert reg.done is True
    assert taken(reg) == [Error(ErrorReason.GC_THRESHOLD, "too old", t(5))]
    log(processor, value(22))
    processor.on_closed(t(30))
    assert taken(reg) == []


def test_end_is_idempotent() -> None:
    processor = make_processor()
    reg = live(processor)
    reg.end(ErrorReason.RANGE_SPLIT, "split")
    reg.end(ErrorReason.RANGE_SPLIT, "split")
    reg.end(ErrorReason.SLOW_CONSUMER, "later")
    assert taken(reg) == [Error(ErrorReason.RANGE_SPLIT, "split")]
    reg.end(ErrorReason.UNREGISTERED)
    assert taken(reg) == []


def test_a_refused_registration_gets_its_error_straight_into_the_stream() -> None:
    reg = Registration("r", SPAN, START, False, EventStream(Budget(1 << 20)))
    reg.end(ErrorReason.RANGE_NOT_FOUND, "not inside one range")
    reg.end(ErrorReason.RANGE_NOT_FOUND, "not inside one range")
    assert reg.done is True
    assert taken(reg) == [Error(ErrorReason.RANGE_NOT_FOUND, "not inside one range")]
    assert taken(reg) == []


def test_an_ending_range_delivers_the_logged_values_then_the_reason() -> None:
    processor = make_processor()
    reg = live(processor)
    log(processor, value(21))
    processor.on_closed(t(25))
    log(processor, value(26))
    processor.on_range_ended(RangeEndReason.RANGE_SPLIT)
    log(processor, value(27))  # the processor has stopped
    assert taken(reg) == [
        value(21),
        value(26),
        Checkpoint(SPAN, t(25)),
        Error(ErrorReason.RANGE_SPLIT, "r1 ended: RANGE_SPLIT"),
    ]
    assert taken(reg) == []
    assert processor.budget.used == 0


def test_ending_the_processor_ends_every_registration_with_the_reason() -> None:
    processor = make_processor()
    first, second = live(processor, "first"), live(processor, "second", span=RANGE)
    log(processor, value(21))
    processor.end(ErrorReason.NODE_SHUTDOWN, "stopping")
    shutdown = Error(ErrorReason.NODE_SHUTDOWN, "stopping")
    assert taken(first) == [value(21), shutdown]
    assert taken(second) == [value(21), shutdown]
    assert len(processor.registry) == 0


def test_ending_while_catching_up_sends_no_logged_values() -> None:
    processor = make_processor()
    reg = register(processor)
    assert push_page(reg, value(11, b"scan")) is True
    log(processor, value(12, b"live"))
    processor.on_range_ended(RangeEndReason.RANGE_MERGED)
    assert taken(reg) == [
        value(11, b"scan"),
        Error(ErrorReason.RANGE_MERGED, "r1 ended: RANGE_MERGED"),
    ]
    processor.finish_catch_up(reg)  # the scan finishing late changes nothing
    assert taken(reg) == []


@pytest.mark.parametrize("ending", ["cut off", "range ended"])
def test_a_registration_ended_while_catching_up_sends_no_checkpoint(ending: str) -> None:
    processor = make_processor()
    processor.on_closed(t(20))  # a mark in the log before the registration's cursor
    reg = register(processor)
    assert push_page(reg, value(12, b"d")) is True  # the scan sent part of the history,
    if ending == "cut off":  # then stalled
        reg.end(ErrorReason.SLOW_CONSUMER, "catch-up stalled")
        processor.unregister(reg)
    else:
        processor.on_range_ended(RangeEndReason.RANGE_SPLIT)
    events = taken(reg)
    # NB: a Checkpoint(SPAN, 20) here moves the client's resume point to 20, so it
    # registers again after 20 and never gets the history the scan had left to send.
    assert [e for e in events if isinstance(e, Checkpoint)] == []
    assert events[:-1] == [value(12, b"d")]


# --- checkpoints only -----------------------------------------------------------------


def test_a_checkpoint_only_registration_reads_only_the_marks_and_never_holds_the_log() -> None:
    processor = make_processor()
    values = live(processor, "values", per_registration=1)
    checkpoints = register(processor, "checkpoints", values=False, per_registration=1)
    processor.finish_catch_up(checkpoints)
    assert taken(checkpoints) == [Checkpoint(SPAN, CLOSED)]
    for wall in (21, 22, 23):
        log(processor, value(wall))
        assert taken(values) == [value(wall)]
    processor.on_closed(t(30))
    assert taken(checkpoints) == [Checkpoint(SPAN, t(30))]
    assert checkpoints.done is False
    assert processor.budget.used == size(value(23))


# --- repr -----------------------------------------------------------------------------


def test_repr_shows_the_phase() -> None:
    processor = make_processor()
    reg = register(processor)
    assert "catching up" in repr(reg)
    processor.finish_catch_up(reg)
    assert "live" in repr(reg)
    reg.end(ErrorReason.UNREGISTERED)
    assert "done" in repr(reg)


def test_a_batch_is_sized_as_its_values_are_one_by_one() -> None:
    ts = Timestamp(5, 0)
    batch = values_of([b"a", b"bb", b"ccc"], [b"x" * 10, None, b""], [ts] * 3, [None, b"p", b"qq"])
    assert batch[1] == Value(b"bb", None, ts, b"p")
    assert all(type(v) is Value for v in batch)
    assert values_size(batch) == sum(map(event_size, batch))
    assert values_size(values_of([b"k"], [b"v"], [ts])) == event_size(Value(b"k", b"v", ts))
    assert values_size([]) == 0
