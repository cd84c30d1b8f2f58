"""Checkpoint-only rangefeeds (``values=False``): the same checkpoints as a values feed,
no values and no catch-up scan, through the node's feeds, the gRPC wire and the
multi-range client, across splits and behind open transactions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from feed_helpers import (
    Collector,
    begin,
    end_txn,
    read_until,
    resolved_past,
    wait_until,
    write_intent,
)

from feedkv import DB
from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.kv.address import split_host_port
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import Store
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.client import FeedTransport
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.rangefeed.stream import EventStream
from feedkv.server.node import Node
from feedkv.storage.gc import gc
from feedkv.storage.logical_ops import WriteValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
USER = Span(b"a", b"z")  # the test's keys, and nothing a fresh store may write itself
ZERO = Timestamp(0, 0)
NO_PUSHES = FeedConfig(push_age_ns=10**15, push_interval_s=0.02)  # open txns stay put


def stamps(events: list[Event]) -> list[Timestamp]:
    return [e.ts for e in events if isinstance(e, Checkpoint)]


def not_checkpoints(events: list[Event]) -> list[Event]:
    return [e for e in events if not isinstance(e, Checkpoint)]


@pytest.fixture
def transport(node_and_db: tuple[Node, DB]) -> Iterator[FeedTransport]:
    """The node's feeds as a client registers with them: in-process, or over its stream
    of feeds."""
    node, db = node_and_db
    if db.node is not None:
        yield node.feeds
        return
    address = split_host_port(node.url.removeprefix("feedkv://"))
    assert address is not None
    kv = GrpcTransport(*address, tls=node.tls.client() if node.tls is not None else None)
    feeds = GrpcFeedTransport(kv.channel, kv.address, tls=kv.tls)
    yield feeds
    feeds.close()
    kv.close()


# The multi-range client (embedded and over gRPC).


def test_a_checkpoint_only_feed_yields_checkpoints_that_pass_the_writes(db: DB) -> None:
    db.put(b"a", b"before since")
    since = db.put(b"b", b"at since")
    db.put(b"a", b"after since, before the feed")  # what a catch-up scan would send
    with db.rangefeed(EVERYTHING, since, values=False) as feed:
        db.put(b"b", b"live")
        last = db.put(b"c", b"live")
        events = read_until(feed, resolved_past(last))
    assert not_checkpoints(events) == []
    assert stamps(events) == sorted(stamps(events))


def test_a_checkpoint_only_feed_keeps_checkpointing_across_a_split(
    db: DB, node_and_db: tuple[Node, DB]
) -> None:
    feeds = node_and_db[0].feeds
    with db.rangefeed(EVERYTHING, ZERO, values=False) as feed:
        events = read_until(feed, lambda es: bool(stamps(es)))
        left, right = db.split(b"m")
        db.put(b"a", b"left")
        last = db.put(b"x", b"right")
        # Checkpoints past ``last`` need both halves registered again: the split ended
        # the registration of the range that was.
        events += read_until(feed, resolved_past(last))
        assert not_checkpoints(events) == []
        assert stamps(events) == sorted(stamps(events))
        for desc in (left, right):
            processor = feeds.processor(desc.range_id)
            assert processor is not None, f"r{desc.range_id} has no feed after the split"
            assert [reg.values for reg in processor.registry] == [False]


@pytest.mark.parametrize("feed_config", [NO_PUSHES], ids=["no-pushes"])
def test_an_open_intent_holds_a_checkpoint_only_feed_back_like_a_values_feed(
    db: DB, store: Store, node_and_db: tuple[Node, DB]
) -> None:
    with (
        db.rangefeed(USER, ZERO) as with_values,
        db.rangefeed(USER, ZERO, values=False) as early,
    ):
        read_until(early, lambda es: bool(stamps(es)))  # the range's processor runs
        txn = begin(store, b"x")
        txn = write_intent(store, txn, b"x", b"provisional")
        processor = node_and_db[0].feeds.processor(1)
        assert processor is not None
        # Once the closed timestamp passes the intent, the resolved timestamp is pinned
        # just below it until the transaction ends.
        assert wait_until(lambda: processor.rts.closed > txn.write_ts)
        pinned = txn.write_ts.prev()
        assert processor.rts.resolved == pinned
        # A feed registered now starts from the pinned resolved timestamp, not the closed.
        with db.rangefeed(USER, ZERO, values=False) as late:
            held = {
                "values": read_until(with_values, resolved_past(pinned)),
                "early": read_until(early, resolved_past(pinned)),
                "late": read_until(late, resolved_past(pinned)),
            }
            assert {name: max(stamps(es)) for name, es in held.items()} == dict.fromkeys(
                held, pinned
            )
            txn = end_txn(store, txn, (Span.for_key(b"x"),), commit=True)
            later = {
                "values": read_until(with_values, resolved_past(txn.write_ts)),
                "early": read_until(early, resolved_past(txn.write_ts)),
                "late": read_until(late, resolved_past(txn.write_ts)),
            }
    committed = [e for e in held["values"] + later["values"] if isinstance(e, Value)]
    assert [(e.key, e.value) for e in committed] == [(b"x", b"provisional")]
    for name in ("early", "late"):
        assert not_checkpoints(held[name] + later[name]) == []
        # No checkpoint given while the txn was open covers the value it committed.
        assert all(ts < committed[0].ts for ts in stamps(held[name])), name


def test_a_checkpoint_only_feed_reads_no_history_so_gc_does_not_stop_it(
    db: DB, store: Store
) -> None:
    old = db.put(b"k", b"1")
    db.put(b"k", b"2")
    threshold = db.now()
    store.engine.write(lambda rw: gc(rw, EVERYTHING, threshold))
    with db.rangefeed(EVERYTHING, old, values=False) as feed:
        last = db.put(b"k", b"3")
        events = read_until(feed, resolved_past(last))
    assert not_checkpoints(events) == []


def test_with_diff_without_values_is_refused(db: DB) -> None:
    with pytest.raises(InvalidArgumentError, match="with_diff=True needs values"):
        db.rangefeed(EVERYTHING, ZERO, with_diff=True, values=False)


# A node's feeds, in-process and on the wire.


def test_a_checkpoint_only_registration_is_sent_no_values(db: DB, transport: FeedTransport) -> None:
    since = db.put(b"a", b"before")
    db.put(b"a", b"history after since")
    stream = transport.new_stream()
    transport.register("c", EVERYTHING, since, False, stream, values=False)
    feed = Collector(stream)
    last = db.put(b"b", b"live")
    events = feed.until(resolved_past(last))
    assert not_checkpoints(events) == []


def test_a_closed_feed_transport_ends_its_feeds_and_refuses_new_ones(
    db: DB, transport: FeedTransport
) -> None:
    stream = transport.new_stream()
    transport.register("open", USER, ZERO, False, stream)
    feed = Collector(stream)
    feed.until(resolved_past(db.put(b"a", b"live")))

    transport.close()
    ended = feed.until(lambda es: isinstance(es[-1], Error))[-1]

    assert isinstance(ended, Error)
    assert ended.reason in (ErrorReason.DISCONNECTED, ErrorReason.NODE_SHUTDOWN)
    with pytest.raises(NodeUnavailableError):
        transport.register("late", USER, ZERO, False, transport.new_stream())
    transport.close()  # idempotent


def test_with_diff_without_values_is_refused_on_the_wire(
    node_and_db: tuple[Node, DB], transport: FeedTransport
) -> None:
    stream = transport.new_stream()
    if node_and_db[1].node is not None:
        with pytest.raises(InvalidArgumentError, match="with_diff=True needs values"):
            transport.register("c", EVERYTHING, ZERO, True, stream, values=False)
        return
    transport.register("c", EVERYTHING, ZERO, True, stream, values=False)
    events = Collector(stream).until(bool)
    assert isinstance(events[0], Error)
    assert events[0].reason is ErrorReason.INVALID_REQUEST
    assert "with_diff=True needs values" in events[0].message


def test_a_checkpoint_only_registration_gets_the_values_registrations_checkpoints(
    db: DB, feeds: StoreFeeds
) -> None:
    for i in range(50):
        db.put(b"k%02d" % i, b"history")
    stream = feeds.new_stream()
    feeds.register("values", USER, ZERO, False, stream)
    feeds.register("checkpoints", USER, ZERO, False, stream, values=False)
    feed = Collector(stream)
    last = ZERO
    for i in range(20):
        last = db.put(b"k%02d" % i, b"live")
    feed.until(lambda es: len([e for e in es if isinstance(e, Checkpoint) and e.ts >= last]) >= 2)
    assert not_checkpoints(feed.of("checkpoints")) == []
    assert len([e for e in feed.of("values") if isinstance(e, Value)]) == 70
    # Once both are live (from the later of their first checkpoints), every checkpoint
    # goes to both, at the same timestamp; the last one may not be taken for both yet.
    of_values, of_checkpoints = stamps(feed.of("values")), stamps(feed.of("checkpoints"))
    both_live = max(of_values[0], of_checkpoints[0])
    of_values = [ts for ts in of_values if ts >= both_live]
    of_checkpoints = [ts for ts in of_checkpoints if ts >= both_live]
    n = min(len(of_values), len(of_checkpoints))
    assert n >= 1
    assert of_values[:n] == of_checkpoints[:n]


def test_a_split_ends_a_checkpoint_only_registration_with_range_split(
    db: DB, feeds: StoreFeeds
) -> None:
    stream = feeds.new_stream()
    feeds.register("c", EVERYTHING, ZERO, False, stream, values=False)
    feed = Collector(stream)
    feed.until(lambda es: bool(stamps(es)))
    db.put(b"a", b"v")
    db.split(b"m")
    events = feed.until(lambda es: any(isinstance(e, Error) for e in es))
    assert isinstance(events[-1], Error)
    assert events[-1].reason is ErrorReason.RANGE_SPLIT
    assert not_checkpoints(events[:-1]) == []


# The processor's fan-out.


def test_the_processor_builds_and_queues_nothing_for_a_checkpoint_only_registration() -> None:
    processor = Processor(1, USER)
    processor.init([], Timestamp(5, 0))
    budget = Budget(1 << 20)
    reg = Registration("c", USER, ZERO, False, EventStream(budget), values=False)
    processor.register(reg)
    processor.finish_catch_up(reg)
    assert [event for _tag, event in reg.stream.take(0)] == [Checkpoint(USER, Timestamp(5, 0))]
    processor.on_ops([WriteValue(b"k", Timestamp(10, 0), b"v", None)])
    assert (budget.used, reg.queued) == (0, 0)
    processor.on_closed(Timestamp(20, 0))
    assert [event for _tag, event in reg.stream.take(0)] == [Checkpoint(USER, Timestamp(20, 0))]
