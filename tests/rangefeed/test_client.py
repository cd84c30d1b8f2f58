"""The multi-range client: whole-feed checkpoints from a span frontier, and retries that
hide splits, merges and slow-consumer cut-offs without losing or repeating a value."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from feed_helpers import read_until, resolved_past, wait_until

import feedkv
from feedkv import DB
from feedkv.errors import BatchTimestampBeforeGCError, ClientClosedError
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed import client
from feedkv.rangefeed.client import FeedTransport, RangeFeed
from feedkv.rangefeed.event import Checkpoint, Event, Value, ValueColumns
from feedkv.rangefeed.store_feeds import FeedConfig
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.storage.export import iter_export
from feedkv.storage.gc import gc
from feedkv.testing.feed_validator import FeedValidator, assert_valid, check_resolved_feed
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
ZERO = Timestamp(0, 0)


def per_key(events: list[Event]) -> dict[bytes, list[Timestamp]]:
    out: dict[bytes, list[Timestamp]] = {}
    for event in events:
        if isinstance(event, Value):
            out.setdefault(event.key, []).append(event.ts)
    return out


def test_a_feed_over_many_ranges_checkpoints_its_whole_span(db: DB) -> None:
    for split in (b"c", b"f", b"p"):
        db.split(split)
    with db.rangefeed([Span(b"a", b"h"), Span(b"o", b"q")], ZERO) as feed:
        last = ZERO
        for key in (b"a", b"d", b"g", b"o", b"z"):
            last = db.put(key, key)
        events = read_until(feed, resolved_past(last))
    assert sorted(e.key for e in events if isinstance(e, Value)) == [b"a", b"d", b"g", b"o"]
    checkpoints = [e for e in events if isinstance(e, Checkpoint)]
    assert {c.span for c in checkpoints} == {Span(b"a", b"h"), Span(b"o", b"q")}
    stamps = [c.ts for c in checkpoints]
    assert stamps == sorted(stamps)


def test_ranges_lists_each_registered_piece_with_its_resolved_timestamp(db: DB) -> None:
    db.split(b"m")
    with db.rangefeed([Span(b"a", b"z")], ZERO) as feed:
        last = db.put(b"b", b"x")
        read_until(feed, resolved_past(last))
        pieces = feed.ranges()
        assert [(p.span.start, p.span.end) for p in pieces] == [(b"a", b"m"), (b"m", b"z")]
        assert len({p.range_id for p in pieces}) == 2
        assert all(p.resolved >= last and p.node_id == 1 for p in pieces)
    assert feed.ranges() == []  # closed: nothing registered


@pytest.mark.parametrize("timestamp_order", [False, True])
def test_a_feed_from_long_ago_over_many_ranges_reads_each_ranges_own_versions(
    db: DB, store: Store, timestamp_order: bool
) -> None:
    """Each range holds a quarter of the versions the store took since the feed's start,
    so its catch-up reads them by key, not the whole store's time index: keys descending,
    each key's versions oldest first, with the values they replaced; unless the feed
    asks for timestamp order."""
    since = db.now()
    for round_ in range(3):
        with db.transaction() as txn:
            for i in range(60):
                txn.put(b"k%02d" % i, b"%d.%d" % (round_, i))
        db.delete(b"k%02d" % (20 + round_))
    for split in (b"k15", b"k30", b"k45"):
        db.split(split)
    last = db.put(b"k59", b"last")
    feed = db.rangefeed(EVERYTHING, since, with_diff=True, timestamp_order=timestamp_order)
    with feed:
        events = read_until(feed, resolved_past(last))
    validator = FeedValidator([EVERYTHING], since, with_diff=True)
    validator.observe_all(events)
    with store.engine.snapshot() as snap:
        committed = list(iter_export(snap, EVERYTHING, ZERO, MAX_TIMESTAMP))
    assert_valid(validator.check(committed, up_to=last))
    middle = [e for e in events if isinstance(e, Value) and b"k15" <= e.key < b"k30"]
    assert len(middle) == 3 * 15 + 3
    if timestamp_order:
        assert middle == sorted(middle, key=lambda e: (e.ts, e.key))
    else:
        assert [e.key for e in middle] == sorted((e.key for e in middle), reverse=True)


def test_no_value_follows_a_checkpoint_at_or_above_it(db: DB) -> None:
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            db.put(b"k%d" % (i % 7), b"%d" % i)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with db.rangefeed(EVERYTHING, ZERO) as feed:
            events = read_until(feed, lambda es: sum(isinstance(e, Checkpoint) for e in es) >= 20)
    finally:
        stop.set()
        thread.join()
    resolved = ZERO
    for event in events:
        if isinstance(event, Checkpoint):
            resolved = max(resolved, event.ts)
        elif isinstance(event, Value):
            assert event.ts > resolved, f"{event} after a checkpoint at {resolved}"


def test_splits_and_merges_during_a_feed_lose_and_repeat_nothing(db: DB) -> None:
    stop = threading.Event()
    written: dict[bytes, list[Timestamp]] = {}

    def writer() -> None:
        i = 0
        while not stop.is_set():
            key = b"k%02d" % (i % 20)
            written.setdefault(key, []).append(db.put(key, b"%d" % i))
            i += 1

    def reshaper() -> None:
        while not stop.is_set():
            db.split(b"k10")
            db.split(b"k05")
            db.merge(b"k00")
            db.merge(b"k00")

    with db.rangefeed(EVERYTHING, ZERO) as feed:
        threads = [threading.Thread(target=writer), threading.Thread(target=reshaper)]
        for thread in threads:
            thread.start()
        try:
            assert wait_until(lambda: sum(map(len, written.values())) >= 300)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        last = db.put(b"zz", b"end")
        events = read_until(feed, resolved_past(last))
    got = per_key(events)
    for key, stamps in written.items():
        assert got.get(key) == stamps, f"{key!r}: got {got.get(key)} wrote {stamps}"


def test_a_slow_consumer_is_cut_off_and_resumed_without_losing_or_repeating(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    config = FeedConfig(per_registration=8, push_interval_s=0.02)
    with feedkv.connect(tmp_path / "s", config=store_config, feed_config=config) as db:
        feed = db.rangefeed(EVERYTHING, ZERO)
        written = [db.put(b"key", b"%d" % i) for i in range(100)]  # nobody reads meanwhile
        events = read_until(feed, resolved_past(written[-1]))
        feed.close()
    assert per_key(events)[b"key"] == written


@pytest.mark.parametrize("merge", [False, True], ids=["folded", "merged"])
def test_a_piece_that_folded_its_kept_values_still_repeats_nothing_after_a_restart(
    tmp_path: Path, store_config: StoreConfig, merge: bool
) -> None:
    # Catch-up pages of 4 values, 8 queued at most: the feed yields history before its
    # first checkpoint, then the split restarts it from the start, and the new catch-up
    # sends that history again; the piece had folded it (more than 2 values kept), and
    # merged the folds into the ten keys' newest timestamps (more than 4 folded).
    config = FeedConfig(per_registration=8, catchup_page_values=4)
    with feedkv.connect(tmp_path / "s", config=store_config, feed_config=config) as db:
        written = [db.put(b"key%d" % (i % 10), b"%d" % i) for i in range(100)]
        # NB: built by hand for the knobs; db.rangefeed keeps 16,384 values before folding.
        feed = RangeFeed(
            db._feeds,
            db._router,
            [EVERYTHING],
            ZERO,
            recent_values=2,
            folded_values=4 if merge else 1000,
        )
        events = read_until(feed, lambda got: len(got) >= 20)
        assert not any(isinstance(e, Checkpoint) for e in events)
        (piece,) = feed._pieces.values()
        assert len(piece.merged) == (10 if merge else 0)
        assert (piece.folded_values <= 4) is merge  # else a key and timestamp a value
        db.split(b"key1")
        events += read_until(feed, resolved_past(written[-1]))
        feed.close()
    got = per_key(events)
    assert sorted(ts for stamps in got.values() for ts in stamps) == written
    assert all(stamps == sorted(stamps) for stamps in got.values())


def test_a_piece_folds_a_transactions_timestamps_as_runs_and_still_repeats_nothing(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    # Catch-up pages of 16 values from transactions of 12 keys: each page folds its
    # timestamps as runs (12 and 4, 8 and 8, ...), not a timestamp per key; a split
    # before the first checkpoint restarts the piece from the start, and what its new
    # catch-up sends again is filtered out by the runs.
    config = FeedConfig(per_registration=32, catchup_page_values=16)
    with feedkv.connect(tmp_path / "s", config=store_config, feed_config=config) as db:
        for t in range(8):
            with db.transaction() as txn:
                for i in range(12):
                    txn.put(b"key%02d" % i, b"%d" % t)
        last = db.put(b"last", b"")
        feed = db.rangefeed(EVERYTHING, ZERO)
        events = read_until(feed, lambda got: len(got) >= 48)
        (piece,) = feed._pieces.values()
        runs = [stamps for _newest, _keys, stamps in piece.folded]
        assert runs and all(isinstance(stamps, client._Runs) for stamps in runs)
        assert any(len(stamps) == 2 for stamps in runs)  # a page across two transactions
        assert sum(n for stamps in runs for _ts, n in stamps) == piece.folded_values
        db.split(b"key06")
        events += read_until(feed, resolved_past(last))
        feed.close()
    got = per_key(events)
    assert all(len(set(got[b"key%02d" % i])) == len(got[b"key%02d" % i]) == 8 for i in range(12))
    assert all(stamps == sorted(stamps) for stamps in got.values())


def test_a_piece_keeps_the_keys_not_the_values_of_catch_up_pages_it_yielded(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    # Catch-up pages of 4 values, read for two pages: the catch-up has a third, so no
    # checkpoint has come; however few values the piece kept, each page it yielded is
    # folded at once (its own key and timestamp lists), so its values are let go.
    config = FeedConfig(catchup_page_values=4)
    with feedkv.connect(tmp_path / "s", config=store_config, feed_config=config) as db:
        written = [db.put(b"key%02d" % i, b"%d" % i) for i in range(12)]
        with db.rangefeed(EVERYTHING, ZERO) as feed:
            events = read_until(feed, lambda got: len(got) >= 8)
            (piece,) = feed._pieces.values()
            folded = [
                (k, ts)
                for _newest, keys, stamps in piece.folded
                for k, ts in zip(keys, stamps, strict=True)
            ]
    assert piece.recent == [] and piece.recent_values == 0
    assert piece.folded_values == len(folded) >= 8
    assert folded[:8] == [(e.key, e.ts) for e in events if isinstance(e, Value)]
    assert [ts for _k, ts in folded] == written[: len(folded)]


def test_a_piece_keeps_the_keys_not_the_values_of_live_values_it_yielded(tmp_path: Path) -> None:
    # Closed timestamps a minute behind: no checkpoint passes the writes, so the piece
    # keeps what it yielded; the log's slices come as columns, folded at once, so it
    # holds their keys and timestamps and lets the values go.
    config = StoreConfig(closed_ts_target_ns=60 * 10**9, sync=False)
    with (
        feedkv.connect(tmp_path / "s", config=config) as db,
        db.rangefeed(EVERYTHING, ZERO) as feed,
    ):
        read_until(feed, lambda got: any(isinstance(e, Checkpoint) for e in got))
        written = [db.put(b"key%d" % i, b"%d" % i) for i in range(5)]
        events = read_until(feed, lambda got: len(got) >= 5)
        (piece,) = feed._pieces.values()
        folded = [
            (k, ts)
            for _newest, keys, stamps in piece.folded
            for k, ts in zip(keys, client._each_of(stamps), strict=True)
        ]
    assert piece.recent == []
    assert folded[-5:] == [(e.key, e.ts) for e in events if isinstance(e, Value)]
    assert [ts for _k, ts in folded[-5:]] == written


def test_a_piece_folding_live_values_drops_its_folds_as_checkpoints_pass_them(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    # Folding after every 2 values kept and merging after 4 folded, a split between
    # checkpoints restarts the pieces with folds both below and above their last
    # checkpoint.
    with feedkv.connect(tmp_path / "s", config=store_config) as db:
        feed = RangeFeed(
            db._feeds, db._router, [EVERYTHING], ZERO, recent_values=2, folded_values=4
        )
        written: list[Timestamp] = []
        events: list[Event] = []
        for round_ in range(3):
            written += [db.put(b"key%d" % (i % 3), b"%d" % i) for i in range(30)]
            if round_ == 1:
                events += read_until(feed, lambda got: len(got) >= 10)
                db.split(b"key1")
            events += read_until(feed, resolved_past(written[-1]))
        assert all(not (p.folded or p.merged) for p in feed._pieces.values())
        feed.close()
    got = per_key(events)
    assert sorted(ts for stamps in got.values() for ts in stamps) == sorted(written)
    assert all(stamps == sorted(stamps) for stamps in got.values())


def test_with_diff_previous_values_survive_a_retry(db: DB) -> None:
    db.put(b"k", b"0")
    start = db.now()
    with db.rangefeed(EVERYTHING, start, with_diff=True) as feed:
        for i in range(1, 6):
            db.put(b"k", b"%d" % i)
            if i == 3:
                db.split(b"k")
        last = db.put(b"k", b"6")
        events = read_until(feed, resolved_past(last))
    pairs = [(e.prev_value, e.value) for e in events if isinstance(e, Value)]
    assert pairs == [(b"%d" % i, b"%d" % (i + 1)) for i in range(6)]


def test_history_below_the_gc_threshold_raises_a_clear_error(db: DB, store: Store) -> None:
    old = db.put(b"k", b"1")
    db.put(b"k", b"2")
    threshold = db.now()
    store.engine.write(lambda rw: gc(rw, EVERYTHING, threshold))
    feed = db.rangefeed(EVERYTHING, old)
    with pytest.raises(BatchTimestampBeforeGCError, match="garbage-collection threshold"):
        read_until(feed, lambda es: False)


def test_closing_from_another_thread_ends_the_iteration(db: DB) -> None:
    feed = db.rangefeed(EVERYTHING, db.now())
    ended = threading.Event()

    def consume() -> None:
        for _event in feed:
            pass
        ended.set()

    thread = threading.Thread(target=consume)
    thread.start()
    feed.close()
    assert ended.wait(10)
    thread.join()


def test_a_feed_read_by_next_and_by_loops_that_break_yields_each_value_once(db: DB) -> None:
    start = db.now()
    with db.transaction() as txn:  # one commit: the values reach the feed as one batch
        for i in range(10):
            txn.put(b"k%d" % i, b"v")
    with db.rangefeed(EVERYTHING, start) as feed:
        keys = [next(v.key for v in feed if isinstance(v, Value))]
        for event in feed:
            if isinstance(event, Value):
                keys.append(event.key)
                if len(keys) == 4:
                    break
        keys.append(next(feed).key)  # type: ignore[union-attr]  # still in the batch
        for event in feed:
            if isinstance(event, Value):
                keys.append(event.key)
                if len(keys) == 10:
                    break
    assert keys == [b"k%d" % i for i in range(10)]


class InterruptedOnce(list[Value]):
    """Values whose first reading is interrupted, as a Ctrl-C landing there would be."""

    interrupted = False

    def __iter__(self) -> Iterator[Value]:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return super().__iter__()


class FirstBatchInterrupted(EventStream):
    """A stream whose first value batch is interrupted when the feed starts reading it."""

    done = False

    def take_batches(self, timeout: float | None = None) -> list[tuple[Hashable, StreamItem]]:
        out = super().take_batches(timeout)
        for i, (tag, item) in enumerate(out):
            if isinstance(item, ValueBatch) and not self.done:
                self.done = True
                out[i] = (tag, ValueBatch(InterruptedOnce(item.values), item.max_ts))
        return out


class InterruptingTransport:
    """The database's own transport, with streams that interrupt their first batch."""

    def __init__(self, inner: FeedTransport) -> None:
        self.inner = inner

    def new_stream(self) -> EventStream:
        stream = self.inner.new_stream()
        return FirstBatchInterrupted(stream.budget, per_registration=stream.per_registration)

    def __getattr__(self, name: str) -> Any:  # register, unregister, close: the inner's
        return getattr(self.inner, name)


def test_an_interrupt_as_the_feed_starts_a_batch_loses_nothing(db: DB) -> None:
    start = db.now()
    with db.transaction() as txn:  # one commit: the values reach the feed as one batch
        for i in range(10):
            txn.put(b"k%d" % i, b"v")
    after = db.now()
    transport = cast(FeedTransport, InterruptingTransport(db._feeds))
    with RangeFeed(transport, db._router, [EVERYTHING], start) as feed:
        with pytest.raises(KeyboardInterrupt):
            read_until(feed, lambda got: False)
        events = read_until(feed, resolved_past(after))
    got = per_key(events)
    assert sorted(got) == [b"k%d" % i for i in range(10)]
    assert all(len(stamps) == 1 for stamps in got.values())


def test_closing_the_db_ends_its_open_feeds(tmp_path: Path, store_config: StoreConfig) -> None:
    db = feedkv.connect(tmp_path / "s", config=store_config)
    feed = db.rangefeed(EVERYTHING, db.now())
    db.close()
    assert list(feed) == []


def test_a_feed_read_by_batches_hands_its_catch_up_over_as_columns(db: DB) -> None:
    span = Span(b"b", b"c")
    keys = [b"b%04d" % i for i in range(3000)]
    with db.transaction() as txn:
        for key in keys:
            txn.put(key, b"v")
    last = db.put(b"b-live", b"v")
    seen: list[bytes] = []
    columns = 0
    reached = False
    with db.rangefeed(span, ZERO) as feed:
        closer = threading.Timer(10, feed.close)
        closer.start()
        try:
            for batch in feed.batches():
                if isinstance(batch, ValueColumns):
                    columns += 1
                    seen += batch.keys
                    continue
                seen += [e.key for e in batch if isinstance(e, Value)]
                if any(isinstance(e, Checkpoint) and e.ts >= last for e in batch):
                    reached = True
                    break
        finally:
            closer.cancel()
    assert reached, "the feed was closed before its checkpoint passed the last write"
    assert columns >= 1
    assert sorted(seen) == sorted([*keys, b"b-live"])


def test_a_feed_can_be_read_with_async_for(db: DB) -> None:
    async def first_value() -> Event:
        with db.rangefeed(EVERYTHING, ZERO) as feed:
            db.put(b"async", b"yes")
            async for event in feed:
                if isinstance(event, Value):
                    return event
        raise AssertionError("the feed ended")

    event = asyncio.run(asyncio.wait_for(first_value(), 10))
    assert (event.key, event.value) == (b"async", b"yes")  # type: ignore[union-attr]


def test_many_idle_watches_in_one_event_loop_do_not_hold_up_a_busy_one(db: DB) -> None:
    # NB: each waiting `async for` once held a thread of the loop's default executor (a
    # handful), so idle watches starved the rest; they now wait in the loop itself.
    async def busy_gets_its_value() -> Event:
        since = db.now()
        idle = [db.watch(b"idle%d/" % i, prefix=True, since=since) for i in range(16)]
        busy = db.watch(b"busy/", prefix=True, since=since)

        async def drain(feed: object) -> None:
            async for _event in feed:  # type: ignore[attr-defined]
                pass

        waiting = [asyncio.create_task(drain(feed)) for feed in idle]
        try:
            db.put(b"busy/key", b"v")
            async for event in busy:
                return event
            raise AssertionError("the busy watch ended")
        finally:
            for feed in [*idle, busy]:
                feed.close()
            await asyncio.gather(*waiting)

    event = asyncio.run(asyncio.wait_for(busy_gets_its_value(), 10))
    assert (event.key, event.value) == (b"busy/key", b"v")  # type: ignore[union-attr]


def test_a_feed_left_waiting_in_a_closed_event_loop_still_closes(db: DB) -> None:
    feed = db.watch(b"nobody/", prefix=True, since=db.now())
    loop = asyncio.new_event_loop()
    waiting = loop.create_task(feed.__anext__())
    for _ in range(100):  # loop iterations, not time: until the feed waits in the loop
        if feed._stream._async_waiters:
            break
        loop.run_until_complete(asyncio.sleep(0))  # wait-ok: one loop iteration, no time
    assert feed._stream._async_waiters and not waiting.done()
    loop.close()  # NB: abandons the waiting task, as a loop stopped abruptly does
    waiting._log_destroy_pending = False  # type: ignore[attr-defined]  # it is on purpose
    feed.close()  # wakes a waiter whose loop is gone: nothing to raise
    assert feed._closed


def test_an_empty_span_list_is_refused(db: DB) -> None:
    with pytest.raises(ValueError, match="at least one non-empty span"):
        db.rangefeed([], ZERO)


def test_spans_may_be_start_end_pairs_of_bytes(db: DB) -> None:
    ts = db.put(b"k1", b"v")
    for spans in [(b"k", b"l"), [(b"k", b"l")], [Span(b"a", b"b"), (b"k", b"l")]]:
        with db.rangefeed(spans, since=ts.prev()) as feed:  # type: ignore[arg-type]
            assert next(e for e in feed if isinstance(e, Value)).key == b"k1"


@pytest.mark.parametrize(
    "spans", ["kl", b"kl", [(b"k", "l")], [(b"k", b"l", b"m")], [b"k"], 5, [None]]
)
def test_anything_else_as_spans_is_a_type_error_naming_it(db: DB, spans: Any) -> None:
    with pytest.raises(TypeError, match="span"):
        db.rangefeed(spans, since=ZERO)


def test_a_closed_client_refuses_new_feeds_instead_of_waiting_forever(tmp_path: Path) -> None:
    db = feedkv.connect(str(tmp_path / "store"))
    ts = db.put(b"k", b"v")
    db.close()
    with pytest.raises(ClientClosedError, match="closed"):
        db.rangefeed(Span(b"k", b"l"), since=ts)
    with pytest.raises(ClientClosedError, match="closed"):
        db.watch(b"k")


# Watch.


def test_a_watch_yields_the_current_value_then_every_change(db: DB) -> None:
    db.put(b"cfg", b"v1")
    db.put(b"cfg/other", b"not this key")
    with db.watch(b"cfg") as watch:
        db.put(b"cfg", b"v2")
        db.delete(b"cfg")
        got = [next(watch) for _ in range(3)]
    assert [(e.key, e.value) for e in got] == [(b"cfg", b"v1"), (b"cfg", b"v2"), (b"cfg", None)]  # type: ignore[union-attr]


def test_a_prefix_watch_covers_every_key_under_it_and_only_values(db: DB) -> None:
    db.put(b"app/a", b"1")
    db.put(b"apq", b"outside")
    with db.watch(b"app/", prefix=True) as watch:
        db.put(b"app/b", b"2")
        db.put(b"apq", b"still outside")
        db.put(b"app/a", b"3")
        got = [next(watch) for _ in range(3)]
    assert all(isinstance(e, Value) for e in got)
    assert [(e.key, e.value) for e in got] == [(b"app/a", b"1"), (b"app/b", b"2"), (b"app/a", b"3")]  # type: ignore[union-attr]


def test_a_watch_from_a_timestamp_replays_history_after_it(db: DB) -> None:
    start = db.put(b"w", b"1")
    db.put(b"w", b"2")
    with db.watch(b"w", since=start) as watch:
        event = next(watch)
    assert (event.value, event.ts > start) == (b"2", True)  # type: ignore[union-attr]


class SilentFirstNode:
    """A transport whose first registration is taken and then never heard from (a
    replica cut off from its range's leader, or a node that stopped sending while its
    stream stays open); later ones reach the node."""

    def __init__(self, inner: FeedTransport) -> None:
        self.inner = inner
        self.registrations = 0

    def register(self, *args: Any, **kwargs: Any) -> object:
        self.registrations += 1
        if self.registrations == 1:
            return None  # NB: the node "took" it: nothing will come
        return self.inner.register(*args, **kwargs)

    def unregister(self, handle: object) -> None:
        if handle is not None:
            self.inner.unregister(handle)

    def __getattr__(self, name: str) -> Any:  # new_stream, local_node, close: the inner's
        return getattr(self.inner, name)


def test_a_piece_its_node_stops_answering_is_registered_again_without_a_gap(db: DB) -> None:
    start = db.now()
    transport = SilentFirstNode(db._feeds)
    written = [db.put(b"k%d" % (i % 3), b"%d" % i) for i in range(6)]
    with RangeFeed(
        cast(FeedTransport, transport), db._router, [EVERYTHING], start, stuck_after_s=0.3
    ) as feed:
        written += [db.put(b"k%d" % (i % 3), b"%d" % i) for i in range(6, 12)]
        events = read_until(feed, resolved_past(written[-1]))
    assert transport.registrations == 2
    history = check_resolved_feed(events, db, EVERYTHING, start, written[-1])
    assert len(history) == 12
