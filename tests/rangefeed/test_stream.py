"""Tests for feedkv.rangefeed.stream: the queue between registrations and one consumer.

Registrations are small fakes with the three attributes the stream uses. Waiting is
observed through a condition variable that reports each waiter, never slept through.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

import pytest
from feed_helpers import Background, ObservedCondition

from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Value
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

DEADLINE_S = 10.0


@dataclass(eq=False)
class FakeReg:
    tag: Hashable
    queued: int = 0
    done: bool = False


def value(n: int) -> Value:
    return Value(b"k%d" % n, b"v%d" % n, Timestamp(n, 0))


SPAN = Span(b"a", b"z")
SLOW = Error(ErrorReason.SLOW_CONSUMER, "fell behind")


def observe(stream: EventStream) -> ObservedCondition:
    """The condition the consumer waits on, observed."""
    cond = ObservedCondition(stream.lock)
    stream._cond = cond  # NB: private; swapped before any thread uses the stream
    return cond


def observe_room(stream: EventStream) -> ObservedCondition:
    """The condition pushers and catch-up scans wait on, observed."""
    cond = ObservedCondition(stream.lock)
    stream._room = cond  # NB: private; swapped before any thread uses the stream
    return cond


def make_stream(limit: int = 10_000, per_registration: int = 100) -> EventStream:
    return EventStream(Budget(limit), per_registration=per_registration)


# --- push and take --------------------------------------------------------------------


def test_take_returns_events_in_push_order_across_registrations() -> None:
    stream = make_stream()
    a, b = FakeReg("a"), FakeReg("b")
    assert stream.push(a, value(1), 10)
    assert stream.push(b, value(2), 10)
    assert stream.push(a, value(3), 10)
    assert stream.push(b, value(4), 10)
    assert stream.take(timeout=0) == [
        ("a", value(1)),
        ("b", value(2)),
        ("a", value(3)),
        ("b", value(4)),
    ]


def test_take_with_nothing_queued_returns_an_empty_list() -> None:
    stream = make_stream()
    assert stream.take(timeout=0) == []
    assert stream.take(timeout=0.01) == []


def test_take_empties_the_queue() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    stream.push(reg, value(1), 10)
    assert stream.take(timeout=0) == [("r", value(1))]
    assert stream.take(timeout=0) == []


def test_the_registration_counts_its_queued_events_until_taken() -> None:
    stream = make_stream()
    a, b = FakeReg("a"), FakeReg("b")
    stream.push(a, value(1), 10)
    stream.push(a, value(2), 10)
    stream.push(b, value(3), 10)
    assert (a.queued, b.queued) == (2, 1)
    stream.take(timeout=0)
    assert (a.queued, b.queued) == (0, 0)


def test_take_is_woken_by_a_push() -> None:
    stream = make_stream()
    cond = observe(stream)
    consumer = Background(lambda: stream.take())  # no timeout
    cond.await_waiters()
    stream.push(FakeReg("r"), value(1), 10)
    assert consumer.result() == [("r", value(1))]


def test_a_kick_wakes_a_waiting_consumer() -> None:
    stream = make_stream()
    cond = observe(stream)
    consumer = Background(lambda: stream.wait(None))
    cond.await_waiters()
    stream.kick()
    consumer.result()


def test_a_kick_before_a_wait_makes_it_return_at_once_once() -> None:
    stream = make_stream()
    stream.kick()
    Background(lambda: stream.wait(None)).result()
    assert stream.take(timeout=0) == []  # a kick is no event


def test_take_now_takes_while_the_consumer_sleeps_and_leaves_it_asleep() -> None:
    stream = make_stream()
    cond = observe(stream)
    consumer = Background(lambda: stream.wait(None))
    cond.await_waiters()
    stream.push(FakeReg("r"), value(1), 10, wake=False)
    assert stream.take_now() == [("r", value(1))]
    assert stream.waiting
    assert cond.notified == 0  # NB: the room it made is for pushers, not the consumer
    stream.kick()
    consumer.result()
    assert cond.notified == 1


# --- bounds ---------------------------------------------------------------------------


def test_push_refuses_a_registration_at_its_bound() -> None:
    stream = make_stream(per_registration=2)
    full, other = FakeReg("full"), FakeReg("other")
    assert stream.push(full, value(1), 10)
    assert stream.push(full, value(2), 10)
    assert stream.push(full, value(3), 10) is False
    assert full.queued == 2
    assert stream.push(other, value(4), 10)  # the bound is per registration
    assert [event for _tag, event in stream.take(timeout=0)] == [value(1), value(2), value(4)]
    assert stream.push(full, value(5), 10)  # room again once taken


def test_a_batch_counts_each_of_its_values_against_the_bound() -> None:
    stream = make_stream(per_registration=3)
    reg = FakeReg("r")
    assert stream.push(reg, ValueBatch([value(1), value(2), value(3)], Timestamp(3, 0)), 30)
    assert reg.queued == 3
    assert stream.push(reg, value(4), 10) is False  # at the bound
    assert stream.take(timeout=0) == [("r", value(1)), ("r", value(2)), ("r", value(3))]
    assert (reg.queued, stream.budget.used) == (0, 0)


def test_take_batches_keeps_a_batch_whole() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    batch = ValueBatch([value(1), value(2)], Timestamp(2, 0))
    stream.push(reg, batch, 20)
    stream.push(reg, SLOW, 0)
    assert stream.take_batches(timeout=0) == [("r", batch), ("r", SLOW)]


class FakeReader:
    """A live registration's reader with some news."""

    def __init__(self, tag: Hashable, items: list[StreamItem]) -> None:
        self.tag = tag
        self.items = items

    def has_news(self) -> bool:
        return bool(self.items)

    def read(self, out: list[tuple[Hashable, StreamItem]]) -> bool:
        out.extend((self.tag, item) for item in self.items)
        self.items = []
        return False


def test_a_take_notes_the_live_values_it_took_so_a_waker_can_let_it_rest() -> None:
    stream = make_stream()
    live = [ValueBatch([value(1), value(2)], Timestamp(2, 0)), Checkpoint(SPAN, Timestamp(2, 0))]
    with stream.lock:
        stream.attach(FakeReader("live", live))
    page = ValueBatch([value(3), value(4), value(5)], Timestamp(5, 0))
    assert stream.push(FakeReg("scan"), page, 30)  # a catch-up page: never paced
    before = stream.taken_at
    assert len(stream.take_batches(timeout=0)) == 3
    assert stream.taken == 2  # the live values only
    assert stream.taken_at > before
    stream.take_batches(timeout=0)
    assert stream.taken == 0


def test_a_rest_lasts_whatever_comes_and_ends_when_the_stream_closes() -> None:
    stream = make_stream()
    cond = observe(stream)
    resting = Background(lambda: stream.rest(time.monotonic() + 3600))
    cond.await_waiters()
    assert stream.push(FakeReg("r"), value(1), 10)
    with stream.lock:
        cond.notify_all()  # as a catch-up scan's room does: it rests on
    cond.await_waiters()
    stream.close()
    resting.result()
    stream.rest(time.monotonic() + 3600)  # closed: no rest at all


def test_push_refuses_when_the_budget_is_spent() -> None:
    stream = make_stream(limit=100)
    a, b = FakeReg("a"), FakeReg("b")
    assert stream.push(a, value(1), 70)
    assert stream.push(b, value(2), 40) is False
    assert b.queued == 0
    assert stream.budget.used == 70
    assert stream.take(timeout=0) == [("a", value(1))]
    assert stream.push(b, value(2), 40)


def test_the_budget_is_charged_on_push_and_released_on_take() -> None:
    stream = make_stream(limit=1000)
    reg = FakeReg("r")
    stream.push(reg, value(1), 100)
    stream.push(reg, value(2), 250)
    assert stream.budget.used == 350
    stream.take(timeout=0)
    assert stream.budget.used == 0


def test_streams_share_their_budget() -> None:
    budget = Budget(100)
    one, two = EventStream(budget), EventStream(budget)
    assert one.push(FakeReg("a"), value(1), 60)
    assert two.push(FakeReg("b"), value(2), 60) is False
    one.take(timeout=0)
    assert two.push(FakeReg("b"), value(2), 60)


# --- ended registrations and final errors ---------------------------------------------


def test_nothing_is_queued_for_a_registration_that_is_done() -> None:
    stream = make_stream()
    reg = FakeReg("r", done=True)
    assert stream.push(reg, value(1), 10) is False
    assert stream.push_wait(reg, value(3), 10, timeout=DEADLINE_S) is False
    assert reg.queued == 0
    assert stream.budget.used == 0
    assert stream.take(timeout=0) == []


def test_push_final_is_queued_even_when_every_bound_is_reached() -> None:
    stream = make_stream(limit=100, per_registration=1)
    reg = FakeReg("r")
    assert stream.push(reg, value(1), 100)
    assert stream.push(reg, value(2), 1) is False
    stream.push_final(reg, SLOW)
    assert stream.budget.used == 100  # the final error costs nothing
    assert stream.take(timeout=0) == [("r", value(1)), ("r", SLOW)]
    assert reg.queued == 0


def test_push_final_is_queued_for_a_registration_that_just_ended() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    reg.done = True  # ending marks the registration done, then sends its error
    stream.push_final(reg, SLOW)
    assert stream.take(timeout=0) == [("r", SLOW)]


# --- push_wait ------------------------------------------------------------------------


def test_push_wait_queues_at_once_when_there_is_room() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    assert stream.push_wait(reg, value(1), 10, timeout=0) is True
    assert stream.budget.used == 10
    assert stream.take(timeout=0) == [("r", value(1))]


def test_push_wait_waits_for_room_and_is_woken_by_take() -> None:
    stream = make_stream(per_registration=1)
    cond = observe_room(stream)
    reg = FakeReg("r")
    stream.push(reg, value(1), 10)
    pusher = Background(lambda: stream.push_wait(reg, value(2), 10, timeout=DEADLINE_S))
    cond.await_waiters()
    assert stream.take(timeout=0) == [("r", value(1))]
    assert pusher.result() is True
    assert stream.take(timeout=0) == [("r", value(2))]


def test_push_wait_waits_for_budget_and_is_woken_by_take() -> None:
    stream = make_stream(limit=100)
    budget_cond = ObservedCondition(stream.budget._mutex)
    stream.budget._cond = budget_cond  # NB: private; the wait is inside the budget
    other, reg = FakeReg("other"), FakeReg("r")
    stream.push(other, value(1), 100)
    pusher = Background(lambda: stream.push_wait(reg, value(2), 50, timeout=DEADLINE_S))
    budget_cond.await_waiters()
    assert stream.take(timeout=0) == [("other", value(1))]
    assert pusher.result() is True
    assert stream.budget.used == 50
    assert stream.take(timeout=0) == [("r", value(2))]


def test_push_wait_times_out_when_the_registration_stays_full() -> None:
    stream = make_stream(per_registration=1)
    reg = FakeReg("r")
    stream.push(reg, value(1), 10)
    assert stream.push_wait(reg, value(2), 10, timeout=0.01) is False
    assert reg.queued == 1
    assert stream.budget.used == 10
    assert stream.take(timeout=0) == [("r", value(1))]


def test_push_wait_times_out_when_the_budget_stays_spent() -> None:
    stream = make_stream(limit=100)
    other, reg = FakeReg("other"), FakeReg("r")
    stream.push(other, value(1), 100)
    assert stream.push_wait(reg, value(2), 10, timeout=0.01) is False
    assert reg.queued == 0
    assert stream.budget.used == 100


def test_push_wait_is_woken_by_close() -> None:
    stream = make_stream(per_registration=1)
    cond = observe_room(stream)
    reg = FakeReg("r")
    stream.push(reg, value(1), 10)
    pusher = Background(lambda: stream.push_wait(reg, value(2), 10, timeout=DEADLINE_S))
    cond.await_waiters()
    stream.close()
    assert pusher.result() is False
    assert stream.budget.used == 0


# --- offer_pages ----------------------------------------------------------------------


Page = tuple[ValueBatch, int]


def pages_of(*numbers: int, read_on: list[threading.Thread] | None = None) -> Iterator[Page]:
    """A scan's pages, a value each, noting the thread that reads each one."""
    for n in numbers:
        if read_on is not None:
            read_on.append(threading.current_thread())
        yield ValueBatch([value(n)], value(n).ts), 10


def test_offered_pages_are_read_by_the_consumer_a_page_a_take_then_the_offer_returns() -> None:
    stream = make_stream()
    cond = observe_room(stream)
    reg = FakeReg("r")
    read_on: list[threading.Thread] = []
    offer = Background(
        lambda: stream.offer_pages(reg, pages_of(1, 2, read_on=read_on), threading.Lock(), 10)
    )
    cond.await_waiters()
    assert stream.take(timeout=DEADLINE_S) == [("r", value(1))]
    assert stream.take(timeout=0) == [("r", value(2))]
    assert stream.take(timeout=0) == []  # the pages ran out
    assert offer.result() is True
    assert read_on == [threading.current_thread()] * 2
    assert stream.budget.used == 0  # handed straight over: nothing queued
    assert reg.queued == 0


def test_a_page_comes_before_what_the_readers_have() -> None:
    stream = make_stream()
    cond = observe_room(stream)
    reg, other = FakeReg("r"), FakeReg("other")
    offer = Background(lambda: stream.offer_pages(reg, pages_of(1), threading.Lock(), 10))
    cond.await_waiters()
    stream.push(other, value(2), 10)
    assert stream.take(timeout=0) == [("r", value(1)), ("other", value(2))]
    assert stream.take(timeout=0) == []
    assert offer.result() is True


def test_an_offer_no_one_reads_gives_up_and_its_pages_are_not_read_after() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    read_on: list[threading.Thread] = []
    pages = pages_of(1, read_on=read_on)
    assert stream.offer_pages(reg, pages, threading.Lock(), timeout=0.01) is False
    assert stream.take(timeout=0) == []
    assert read_on == []


def test_an_error_raised_by_the_offered_pages_is_raised_by_the_offer() -> None:
    stream = make_stream()
    cond = observe_room(stream)
    reg = FakeReg("r")

    def failing() -> Iterator[Page]:
        yield from pages_of(1)
        raise RuntimeError("the scan failed")

    offer = Background(lambda: stream.offer_pages(reg, failing(), threading.Lock(), DEADLINE_S))
    cond.await_waiters()
    assert stream.take(timeout=0) == [("r", value(1))]
    assert stream.take(timeout=0) == []
    with pytest.raises(RuntimeError, match="the scan failed"):
        offer.result()


def test_an_offer_stops_when_its_registration_ends_and_no_page_follows_the_error() -> None:
    stream = make_stream()
    cond = observe_room(stream)
    reg = FakeReg("r")
    offer = Background(lambda: stream.offer_pages(reg, pages_of(1, 2), threading.Lock(), 10))
    cond.await_waiters()
    assert stream.take(timeout=0) == [("r", value(1))]
    reg.done = True
    stream.push_final(reg, SLOW)
    assert offer.result() is False
    assert stream.take(timeout=0) == [("r", SLOW)]
    assert stream.take(timeout=0) == []


def test_an_offer_is_woken_by_close() -> None:
    stream = make_stream()
    cond = observe_room(stream)
    reg = FakeReg("r")
    offer = Background(lambda: stream.offer_pages(reg, pages_of(1), threading.Lock(), 10))
    cond.await_waiters()
    stream.close()
    assert offer.result() is False
    assert stream.take(timeout=0) == []


# --- close ----------------------------------------------------------------------------


def test_close_wakes_a_waiting_take() -> None:
    stream = make_stream()
    cond = observe(stream)
    consumer = Background(lambda: stream.take())  # no timeout
    cond.await_waiters()
    stream.close()
    assert consumer.result() == []
    assert stream.closed is True


def test_close_drops_queued_events_and_releases_their_memory() -> None:
    stream = make_stream(limit=1000)
    reg = FakeReg("r")
    stream.push(reg, value(1), 100)
    stream.push(reg, value(2), 200)
    stream.close()
    assert stream.budget.used == 0
    assert stream.take(timeout=0) == []


def test_a_closed_stream_accepts_nothing() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    stream.close()
    assert stream.push(reg, value(1), 10) is False
    assert stream.push_wait(reg, value(3), 10, timeout=0) is False
    stream.push_final(reg, Error(ErrorReason.NODE_SHUTDOWN))
    assert stream.take() == []  # returns at once: closed
    assert stream.budget.used == 0


def test_a_checkpoint_is_queued_like_any_event() -> None:
    stream = make_stream()
    reg = FakeReg("r")
    checkpoint = Checkpoint(Span(b"a", b"b"), Timestamp(5, 0))
    assert stream.push(reg, checkpoint, 64)
    assert stream.take(timeout=0) == [("r", checkpoint)]
