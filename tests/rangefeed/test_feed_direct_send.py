"""A node sends a light remote feed's news on the commit thread, as the commit group is
flushed, sparing the stream's writer thread a wake; what the connection does not take at
once is sent by the writer, before anything taken after it."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from feed_helpers import Collector

import feedkv
from feedkv.kv.address import split_host_port
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.rangefeed.event import Checkpoint, Event, Value
from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
from feedkv.rangefeed.service import _ServedFeeds
from feedkv.server.node import Node
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

WATCHED = Span(b"w", b"w\x00")
PREFIX = Span(b"p", b"q")


class DirectSends:
    """Each message a node tried to send at once: its thread and whether it went (a
    seeded share of them is declined, as by a connection without room)."""

    def __init__(self, decline: float = 0.0) -> None:
        self.tried: list[tuple[str, bool]] = []
        self._decline = decline
        self._random = random.Random(7)

    def wrap(self, send_now: Callable[[bytes], bool]) -> Callable[[bytes], bool]:
        def send(message: bytes) -> bool:
            went = self._random.random() >= self._decline and send_now(message)
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


def values(events: list[Event]) -> list[Value]:
    return [e for e in events if isinstance(e, Value)]


def test_a_watched_keys_values_leave_on_the_commit_thread(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    store_config: StoreConfig,
    feeds: Callable[[Node], GrpcFeedTransport],
) -> None:
    sends = DirectSends()
    with node_sending(monkeypatch, tmp_path, store_config, sends) as node:
        transport = feeds(node)
        stream = transport.new_stream()
        seen = Collector(stream)
        with feedkv.connect(node.url) as db:
            transport.register("w", WATCHED, db.now(), False, stream)
            seen.until(lambda events: any(isinstance(e, Checkpoint) for e in events))
            for i in range(20):
                db.put(b"w", b"%d" % i)
                seen.until(lambda events, n=i + 1: len(values(events)) == n)
    assert [v.value for v in values(seen.of_all())] == [b"%d" % i for i in range(20)]
    assert ("feedkv-commit", True) in sends.tried


def test_what_the_connection_does_not_take_at_once_goes_in_order(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    store_config: StoreConfig,
    feeds: Callable[[Node], GrpcFeedTransport],
) -> None:
    """Half the direct sends are declined while 4 writers put 400 keys: the feed gets
    every value once, in timestamp order per key, none at or below a checkpoint before."""
    sends = DirectSends(decline=0.5)
    with node_sending(monkeypatch, tmp_path, store_config, sends) as node:
        transport = feeds(node)
        stream = transport.new_stream()
        seen = Collector(stream)
        with feedkv.connect(node.url) as db:
            transport.register("p", PREFIX, db.now(), False, stream)

            def write(writer: int) -> None:
                for i in range(100):
                    db.put(b"p%d-%03d" % (writer, i % 10), b"%d" % i)

            threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            seen.until(lambda events: len(values(events)) == 400)
    assert any(not went for _thread, went in sends.tried)
    assert any(went for _thread, went in sends.tried)
    events = seen.of_all()
    per_key: dict[bytes, list[Timestamp]] = {}
    checkpoint = Timestamp(0, 0)
    for event in events:
        if isinstance(event, Checkpoint):
            checkpoint = max(checkpoint, event.ts)
        elif isinstance(event, Value):
            assert event.ts > checkpoint
            per_key.setdefault(event.key, []).append(event.ts)
    assert len(per_key) == 40
    assert all(stamps == sorted(set(stamps)) and len(stamps) == 10 for stamps in per_key.values())
