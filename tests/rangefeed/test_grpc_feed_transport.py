"""The client side of the gRPC rangefeed stream: a feed whose stream is full holds the
connection back until its consumer takes, so a catch-up scan goes at the consumer's
pace; one that takes nothing for ``consumer_wait_s`` is cut off, and the connection's
other feeds go on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from feed_helpers import Collector, wait_until

import feedkv
from feedkv.kv.address import split_host_port
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.node import Node
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
from feedkv.rangefeed.store_feeds import FeedConfig
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
def feeds(node: Node) -> Iterator[GrpcFeedTransport]:
    """A client of ``node`` whose streams hold 8 values, patient for 2 s."""
    address = split_host_port(node.url.removeprefix("feedkv://"))
    assert address is not None
    kv = GrpcTransport(*address)
    transport = GrpcFeedTransport(kv.channel, kv.address, per_registration=8, consumer_wait_s=2.0)
    yield transport
    transport.close()
    kv.close()


def caught_up_or_ended(events: list[Event]) -> bool:
    return any(isinstance(e, Checkpoint | Error) for e in events)


def test_a_catch_up_bigger_than_the_stream_waits_for_its_consumer(
    feeds: GrpcFeedTransport,
) -> None:
    stream = feeds.new_stream()
    handle = feeds.register("t", USER, ZERO, False, stream)
    # Two pages fill the stream; the scan's next pages wait for a take.
    wait_until(lambda: handle.queued >= 8)  # type: ignore[attr-defined]
    events = Collector(stream).until(caught_up_or_ended)
    assert [e for e in events if isinstance(e, Error)] == []
    assert [e.key for e in events if isinstance(e, Value)] == KEYS
    feeds.unregister(handle)


def test_a_consumer_that_takes_nothing_is_cut_off_and_the_others_go_on(
    feeds: GrpcFeedTransport,
) -> None:
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
    assert "took nothing for 2 s" in last.message
