"""The server side of a rangefeed on a real store: catch-up and the live seam, intents
and checkpoints, the pusher, ends with a reason, and slow consumers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from feed_helpers import Collector, begin, end_txn, wait_until, write_intent

import feedkv
from feedkv import DB
from feedkv.errors import InvalidArgumentError, RangeRoutingError
from feedkv.kv.api import BatchRequest, ResolveIntent
from feedkv.kv.command import Applied
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.pusher import StorePusher
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.storage.intent import TxnStatus
from feedkv.storage.mvcc import scan_intents
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)


@pytest.fixture
def db(tmp_path: Path, store_config: StoreConfig, feed_config: FeedConfig) -> Iterator[DB]:
    """The server side needs no client transport: an embedded node only."""
    database = feedkv.connect(tmp_path / "store", config=store_config, feed_config=feed_config)
    yield database
    database.close()


@pytest.fixture
def store(db: DB) -> Store:
    assert db.node is not None
    return db.node.store


@pytest.fixture
def feeds(db: DB) -> StoreFeeds:
    assert db.node is not None
    return db.node.feeds


ZERO = Timestamp(0, 0)


def values(events: list[Event]) -> list[tuple[bytes, bytes | None]]:
    return [(e.key, e.value) for e in events if isinstance(e, Value)]


def checkpoints(events: list[Event]) -> list[Timestamp]:
    return [e.ts for e in events if isinstance(e, Checkpoint)]


def has_checkpoint_above(ts: Timestamp) -> object:
    return lambda events: any(isinstance(e, Checkpoint) and e.ts >= ts for e in events)


def register(
    feeds: StoreFeeds, span: Span = EVERYTHING, since: Timestamp = ZERO, *, diff: bool = False
) -> Collector:
    stream = feeds.new_stream()
    feeds.register("r", span, since, diff, stream)
    return Collector(stream)


# Catch-up and the seam.


def test_the_catch_up_sends_history_after_the_start_then_a_first_checkpoint(
    db: DB, feeds: StoreFeeds
) -> None:
    db.put(b"a", b"1")
    start = db.put(b"b", b"1")
    db.put(b"a", b"2")
    db.delete(b"b")
    feed = register(feeds, since=start)
    events = feed.until(lambda es: bool(checkpoints(es)))
    first_checkpoint = next(i for i, e in enumerate(events) if isinstance(e, Checkpoint))
    assert values(events[:first_checkpoint]) == [(b"a", b"2"), (b"b", None)]


def test_the_catch_up_gives_previous_values_when_asked(db: DB, feeds: StoreFeeds) -> None:
    start = db.put(b"k", b"old")
    db.put(b"k", b"new")
    feed = register(feeds, since=start, diff=True)
    events = feed.until(lambda es: bool(checkpoints(es)))
    assert [(e.value, e.prev_value) for e in events if isinstance(e, Value)] == [(b"new", b"old")]


def test_writes_racing_a_registration_arrive_once_each_in_order(db: DB, feeds: StoreFeeds) -> None:
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            db.put(b"key", b"%d" % i)
            written.append(i)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert wait_until(lambda: len(written) >= 50)
        feed = register(feeds)
        feed.until(lambda es: bool(checkpoints(es)))
        assert wait_until(lambda: len(written) >= 100 + len(feed.events))
    finally:
        stop.set()
        thread.join()
    final = db.put(b"done", b"")
    events = feed.until(has_checkpoint_above(final))  # type: ignore[arg-type]
    seen = [int(v or b"-1") for k, v in values(events) if k == b"key"]
    assert seen == list(range(len(written)))


def test_values_at_or_below_the_start_are_never_sent(db: DB, feeds: StoreFeeds) -> None:
    db.put(b"a", b"before")
    start = db.now()
    feed = register(feeds, since=start)
    after = db.put(b"a", b"after")
    events = feed.until(has_checkpoint_above(after))  # type: ignore[arg-type]
    assert values(events) == [(b"a", b"after")]
    assert all(e.ts > start for e in events if isinstance(e, Value))


def test_only_keys_in_the_registered_span_are_sent(db: DB, feeds: StoreFeeds) -> None:
    feed = register(feeds, Span(b"b", b"d"))
    for key in (b"a", b"b", b"c", b"d"):
        last = db.put(key, key)
    events = feed.until(has_checkpoint_above(last))  # type: ignore[arg-type]
    assert values(events) == [(b"b", b"b"), (b"c", b"c")]
    assert {e.span for e in events if isinstance(e, Checkpoint)} == {Span(b"b", b"d")}


# Intents and checkpoints.


def test_a_checkpoint_never_passes_an_unresolved_intent(db: DB, store: Store) -> None:
    feeds = StoreFeeds(store, FeedConfig(push_age_ns=10**15))  # no pushes: the txn commits
    try:
        txn = begin(store, b"x")
        txn = write_intent(store, txn, b"x", b"provisional")
        feed = register(feeds)
        later = db.put(b"other", b"v")
        # The processor's closed timestamp passes ``later``, but the intent holds
        # checkpoints below it.
        processor = feeds.processor(1)
        assert processor is not None
        assert wait_until(lambda: processor.rts.closed > later)
        feed.until(lambda es: bool(checkpoints(es)))
        feed.events.extend(feed.stream.take(0))
        assert max(checkpoints(feed.of_all())) < txn.write_ts
        assert (b"x", b"provisional") not in values(feed.of_all())
        txn = end_txn(store, txn, (Span.for_key(b"x"),), commit=True)
        events = feed.until(has_checkpoint_above(txn.write_ts))  # type: ignore[arg-type]
        assert (b"x", b"provisional") in values(events)
    finally:
        feeds.close()


def test_an_aborted_intent_is_never_published_and_releases_checkpoints(
    db: DB, store: Store, feeds: StoreFeeds
) -> None:
    txn = begin(store, b"x")
    txn = write_intent(store, txn, b"x", b"never")
    feed = register(feeds)
    end_txn(store, txn, (Span.for_key(b"x"),), commit=False)
    after = db.put(b"y", b"v")
    events = feed.until(has_checkpoint_above(after))  # type: ignore[arg-type]
    assert values(events) == [(b"y", b"v")]


def test_an_abandoned_transaction_cannot_stall_checkpoints(
    db: DB, store: Store, feeds: StoreFeeds
) -> None:
    txn = begin(store, b"x")
    txn = write_intent(store, txn, b"x", b"abandoned")
    feed = register(feeds)
    later = db.put(b"y", b"v")
    # Nobody heartbeats the txn: after its liveness the pusher aborts and removes it.
    events = feed.until(has_checkpoint_above(later))  # type: ignore[arg-type]
    assert values(events) == [(b"y", b"v")]
    assert db.get(b"x") is None


def test_the_pusher_resolves_a_committed_transaction_over_every_range_of_its_span(
    db: DB, store: Store
) -> None:
    txn = begin(store, b"b")
    txn = write_intent(store, txn, b"b", b"1")
    txn = write_intent(store, txn, b"m", b"2")
    txn = end_txn(store, txn, (), commit=True)  # committed, its intents left behind
    db.split(b"g")  # the processor's span, read before, now covers two ranges
    StorePusher(store).resolve(Span(b"a", b"z"), txn.meta(), TxnStatus.COMMITTED)
    with store.engine.snapshot() as snap:
        assert scan_intents(snap, EVERYTHING) == []
    assert (db.get(b"b"), db.get(b"m")) == (b"1", b"2")


def test_the_pushers_resolves_go_on_while_the_ranges_split_and_merge_under_them(
    db: DB, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = []
    for i in range(20):  # committed transactions whose intents were left behind
        txn = begin(store, b"b%02d" % i)
        for key in (b"b%02d" % i, b"m%02d" % i, b"t%02d" % i):
            txn = write_intent(store, txn, key, b"v")
        committed.append(end_txn(store, txn, (), commit=True))
    moves: list[Callable[[], object]] = []
    misses = 0
    execute = Store._execute

    def moving(self: Store, batch: BatchRequest) -> Applied:
        """A boundary moves just before each of a resolve's first four parts applies."""
        nonlocal misses
        if moves and isinstance(batch.requests[0], ResolveIntent):
            moves.pop(0)()
        try:
            return execute(self, batch)
        except RangeRoutingError:
            misses += 1
            raise

    monkeypatch.setattr(Store, "_execute", moving)
    for txn in committed:
        moves[:] = [
            partial(db.split, b"g"),
            partial(db.split, b"p"),
            partial(db.merge, b"g"),
            partial(db.merge, b"a"),
        ]
        StorePusher(store).resolve(Span(b"a", b"z"), txn.meta(), TxnStatus.COMMITTED)
    assert misses == 2 * len(committed)  # the first split, and the merge of the part's range
    with store.engine.snapshot() as snap:
        assert scan_intents(snap, EVERYTHING) == []


def test_a_pending_transaction_is_pushed_above_checkpoints_while_it_lives(
    db: DB, store: Store, feeds: StoreFeeds
) -> None:
    txn = begin(store, b"x")
    txn = write_intent(store, txn, b"x", b"slow")
    stop = threading.Event()

    def heartbeat() -> None:
        from feedkv.kv.api import BatchRequest, Header, HeartbeatTxn

        while not stop.wait(0.02):
            store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),)))

    beat = threading.Thread(target=heartbeat)
    beat.start()
    try:
        feed = register(feeds)
        later = db.put(b"y", b"v")
        feed.until(has_checkpoint_above(later))  # type: ignore[arg-type]
        processor = feeds.processor(1)
        assert processor is not None
        unresolved = processor.rts.intents.get(txn.id)
        assert unresolved is not None and unresolved.ts > txn.write_ts
    finally:
        stop.set()
        beat.join()


# Endings.


def test_more_registrations_at_once_than_the_store_has_readers_all_catch_up(
    db: DB, feeds: StoreFeeds
) -> None:
    # NB: the store allows 1024 concurrent readers; a scan waiting for a worker holds none.
    db.put(b"k", b"v")
    stream = feeds.new_stream()
    count = 1500
    for i in range(count):
        feeds.register(i, Span(b"k", b"k\x00"), ZERO, False, stream)
    events: list[Event] = []
    caught_up: set[object] = set()

    def all_caught_up() -> bool:
        # NB: counted as they come: the checkpoints of 1,500 registrations pile up fast
        for tag, event in stream.take(0.05):
            events.append(event)
            if isinstance(event, Checkpoint):
                caught_up.add(tag)
        return len(caught_up) == count

    wait_until(all_caught_up)
    assert len(values(events)) == count  # each registration's history: the one value
    assert not [e for e in events if isinstance(e, Error)]


def test_a_split_ends_the_stream_with_range_split_as_its_last_event(
    db: DB, feeds: StoreFeeds
) -> None:
    feed = register(feeds)
    feed.until(lambda es: bool(checkpoints(es)))
    db.split(b"m")
    events = feed.until(lambda es: any(isinstance(e, Error) for e in es))
    assert isinstance(events[-1], Error)
    assert events[-1].reason is ErrorReason.RANGE_SPLIT


def test_a_span_across_two_ranges_is_refused_with_range_not_found(
    db: DB, feeds: StoreFeeds
) -> None:
    db.split(b"m")
    feed = register(feeds, Span(b"a", b"z"))
    events = feed.until(lambda es: bool(es))
    assert events == [Error(ErrorReason.RANGE_NOT_FOUND, events[0].message)]  # type: ignore[union-attr]


def test_a_consumer_that_falls_behind_is_cut_off_with_slow_consumer(db: DB, store: Store) -> None:
    feeds = StoreFeeds(store, FeedConfig(per_registration=5))
    try:
        stream = feeds.new_stream()
        feeds.register("r", EVERYTHING, ZERO, False, stream)
        for i in range(20):
            db.put(b"k%02d" % i, b"v")
        collector = Collector(stream)
        events = collector.until(lambda es: any(isinstance(e, Error) for e in es))
        assert isinstance(events[-1], Error)
        assert events[-1].reason is ErrorReason.SLOW_CONSUMER
        assert "fell behind" in events[-1].message
        assert feeds.budget.used == 0
    finally:
        feeds.close()


def test_a_catch_up_whose_consumer_stops_reading_is_cut_off_with_slow_consumer(
    db: DB, store: Store
) -> None:
    # The consumer reads the scan's pages itself, a page a take: one that stops taking
    # holds the scan's snapshot until the scan gives up on it (catchup_wait_s).
    feeds = StoreFeeds(store, FeedConfig(catchup_wait_s=0.05, catchup_page_values=1))
    try:
        for i in range(3):
            db.put(b"k%d" % i, b"v")
        stream = feeds.new_stream()
        reg = feeds.register("r", EVERYTHING, ZERO, False, stream)
        first = stream.take(timeout=10)
        assert [type(e) for _tag, e in first] == [Value]
        wait_until(lambda: reg.done)
        events = [e for _tag, e in stream.take(timeout=0)]
        assert events == [Error(ErrorReason.SLOW_CONSUMER, "catch-up stalled")]
        assert feeds.budget.used == 0
    finally:
        feeds.close()


def test_a_catch_up_scan_that_breaks_ends_its_stream(
    db: DB, feeds: StoreFeeds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error no feedkv code expects (a bug) in a catch-up scan still ends the
    stream, as an invariant violation: its consumer does not wait for ever."""

    def broken(*args: object, **kwargs: object) -> Iterator[object]:
        raise RuntimeError("a bug in the scan")

    db.put(b"a", b"1")
    monkeypatch.setattr("feedkv.rangefeed.store_feeds.catch_up", broken)
    events = register(feeds).until(lambda es: any(isinstance(e, Error) for e in es))
    assert events[-1] == Error(
        ErrorReason.INVARIANT_VIOLATION, "catch-up failed: RuntimeError('a bug in the scan')"
    )


def test_unregistering_ends_the_stream_and_stops_the_processor(db: DB, feeds: StoreFeeds) -> None:
    stream = feeds.new_stream()
    reg = feeds.register("r", EVERYTHING, ZERO, False, stream)
    feed = Collector(stream)
    feed.until(lambda es: bool(checkpoints(es)))
    feeds.unregister(reg)
    events = feed.until(lambda es: any(isinstance(e, Error) for e in es))
    assert events[-1] == Error(ErrorReason.UNREGISTERED, "unregistered by the consumer")
    assert wait_until(lambda: feeds.processor(1) is None)


def test_closing_the_node_ends_every_stream_with_node_shutdown(db: DB, feeds: StoreFeeds) -> None:
    feed = register(feeds)
    feed.until(lambda es: bool(checkpoints(es)))
    feeds.close()
    events = feed.until(lambda es: any(isinstance(e, Error) for e in es))
    assert events[-1].reason is ErrorReason.NODE_SHUTDOWN  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "field", ["per_registration", "budget_bytes", "catchup_workers", "catchup_page_values"]
)
def test_a_feed_config_without_room_is_refused(field: str) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        FeedConfig(**{field: 0})
