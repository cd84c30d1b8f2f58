"""TimestampOrderer: values held until the frontier passes them, then in timestamp order."""

from __future__ import annotations

from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Value
from feedkv.rangefeed.reorder import TimestampOrderer
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

LEFT, RIGHT = Span(b"a", b"m"), Span(b"m", b"z")
WHOLE = Span(b"a", b"z")


def ts(n: int) -> Timestamp:
    return Timestamp(n, 0)


def value(key: bytes, n: int) -> Value:
    return Value(key, b"v%d" % n, ts(n))


def test_values_wait_for_every_range_to_checkpoint_past_them_then_come_in_order() -> None:
    orderer = TimestampOrderer([WHOLE], ts(0))
    # the right range's history arrives first, then the left's: each in its own order
    assert orderer.push(value(b"x", 2)) == []
    assert orderer.push(value(b"y", 4)) == []
    assert orderer.push(Checkpoint(RIGHT, ts(10))) == [Checkpoint(RIGHT, ts(10))]
    assert orderer.push(value(b"b", 1)) == []
    assert orderer.push(value(b"c", 3)) == []
    assert orderer.held == 4
    released = orderer.push(Checkpoint(LEFT, ts(3)))
    assert released == [value(b"b", 1), value(b"x", 2), value(b"c", 3), Checkpoint(LEFT, ts(3))]
    assert orderer.push(Checkpoint(LEFT, ts(9))) == [value(b"y", 4), Checkpoint(LEFT, ts(9))]
    assert orderer.held == 0


def test_a_checkpoint_that_does_not_move_the_frontier_releases_nothing() -> None:
    orderer = TimestampOrderer([WHOLE], ts(0))
    orderer.push(value(b"b", 1))
    assert orderer.push(Checkpoint(RIGHT, ts(5))) == [Checkpoint(RIGHT, ts(5))]
    assert orderer.held == 1


def test_values_of_one_timestamp_come_by_key_and_repeats_in_arrival_order() -> None:
    orderer = TimestampOrderer([WHOLE], ts(0))
    for event in (value(b"q", 1), value(b"c", 1), Value(b"c", b"again", ts(1))):
        orderer.push(event)
    assert orderer.push(Checkpoint(WHOLE, ts(1)))[:3] == [
        value(b"c", 1),
        Value(b"c", b"again", ts(1)),
        value(b"q", 1),
    ]


def test_an_error_ends_the_feed_releasing_what_was_held_in_order() -> None:
    orderer = TimestampOrderer([WHOLE], ts(0))
    orderer.push(value(b"x", 5))
    orderer.push(value(b"b", 2))
    error = Error(ErrorReason.SLOW_CONSUMER, "cut off")
    assert orderer.push(error) == [value(b"b", 2), value(b"x", 5), error]
