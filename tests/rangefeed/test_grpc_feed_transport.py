"""The client side of a node's stream of feeds: a feed whose stream is full holds the
connection back until its consumer takes, so a catch-up scan goes at the consumer's
pace; one that takes nothing for ``consumer_wait_s`` is cut off, and the connection's
other feeds go on; the connection is dialed on its own thread, and a stopping node ends
each feed ``NODE_SHUTDOWN`` before the connection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest
from feed_helpers import DEADLINE_S, Collector, wait_until

import feedkv
from feedkv.kv.address import split_host_port
from feedkv.kv.framed_socket import frame, read_frame
from feedkv.kv.grpc_transport import GrpcTransport, dial_stream
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import MAX_MESSAGE_BYTES, SERVICE, span_to_proto, timestamp_to_proto
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
from feedkv.rangefeed.store_feeds import FeedConfig
from feedkv.rangefeed.wire import RANGEFEED, values_from_proto
from feedkv.server.node import Node
from feedkv.testing.node_process import free_port
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

USER = Span(b"a", b"z")
ZERO = Timestamp(0, 0)
KEYS = [b"k%02d" % i for i in range(40)]


@pytest.fixture
def node(tmp_path: Path, store_config: StoreConfig) -> Iterator[Node]:
    """A node whose catch-up scans send pages of 4 values, with ``KEYS`` written."""
    config = FeedConfig(catchup_page_values=4)
    with Node(tmp_path / "s", listen="127.0.0.1:0", config=store_config, feed_config=config) as n:
        with feedkv.connect(n.url) as db:
            for key in KEYS:
                db.put(key, b"v")
        yield n


@pytest.fixture
def client(node: Node) -> Iterator[Callable[[float], GrpcFeedTransport]]:
    """Clients of ``node`` whose streams hold 8 values, as patient as asked."""
    address = split_host_port(node.url.removeprefix("feedkv://"))
    assert address is not None
    kv = GrpcTransport(*address)
    made: list[GrpcFeedTransport] = []

    def make(consumer_wait_s: float) -> GrpcFeedTransport:
        made.append(
            GrpcFeedTransport(
                kv.channel,
                kv.address,
                tls=None,
                per_registration=8,
                consumer_wait_s=consumer_wait_s,
            )
        )
        return made[-1]

    yield make
    for transport in made:
        transport.close()
    kv.close()


def caught_up_or_ended(events: list[Event]) -> bool:
    return any(isinstance(e, Checkpoint | Error) for e in events)


def test_a_catch_up_bigger_than_the_stream_waits_for_its_consumer(
    client: Callable[[float], GrpcFeedTransport],
) -> None:
    feeds = client(DEADLINE_S)  # a wait that runs out only if the test fails anyway
    stream = feeds.new_stream()
    handle = feeds.register("t", USER, ZERO, False, stream)
    # Two pages fill the stream; the scan's next pages wait for a take.
    wait_until(lambda: handle.queued >= 8)  # type: ignore[attr-defined]
    events = Collector(stream).until(caught_up_or_ended)
    assert [e for e in events if isinstance(e, Error)] == []
    assert [e.key for e in events if isinstance(e, Value)] == KEYS
    feeds.unregister(handle)


def test_a_consumer_that_takes_nothing_is_cut_off_and_the_others_go_on(
    client: Callable[[float], GrpcFeedTransport],
) -> None:
    feeds = client(0.2)
    stalled = feeds.new_stream()
    handle = feeds.register("stalled", USER, ZERO, False, stalled)
    wait_until(lambda: handle.queued >= 8)  # type: ignore[attr-defined]
    # Nothing is taken from ``stalled``: after consumer_wait_s it ends, and the
    # connection reads on.
    other = feeds.new_stream()
    feeds.register("other", USER, ZERO, False, other)
    events = Collector(other).until(caught_up_or_ended)
    assert [e.key for e in events if isinstance(e, Value)] == KEYS
    last = Collector(stalled).until(lambda es: any(isinstance(e, Error) for e in es))[-1]
    assert isinstance(last, Error)
    assert last.reason is ErrorReason.SLOW_CONSUMER
    assert "took nothing for 0.2 s" in last.message


def test_closing_the_client_ends_a_feed_it_waits_for_as_disconnected(
    client: Callable[[float], GrpcFeedTransport],
) -> None:
    feeds = client(DEADLINE_S)
    stalled = feeds.new_stream()
    handle = feeds.register("stalled", USER, ZERO, False, stalled)
    wait_until(lambda: handle.queued >= 8)  # type: ignore[attr-defined]
    feeds.close()  # the reader waits for ``stalled``'s consumer: closing ends the wait
    last = Collector(stalled).until(lambda es: any(isinstance(e, Error) for e in es))[-1]
    assert isinstance(last, Error)
    assert last.reason is ErrorReason.DISCONNECTED


def value_runs(url: str, *, timestamp_runs: bool) -> list[pb.RangeFeedValues]:
    """The value runs a stream opened by hand gets for one registration of ``USER`` from
    zero, until 60 values came."""
    register = pb.RangeFeedRequest()
    register.register.tag = 1
    span_to_proto(USER, register.register.span)
    timestamp_to_proto(ZERO, register.register.start_ts)
    register.register.timestamp_runs = timestamp_runs
    runs: list[pb.RangeFeedValues] = []
    with grpc.insecure_channel(url.removeprefix("feedkv://")) as channel:
        sock, reader = dial_stream(channel, "127.0.0.1", None, DEADLINE_S, RANGEFEED)
        try:
            sock.sendall(frame(register.SerializeToString()))
            while sum(len(run.keys) for run in runs) < 60:
                data = read_frame(reader, MAX_MESSAGE_BYTES)
                assert data, "the node ended the stream"
                message = pb.RangeFeedEvents.FromString(data)
                runs += [e.values for e in message.events if e.WhichOneof("kind") == "values"]
        finally:
            reader.close()
            sock.close()
    return runs


def test_a_client_that_reads_no_timestamp_runs_gets_a_timestamp_a_value(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    """Clients from before ``ts_runs`` read a timestamp a value; ours send
    ``timestamp_runs`` and get one for each of a page's transactions."""
    with Node(tmp_path / "s", listen="127.0.0.1:0", config=store_config) as node:
        with feedkv.connect(node.url) as db:
            with db.transaction() as txn:
                for i in range(50):
                    txn.put(b"t%02d" % i, b"v")
            for key in KEYS[:10]:
                db.put(key, b"v")
        old, new = (value_runs(node.url, timestamp_runs=runs) for runs in (False, True))
    assert all(not run.ts_runs and len(run.walls) == len(run.keys) for run in old)
    assert [list(run.ts_runs) for run in new] == [[50] + [1] * 10]
    assert [values_from_proto(run).values for run in new] == [
        values_from_proto(run).values for run in old
    ]


def test_a_transport_moved_to_another_node_ends_its_feeds_and_registers_there(
    node: Node, tmp_path: Path, store_config: StoreConfig
) -> None:
    """The client's gateway moved: the feeds on the old node's stream end DISCONNECTED
    (the client registers them again), and a feed's stream, made before, goes on with
    registrations on the new node."""
    with Node(tmp_path / "other", listen="127.0.0.1:0", config=store_config) as other:
        with feedkv.connect(other.url) as db:
            db.put(b"on-other", b"v")
        first, second = (
            GrpcTransport(*address)
            for address in (split_host_port(n.url.removeprefix("feedkv://")) for n in (node, other))
            if address is not None
        )
        feeds = GrpcFeedTransport(first.channel, first.address, tls=None)
        try:
            stream = feeds.new_stream()
            seen = Collector(stream)

            def keys(tag: str) -> list[bytes]:
                return [e.key for e in seen.of(tag) if isinstance(e, Value)]

            def ends(tag: str) -> list[ErrorReason]:
                return [e.reason for e in seen.of(tag) if isinstance(e, Error)]

            def caught_up(tag: str) -> bool:
                return any(isinstance(e, Checkpoint) for e in seen.of(tag))

            feeds.register("before", USER, ZERO, False, stream)
            seen.until(lambda _: caught_up("before"))
            assert keys("before") == KEYS
            feeds.reconnect(second.channel, second.address)
            seen.until(lambda _: bool(ends("before")))
            assert ends("before") == [ErrorReason.DISCONNECTED]
            assert feeds.address == second.address
            feeds.register("after", USER, ZERO, False, stream)
            seen.until(lambda _: caught_up("after"))
            assert keys("after") == [b"on-other"]
        finally:
            feeds.close()
            first.close()
            second.close()


def test_a_stopping_node_ends_each_feed_node_shutdown_before_its_stream(
    node: Node, client: Callable[[float], GrpcFeedTransport]
) -> None:
    feeds = client(DEADLINE_S)
    stream = feeds.new_stream()
    feeds.register("t", USER, ZERO, False, stream)
    seen = Collector(stream)
    seen.until(lambda es: any(isinstance(e, Checkpoint) for e in es))
    node.stop()
    last = seen.until(lambda es: any(isinstance(e, Error) for e in es))[-1]
    assert isinstance(last, Error)
    assert last.reason is ErrorReason.NODE_SHUTDOWN, last


class _HeldBatchPort:
    """A gRPC server whose ``BatchPort`` answers, with a port nothing listens on, only
    once :attr:`answer` is set: a node slow to take a dial."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.answer = threading.Event()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handler = grpc.unary_unary_rpc_method_handler(self._batch_port)
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"BatchPort": handler}),)
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _batch_port(self, request: bytes, context: Any) -> bytes:
        self.asked.set()
        self.answer.wait(DEADLINE_S)
        return bytes(msgpack.packb({"port": free_port()}))


def test_registering_waits_for_no_dial_and_a_failed_dial_breaks_the_transport() -> None:
    """The connection is dialed on its reader thread: a registration returns at once
    (the consumer goes on taking its other feeds' events), and a dial that fails ends
    it DISCONNECTED and leaves the transport broken (a cluster client then looks the
    node's address up again)."""
    held = _HeldBatchPort()
    channel = grpc.insecure_channel(f"127.0.0.1:{held.port}")
    feeds = GrpcFeedTransport(channel, f"127.0.0.1:{held.port}", tls=None)
    try:
        stream = feeds.new_stream()
        feeds.register("t", USER, ZERO, False, stream)
        assert held.asked.wait(DEADLINE_S)  # the dial is under way, the registration made
        assert not feeds.broken
        held.answer.set()
        last = Collector(stream).until(lambda es: any(isinstance(e, Error) for e in es))[-1]
        assert isinstance(last, Error)
        assert last.reason is ErrorReason.DISCONNECTED
        assert "cannot connect to the batch port" in last.message
        assert feeds.broken
    finally:
        held.answer.set()
        feeds.close()
        channel.close()
        held.server.stop(None)
