"""Raft messages on a connection per node (its port asked of the node's gRPC service),
in requests of bounded size: large ones in chunks, put together whole by the receiver,
and a message with a chunk lost is lost whole; batches arrive in order whether the
sender or the connection's thread wrote them; a connection that ends or fails is opened
again. Snapshots on a gRPC call of their own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.kv.replica_refusal import Refusal, SnapshotRefusedError
from feedkv.kv.snapshot_spool import SnapshotSpool
from feedkv.kv.wire import SERVICE
from feedkv.server import raft_transport
from feedkv.server.raft_socket import RaftListener
from feedkv.server.raft_transport import (
    ChunkAssembler,
    RaftTransport,
    abort_refused,
    snapshot_frames,
    take_request,
)
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Clock, Timestamp

CHUNK = 64


class _Receiver:
    """A node's Raft port and its gRPC methods on a real gRPC server: what arrives, in
    order."""

    connections = 0  # RaftPort calls taken: one per connection opened

    def __init__(self, spool: SnapshotSpool | None = None) -> None:
        self.spool = spool
        self.fail_after: int | None = None  # snapshot frames taken before a failure
        self.refuse: Refusal | None = None  # refuse every snapshot at its first frames
        self.stall = threading.Event()  # cleared: a snapshot call reads nothing until set
        self.stall.set()
        self.snapshots: list[tuple[int, int, bytes]] = []  # (sender, range, token)
        self.clocks: list[Timestamp] = []
        self.assembler = ChunkAssembler()
        self.received: list[tuple[int, bytes]] = []
        self.calls: list[int] = []  # the size of each call's payload
        self._lock = threading.Lock()
        self.listener = RaftListener("127.0.0.1", None, self._take)

    def _take(self, request: dict[str, Any]) -> None:
        messages = take_request(self.assembler, request)
        self._took(msgpack.packb(request), [(r, bytes(m)) for r, m in messages])

    def handlers(self) -> grpc.GenericRpcHandler:
        def raft_port(_request: bytes, _context: Any) -> bytes:
            with self._lock:
                self.connections += 1
            return msgpack.packb({"port": self.listener.port})  # type: ignore[no-any-return]

        def snapshot(requests: Iterator[bytes], context: Any) -> bytes:
            self.stall.wait(30)
            sender, range_id, frames = snapshot_frames(requests, self.clocks.append)
            if self.refuse is not None:
                next(frames)  # the header: what a store decides on
                abort_refused(context, SnapshotRefusedError(self.refuse, f"r{range_id} here"))
            if self.spool is None:
                raise AssertionError("this receiver takes no snapshots")
            token = self.spool.write(self._failing(frames))
            with self._lock:
                self.snapshots.append((sender, range_id, token))
            return msgpack.packb({})  # type: ignore[no-any-return]

        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "RaftPort": grpc.unary_unary_rpc_method_handler(raft_port),
                "RaftSnapshot": grpc.stream_unary_rpc_method_handler(snapshot),
            },
        )

    def _failing(self, frames: Iterator[bytes]) -> Iterator[bytes]:
        for taken, frame in enumerate(frames):
            if self.fail_after is not None and taken == self.fail_after:
                raise ConnectionResetError("the receiver failed mid-way")
            yield frame

    def _took(self, data: bytes, messages: list[tuple[int, bytes]]) -> None:
        with self._lock:
            self.calls.append(len(data))
            self.received.extend(messages)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[_Receiver, str]]:
    held = _Receiver(SnapshotSpool(tmp_path / "spool"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((held.handlers(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield held, f"127.0.0.1:{port}"
    finally:
        server.stop(None)
        held.listener.stop()


def test_large_messages_cross_in_chunks_and_arrive_whole_in_order(
    receiver: tuple[_Receiver, str],
) -> None:
    held, address = receiver
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(
        1, lambda _node: address, lambda _a: channel, Clock().now, chunk_bytes=CHUNK
    )
    sent = [
        (1, b"small"),
        (2, bytes(range(256)) * 3),  # 768 bytes: 12 chunks
        (1, b"x" * 40),
        (1, b"y" * 40),  # with the one before, more than a call carries
        (3, b"z" * (CHUNK + 1)),  # just past a call: two chunks
    ]
    try:
        transport.send(2, sent)
        wait_until(lambda: len(held.received) == len(sent), timeout_s=30, what="every message")
    finally:
        transport.stop()
        channel.close()
    assert held.received == sent
    payload_overhead = 128  # msgpack framing and the chunk's fields
    assert max(held.calls) <= CHUNK + payload_overhead


def _frames(count: int, size: int, taken: list[int]) -> Iterator[bytes]:
    for i in range(count):
        taken.append(i)
        yield bytes([i % 256]) * size


def test_a_snapshot_streams_its_frames_into_the_receivers_spool(
    receiver: tuple[_Receiver, str],
) -> None:
    held, address = receiver
    channel = grpc.insecure_channel(address)
    clock = Clock()
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, clock.now)
    taken: list[int] = []
    try:
        transport.send_snapshot(2, 7, _frames(40, 64 << 10, taken))
    finally:
        transport.stop()
        channel.close()
    assert held.spool is not None
    [(sender, range_id, token)] = held.snapshots
    assert (sender, range_id) == (1, 7)
    assert list(held.spool.read(token)) == [bytes([i]) * (64 << 10) for i in range(40)]
    assert len(held.clocks) == 40 and held.clocks[-1] <= clock.now()


def test_a_snapshot_cut_off_mid_way_fails_its_sender_and_leaves_no_file(
    receiver: tuple[_Receiver, str],
) -> None:
    """The sender learns of it (Raft sends the snapshot again) and read only a bounded
    window past the cut (the transport's frames and gRPC's flow control), never the
    rest of the snapshot."""
    held, address = receiver
    held.fail_after = 3
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, Clock().now)
    taken: list[int] = []
    try:
        with pytest.raises(NodeUnavailableError, match="snapshot"):
            transport.send_snapshot(2, 7, _frames(1000, 4096, taken))
    finally:
        transport.stop()
        channel.close()
    assert held.snapshots == []
    assert held.spool is not None and held.spool.held() == []
    assert len(taken) < 200, len(taken)  # of 1000 frames: seen 10 to 25 here


@pytest.mark.parametrize("reason", [Refusal.COLLECTING, Refusal.REPLICA_REMOVED])
def test_a_snapshot_refused_at_its_header_fails_its_sender_with_the_reason_at_once(
    receiver: tuple[_Receiver, str], reason: Refusal
) -> None:
    """The receiver refuses after the first frame: the sender raises the receiver's
    reason, typed, having read a bounded window of the snapshot, not all of it."""
    held, address = receiver
    held.refuse = reason
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, Clock().now)
    taken: list[int] = []
    try:
        with pytest.raises(SnapshotRefusedError) as refused:
            transport.send_snapshot(2, 7, _frames(1000, 4096, taken))
    finally:
        transport.stop()
        channel.close()
    assert refused.value.reason is reason
    assert "r7 here" in str(refused.value)
    assert held.spool is not None and held.spool.held() == []
    assert len(taken) < 200, len(taken)


def test_a_snapshot_the_receiver_stops_taking_fails_its_sender_and_frees_its_threads(
    receiver: tuple[_Receiver, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver that is up but takes nothing does not hold the sender (and its engine
    snapshot) for ever, and the thread gRPC gave the call's requests ends with it."""
    monkeypatch.setattr(raft_transport, "CALL_TIMEOUT_S", 0.5)
    monkeypatch.setattr(raft_transport, "_POLL_S", 0.05)
    held, address = receiver
    held.stall.clear()
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, Clock().now)

    def feeding() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if "consume_request_iterator" in t.name]

    try:
        with pytest.raises(NodeUnavailableError, match="stalled"):
            transport.send_snapshot(2, 7, _frames(1000, 64 << 10, []))
        wait_until(lambda: not feeding(), timeout_s=30, what="gRPC's request thread to end")
    finally:
        held.stall.set()
        transport.stop()
        channel.close()
    assert held.snapshots == []


def _chunk(sender: int, transfer: int, seq: int, total: int, data: bytes) -> dict[str, Any]:
    return {
        "from": sender,
        "transfer": transfer,
        "seq": seq,
        "total": total,
        "range": 7,
        "data": data,
    }


def test_a_message_missing_a_chunk_is_dropped_and_the_next_one_arrives() -> None:
    assembler = ChunkAssembler()
    assert assembler.take(_chunk(1, 1, 0, 3, b"a")) is None
    assert assembler.take(_chunk(1, 1, 2, 3, b"c")) is None  # chunk 1 lost
    assert assembler.take(_chunk(1, 1, 1, 3, b"b")) is None  # too late: dropped already
    assert assembler.take(_chunk(1, 2, 0, 2, b"n")) is None
    assert assembler.take(_chunk(2, 9, 0, 1, b"other sender")) == (7, b"other sender")
    assert assembler.take(_chunk(1, 2, 1, 2, b"ew")) == (7, b"new")


def test_a_new_message_replaces_one_left_half_assembled() -> None:
    assembler = ChunkAssembler()
    assert assembler.take(_chunk(1, 1, 0, 2, b"half")) is None
    assert assembler.take(_chunk(1, 2, 0, 1, b"whole")) == (7, b"whole")
    assert assembler.take(_chunk(1, 1, 1, 2, b"rest")) is None


def test_a_connection_that_ends_is_opened_again_and_what_comes_next_arrives(
    receiver: tuple[_Receiver, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, address = receiver
    monkeypatch.setattr(raft_transport, "STREAM_LIFETIME_S", 0.0)  # each ends at once
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, Clock().now)
    try:
        for i in range(1, 4):
            transport.send(2, [(1, b"m%d" % i)])
            wait_until(lambda n=i: len(held.received) == n, timeout_s=30, what=f"message {i}")
    finally:
        transport.stop()
        channel.close()
    assert held.received == [(1, b"m1"), (1, b"m2"), (1, b"m3")]
    assert held.connections >= 3


def test_messages_to_a_node_that_is_down_are_dropped_and_flow_once_it_is_up(
    receiver: tuple[_Receiver, str],
) -> None:
    held, address = receiver
    known: dict[int, str] = {2: "127.0.0.1:1"}  # nothing listens there
    channels: list[grpc.Channel] = []

    def channel_to(at: str) -> grpc.Channel:
        channels.append(grpc.insecure_channel(at))
        return channels[-1]

    transport = RaftTransport(1, known.get, channel_to, Clock().now)
    try:
        transport.send(2, [(1, b"lost")])
        wait_until(lambda: len(channels) >= 1, timeout_s=30, what="a try at the dead address")
        known[2] = address  # the node came up elsewhere
        wait_until(
            lambda: (transport.send(2, [(1, b"later")]), bool(held.received))[1],
            timeout_s=30,
            what="a message to the node's new address",
        )
    finally:
        transport.stop()
        for channel in channels:
            channel.close()
    assert set(held.received) == {(1, b"later")}


def test_batches_sent_in_a_row_arrive_in_order_whoever_writes_them(
    receiver: tuple[_Receiver, str],
) -> None:
    """The sender writes a batch itself while the connection is idle, and queues it for
    the connection's thread while that writes: the batches still arrive in order."""
    held, address = receiver
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, Clock().now)
    sent = [(i % 3, b"m%d" % i + b"." * (i % 50)) for i in range(300)]
    try:
        for message in sent:
            transport.send(2, [message])
        wait_until(lambda: len(held.received) == len(sent), timeout_s=30, what="every message")
    finally:
        transport.stop()
        channel.close()
    assert held.received == sent


def test_a_connection_cut_under_the_senders_own_writes_is_opened_again(
    receiver: tuple[_Receiver, str],
) -> None:
    """Once the connection is up the sender writes on it itself; when the receiver cuts
    it, a write fails there, and the connection's thread opens another one, on which
    what comes next arrives."""
    held, address = receiver
    channel = grpc.insecure_channel(address)
    transport = RaftTransport(1, lambda _node: address, lambda _a: channel, Clock().now)
    try:
        transport.send(2, [(1, b"first")])
        wait_until(lambda: held.received == [(1, b"first")], timeout_s=30, what="a connection")
        port = held.listener.port
        held.listener.stop()  # NB: ends the connection; the port opens again below
        held.listener = RaftListener("127.0.0.1", None, held._take, port=port)
        wait_until(
            lambda: (transport.send(2, [(1, b"later")]), (1, b"later") in held.received)[1],
            timeout_s=30,
            what="a message on a new connection",
        )
    finally:
        transport.stop()
        channel.close()
    assert held.connections >= 2
