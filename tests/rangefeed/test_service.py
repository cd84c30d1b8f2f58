"""What the node sends on a client's stream of feeds: for a take of many registrations, a
batch that several registrations read as one list goes once, naming them all, and each
registration still gets its own events in their order; a light stream's news is sent on
the commit thread as its group is flushed, sparing the stream's writer thread a wake, and
what the connection does not take at once is sent by the writer, before anything taken
after it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
from feed_helpers import DEADLINE_S, Collector, wait_until

import feedkv
from feedkv.kv.address import split_host_port
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.store import StoreConfig
from feedkv.rangefeed import service
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
from feedkv.rangefeed.service import (
    DIRECT_MAX_VALUES,
    MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS,
    RangeFeedService,
    _batches,
    _ServedFeeds,
)
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.rangefeed.wire import event_from_proto, values_from_proto
from feedkv.server.node import Node
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

SPAN = Span(b"a", b"z")
WATCHED = Span(b"w", b"w\x00")
PREFIX = Span(b"p", b"q")


def values(*stamps: int) -> list[Value]:
    return [Value(b"k%d" % s, b"v", Timestamp(s, 0)) for s in stamps]


def sent(
    items: list[tuple[Hashable, StreamItem]], *, ts_runs: bool = False
) -> list[pb.RangeFeedEvents]:
    return list(_batches(items, ts_runs=ts_runs))


def per_tag(messages: list[pb.RangeFeedEvents]) -> dict[int, list[Event]]:
    """What each registration receives, in order, as the client reads it."""
    out: dict[int, list[Event]] = {}
    for message in messages:
        for msg in message.events:
            if msg.WhichOneof("kind") == "values":
                batch = values_from_proto(msg.values)
                for tag in msg.values.tags:
                    out.setdefault(tag, []).extend(batch.values)
            else:
                out.setdefault(msg.tag, []).append(event_from_proto(msg))
    return out


def test_registrations_that_read_one_list_get_it_in_one_run() -> None:
    shared = values(21, 22)
    checkpoint = Checkpoint(SPAN, Timestamp(20, 0))
    items: list[tuple[Hashable, StreamItem]] = []
    for tag in (1, 2, 3):
        items += [(tag, ValueBatch(shared, Timestamp(22, 0))), (tag, checkpoint)]
    (message,) = sent(items)
    kinds = [msg.WhichOneof("kind") for msg in message.events]
    assert kinds == ["values", "checkpoint", "checkpoint", "checkpoint"]
    assert list(message.events[0].values.tags) == [1, 2, 3]
    assert per_tag([message]) == {tag: [*shared, checkpoint] for tag in (1, 2, 3)}


@pytest.mark.parametrize("ts_runs", [True, False], ids=["runs", "a timestamp a row"])
def test_a_transaction_goes_with_one_timestamp_to_clients_that_read_runs(ts_runs: bool) -> None:
    at = Timestamp(30, 2)
    txn = [Value(b"k%03d" % i, b"v", at) for i in range(100)]
    items: list[tuple[Hashable, StreamItem]] = [(tag, ValueBatch(txn, at)) for tag in (1, 2)]
    (message,) = sent(items, ts_runs=ts_runs)
    run = message.events[0].values
    assert list(run.ts_runs) == ([100] if ts_runs else [])
    assert len(run.walls) == (1 if ts_runs else 100)
    assert per_tag([message]) == {1: txn, 2: txn}


def test_a_batch_does_not_join_a_run_placed_before_its_registrations_last_event() -> None:
    first, second = values(21), values(22)
    early = Checkpoint(SPAN, Timestamp(20, 0))
    items: list[tuple[Hashable, StreamItem]] = [
        (1, ValueBatch(first, Timestamp(21, 0))),
        (1, ValueBatch(second, Timestamp(22, 0))),
        (2, early),
        (2, ValueBatch(first, Timestamp(21, 0))),  # 1's runs precede 2's checkpoint
        (2, ValueBatch(second, Timestamp(22, 0))),
    ]
    (message,) = sent(items)
    runs = [list(msg.values.tags) for msg in message.events if msg.HasField("values")]
    assert runs == [[1], [1], [2], [2]]
    assert per_tag([message]) == {1: [*first, *second], 2: [early, *first, *second]}


def test_a_later_batch_joins_a_run_placed_after_its_registrations_last_event() -> None:
    first, second = values(21), values(22)
    items: list[tuple[Hashable, StreamItem]] = [
        (1, ValueBatch(first, Timestamp(21, 0))),
        (2, ValueBatch(first, Timestamp(21, 0))),
        (2, ValueBatch(second, Timestamp(22, 0))),
        (1, ValueBatch(second, Timestamp(22, 0))),
    ]
    (message,) = sent(items)
    assert [list(msg.values.tags) for msg in message.events] == [[1, 2], [2, 1]]
    assert per_tag([message]) == {1: [*first, *second], 2: [*first, *second]}


def test_distinct_lists_with_equal_values_are_sent_apart() -> None:
    items: list[tuple[Hashable, StreamItem]] = [
        (1, ValueBatch(values(21), Timestamp(21, 0))),
        (2, ValueBatch(values(21), Timestamp(21, 0))),  # filtered for its own span
    ]
    (message,) = sent(items)
    assert [list(msg.values.tags) for msg in message.events] == [[1], [2]]


def test_a_run_keeps_the_higher_bound_of_its_readers() -> None:
    shared = values(21)
    items: list[tuple[Hashable, StreamItem]] = [
        (1, ValueBatch(shared, Timestamp(21, 0))),
        (2, ValueBatch(shared, Timestamp(25, 0))),  # read later: the log's newest was 25
    ]
    (message,) = sent(items)
    assert values_from_proto(message.events[0].values).max_ts == Timestamp(25, 0)


def test_big_batches_are_cut_into_messages_of_at_most_max_batch_events_values() -> None:
    many = values(*range(1, 2 * MAX_BATCH_EVENTS + 2))
    error = Error(ErrorReason.RANGE_SPLIT, "r1 ended")
    messages = sent([(1, ValueBatch(many, many[-1].ts)), (1, error)])
    assert len(messages) == 3
    for message in messages:
        assert sum(len(msg.values.keys) for msg in message.events) <= MAX_BATCH_EVENTS
    assert per_tag(messages) == {1: [*many, error]}


def test_runs_share_a_message_until_it_holds_max_batch_events_values() -> None:
    quarter = MAX_BATCH_EVENTS // 4
    runs = [values(*range(1 + i * quarter, 1 + (i + 1) * quarter)) for i in range(5)]
    messages = sent([(1, ValueBatch(run, run[-1].ts)) for run in runs])
    runs_sent = [[len(msg.values.keys) for msg in message.events] for message in messages]
    assert runs_sent == [[quarter] * 4, [quarter]]  # whole runs, none cut or empty
    assert per_tag(messages) == {1: [value for run in runs for value in run]}


def test_big_values_are_cut_into_messages_of_about_max_batch_bytes() -> None:
    big = [Value(b"k%04d" % i, b"x" * 100_000, Timestamp(i + 1, 0)) for i in range(1000)]
    messages = sent([(1, ValueBatch(big, big[-1].ts)), (2, ValueBatch(big, big[-1].ts))])
    assert len(messages) > 1
    for message in messages:
        assert message.ByteSize() <= MAX_BATCH_BYTES + 200_000  # the value that fills it
    assert per_tag(messages) == {1: big, 2: big}


def test_many_checkpoints_are_cut_into_messages_of_at_most_max_batch_events() -> None:
    checkpoints = [Checkpoint(SPAN, Timestamp(i + 1, 0)) for i in range(2 * MAX_BATCH_EVENTS)]
    messages = sent([(1, checkpoint) for checkpoint in checkpoints])
    assert [len(message.events) for message in messages] == [MAX_BATCH_EVENTS] * 2
    assert per_tag(messages) == {1: checkpoints}


class _Feeds:
    """What a stream of feeds needs of the node's feeds: a stream, never stopped, no rest."""

    stopped = False

    def new_stream(self) -> EventStream:
        return EventStream(Budget(1 << 20))

    def rest_end(self, stream: EventStream) -> float:
        return 0.0


class _Service:
    feeds = _Feeds()


class _Reg:
    """A registration as the stream counts it."""

    tag = 1
    queued = 0
    done = False


def served_feeds(send_now: Callable[[bytes], bool]) -> tuple[_ServedFeeds, EventStream]:
    served = _ServedFeeds(cast(RangeFeedService, _Service()), None)
    served.direct(send_now)
    stream = served._stream
    assert stream.deliver_now is not None
    return served, stream


def push(stream: EventStream, *stamps: int, wake: bool = True) -> None:
    batch = values(*stamps)
    assert stream.push(_Reg(), ValueBatch(batch, batch[-1].ts), 100, wake=wake)


def deliver(stream: EventStream) -> bool:
    assert stream.deliver_now is not None
    return stream.deliver_now()


class Writer:
    """The stream's writer thread: iterates :meth:`_ServedFeeds.replies`, keeping what
    it would send."""

    def __init__(self, served: _ServedFeeds) -> None:
        self.served = served
        self.sent: list[bytes] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for message in self.served.replies():
                self.sent.append(message)
        except BaseException as exc:
            self.error = exc

    def until(self, count: int) -> dict[int, list[Event]]:
        """What the first ``count`` messages carry, per registration."""
        wait_until(lambda: len(self.sent) >= count or self.error is not None)
        assert self.error is None
        return per_tag([pb.RangeFeedEvents.FromString(m) for m in self.sent])

    def stop(self) -> None:
        self.served._client_done.set()
        self.served._stream.kick()
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive()


def test_news_sent_at_once_is_not_sent_again_by_the_writer() -> None:
    direct: list[bytes] = []
    served, stream = served_feeds(lambda message: direct.append(message) is None)
    push(stream, 1, wake=False)
    assert deliver(stream)
    writer = Writer(served)
    push(stream, 2)
    assert writer.until(1) == {1: values(2)}
    writer.stop()
    assert per_tag([pb.RangeFeedEvents.FromString(m) for m in direct]) == {1: values(1)}


def test_news_the_connection_did_not_take_goes_first_with_the_writer() -> None:
    served, stream = served_feeds(lambda message: False)
    push(stream, 1, wake=False)
    assert deliver(stream)  # left to the writer, kicked
    push(stream, 2, wake=False)
    writer = Writer(served)
    assert writer.until(2) == {1: values(1, 2)}
    writer.stop()


class _Reader:
    """A live registration's reader (as a processor's): what it has is read on take."""

    def __init__(self) -> None:
        self.news: list[Value] = []

    def has_news(self) -> bool:
        return bool(self.news)

    def read(self, out: list[tuple[Hashable, StreamItem]]) -> bool:
        if self.news:
            out.append((1, ValueBatch(self.news, self.news[-1].ts)))
            self.news = []
        return False


def test_a_sleeping_writer_is_kicked_for_what_the_connection_did_not_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service, "_POLL_S", 10 * DEADLINE_S)  # no poll finds it in time
    served, stream = served_feeds(lambda message: False)
    reader = _Reader()
    with stream.lock:
        stream.attach(reader)
    writer = Writer(served)
    wait_until(lambda: stream.waiting)
    reader.news = values(1)  # NB: a reader's news wakes no one by itself
    assert deliver(stream)
    assert writer.until(1) == {1: values(1)}
    writer.stop()


def test_a_big_take_is_left_to_the_writer_unencoded() -> None:
    direct: list[bytes] = []
    served, stream = served_feeds(lambda message: direct.append(message) is None)
    many = range(1, DIRECT_MAX_VALUES + 2)
    push(stream, *many, wake=False)
    assert deliver(stream)
    assert direct == []
    writer = Writer(served)
    assert writer.until(1) == {1: values(*many)}
    writer.stop()


def test_a_failed_direct_send_ends_the_stream_with_its_error() -> None:
    def broken(message: bytes) -> bool:
        raise ConnectionResetError("the client is gone")

    served, stream = served_feeds(broken)
    push(stream, 1, wake=False)
    assert deliver(stream)
    writer = Writer(served)
    wait_until(lambda: writer.error is not None)
    assert isinstance(writer.error, ConnectionResetError)


def test_nothing_is_sent_at_once_after_the_writer_ended() -> None:
    direct: list[bytes] = []
    served, stream = served_feeds(lambda message: direct.append(message) is None)
    writer = Writer(served)
    push(stream, 1)
    assert writer.until(1) == {1: values(1)}
    writer.stop()  # its connection's end follows
    push(stream, 2, wake=False)
    assert not deliver(stream)
    assert direct == []


class DirectSends:
    """Each message a node tried to send at once: its thread and whether it went (with
    ``decline``, every other one is declined, as by a connection without room)."""

    def __init__(self, *, decline: bool = False) -> None:
        self.tried: list[tuple[str, bool]] = []
        self._decline = decline

    def wrap(self, send_now: Callable[[bytes], bool]) -> Callable[[bytes], bool]:
        def send(message: bytes) -> bool:
            went = not (self._decline and len(self.tried) % 2 == 0) and send_now(message)
            self.tried.append((threading.current_thread().name, went))
            return went

        return send


def node_sending(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, store_config: StoreConfig, sends: DirectSends
) -> Node:
    direct = _ServedFeeds.direct
    monkeypatch.setattr(_ServedFeeds, "direct", lambda self, now: direct(self, sends.wrap(now)))
    return Node(tmp_path / "s", listen="127.0.0.1:0", config=store_config)


@pytest.fixture
def feeds() -> Iterator[Callable[[Node], GrpcFeedTransport]]:
    made: list[tuple[GrpcTransport, GrpcFeedTransport]] = []

    def connect(node: Node) -> GrpcFeedTransport:
        address = split_host_port(node.url.removeprefix("feedkv://"))
        assert address is not None
        kv = GrpcTransport(*address)
        made.append((kv, GrpcFeedTransport(kv.channel, kv.address, tls=None)))
        return made[-1][1]

    yield connect
    for kv, transport in made:
        transport.close()
        kv.close()


@contextmanager
def feed_of(
    node: Node, feeds: Callable[[Node], GrpcFeedTransport], span: Span
) -> Iterator[tuple[feedkv.DB, Collector]]:
    """A client of ``node`` and a feed of ``span`` from now over the wire, read by the
    collector."""
    transport = feeds(node)
    stream = transport.new_stream()
    seen = Collector(stream)
    with feedkv.connect(node.url) as db:
        transport.register("feed", span, db.now(), False, stream)
        yield db, seen


def values_in(events: list[Event]) -> list[Value]:
    return [e for e in events if isinstance(e, Value)]


def test_a_watched_keys_values_leave_on_the_commit_thread(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    store_config: StoreConfig,
    feeds: Callable[[Node], GrpcFeedTransport],
) -> None:
    sends = DirectSends()
    with (
        node_sending(monkeypatch, tmp_path, store_config, sends) as node,
        feed_of(node, feeds, WATCHED) as (db, seen),
    ):
        seen.until(lambda events: any(isinstance(e, Checkpoint) for e in events))
        for i in range(20):
            db.put(b"w", b"%d" % i)
            seen.until(lambda events, n=i + 1: len(values_in(events)) == n)
    assert [v.value for v in values_in(seen.of_all())] == [b"%d" % i for i in range(20)]
    assert ("feedkv-commit", True) in sends.tried


def test_what_the_connection_does_not_take_at_once_goes_in_order(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    store_config: StoreConfig,
    feeds: Callable[[Node], GrpcFeedTransport],
) -> None:
    """Every other direct send is declined while a writer puts 200 values over 20 keys,
    one at a time (each value alone in its group, so each goes directly): the feed gets
    every value once, in timestamp order per key, none at or below an earlier
    checkpoint."""
    sends = DirectSends(decline=True)
    with (
        node_sending(monkeypatch, tmp_path, store_config, sends) as node,
        feed_of(node, feeds, PREFIX) as (db, seen),
    ):
        for i in range(200):
            db.put(b"p%02d" % (i % 20), b"%d" % i)
        seen.until(lambda events: len(values_in(events)) == 200)
    assert any(not went for _thread, went in sends.tried)
    assert any(went for _thread, went in sends.tried)
    per_key: dict[bytes, list[Timestamp]] = {}
    checkpoint = Timestamp(0, 0)
    for event in seen.of_all():
        if isinstance(event, Checkpoint):
            checkpoint = max(checkpoint, event.ts)
        elif isinstance(event, Value):
            assert event.ts > checkpoint
            per_key.setdefault(event.key, []).append(event.ts)
    assert len(per_key) == 20
    assert all(stamps == sorted(set(stamps)) and len(stamps) == 10 for stamps in per_key.values())
