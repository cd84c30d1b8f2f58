"""Helpers for the rangefeed tests: hand-driven transactions that leave intents behind,
an event collector, background calls and waits with this suite's deadline.

NB: a module of its own, not ``conftest``: ``from conftest import`` resolves to whichever
``conftest`` was imported first, which in a run of several test directories is another's.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

from feedkv.kv.api import BatchRequest, EndTxn, Header, HeartbeatTxn, Put, Transaction
from feedkv.kv.store import Store
from feedkv.rangefeed.client import RangeFeed
from feedkv.rangefeed.event import Checkpoint, Event
from feedkv.rangefeed.stream import EventStream
from feedkv.testing import waiting
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

DEADLINE_S = 10.0
T = TypeVar("T")


def wait_until(predicate: Callable[[], object], timeout: float = DEADLINE_S) -> object:
    """:func:`feedkv.testing.waiting.wait_until` with this suite's deadline."""
    return waiting.wait_until(predicate, timeout_s=timeout)


class Collector:
    """Takes events from a stream on the test's thread until a condition holds."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.events: list[tuple[object, Event]] = []

    def until(
        self, predicate: Callable[[list[Event]], bool], timeout: float = DEADLINE_S
    ) -> list[Event]:
        deadline = time.monotonic() + timeout
        while not predicate(self.of_all()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; events so far: {self.events[-20:]}")
            self.events.extend(self.stream.take(min(left, 0.05)))
        return self.of_all()

    def of_all(self) -> list[Event]:
        return [event for _tag, event in self.events]

    def of(self, tag: object) -> list[Event]:
        return [event for t, event in self.events if t == tag]


def begin(store: Store, anchor: bytes) -> Transaction:
    """A transaction coordinated by hand: its record exists, nothing else."""
    now = store.clock.now()
    txn = Transaction(uuid.uuid4().bytes, anchor, 0, now, now, 1)
    response = store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),)))
    return response.txn or txn


def write_intent(store: Store, txn: Transaction, key: bytes, value: bytes) -> Transaction:
    response = store.send(BatchRequest(Header(txn=txn), (Put(key, value),)))
    assert response.txn is not None
    return response.txn


def end_txn(
    store: Store, txn: Transaction, spans: tuple[Span, ...], *, commit: bool
) -> Transaction:
    """Commits or aborts ``txn``. A hand-coordinated transaction reads nothing, so when a
    write was pushed (a slow machine's writes can fall below the closed timestamp), it
    refreshes as a client would, trivially: it reads at its write timestamp."""
    txn = txn.started_at(txn.write_ts)
    response = store.send(BatchRequest(Header(txn=txn), (EndTxn(commit, spans),)))
    return response.txn or txn


class ObservedCondition(threading.Condition):
    """A condition variable that counts the threads that start waiting on it, and how
    often it was notified while one waited (``notified``)."""

    def __init__(self, lock: threading.Lock | None = None) -> None:
        super().__init__(lock)
        self._entered = threading.Semaphore(0)
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        if self._waiters:  # type: ignore[attr-defined]  # NB: private, CPython's
            self.notified += 1
        super().notify(n)

    def wait(self, timeout: float | None = None) -> bool:
        # NB: called with the lock held, so a notifier that needs the lock runs only once
        # this waiter has really released it inside super().wait().
        self._entered.release()
        return super().wait(timeout)

    def await_waiters(self, n: int = 1) -> None:
        for _ in range(n):
            assert self._entered.acquire(timeout=DEADLINE_S), "no thread started waiting"


class Background(Generic[T]):
    """Runs ``fn`` on a thread and hands back its result or its exception."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._result: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:
            self._error = exc

    def result(self) -> T | None:
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "the background call did not return"
        if self._error is not None:
            raise self._error
        return self._result


def read_until(
    feed: RangeFeed, done: Callable[[list[Event]], bool], limit: int = 100_000
) -> list[Event]:
    """Iterate ``feed`` until ``done(events)``; the feed's own deadline is the test's."""
    events: list[Event] = []
    closer = threading.Timer(DEADLINE_S, feed.close)
    closer.start()
    try:
        for event in feed:
            events.append(event)
            if done(events) or len(events) >= limit:
                return events
    finally:
        closer.cancel()
    raise AssertionError(f"the feed ended before the condition held: {events[-10:]}")


def resolved_past(ts: Timestamp) -> Callable[[list[Event]], bool]:
    return lambda events: any(isinstance(e, Checkpoint) and e.ts >= ts for e in events)
