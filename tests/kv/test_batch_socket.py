"""The batch stream on the node's batch port: what its end tells the client (a break: a
write is ambiguous; the node's announced end or a refusal: nothing applied), a torn frame
from a client, and TLS with the credentials a gRPC call carries (a denied user hears
what ``Batch`` would tell her)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest

from feedkv.errors import AmbiguousResultError, PermissionDeniedError
from feedkv.kv import grpc_transport
from feedkv.kv.api import BatchRequest, Get, Header, Put
from feedkv.kv.batch_socket import CallStream, StreamEnded, StreamRetired, hello, open_stream
from feedkv.kv.framed_socket import connect, frame, read_frame
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.server import NodeServer
from feedkv.kv.store import Store
from feedkv.kv.wire import (
    MAX_MESSAGE_BYTES,
    SERVICE,
    batch_request_to_proto,
    batch_response_from_proto,
)
from feedkv.security.tls import ClientTLS, ServerTLS, call_metadata, open_channel
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.waiting import wait_until

WELCOME = frame(msgpack.packb({"welcome": True}))

PUT = BatchRequest(Header(range_id=1), (Put(b"k", b"v"),))


def one_call(batch: BatchRequest) -> pb.BatchCalls:
    calls = pb.BatchCalls()
    batch_request_to_proto(batch, calls.calls.add().request)
    return calls


class FakeBatchPort:
    """A batch port that reads a connection's hello and first message of calls, then
    does ``then`` to it: ``"cut"`` closes it unanswered; else sends ``then`` as is."""

    def __init__(self, then: str | bytes) -> None:
        self.then = then
        self.calls: list[pb.BatchCalls] = []
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._socket.accept()
        with conn, conn.makefile("rb") as reader:
            read_frame(reader, MAX_MESSAGE_BYTES)  # the hello
            conn.sendall(WELCOME)
            data = read_frame(reader, MAX_MESSAGE_BYTES)
            assert data is not None
            self.calls.append(pb.BatchCalls.FromString(data))
            if isinstance(self.then, bytes):
                conn.sendall(self.then)

    def connect(self) -> CallStream:
        sock = socket.create_connection(("127.0.0.1", self.port))
        return open_stream(sock, None)

    def close(self) -> None:
        self._socket.close()
        self._thread.join()


def test_a_connection_that_breaks_fails_the_waiting_call_as_maybe_applied() -> None:
    port = FakeBatchPort("cut")
    try:
        with pytest.raises(StreamEnded) as ended:
            port.connect().call(one_call(PUT))
        assert ended.value.maybe_applied and not ended.value.denied
        assert port.calls[0].calls[0].id == 1  # it reached the node
    finally:
        port.close()


def test_a_torn_answer_fails_the_waiting_call_as_maybe_applied() -> None:
    port = FakeBatchPort(frame(b"a reply cut short")[:-4])
    try:
        with pytest.raises(StreamEnded, match="broke") as ended:
            port.connect().call(one_call(PUT))
        assert ended.value.maybe_applied
    finally:
        port.close()


@pytest.mark.parametrize(
    ("end", "maybe_applied", "denied"),
    [("done", False, False), ("denied", False, True), ("malformed", True, False)],
)
def test_the_end_a_node_announces_says_whether_the_calls_it_left_were_applied(
    end: str, maybe_applied: bool, denied: bool
) -> None:
    said = msgpack.packb({"end": end, "message": f"ended: {end}"})
    port = FakeBatchPort(frame(b"") + frame(said))
    try:
        with pytest.raises(StreamEnded, match=f"ended: {end}") as ended:
            port.connect().call(one_call(PUT))
        assert (ended.value.maybe_applied, ended.value.denied) == (maybe_applied, denied)
    finally:
        port.close()


def test_a_write_on_a_stream_that_breaks_is_ambiguous_to_the_transports_caller() -> None:
    port = FakeBatchPort("cut")
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    named = bytes(msgpack.packb({"port": port.port}))
    handlers = {"BatchPort": grpc.unary_unary_rpc_method_handler(lambda request, _: named)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    transport = GrpcTransport("127.0.0.1", grpc_port)
    try:
        with pytest.raises(AmbiguousResultError, match="may or may not have been applied"):
            transport.send(PUT)
        assert len(port.calls) == 1  # it was sent
    finally:
        transport.close()
        server.stop(0).wait()
        port.close()


@pytest.fixture
def plain(store: Store) -> Iterator[NodeServer]:
    server = NodeServer(store, "127.0.0.1", 0)
    server.start()
    yield server
    server.stop(grace_s=5)


def _batch_port(channel: grpc.Channel, metadata: Any = None) -> int:
    answer = channel.unary_unary(f"/{SERVICE}/BatchPort")(b"", metadata=metadata, timeout=10)
    return int(msgpack.unpackb(answer)["port"])


def test_a_torn_frame_from_a_client_ends_its_stream_and_the_node_serves_on(
    plain: NodeServer,
) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{plain.port}") as channel:
        port = _batch_port(channel)
    with socket.create_connection(("127.0.0.1", port)) as torn:
        torn.sendall(hello(None) + frame(one_call(PUT).SerializeToString())[:-3])
        torn.shutdown(socket.SHUT_WR)
        with torn.makefile("rb") as reader:
            assert frame(read_frame(reader, MAX_MESSAGE_BYTES) or b"") == WELCOME
            assert read_frame(reader, MAX_MESSAGE_BYTES) == b""  # the end, no answer
    stream = open_stream(connect("127.0.0.1", port, None, 10, "the batch port"), None)
    try:
        reply = stream.call(one_call(PUT))
        assert reply is not None and not reply.HasField("error")
    finally:
        stream.close()


def test_a_retired_stream_takes_no_new_call_and_closes_once_its_calls_are_answered(
    plain: NodeServer,
) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{plain.port}") as channel:
        port = _batch_port(channel)
    stream = open_stream(connect("127.0.0.1", port, None, 10, "the batch port"), None)
    reply = stream.call(one_call(PUT))
    assert reply is not None and not reply.HasField("error")
    stream.retire()
    with pytest.raises(StreamRetired):
        stream.call(one_call(PUT))
    wait_until(lambda: stream.ended, what="the retired stream to close")


def test_a_transport_moves_to_a_new_stream_once_its_stream_lived_its_lifetime(
    plain: NodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = GrpcTransport("127.0.0.1", plain.port)
    try:
        transport.send(PUT)
        first = transport._stream
        monkeypatch.setattr(grpc_transport, "STREAM_LIFETIME_S", 0.0)
        transport.send(PUT)
        assert transport._stream is not first
        assert first is not None
        wait_until(lambda: first.ended, what="the old stream to close")
    finally:
        transport.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


@pytest.fixture
def secure(store: Store, certs: Path) -> Iterator[NodeServer]:
    """A secure node whose raw KV API is for nodes and root alone (no read access)."""
    server = NodeServer(store, "127.0.0.1", 0, tls=ServerTLS.load(certs))
    server.start()
    yield server
    server.stop(grace_s=5)


def _secure_stream(
    server: NodeServer,
    certs: Path,
    tls: ClientTLS,
    channel: grpc.Channel,
    *,
    credentials: bool = True,
) -> CallStream:
    """A stream opened as ``tls`` (with ``channel``'s credentials) on a port that root
    asked for."""
    root = ClientTLS.load(certs, "root")
    with open_channel(f"127.0.0.1:{server.port}", [], root) as asker:
        port = _batch_port(asker, call_metadata(asker))
    sock = connect("127.0.0.1", port, tls, 10, "the batch port")
    return open_stream(sock, call_metadata(channel) if credentials else None)


def test_root_sends_batches_on_a_tls_stream(secure: NodeServer, certs: Path) -> None:
    root = ClientTLS.load(certs, "root")
    with open_channel(f"127.0.0.1:{secure.port}", [], root) as channel:
        stream = _secure_stream(secure, certs, root, channel)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            puts = [
                BatchRequest(Header(range_id=1), (Put(b"k%d" % i, b"v%d" % i),)) for i in range(40)
            ]
            replies = list(pool.map(lambda batch: stream.call(one_call(batch)), puts))
        assert all(reply is not None and not reply.HasField("error") for reply in replies)
        got = stream.call(one_call(BatchRequest(Header(range_id=1), (Get(b"k7"),))))
        assert got is not None
        assert batch_response_from_proto(got).responses[0].value == b"v7"
    finally:
        stream.close()


def test_a_user_the_raw_kv_api_is_not_for_is_refused_in_the_words_of_a_batch(
    secure: NodeServer, certs: Path
) -> None:
    alice = ClientTLS.load(certs, "alice")
    with (
        open_channel(f"127.0.0.1:{secure.port}", [], alice) as channel,
        pytest.raises(StreamEnded) as ended,
    ):
        _secure_stream(secure, certs, alice, channel)
    assert ended.value.denied and not ended.value.maybe_applied
    # NB: her transport is refused the batch port itself, in the same words
    transport = GrpcTransport("127.0.0.1", secure.port, tls=alice)
    try:
        with pytest.raises(PermissionDeniedError) as asked:
            transport.send(PUT)
    finally:
        transport.close()
    said = str(ended.value).removeprefix("BatchStream")
    assert said == str(asked.value).removeprefix("BatchPort")
    assert "the raw KV API is only for nodes and root; user 'alice'" in said


def test_a_stream_without_credentials_is_refused(secure: NodeServer, certs: Path) -> None:
    root = ClientTLS.load(certs, "root")
    with (
        open_channel(f"127.0.0.1:{secure.port}", [], root) as channel,
        pytest.raises(StreamEnded, match="needs credentials") as ended,
    ):
        _secure_stream(secure, certs, root, channel, credentials=False)
    assert ended.value.denied and not ended.value.maybe_applied
