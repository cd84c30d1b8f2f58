"""The node's gRPC service and batch port: batches on the shared stream, malformed
requests sent straight to the ports, and draining."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest

import feedkv
from feedkv import DB
from feedkv.errors import (
    AmbiguousResultError,
    ClockOffsetError,
    InvalidArgumentError,
    NodeUnavailableError,
    RangeRoutingError,
    TransactionRetryError,
)
from feedkv.kv import server
from feedkv.kv.api import BatchRequest, Get, Header, Put
from feedkv.kv.batch_socket import BATCHES, hello
from feedkv.kv.cancellation import CallCancels
from feedkv.kv.framed_socket import frame, read_frame
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import MAX_MESSAGE_BYTES, SERVICE, batch_request_to_proto, error_from_proto
from feedkv.rangefeed.wire import RANGEFEED
from feedkv.server.node import Node
from feedkv.testing.node_process import free_port
from feedkv.testing.waiting import run_threads, wait_until
from feedkv.util.hlc import Timestamp

THREADS = 16
PUTS_EACH = 40


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    config = StoreConfig(closed_ts_interval_s=0.05, sync=False)
    with Node(tmp_path / "store", listen="127.0.0.1:0", config=config) as running:
        yield running


@pytest.fixture
def remote(node: Node) -> Iterator[DB]:
    db = feedkv.connect(node.url)
    yield db
    db.close()


@pytest.fixture
def channel(node: Node) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(node.url.removeprefix("feedkv://")) as chan:
        yield chan


class RawStream:
    """A stream opened by hand on the node's batch port (plaintext), a ``stream`` of
    batches unless it names another; ``welcome``: assert the node welcomed it."""

    def __init__(self, channel: grpc.Channel, stream: str = BATCHES, welcome: bool = True) -> None:
        port = msgpack.unpackb(channel.unary_unary(f"/{SERVICE}/BatchPort")(b""))["port"]
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(hello(None, stream))
        self.reader = self.sock.makefile("rb")
        if welcome:
            assert msgpack.unpackb(self._frame()) == {"welcome": True}
        self.end: dict[str, Any] | None = None

    def _frame(self) -> bytes:
        data = read_frame(self.reader, MAX_MESSAGE_BYTES)
        assert data is not None, "the connection ended with no end announced"
        return data

    def messages(self) -> list[bytes]:
        """The node's messages until it ends the stream, whose end is then :attr:`end`."""
        messages = []
        while data := self._frame():
            messages.append(data)
        self.end = msgpack.unpackb(self._frame())
        return messages

    def send(self, data: bytes) -> None:
        self.sock.sendall(frame(data))

    def replies(self, count: int | None = None) -> list[pb.BatchReply]:
        """The next ``count`` replies, or (``None``) those until the node ends the
        stream, whose end is then :attr:`end`."""
        replies: list[pb.BatchReply] = []
        while count is None or len(replies) < count:
            data = self._frame()
            if not data:
                self.end = msgpack.unpackb(self._frame())
                break
            replies.extend(pb.BatchReplies.FromString(data).replies)
        return replies

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


@pytest.fixture
def raw(channel: grpc.Channel) -> Iterator[RawStream]:
    stream = RawStream(channel)
    yield stream
    stream.close()


def call(call_id: int, batch: BatchRequest) -> pb.BatchCall:
    msg = pb.BatchCall(id=call_id)
    batch_request_to_proto(batch, msg.request)
    return msg


def test_many_threads_share_one_stream_and_each_gets_its_own_answer(remote: DB) -> None:
    def writer(n: int) -> None:
        for i in range(PUTS_EACH):
            remote.put(b"t%02d/%03d" % (n, i), b"v%d.%d" % (n, i))
            assert remote.get(b"t%02d/%03d" % (n, i)) == b"v%d.%d" % (n, i)

    run_threads([partial(writer, n) for n in range(THREADS)])
    rows = remote.scan(b"t", b"u")
    assert len(rows) == THREADS * PUTS_EACH
    assert all(kv.value == b"v%d.%d" % (int(kv.key[1:3]), int(kv.key[4:])) for kv in rows)


def test_a_malformed_call_is_answered_with_an_error_and_its_neighbours_still_apply(
    raw: RawStream, remote: DB
) -> None:
    good = call(1, BatchRequest(Header(range_id=1), (Put(b"good", b"v"),)))
    bad = pb.BatchCall(id=2)
    bad.request.requests.add()  # a request union with no request in it
    wrong_range = call(3, BatchRequest(Header(range_id=999), (Get(b"good"),)))
    raw.send(pb.BatchCalls(calls=[good, bad, wrong_range]).SerializeToString())
    answers = {r.id: r.response for r in raw.replies(3)}
    assert sorted(answers) == [1, 2, 3]
    assert not answers[1].HasField("error")
    assert isinstance(error_from_proto(answers[2].error), InvalidArgumentError)
    assert "malformed request" in answers[2].error.message
    assert isinstance(error_from_proto(answers[3].error), RangeRoutingError)
    assert remote.get(b"good") == b"v"


def test_a_stream_reads_no_more_calls_while_too_many_wait_for_their_answers(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends calls and reads no answers is held back (by TCP, as its
    stream's reader stops reading) rather than buffered in the node's memory."""
    monkeypatch.setattr(server, "MAX_CALLS_IN_FLIGHT", 8)
    calls = 50
    read_after_an_answer_left: list[bool] = []  # for each call read
    answer_left = threading.Event()

    def frames() -> Iterator[bytes]:
        for i in range(1, calls + 1):
            read_after_an_answer_left.append(answer_left.is_set())
            put = BatchRequest(Header(range_id=1), (Put(b"f%02d" % i, b"v"),))
            yield pb.BatchCalls(calls=[call(i, put)]).SerializeToString()

    with ThreadPoolExecutor(max_workers=2) as pool:
        stream = server._ServedStream(node.store, pool, CallCancels(), threading.Event())
        reader = threading.Thread(target=stream.read, args=(frames(),))
        reader.start()
        wait_until(lambda: len(read_after_an_answer_left) > 8)  # the 9th waits for room
        answer_left.set()
        answered = [
            reply.id
            for message in stream.replies()
            for reply in pb.BatchReplies.FromString(message).replies
        ]
        reader.join()
    assert read_after_an_answer_left == [False] * 9 + [True] * (calls - 9)
    assert sorted(answered) == list(range(1, calls + 1))


def test_a_node_takes_batch_streams_on_the_batch_port_it_is_given(tmp_path: Path) -> None:
    port = free_port()
    config = StoreConfig(sync=False)
    with Node(
        tmp_path / "fixed", listen="127.0.0.1:0", config=config, batch_addr=f"127.0.0.1:{port}"
    ) as fixed:
        with grpc.insecure_channel(fixed.url.removeprefix("feedkv://")) as channel:
            asked = channel.unary_unary(f"/{SERVICE}/BatchPort")(b"")
        assert msgpack.unpackb(asked)["port"] == port
        db = feedkv.connect(fixed.url)
        try:
            run_threads([partial(db.put, b"k%d" % i, b"v") for i in range(8)])  # streamed
            assert len(db.scan(b"k", b"l")) == 8
        finally:
            db.close()


def test_a_batch_from_a_clock_far_ahead_is_refused_and_the_stream_goes_on(remote: DB) -> None:
    ahead = Timestamp(remote.now().wall + 3_600 * 10**9, 0)
    with pytest.raises(ClockOffsetError, match="max offset"):
        remote.transport.send(BatchRequest(Header(range_id=1, timestamp=ahead), (Get(b"k"),)))
    remote.put(b"k", b"v")
    assert remote.get(b"k") == b"v"


def test_bytes_that_are_not_a_message_end_the_batch_stream_and_the_node_keeps_serving(
    node: Node, raw: RawStream, remote: DB
) -> None:
    put = call(1, BatchRequest(Header(range_id=1), (Put(b"before", b"v"),)))
    raw.send(pb.BatchCalls(calls=[put]).SerializeToString())
    raw.send(b"\xff\xff\xff not protobuf")
    assert [r.id for r in raw.replies()] == [1]  # the call read before it is answered
    assert raw.end is not None and raw.end["end"] == "malformed"
    assert "malformed message: 16 bytes that are not a BatchCalls" in raw.end["message"]
    remote.put(b"after", b"still serving")
    assert remote.get(b"after") == b"still serving"
    node.stop()


def test_bytes_that_are_not_a_message_end_the_rangefeed_and_the_node_keeps_serving(
    node: Node, channel: grpc.Channel, remote: DB
) -> None:
    feeds = RawStream(channel, RANGEFEED)
    try:
        feeds.send(b"\xff\xff\xff not protobuf")
        assert feeds.messages() == []
    finally:
        feeds.close()
    assert feeds.end is not None and feeds.end["end"] == "malformed"
    assert "16 bytes that are not a RangeFeedRequest" in feeds.end["message"]
    remote.put(b"after", b"still serving")
    assert remote.get(b"after") == b"still serving"
    node.stop()


def test_a_hello_for_a_stream_the_node_does_not_serve_ends_it_as_malformed(
    channel: grpc.Channel, remote: DB
) -> None:
    unknown = RawStream(channel, "gossip", welcome=False)
    try:
        assert unknown.messages() == []
    finally:
        unknown.close()
    assert unknown.end == {"end": "malformed", "message": "this node serves no stream 'gossip'"}
    remote.put(b"after", b"still serving")
    assert remote.get(b"after") == b"still serving"


def test_bytes_that_are_not_a_batch_get_a_clear_error(channel: grpc.Channel) -> None:
    unary = channel.unary_unary(
        f"/{SERVICE}/Batch", response_deserializer=pb.BatchResponse.FromString
    )
    response = unary(b"\xff\xff\xff not protobuf")
    error = error_from_proto(response.error)
    assert isinstance(error, InvalidArgumentError)
    assert "not a BatchRequest" in str(error)


def test_a_malformed_unary_batch_gets_a_clear_error(channel: grpc.Channel) -> None:
    batch = channel.unary_unary(
        f"/{SERVICE}/Batch",
        request_serializer=pb.BatchRequest.SerializeToString,
        response_deserializer=pb.BatchResponse.FromString,
    )
    msg = pb.BatchRequest()
    msg.requests.add()
    response = batch(msg)
    assert isinstance(error_from_proto(response.error), InvalidArgumentError)


def test_a_draining_node_answers_what_it_read_and_ends_the_stream_cleanly(
    tmp_path: Path,
) -> None:
    config = StoreConfig(closed_ts_interval_s=0.05, sync=False)
    node = Node(tmp_path / "store", listen="127.0.0.1:0", config=config)
    try:
        with grpc.insecure_channel(node.url.removeprefix("feedkv://")) as chan:
            raw = RawStream(chan)
            put = call(1, BatchRequest(Header(range_id=1), (Put(b"k", b"v"),)))
            raw.send(pb.BatchCalls(calls=[put]).SerializeToString())
            assert [r.id for r in raw.replies(1)] == [1]
            node.stop()
            assert raw.replies() == []
            assert raw.end is not None and raw.end["end"] == "done"  # ended, not broken
            raw.close()
    finally:
        node.stop()


def test_a_batch_to_a_stopped_node_fails_with_an_error_naming_it(tmp_path: Path) -> None:
    config = StoreConfig(closed_ts_interval_s=0.05, sync=False)
    node = Node(tmp_path / "store", listen="127.0.0.1:0", config=config)
    host, port = node.url.removeprefix("feedkv://").rsplit(":", 1)
    transport = GrpcTransport(host, int(port))
    try:
        put = BatchRequest(Header(range_id=1), (Put(b"k", b"v"),))
        transport.send(put)  # opens the stream
        node.stop()
        with pytest.raises((NodeUnavailableError, AmbiguousResultError), match=port):
            transport.send(put)
    finally:
        transport.close()
        node.stop()


def test_a_commit_deadline_crosses_the_wire(remote: DB) -> None:
    txn = remote.transaction()
    txn.put(b"k", b"v")
    txn.limit_commit(remote.now())
    with pytest.raises(TransactionRetryError, match="deadline"):
        txn.commit()
    assert remote.get(b"k") is None


def test_a_call_id_used_twice_while_in_flight_ends_the_stream_as_malformed(
    raw: RawStream, remote: DB
) -> None:
    """Two answers with one id could not be told apart: the second call is refused with
    the stream (its end says malformed), the first is answered, and the node goes on."""
    first = call(7, BatchRequest(Header(range_id=1), (Put(b"dup", b"first"),)))
    second = call(7, BatchRequest(Header(range_id=1), (Put(b"dup", b"second"),)))
    raw.send(pb.BatchCalls(calls=[first, second]).SerializeToString())
    answers = raw.replies()
    assert raw.end is not None and raw.end["end"] == "malformed"
    assert "call id 7 is already in flight" in raw.end["message"]
    assert [a.id for a in answers] == [7]
    assert remote.get(b"dup") == b"first"


def test_a_rangefeed_tag_registered_twice_ends_the_stream_as_malformed(
    channel: grpc.Channel, remote: DB
) -> None:
    register = pb.RangeFeedRequest()
    register.register.tag = 3
    register.register.span.start = b"a"
    register.register.span.end = b"b"
    feeds = RawStream(channel, RANGEFEED)
    try:
        feeds.send(register.SerializeToString())
        feeds.send(register.SerializeToString())
        feeds.messages()
    finally:
        feeds.close()
    assert feeds.end is not None and feeds.end["end"] == "malformed"
    assert "tag 3 is already registered" in feeds.end["message"]
    remote.put(b"after", b"still serving")
    assert remote.get(b"after") == b"still serving"


def test_a_client_connects_through_the_first_node_of_its_url_that_answers(node: Node) -> None:
    """A URL may list several nodes (``feedkv://h1:p1,h2:p2``): the first one down, the
    client connects through the next; none up, the error names each."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    live = node.url.removeprefix("feedkv://")
    db = feedkv.connect(f"feedkv://{dead},{live}")
    try:
        db.put(b"k", b"v")
        assert db.get(b"k") == b"v"
    finally:
        db.close()
    with pytest.raises(NodeUnavailableError, match="none of the 2 nodes") as raised:
        feedkv.connect(f"feedkv://{dead},{dead}")
    assert str(raised.value).count(dead) >= 2
