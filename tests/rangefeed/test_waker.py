"""The Waker wakes sleeping consumers once per commit group, and after a wake holds the
next ones back for a gap that grows with how many it woke; a consumer that took many values
rests before it is woken again. A processor's news (values, checkpoints) reaches its
sleeping consumers through it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

import pytest
from feed_helpers import DEADLINE_S, wait_until

from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Event, Value
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.stream import EventStream
from feedkv.rangefeed.waker import Waker
from feedkv.storage.logical_ops import WriteValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span


class Sleeper:
    """A consumer asleep on its stream: all the Waker looks at and calls."""

    def __init__(self, waiting: bool = True) -> None:
        self.waiting = waiting
        self.taken = 0  # as EventStream: values at the last take, and when
        self.taken_at = 0.0
        self.woken = threading.Event()
        self.by: list[str] = []
        self.deliver_now: Callable[[], bool] | None = None

    def wake(self) -> None:  # as EventStream.wake: only a sleeping consumer is woken
        if self.waiting:
            self.by.append(threading.current_thread().name)
            self.woken.set()


class Deliverer(Sleeper):
    """A consumer asleep whose news can be taken for it (a remote client's stream of
    feeds): it records on which thread, and says it delivered all if ``takes``."""

    def __init__(self, takes: bool = True) -> None:
        super().__init__()
        self.takes = takes
        self.delivered_by: list[str] = []
        self.deliver_now = self._deliver

    def _deliver(self) -> bool:
        self.delivered_by.append(threading.current_thread().name)
        return self.takes


@pytest.fixture
def slow_waker():
    waker = Waker(per_wake_s=60.0, max_gap_s=60.0)
    yield waker
    waker.close()


def test_a_flush_with_no_gap_open_wakes_at_once_on_the_callers_thread(slow_waker: Waker) -> None:
    sleeper = Sleeper()
    slow_waker.defer([sleeper], -1)
    slow_waker.flush()
    assert sleeper.woken.is_set()
    assert sleeper.by == [threading.current_thread().name]


def test_only_consumers_that_sleep_are_woken(slow_waker: Waker) -> None:
    awake, asleep = Sleeper(waiting=False), Sleeper()
    slow_waker.defer([awake, asleep], -1)
    slow_waker.flush()
    assert asleep.woken.is_set()
    assert not awake.woken.is_set()


def test_a_light_stream_is_delivered_on_the_flushing_thread_and_not_woken(
    slow_waker: Waker,
) -> None:
    deliverer = Deliverer()
    slow_waker.defer([deliverer], -1)
    slow_waker.flush()
    assert deliverer.delivered_by == [threading.current_thread().name]
    assert not deliverer.woken.is_set()


def test_a_stream_whose_news_was_not_all_delivered_is_woken(slow_waker: Waker) -> None:
    deliverer = Deliverer(takes=False)
    slow_waker.defer([deliverer], -1)
    slow_waker.flush()
    assert deliverer.delivered_by == [threading.current_thread().name]
    assert deliverer.by == [threading.current_thread().name]


def test_a_stream_that_took_many_values_is_woken_not_delivered() -> None:
    waker = Waker(per_wake_s=0.0, per_value_s=0.0, max_gap_s=0.0)
    try:
        deliverer = Deliverer()
        deliverer.taken = 100  # its rest (none here) is over: due, but not light
        waker.defer([deliverer], -1)
        waker.flush()
        assert deliverer.woken.is_set()
        assert deliverer.delivered_by == []
    finally:
        waker.close()


def test_one_light_stream_a_flush_is_delivered_the_others_are_woken(slow_waker: Waker) -> None:
    deliverers = [Deliverer() for _ in range(3)]
    slow_waker.defer(deliverers, -1)
    slow_waker.flush()
    assert sum(bool(d.delivered_by) for d in deliverers) == 1
    assert sum(d.woken.is_set() for d in deliverers) == 2
    assert all(bool(d.delivered_by) != d.woken.is_set() for d in deliverers)


def test_wakes_in_the_gap_wait_for_it_and_close_releases_them(slow_waker: Waker) -> None:
    first, second = Sleeper(), Sleeper()
    slow_waker.defer([first, Sleeper()], -1)
    slow_waker.flush()  # opens a 60 s gap
    slow_waker.defer([second], -1)
    slow_waker.flush()
    assert not second.woken.is_set()
    slow_waker.close()
    assert second.woken.is_set()


def test_one_stream_woken_opens_no_gap(slow_waker: Waker) -> None:
    """A watched key written again and again: each write is delivered at once."""
    first, second = Sleeper(), Sleeper()
    for sleeper in (first, second, first):
        sleeper.woken.clear()
        slow_waker.defer([sleeper], -1)
        slow_waker.flush()
        assert sleeper.woken.is_set()


def test_after_close_a_flush_wakes_at_once_even_in_a_gap_and_with_an_old_token(
    slow_waker: Waker,
) -> None:
    first, second = Sleeper(), Sleeper()
    slow_waker.defer([second, Sleeper()], -1)
    slow_waker.flush()  # opens a 60 s gap
    token = slow_waker.defer([first], -1)
    slow_waker.close()  # wakes the pending
    first.woken.clear()
    slow_waker.defer([first], token)
    slow_waker.flush()
    assert first.woken.is_set()


def test_the_waker_thread_wakes_what_came_in_the_gap_when_it_ends() -> None:
    waker = Waker(per_wake_s=0.05, max_gap_s=0.05)
    try:
        first, second = Sleeper(), Sleeper()
        waker.defer([first, Sleeper()], -1)
        waker.flush()
        waker.defer([second], -1)
        waker.flush()
        assert second.woken.wait(10)
    finally:
        waker.close()


def test_each_consumer_is_woken_once_however_many_commands_named_it(slow_waker: Waker) -> None:
    first, second = Sleeper(), Sleeper()
    slow_waker.defer([first, Sleeper()], -1)
    slow_waker.flush()  # opens a 60 s gap
    for _ in range(5):
        slow_waker.defer([second], -1)
        slow_waker.flush()
    slow_waker.close()
    assert len(second.by) == 1


def test_a_token_makes_deferring_pending_streams_free_until_they_are_woken() -> None:
    waker = Waker(per_wake_s=0.0, max_gap_s=0.0)
    try:
        sleeper = Sleeper()
        token = waker.defer([sleeper], -1)
        assert waker.defer([sleeper], token) == token
        waker.flush()
        assert sleeper.by == [threading.current_thread().name]
        # Woken since: the token is stale, so the streams are pending again.
        assert waker.defer([sleeper], token) != token
        waker.flush()
        assert len(sleeper.by) == 2
    finally:
        waker.close()


def test_a_consumer_that_took_many_values_rests_while_the_others_are_woken() -> None:
    waker = Waker(per_wake_s=0.0, per_value_s=60.0, max_gap_s=3600.0)
    try:
        busy, idle = Sleeper(), Sleeper()
        busy.taken, busy.taken_at = 2, time.monotonic()  # a rest of 60 s
        waker.defer([busy, idle], -1)
        waker.flush()
        assert idle.woken.is_set()
        assert not busy.woken.is_set()
    finally:
        waker.close()
    assert busy.woken.is_set()  # closing wakes what rests


def test_a_rest_ends_at_max_gap_and_the_waker_thread_wakes_the_consumer() -> None:
    waker = Waker(per_wake_s=0.0, per_value_s=60.0, max_gap_s=0.05)
    try:
        busy = Sleeper()
        busy.taken, busy.taken_at = 1_000, time.monotonic()  # uncapped: about 60,000 s
        waker.defer([busy], -1)
        waker.flush()
        assert busy.woken.wait(10)
    finally:
        waker.close()


def test_waking_consumers_whose_rest_ended_opens_a_gap_as_any_wake_does() -> None:
    """Busy consumers are paced with the others: a hundred resting 50 ms each would
    otherwise be woken 2,000 times a second, whatever the gap."""
    waker = Waker(per_wake_s=60.0, per_value_s=60.0, max_gap_s=0.5)
    try:
        busy, other = [Sleeper(), Sleeper()], Sleeper()
        for sleeper in busy:
            sleeper.taken, sleeper.taken_at = 2, time.monotonic()  # rests max_gap_s
        waker.defer(busy, -1)
        waker.flush()  # opens a gap; busy rests
        assert all(sleeper.woken.wait(10) for sleeper in busy)  # their rest and the gap over
        waker.defer([other], -1)
        waker.flush()  # in the gap that waking busy opened: left to the waker's thread
        assert other.woken.wait(10)
        assert other.by == ["feedkv-waker"]
    finally:
        waker.close()


def test_only_the_consumers_woken_open_a_gap_not_those_left_resting() -> None:
    waker = Waker(per_wake_s=60.0, per_value_s=60.0, max_gap_s=3600.0)
    try:
        busy = [Sleeper() for _ in range(3)]
        for sleeper in busy:
            sleeper.taken, sleeper.taken_at = 2, time.monotonic()  # a rest of 60 s
        waker.defer(busy, -1)
        waker.flush()  # wakes none of them
        idle = [Sleeper(), Sleeper()]
        waker.defer(idle, -1)
        waker.flush()
        assert all(sleeper.by == [threading.current_thread().name] for sleeper in idle)
        assert not any(sleeper.woken.is_set() for sleeper in busy)
    finally:
        waker.close()


def test_a_consumer_that_took_one_value_does_not_rest() -> None:
    """A watched key written again and again: each write is delivered at once."""
    waker = Waker(per_wake_s=0.0, per_value_s=60.0, max_gap_s=3600.0)
    try:
        watcher = Sleeper()
        watcher.taken, watcher.taken_at = 1, time.monotonic()
        waker.defer([watcher], -1)
        waker.flush()
        assert watcher.by == [threading.current_thread().name]
    finally:
        waker.close()


@pytest.mark.parametrize("news", ["values", "checkpoint"])
def test_a_processors_news_wakes_a_sleeping_consumer_when_the_group_flushes(
    slow_waker: Waker, news: str
) -> None:
    span = Span(b"a", b"z")
    processor = Processor(1, span, Budget(1 << 20), slow_waker)
    processor.init([], Timestamp(5, 0))
    stream = EventStream(processor.budget, per_registration=100)
    reg = Registration("r", span, Timestamp(5, 0), False, stream)
    processor.register(reg)
    processor.finish_catch_up(reg)
    assert stream.take(0) == [("r", Checkpoint(span, Timestamp(5, 0)))]
    got: list[tuple[Hashable, Event]] = []
    # NB: the take outwaits the join below, so only a wake ends it in time
    consumer = threading.Thread(target=lambda: got.extend(stream.take(2 * DEADLINE_S)))
    consumer.start()
    assert wait_until(lambda: stream.waiting)
    if news == "values":
        processor.on_ops([WriteValue(b"k", Timestamp(6, 0), b"v", None)])
    else:
        processor.on_closed(Timestamp(7, 0))
    slow_waker.flush()  # as the engine's group hook does after the commit group
    consumer.join(DEADLINE_S)
    if consumer.is_alive():
        stream.close()
        raise AssertionError("the consumer was not woken")
    if news == "values":
        assert got == [("r", Value(b"k", b"v", Timestamp(6, 0)))]
    else:
        assert got == [("r", Checkpoint(span, Timestamp(7, 0)))]
