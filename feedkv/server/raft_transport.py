"""Raft messages between nodes: a node's replica loop hands them here, per destination.

The loop must never wait on the network. For each destination node a thread of its own
keeps a connection (:mod:`feedkv.server.raft_socket`: length-prefixed msgpack frames on
a TCP socket, TLS on a secure cluster, as CockroachDB's Raft transport keeps one stream
of message batches per node) and writes on it everything queued for it: each write holds
all that was queued since the last, the messages of every range between the two nodes
together. :meth:`RaftTransport.send` writes a batch itself, on the loop's thread, when
that cannot wait: the connection is open, nothing queued before it is still unwritten,
no write is under way, and the socket's send buffer has room for it (the kernel then
takes it at once); else it queues it for the thread. NB: waking the thread cost more
than the write: in kv0 on three replicas each send woke it through ~14 futex calls
(the GIL handed back and forth), the thread's CPU ~100 us per send. A slow or
dead node holds up only its own queue, which keeps the newest ``MAX_QUEUED`` batches; a
connection that fails, or whose receiver takes nothing for ``CALL_TIMEOUT_S`` while a
write waits, is dropped with what it held, as a lossy network would drop them (Raft
resends what matters), and opened again. A connection ends after ``STREAM_LIFETIME_S``
and opens anew, so its credentials are checked again at least that often.

Each request carries the sender's clock, which the receiver takes in before it
steps the messages (an HLC's rule for messages): a leader that confirms a read with its
heartbeats passes a clock above the read's timestamp through the quorum that answers,
and so to whichever replica that quorum elects next (see
:meth:`~feedkv.kv.replica.Replica.take_lease_start`).

A request carries at most ``CHUNK_BYTES`` of messages. A message larger than that (a
snapshot of a big range, whatever gRPC's message limit) goes alone, in requests of one
chunk each of that size, one after another, in its place among the connection's requests;
the receiver's :class:`ChunkAssembler` puts it together and hands it on whole
(:func:`take_request`). A connection lost midway loses the message, and the leader sends the
snapshot again.

A snapshot goes on a call of its own (``RaftSnapshot``, as CockroachDB streams its
snapshots apart from the Raft messages): :meth:`RaftTransport.send_snapshot` streams its
frames (the message, then the data's chunks, each at most ``CHUNK_BYTES``) as the sending
loop reads them from its spooled copy, at most ``SNAPSHOT_WINDOW`` frames ahead of what gRPC
took (gRPC holds no more than its flow control lets through), and returns once the
receiver spooled them all; the receiver's handler
(:func:`snapshot_frames`) hands them to its loop as they arrive. A call that fails, or
stalls for ``CALL_TIMEOUT_S``, raises on the sender and leaves the receiver nothing. A
receiver that refuses the snapshot at its header ends the call at once, its reason in
the call's trailing metadata (``REFUSAL_METADATA``): the sender raises
:class:`~feedkv.kv.replica_refusal.SnapshotRefusedError` with it, having sent a few
frames, not the snapshot.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import grpc
import msgpack

from feedkv.errors import NodeUnavailableError
from feedkv.kv.framed_socket import queued_bytes, send_room
from feedkv.kv.replica_refusal import Refusal, SnapshotRefusedError
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, call_metadata
from feedkv.server.raft_socket import dial, frame
from feedkv.util.hlc import Timestamp

__all__ = [
    "CHUNK_BYTES",
    "MAX_QUEUED",
    "REFUSAL_METADATA",
    "ChunkAssembler",
    "RaftTransport",
    "abort_refused",
    "snapshot_frames",
    "take_request",
]

log = logging.getLogger(__name__)

MAX_QUEUED = 1024  # batches waiting for one node; older ones are dropped first
CALL_TIMEOUT_S = 5.0
CHUNK_BYTES = 4 << 20  # the most one request carries
STREAM_LIFETIME_S = 60.0
RETRY_S = 0.2  # after a connection failed, before the next is opened
_POLL_S = 1.0  # how often a waiting connection looks whether it should end
SNAPSHOT_WINDOW = 2  # a snapshot's frames read ahead of what gRPC sent
REFUSAL_METADATA = "feedkv-snapshot-refusal"  # a refused snapshot's Refusal (its value)

Batch = list[tuple[int, bytes]]


class _Peer:
    """One destination node's queue and connection. Whoever writes on the connection
    holds :attr:`lock` as it does (the peer's thread, or :meth:`RaftTransport.send`),
    and so does the thread as it opens or closes it and counts the batches it took."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()  # None: stop
        self.connection: socket.socket | None = None  # open to the node now
        self.room = 0  # bytes a write may add to its send buffer without waiting
        self.lock = threading.Lock()
        self.queued = 0  # batches put on the queue (by send, on one thread at a time)
        self.carried = 0  # of those, the ones the thread wrote or lost (under lock)
        self._in_hand = 0  # taken from the queue, not yet counted in carried

    def take(self, timeout: float | None) -> list[Batch] | None:
        """Everything queued, once there is something (waiting at most ``timeout``:
        ``[]`` then); ``None`` when the transport stops. What it returns counts as
        carried at the next :meth:`settle`."""
        try:
            first = self.queue.get(timeout=timeout)
        except queue.Empty:
            return []
        batches = [first]
        while True:
            try:
                batches.append(self.queue.get_nowait())
            except queue.Empty:
                break
        taken = [batch for batch in batches if batch is not None]
        self._in_hand += len(taken)
        if len(taken) < len(batches):
            self.queue.put(None)  # NB: for whoever waits next
            return None
        return taken[-MAX_QUEUED:]

    def settle(self) -> None:
        """The batches taken so far are written, or lost (under :attr:`lock`)."""
        self.carried += self._in_hand
        self._in_hand = 0

    def drop(self) -> None:
        """Drop what is queued (what a lossy network drops), keeping a stop."""
        self.take(0)
        with self.lock:
            self.settle()

    def has_room(self, connection: socket.socket, size: int) -> bool:
        """Whether ``size`` more bytes fit in ``connection``'s send buffer now (under
        :attr:`lock`): a write of them then does not wait. NB: :attr:`room` is a quarter
        of the buffer, as the kernel counts its bookkeeping against it too."""
        return queued_bytes(connection) + size <= self.room


class RaftTransport:
    """Sends this node's Raft messages; see the module docstring. ``tls``: the node's
    identity on a secure cluster (``None``: plaintext), for its Raft connections; its
    gRPC calls (the Raft port, snapshots) go on ``channel_to``'s channels."""

    def __init__(
        self,
        node_id: int,
        address_of: Callable[[int], str | None],
        channel_to: Callable[[str], grpc.Channel],
        now: Callable[[], Timestamp],
        *,
        tls: ClientTLS | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self._node_id = node_id
        self._now = now
        self._tls = tls
        self._chunk_bytes = chunk_bytes
        self._transfers = itertools.count(1)
        self._address_of = address_of
        self._channel_to = channel_to
        self._peers: dict[int, _Peer] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def send(self, node: int, batch: Batch) -> None:
        """Write ``batch`` to ``node`` now, if that cannot wait, else queue it (never
        blocks on the network; one thread at a time: the replica loop's)."""
        if self._stopping.is_set():
            return
        peer = self._peers.get(node) or self._start(node)
        if not self._write_now(peer, batch):
            peer.queued += 1
            peer.queue.put(batch)

    def _write_now(self, peer: _Peer, batch: Batch) -> bool:
        """Write ``batch`` on ``peer``'s connection from the calling thread, if no write
        is under way, nothing queued before it is unwritten, and the send buffer has
        room for it; whether it did."""
        if not peer.lock.acquire(blocking=False):
            return False  # NB: the thread writes: what comes now goes after that
        try:
            connection = peer.connection
            if connection is None or peer.queued != peer.carried:
                return False
            data = b"".join(frame(r) for r in self._requests(batch))
            if not peer.has_room(connection, len(data)):
                return False
            try:
                connection.sendall(data)
            except OSError:
                # NB: part of it may have gone: queued, the batch wakes the thread, whose
                # write fails on the connection shut here, and it opens another
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                return False
            return True
        finally:
            peer.lock.release()

    def send_snapshot(self, node: int, range_id: int, frames: Iterator[bytes]) -> None:
        """Stream a snapshot's ``frames`` to ``node`` (taken on this thread, a few ahead
        of gRPC); returns once it took them all, raises
        :class:`~feedkv.errors.NodeUnavailableError` when the call failed or stalled, and
        :class:`~feedkv.kv.replica_refusal.SnapshotRefusedError` when the receiver refused
        it at its header (:func:`abort_refused`)."""
        address = self._address_of(node)
        if address is None or self._stopping.is_set():
            raise NodeUnavailableError(f"n{node} is not known here: no snapshot sent")
        channel = self._channel_to(address)
        window: queue.Queue[bytes | None] = queue.Queue(maxsize=SNAPSHOT_WINDOW)
        ended = threading.Event()  # set when this call is over, however it ended

        def requests() -> Iterator[bytes]:
            # NB: gRPC's thread that takes these is not woken by a cancel: it looks at
            # ``ended`` between waits, so a failed transfer does not leave it waiting
            while not ended.is_set():
                try:
                    frame = window.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if frame is None:
                    return
                clock = tuple(self._now())
                yield msgpack.packb(
                    {"from": self._node_id, "range": range_id, "frame": frame, "clock": clock}
                )

        stub = channel.stream_unary(f"/{SERVICE}/RaftSnapshot")
        call = stub.future(requests(), metadata=call_metadata(channel))
        try:
            for frame in itertools.chain(frames, [None]):
                self._put_frame(window, frame, call, node)
            call.result(timeout=CALL_TIMEOUT_S)
        except (grpc.RpcError, grpc.FutureTimeoutError, grpc.FutureCancelledError) as exc:
            refused = _refusal(call, node)
            if refused is not None:
                raise refused from exc
            raise NodeUnavailableError(f"the snapshot to n{node} failed: {exc}") from exc
        except NodeUnavailableError:
            refused = _refusal(call, node)
            if refused is not None:
                raise refused from None
            raise
        finally:
            ended.set()
            if not call.done():
                call.cancel()

    def _put_frame(
        self, window: queue.Queue[bytes | None], frame: bytes | None, call: Any, node: int
    ) -> None:
        """Hand ``frame`` to the snapshot call's window; raises
        :class:`~feedkv.errors.NodeUnavailableError` when the call ended, the transport
        stops, or the receiver took nothing for ``CALL_TIMEOUT_S``."""
        stalled_at = time.monotonic() + CALL_TIMEOUT_S
        while True:
            if call.done():
                raise NodeUnavailableError(f"the snapshot stream to n{node} ended early")
            try:
                window.put(frame, timeout=_POLL_S)
                return
            except queue.Full:
                if self._stopping.is_set():
                    raise NodeUnavailableError("the transport stops") from None
                if time.monotonic() >= stalled_at:
                    raise NodeUnavailableError(
                        f"the snapshot to n{node} stalled: nothing taken for {CALL_TIMEOUT_S} s"
                    ) from None

    def stop(self) -> None:
        self._stopping.set()
        for peer in list(self._peers.values()):
            peer.queue.put(None)
            connection = peer.connection
            if connection is not None:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)  # NB: wakes a blocked send
        for thread in self._threads:
            thread.join()

    def _start(self, node: int) -> _Peer:
        with self._lock:
            peer = self._peers.get(node)
            if peer is None:
                peer = self._peers[node] = _Peer()
                thread = threading.Thread(
                    target=self._keep_connection,
                    args=(node, peer),
                    name=f"raft-to-n{node}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
            return peer

    def _keep_connection(self, node: int, peer: _Peer) -> None:
        """Keep a connection to ``node`` open while there is something to send."""
        while True:
            batches = peer.take(None)
            if batches is None or self._stopping.is_set():
                return
            address = self._address_of(node)
            if address is None:
                with peer.lock:
                    peer.settle()  # not known yet: as if lost
                continue
            try:
                connection = self._connect(address)
                with peer.lock:
                    peer.connection = connection
                    peer.room = send_room(connection)
                if self._stopping.is_set():
                    return
                self._carry(node, peer, address, batches, connection)
            except (NodeUnavailableError, OSError) as exc:
                log.debug("raft connection to n%s lost: %s", node, exc)
                peer.drop()
                self._stopping.wait(RETRY_S)
            finally:
                with peer.lock:
                    if peer.connection is not None:
                        peer.connection.close()
                        peer.connection = None
                    peer.settle()  # NB: what it held is lost with it

    def _connect(self, address: str) -> socket.socket:
        """A connection to the Raft port of the node at ``address``, which its gRPC
        ``RaftPort`` call names. Raises :class:`~feedkv.errors.NodeUnavailableError`."""
        channel = self._channel_to(address)
        metadata = call_metadata(channel)
        ask = channel.unary_unary(f"/{SERVICE}/RaftPort")
        try:
            answer = msgpack.unpackb(
                ask(msgpack.packb({}), timeout=CALL_TIMEOUT_S, metadata=metadata)
            )
        except grpc.RpcError as exc:
            raise NodeUnavailableError(f"cannot ask {address} for its Raft port: {exc}") from exc
        host, _, _ = address.rpartition(":")
        port = int(answer["port"])
        return dial(host.strip("[]"), port, self._node_id, metadata, self._tls, CALL_TIMEOUT_S)

    def _carry(
        self, node: int, peer: _Peer, address: str, batches: list[Batch], connection: socket.socket
    ) -> None:
        """Write ``batches``, then what is queued, as it comes, on ``connection`` (each
        send waits at most ``CALL_TIMEOUT_S`` for the receiver to take it, or raises),
        until the connection ages out, the transport stops, or ``node`` moves to another
        address."""
        ends = time.monotonic() + STREAM_LIFETIME_S
        while True:
            if self._address_of(node) != address:
                return  # NB: its messages are lost; the next connection goes to the new address
            messages = [message for batch in batches for message in batch]
            data = b"".join(frame(r) for r in self._requests(messages))
            with peer.lock:
                try:
                    connection.sendall(data)
                finally:
                    peer.settle()
            taken: list[Batch] | None = []
            while taken == [] and time.monotonic() < ends:
                taken = peer.take(_POLL_S)
            if not taken:  # stopping, or aged out
                return
            batches = taken

    def _requests(self, messages: Batch) -> Iterator[bytes]:
        """The requests carrying ``messages``, at most ``chunk_bytes`` each, a larger
        message in chunks."""
        for group in _groups(messages, self._chunk_bytes):
            if len(group) == 1 and len(group[0][1]) > self._chunk_bytes:
                yield from self._chunks(*group[0])
            else:
                clock = tuple(self._now())
                yield msgpack.packb({"from": self._node_id, "messages": group, "clock": clock})

    def _chunks(self, range_id: int, raw: bytes) -> Iterator[bytes]:
        """The requests carrying ``raw``, a message too large for one, a chunk each."""
        transfer, size = next(self._transfers), self._chunk_bytes
        total = -(-len(raw) // size)
        for seq in range(total):
            chunk = {
                "transfer": transfer,
                "seq": seq,
                "total": total,
                "range": range_id,
                "data": raw[seq * size : (seq + 1) * size],
            }
            clock = tuple(self._now())
            yield msgpack.packb({"from": self._node_id, "chunk": chunk, "clock": clock})


def _groups(messages: list[tuple[int, bytes]], limit: int) -> Iterator[Batch]:
    """``messages`` in order, in groups of at most ``limit`` bytes (a larger message
    alone)."""
    group: Batch = []
    size = 0
    for message in messages:
        if group and size + len(message[1]) > limit:
            yield group
            group, size = [], 0
        group.append(message)
        size += len(message[1])
    if group:
        yield group


class ChunkAssembler:
    """Puts together the messages other nodes sent in chunks. A sender sends one
    message's chunks in order before the next message's, so each sender has at most one
    message in assembly: a chunk out of order (one was lost), or the first of another
    message, drops the one in assembly."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._assembling: dict[int, tuple[int, int, list[bytes]]] = {}  # sender -> ...

    def take(self, chunk: dict[str, Any]) -> tuple[int, bytes] | None:
        """Take one chunk (with its sender's id, ``from``); returns ``(range_id,
        message)`` once its message is whole."""
        sender, transfer, seq = int(chunk["from"]), int(chunk["transfer"]), int(chunk["seq"])
        with self._lock:
            held = self._assembling.pop(sender, None)
            if seq == 0:
                held = (transfer, 0, [])
            if held is None or held[0] != transfer or held[1] != seq:
                return None  # NB: a chunk of this message was lost: it is lost
            parts = held[2]
            parts.append(bytes(chunk["data"]))
            if seq + 1 < int(chunk["total"]):
                self._assembling[sender] = (transfer, seq + 1, parts)
                return None
        return int(chunk["range"]), b"".join(parts)


def abort_refused(context: Any, refused: SnapshotRefusedError) -> NoReturn:
    """End a ``RaftSnapshot`` call (on the receiver, ``context`` its gRPC context) with
    ``refused``'s reason, which the sender raises again (:meth:`RaftTransport.send_snapshot`)."""
    context.set_trailing_metadata(((REFUSAL_METADATA, refused.reason.value),))
    context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(refused))
    raise refused  # NB: unreachable: abort raises


def _refusal(call: Any, node: int) -> SnapshotRefusedError | None:
    """The receiver's refusal that ended a snapshot call, if it ended so."""
    if (
        not call.done()
        or call.cancelled()
        or call.code() is not grpc.StatusCode.FAILED_PRECONDITION
    ):
        return None
    for key, value in call.trailing_metadata() or ():
        if key == REFUSAL_METADATA:
            try:
                reason = Refusal(value)
            except ValueError:
                return None  # NB: a newer node's reason: a plain failure here
            return SnapshotRefusedError(reason, f"n{node} said: {call.details()}")
    return None


def snapshot_frames(
    requests: Iterator[bytes], take_clock: Callable[[Timestamp], object]
) -> tuple[int, int, Iterator[bytes]]:
    """``(sender, range_id, frames)`` of one ``RaftSnapshot`` call's ``requests``, the
    frames read as they are taken (each request's clock goes to ``take_clock`` first)."""
    first = msgpack.unpackb(next(requests))
    sender, range_id = int(first["from"]), int(first["range"])

    def frames() -> Iterator[bytes]:
        request = first
        while True:
            take_clock(Timestamp(*request["clock"]))
            yield bytes(request["frame"])
            try:
                request = msgpack.unpackb(next(requests))
            except StopIteration:
                return

    return sender, range_id, frames()


def take_request(assembler: ChunkAssembler, request: dict[str, Any]) -> list[tuple[int, bytes]]:
    """The messages one Raft request (unpacked) completes: those it carries, or
    the message its chunk makes whole (``assembler`` holds the sender's earlier ones)."""
    chunk = request.get("chunk")
    if chunk is None:
        messages: list[tuple[int, bytes]] = request["messages"]  # NB: as msgpack lists
        return messages
    whole = assembler.take({**chunk, "from": request["from"]})
    return [whole] if whole is not None else []
