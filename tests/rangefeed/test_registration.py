"""Tests for feedkv.rangefeed.registration: one consumer's subscription to one range.

A registration holds live events while its catch-up scan runs, then sends them followed
by its first checkpoint; a consumer that cannot keep up gets ``SLOW_CONSUMER`` as its last
event, and every byte it held goes back to the budget. Each test uses a real stream and
budget, driven on one thread.
"""

from __future__ import annotations

from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.registration import Registration, event_size
from feedkv.rangefeed.stream import EventStream
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

SPAN = Span(b"a", b"m")
START = Timestamp(10, 0)  # exclusive
RESOLVED = Timestamp(20, 0)


def t(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


def value(wall: int, key: bytes = b"k", data: bytes = b"v") -> Value:
    return Value(key, data, t(wall))


def make_registration(
    *, per_registration: int = 100, limit: int = 100_000, start_ts: Timestamp = START
) -> Registration:
    stream = EventStream(Budget(limit), per_registration=per_registration)
    return Registration("tag", SPAN, start_ts, False, stream)


def live(*, per_registration: int = 100, limit: int = 100_000) -> Registration:
    """A registration past its catch-up, with its first checkpoint already taken."""
    reg = make_registration(per_registration=per_registration, limit=limit)
    assert reg.finish_catch_up(RESOLVED)
    assert taken(reg) == [Checkpoint(SPAN, RESOLVED)]
    return reg


def taken(reg: Registration) -> list[Event]:
    """Everything queued for ``reg``'s consumer, without waiting."""
    events = reg.stream.take(timeout=0)
    assert all(tag == reg.tag for tag, _event in events)
    return [event for _tag, event in events]


def is_slow(event: Event) -> bool:
    return isinstance(event, Error) and event.reason is ErrorReason.SLOW_CONSUMER


# --- the start timestamp --------------------------------------------------------------


def test_values_at_or_below_the_start_are_dropped_while_catching_up() -> None:
    reg = make_registration()
    assert reg.publish(value(9)) is True
    assert reg.publish(value(10)) is True
    assert reg.publish(Value(b"k", b"v", START.next())) is True
    assert reg.finish_catch_up(RESOLVED) is True
    assert taken(reg) == [Value(b"k", b"v", START.next()), Checkpoint(SPAN, RESOLVED)]
    assert reg.stream.budget.used == 0


def test_values_at_or_below_the_start_are_dropped_when_live() -> None:
    reg = live()
    assert reg.publish(value(10)) is True
    assert reg.publish(value(3)) is True
    assert taken(reg) == []
    assert reg.stream.budget.used == 0
    assert reg.done is False


# --- catching up ----------------------------------------------------------------------


def test_live_events_are_held_while_catching_up() -> None:
    reg = make_registration()
    assert reg.catching_up is True
    assert reg.publish(value(11, b"a")) is True
    assert reg.publish(value(12, b"b")) is True
    assert taken(reg) == []
    # Held events already count against the node's budget.
    assert reg.stream.budget.used == event_size(value(11, b"a")) + event_size(value(12, b"b"))


def test_finish_catch_up_sends_held_events_then_the_first_checkpoint() -> None:
    reg = make_registration()
    reg.publish(value(11, b"a"))
    reg.publish(value(12, b"b"))
    assert reg.finish_catch_up(RESOLVED) is True
    assert reg.catching_up is False
    assert taken(reg) == [value(11, b"a"), value(12, b"b"), Checkpoint(SPAN, RESOLVED)]
    assert reg.stream.budget.used == 0


def test_checkpoints_are_not_held_while_catching_up() -> None:
    reg = make_registration()
    assert reg.publish(Checkpoint(SPAN, t(15))) is True
    assert reg.publish(value(16)) is True
    assert reg.publish(Checkpoint(SPAN, t(17))) is True
    assert reg.finish_catch_up(RESOLVED) is True
    assert taken(reg) == [value(16), Checkpoint(SPAN, RESOLVED)]


def test_catch_up_events_come_before_the_held_live_events() -> None:
    reg = make_registration()
    assert reg.publish(value(13, b"live")) is True
    # The catch-up scan runs on another thread and pushes straight into the stream.
    assert reg.stream.push_wait(reg, value(11, b"scan"), 80, timeout=0) is True
    assert reg.finish_catch_up(RESOLVED) is True
    assert taken(reg) == [value(11, b"scan"), value(13, b"live"), Checkpoint(SPAN, RESOLVED)]


class ContendedBudget(Budget):
    """A budget under pressure: the moment memory is released, another thread's waiting
    ``acquire`` (say, a second registration's catch-up scan) takes it."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.contended = False

    def release(self, n: int) -> None:
        super().release(n)
        if self.contended:
            self.try_acquire(n)  # the competitor wins the race for the freed bytes


def test_held_events_keep_their_memory_through_finish_catch_up() -> None:
    # The held events were charged when they arrived; moving them to the stream must not
    # hand that memory to a competitor and then find none left for them.
    held = [value(11, b"a"), value(12, b"b")]
    budget = ContendedBudget(sum(event_size(e) for e in held) + event_size(value(0)))
    reg = Registration("tag", SPAN, START, False, EventStream(budget))
    for event in held:
        assert reg.publish(event) is True
    budget.contended = True
    assert reg.finish_catch_up(RESOLVED) is True
    assert taken(reg) == [*held, Checkpoint(SPAN, RESOLVED)]


def test_a_held_buffer_with_room_left_for_the_checkpoint_finishes_cleanly() -> None:
    reg = make_registration(per_registration=3)
    assert reg.publish(value(11)) is True
    assert reg.publish(value(12)) is True
    assert reg.finish_catch_up(RESOLVED) is True
    assert taken(reg) == [value(11), value(12), Checkpoint(SPAN, RESOLVED)]
    assert reg.done is False


# --- live -----------------------------------------------------------------------------


def test_live_events_go_straight_to_the_stream_in_order() -> None:
    reg = live()
    assert reg.publish(value(21, b"a")) is True
    assert reg.publish(Checkpoint(SPAN, t(21))) is True
    assert reg.publish(value(22, b"b")) is True
    assert taken(reg) == [value(21, b"a"), Checkpoint(SPAN, t(21)), value(22, b"b")]
    assert reg.stream.budget.used == 0


def test_the_budget_is_charged_by_event_size() -> None:
    reg = live()
    big = Value(b"key", b"x" * 100, t(21), b"y" * 50)
    reg.publish(big)
    reg.publish(Checkpoint(SPAN, t(21)))
    assert event_size(big) > event_size(Checkpoint(SPAN, t(21)))
    assert reg.stream.budget.used == event_size(big) + event_size(Checkpoint(SPAN, t(21)))
    taken(reg)
    assert reg.stream.budget.used == 0


# --- slow consumers -------------------------------------------------------------------


def test_overflowing_the_held_buffer_ends_with_slow_consumer() -> None:
    reg = make_registration(per_registration=2)
    assert reg.publish(value(11)) is True
    assert reg.publish(value(12)) is True
    assert reg.publish(value(13)) is False
    assert reg.done is True
    events = taken(reg)
    assert len(events) == 1
    assert is_slow(events[0])
    assert reg.stream.budget.used == 0  # the held events were given back


def test_overflowing_the_budget_while_catching_up_ends_with_slow_consumer() -> None:
    size = event_size(value(11))
    reg = make_registration(limit=size + size // 2)
    assert reg.publish(value(11)) is True
    assert reg.publish(value(12)) is False
    assert reg.done is True
    assert [is_slow(e) for e in taken(reg)] == [True]
    assert reg.stream.budget.used == 0


def test_nothing_follows_slow_consumer_after_a_held_overflow() -> None:
    reg = make_registration(per_registration=1)
    reg.publish(value(11))
    reg.publish(value(12))
    assert is_slow(taken(reg)[-1])
    assert reg.publish(value(13)) is False
    assert reg.publish(Checkpoint(SPAN, t(13))) is False
    assert reg.finish_catch_up(RESOLVED) is False
    assert reg.stream.push_wait(reg, value(14), 80, timeout=0) is False  # a late catch-up
    assert taken(reg) == []
    assert reg.stream.budget.used == 0


def test_overflowing_the_stream_when_live_ends_with_slow_consumer() -> None:
    reg = live(per_registration=2)
    assert reg.publish(value(21)) is True
    assert reg.publish(value(22)) is True
    assert reg.publish(value(23)) is False
    assert reg.done is True
    assert reg.publish(Checkpoint(SPAN, t(23))) is False
    assert reg.publish(value(24)) is False
    events = taken(reg)
    assert events[:2] == [value(21), value(22)]
    assert len(events) == 3
    assert is_slow(events[-1])
    assert taken(reg) == []
    assert reg.stream.budget.used == 0


def test_running_out_of_budget_when_live_ends_with_slow_consumer() -> None:
    size = event_size(value(21))
    reg = live(limit=size + size // 2)
    assert reg.publish(value(21)) is True
    assert reg.publish(value(22)) is False
    events = taken(reg)
    assert events[0] == value(21)
    assert is_slow(events[-1])
    assert len(events) == 2


def test_a_stream_full_at_the_seam_ends_with_slow_consumer_as_the_last_event() -> None:
    reg = make_registration(per_registration=2)
    assert reg.publish(value(13, b"live")) is True
    assert reg.stream.push_wait(reg, value(11, b"scan"), 80, timeout=0) is True
    assert reg.stream.push_wait(reg, value(12, b"scan"), 80, timeout=0) is True
    assert reg.finish_catch_up(RESOLVED) is False
    assert reg.done is True
    events = taken(reg)
    assert is_slow(events[-1])
    assert not any(isinstance(e, Checkpoint) for e in events)
    assert reg.publish(value(14)) is False
    assert taken(reg) == []
    assert reg.stream.budget.used == 0


def test_the_slow_consumer_message_names_the_span_and_the_limit() -> None:
    reg = live(per_registration=1)
    reg.publish(value(21))
    reg.publish(value(22))
    error = taken(reg)[-1]
    assert isinstance(error, Error)
    assert error.reason is ErrorReason.SLOW_CONSUMER
    assert error.reason.retryable
    assert str(SPAN) in error.message
    assert "limit 1" in error.message


# --- ending ---------------------------------------------------------------------------


def test_end_sends_the_reason_as_the_last_event() -> None:
    reg = live()
    reg.publish(value(21))
    reg.end(ErrorReason.GC_THRESHOLD, "too old", t(5))
    assert reg.done is True
    assert taken(reg) == [value(21), Error(ErrorReason.GC_THRESHOLD, "too old", t(5))]
    assert reg.publish(value(22)) is False
    assert taken(reg) == []


def test_end_is_idempotent() -> None:
    reg = live()
    reg.end(ErrorReason.RANGE_SPLIT, "split")
    reg.end(ErrorReason.RANGE_SPLIT, "split")
    reg.end(ErrorReason.SLOW_CONSUMER, "later")
    assert taken(reg) == [Error(ErrorReason.RANGE_SPLIT, "split")]


def test_ending_while_catching_up_gives_held_memory_back() -> None:
    reg = make_registration()
    reg.publish(value(11, b"a"))
    reg.publish(value(12, b"b"))
    assert reg.stream.budget.used > 0
    reg.end(ErrorReason.UNREGISTERED)
    assert reg.stream.budget.used == 0
    reg.end(ErrorReason.UNREGISTERED)
    assert reg.stream.budget.used == 0
    assert taken(reg) == [Error(ErrorReason.UNREGISTERED)]
    assert reg.finish_catch_up(RESOLVED) is False
    assert taken(reg) == []


def test_finish_catch_up_on_a_closed_stream_gives_held_memory_back() -> None:
    reg = make_registration()
    reg.publish(value(11, b"a"))
    reg.publish(value(12, b"b"))
    reg.publish(value(13, b"c"))
    reg.stream.close()
    assert reg.finish_catch_up(RESOLVED) is False
    assert reg.done is True
    assert reg.stream.budget.used == 0


def test_repr_shows_the_phase() -> None:
    reg = make_registration()
    assert "catching up" in repr(reg)
    reg.finish_catch_up(RESOLVED)
    assert "live" in repr(reg)
    reg.end(ErrorReason.UNREGISTERED)
    assert "done" in repr(reg)
