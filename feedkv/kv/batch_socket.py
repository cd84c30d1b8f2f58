"""The streams of a node's batch port: a client's concurrent batches (and, for the layer
above, its rangefeeds), framed messages on a TCP connection.

Why not gRPC's ``BatchStream``: a message on grpcio's sync stream costs ~55-70 µs of
CPU on each side, mostly thread hand-offs inside grpcio, and a kv0 commit from 32
clients made about one message each way (a third of the client's and the node's CPU per
commit). Here a caller writes the calls queued meanwhile itself, the node's thread for
the connection reads them itself, and one thread on each side hands the answers over,
as :mod:`feedkv.server.raft_socket` does for Raft. A lone caller's batch takes the
stream too; every other call stays on gRPC (:mod:`feedkv.kv.grpc_transport`).

Frames (:mod:`feedkv.kv.framed_socket`), at most ``MAX_MESSAGE_BYTES`` each, as gRPC's
messages. The client's first frame is its hello, msgpack ``{"auth": metadata, "stream":
name}``: the metadata a gRPC call on the same channel carries
(:func:`~feedkv.security.tls.call_metadata`, ``None`` on a plaintext node), checked as the
node checks a gRPC call's, and what the connection carries: :data:`BATCHES` (also when
``stream`` is missing), or a stream a layer above serves (the rangefeeds':
:mod:`feedkv.rangefeed.service`; :class:`BatchListener` hands the metadata to the opener
of that name). The node answers it with its welcome, msgpack ``{"welcome": true}``, or
ends the stream (``malformed`` when it serves no stream of that name); the client sends
nothing before the welcome. What follows is the stream's own; a stream of batches goes
as below. Every frame the client sends after its hello is a serialized ``BatchCalls``.
The node answers them with frames of serialized ``BatchReplies``, never empty: an empty
frame announces the stream's end, and the frame after it says why, msgpack
``{"end": kind, "message": text}``:

- ``"done"``: the node ended it cleanly (it drains): the calls it did not answer were
  not applied;
- ``"denied"``: the hello did not prove a caller who may send batches, or no longer
  does (the node checks it again before each message of calls, as it checks each gRPC
  call's credentials: a password changed, a user dropped, a certificate revoked or
  credentials expired): the calls it did not answer were not applied;
- ``"unavailable"``: the hello could not be checked (the user's record could not be
  read): the calls it did not answer were not applied;
- ``"malformed"``: a frame was not a ``BatchCalls`` (or reused a call id in flight):
  the calls before it were answered.

A connection that ends without that (torn, or reset) fails the calls waiting on it as
the client's ``BatchStream`` did: a write as ambiguous.

Why the welcome: each side reads a connection on one thread while others write on it,
which OpenSSL allows of a TLS connection only once the handshake's last messages are
read: TLS 1.3's session tickets come after the handshake, and a client reading them on
its reader thread while a caller wrote its first calls broke the connection ("bad record
mac"). The client reads the welcome, which follows them, before it sends a call or
starts its reader. It also learns there that it is refused, before any call is sent.

A node takes these on a port of its own beside its gRPC port, rather than on the Raft
port: the stream is the gRPC server's, drained and stopped with it (a node alone, in no
cluster, has no Raft port), and a client asks for the port with the ``BatchPort`` gRPC
call each time it opens a stream.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, BinaryIO, Protocol

import msgpack
from google.protobuf.message import DecodeError

from feedkv.errors import FeedKVError, PermissionDeniedError
from feedkv.kv.framed_socket import (
    FRAME_HEAD_BYTES,
    FramedListener,
    frame,
    queued_bytes,
    read_frame,
    send_room,
)
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import MAX_MESSAGE_BYTES
from feedkv.security.call_auth import Metadata
from feedkv.security.tls import ServerTLS
from feedkv.storage.engine import Completion
from feedkv.util.cpu import counted

__all__ = [
    "BatchListener",
    "CallStream",
    "Served",
    "StreamEnded",
    "StreamRetired",
    "BATCHES",
    "ended_by",
    "greet",
    "hello",
    "open_stream",
]

log = logging.getLogger(__name__)

# A message of calls holds those queued when it is sent, up to about this many bytes.
MAX_CALLS_BYTES = 4 << 20
_END = frame(b"")  # announces the stream's end (a BatchReplies frame is never empty)
_WELCOME = msgpack.packb({"welcome": True})
BATCHES = "batches"  # a hello's stream of concurrent batches (its default)


def hello(auth: Metadata | None, stream: str = BATCHES) -> bytes:
    """The first frame of a client's connection: ``auth`` proves who sends, ``stream``
    names what the connection carries."""
    return frame(
        msgpack.packb({"auth": list(auth) if auth is not None else None, "stream": stream})
    )


def _end(kind: str, message: str) -> bytes:
    return _END + frame(msgpack.packb({"end": kind, "message": message}))


def open_stream(sock: socket.socket, auth: Metadata | None) -> CallStream:
    """The batch stream on ``sock`` once the node has welcomed the hello carrying
    ``auth`` (raises as :func:`greet`)."""
    return CallStream(sock, greet(sock, auth, BATCHES))


def greet(sock: socket.socket, auth: Metadata | None, stream: str) -> BinaryIO:
    """The reader of ``sock`` (connected, its receives timing out) once the node has
    welcomed the hello carrying ``auth`` for a ``stream``. Raises :class:`StreamEnded`
    (nothing sent, and ``denied`` if the node refused the caller) or :class:`OSError`;
    ``sock`` is closed then."""
    reader = sock.makefile("rb")
    try:
        sock.sendall(hello(auth, stream))
        first = read_frame(reader, MAX_MESSAGE_BYTES)
        if first == b"":
            raise ended_by(read_frame(reader, MAX_MESSAGE_BYTES))
        if first != _WELCOME:
            raise StreamEnded("the node did not welcome the stream", maybe_applied=False)
    except BaseException:
        reader.close()
        sock.close()
        raise
    return reader


class StreamEnded(FeedKVError):
    """The stream ended before answering a call; ``maybe_applied`` unless the node
    ended it cleanly (draining) or refused the caller; ``denied``: the node refused the
    caller (its credentials) as the stream opened."""

    def __init__(self, message: str, *, maybe_applied: bool, denied: bool = False) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied
        self.denied = denied


class StreamRetired(FeedKVError):
    """The stream takes no new calls (:meth:`CallStream.retire`): nothing was sent."""


class CallStream:
    """One open connection and the calls waiting for their answers on it (the client's
    side): made by :func:`open_stream`."""

    def __init__(self, sock: socket.socket, reader: BinaryIO) -> None:
        sock.settimeout(None)
        self._sock = sock
        self._reader = reader
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # guards the five below
        self._waiting: dict[int, Completion[pb.BatchResponse]] = {}
        self._end: StreamEnded | None = None
        self._queued: list[bytes] = []
        self._writing = False
        self._retired = False
        self.opened = time.monotonic()
        threading.Thread(target=self._read, name="feedkv-batch-client", daemon=True).start()

    @property
    def ended(self) -> bool:
        return self._end is not None

    def retire(self) -> None:
        """Take no new call (:meth:`call` raises :class:`StreamRetired`), and close once
        the calls sent are answered: a client moves to a new stream, whose hello carries
        fresh credentials, before the node would find this one's expired."""
        with self._lock:
            self._retired = True
            idle = not self._waiting
        if idle:
            self._cut()

    def call(self, one: pb.BatchCalls) -> pb.BatchResponse:
        """Send the one call in ``one`` (its ``id`` is set here) and wait for the node's
        answer; raises :class:`StreamEnded` if the stream ends first (not
        ``maybe_applied`` when it had ended before: nothing was sent), and
        :class:`StreamRetired` if it was retired (nothing sent either).

        NB: the caller that finds no other writing writes, and goes on writing what
        queued up meanwhile before it waits for its own answer: the calls that arrive
        while a message is sent go together in the next one, with no thread hand-off."""
        answer: Completion[pb.BatchResponse] = Completion()
        call = one.calls[0]
        with self._lock:
            if self._retired:  # NB: before the end, which its retirement brings
                raise StreamRetired("the stream was retired")
            if (end := self._end) is not None:
                raise StreamEnded(str(end), maybe_applied=False, denied=end.denied)
            call.id = next(self._ids)
            self._waiting[call.id] = answer
            self._queued.append(one.SerializeToString())
            write = not self._writing
            self._writing = True
        if write:
            self._write()
        return answer.result()

    def _write(self) -> None:
        while True:
            with self._lock:
                queued = self._queued
                if not queued or self._end is not None:
                    self._writing = False
                    return
                taken = size = 0
                while taken < len(queued) and size < MAX_CALLS_BYTES:
                    size += len(queued[taken])
                    taken += 1
                message, self._queued = queued[:taken], queued[taken:]
            try:
                self._sock.sendall(frame(b"".join(message)))
            except OSError as exc:
                log.debug("a batch stream's send failed: %s", exc)
                self._cut()  # NB: the reader then fails every waiting call
                with self._lock:
                    self._writing = False
                return

    def close(self) -> None:
        self._cut()

    def _cut(self) -> None:
        with contextlib.suppress(OSError):
            # NB: the plain socket's shutdown, not SSLSocket's (which drops its TLS state
            # under the reader): it wakes the reader blocked in a receive
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def _read(self) -> None:
        end = StreamEnded("the connection to the node broke", maybe_applied=True)
        try:
            with self._reader as reader:
                while (data := read_frame(reader, MAX_MESSAGE_BYTES)) is not None:
                    if not data:
                        end = ended_by(read_frame(reader, MAX_MESSAGE_BYTES))
                        break
                    waiting = self._waiting
                    for reply in pb.BatchReplies.FromString(data).replies:
                        answer = waiting.pop(reply.id, None)
                        if answer is not None:
                            answer.set_result(reply.response)
                    if self._retired and not waiting:  # NB: no call is added once retired
                        end = StreamEnded("the stream was retired", maybe_applied=False)
                        break
        except (OSError, ssl.SSLError, ValueError, DecodeError) as exc:
            end = StreamEnded(f"the connection to the node broke: {exc}", maybe_applied=True)
        finally:
            with self._lock:
                self._end = end
                waiting, self._waiting = self._waiting, {}
            self._sock.close()
        for answer in waiting.values():
            answer.set_exception(end)


def ended_by(data: bytes | None) -> StreamEnded:
    """The end the node announced in ``data`` (the frame after the empty one)."""
    said = msgpack.unpackb(data) if data else {}
    kind, message = said.get("end"), str(said.get("message", "the node ended the stream"))
    if kind == "done":
        return StreamEnded(message, maybe_applied=False)
    if kind == "denied":
        return StreamEnded(message, maybe_applied=False, denied=True)
    if kind == "unavailable":
        return StreamEnded(message, maybe_applied=False)
    return StreamEnded(message, maybe_applied=True)


class Served(Protocol):
    """The node's side of one stream (:class:`feedkv.kv.server.NodeServer`'s batches,
    or a stream of a layer above: :mod:`feedkv.rangefeed.service`'s feeds)."""

    end: tuple[str, str] | None  # (kind, why) it stopped reading, if for a reason of its own

    def read(self, frames: Iterator[bytes]) -> None:
        """Take the client's messages from ``frames`` until they end or the node stops
        reading (it drains, or :attr:`end` says why)."""

    def replies(self) -> Iterator[bytes]:
        """The node's messages to the client, until the stream is done."""

    def direct(self, send_now: Callable[[bytes], bool]) -> None:
        """Given before :meth:`replies` is iterated: ``send_now(message)`` sends a
        message as a frame on the calling thread if the connection's send buffer takes
        it without waiting, and says whether it did (raises :class:`OSError` once the
        connection broke). It takes no lock: the served side calls it only while no
        reply is being sent, and never once :meth:`replies` has ended (the end's
        frames follow)."""


# Serves one stream for a hello's metadata, for as long as it is entered; raises
# PermissionDeniedError (that caller may not), or another FeedKVError (it cannot be
# checked now), as it is entered.
Opener = Callable[[Metadata], AbstractContextManager[Served]]


class BatchListener:
    """Takes clients' streams on ``host`` and ``port`` (0: any free one; the one taken is
    :attr:`port`), a thread per connection reading its messages and one writing the
    node's; ``openers`` makes the served side of each from its hello's metadata, by the
    stream its hello names. ``tls``: serve TLS (``None``: plaintext). Raises
    :class:`OSError` when it cannot listen."""

    def __init__(
        self, host: str, tls: ServerTLS | None, openers: dict[str, Opener], *, port: int = 0
    ) -> None:
        self._openers = openers
        # NB: a stop does not wait for the connections' threads: a call still running
        # keeps its stream's writer until it ends, which the node's call pool, shut down
        # after the stop, waits for
        self._listener = FramedListener(host, port, tls, self._serve, name="batch", join=False)
        self.port = self._listener.port

    @property
    def connections(self) -> int:
        """How many clients' streams this node is taking now."""
        return self._listener.connections

    def stop(self) -> None:
        """Close the port and cut every connection still open (their clients fail the
        calls waiting as ambiguous, as on a broken connection: a draining node ended
        its streams cleanly before). Idempotent."""
        self._listener.stop()

    def _serve(self, sock: socket.socket, peer: Any) -> None:
        # NB: the reader holds the socket open: it is closed with it
        with sock.makefile("rb") as reader:
            first = read_frame(reader, MAX_MESSAGE_BYTES)
            if first is None:
                return
            auth, stream = _hello_of(first)
            opener = self._openers.get(stream)
            if opener is None:
                sock.sendall(_end("malformed", f"this node serves no stream {stream!r}"))
                return
            try:
                with opener(auth) as served:
                    sock.sendall(frame(_WELCOME))
                    sock.settimeout(None)
                    self._carry(sock, reader, served)
            except PermissionDeniedError as exc:
                log.warning("refused a batch stream from %s: %s", peer, exc)
                sock.sendall(_end("denied", str(exc)))
            except FeedKVError as exc:  # the caller could not be checked now
                sock.sendall(_end("unavailable", str(exc)))

    def _carry(self, sock: socket.socket, reader: Any, served: Served) -> None:
        """Read calls into ``served`` here, and write its replies on a thread of their
        own until it ends them; then announce the end and wake this reader."""

        room = send_room(sock)

        def send_now(message: bytes) -> bool:
            if queued_bytes(sock) + FRAME_HEAD_BYTES + len(message) > room:
                return False
            # NB: it fits in a quarter of the send buffer, which the kernel's bookkeeping
            # cannot fill (raft_transport writes on the same bet): returns at once
            sock.sendall(frame(message))
            return True

        served.direct(send_now)

        def write() -> None:
            try:
                for message in served.replies():
                    sock.sendall(frame(message))
                if served.end is not None:
                    sock.sendall(_end(*served.end))
                else:
                    sock.sendall(_end("done", "the node ended the stream (it is shutting down)"))
            except OSError as exc:
                # NB: the answers still to come are dropped, as gRPC drops a cancelled
                # stream's: the client fails their calls as ambiguous
                log.debug("a batch stream's reply failed: %s", exc)
            finally:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

        writer = threading.Thread(target=counted(write), name="batch-out", daemon=True)
        writer.start()
        try:
            served.read(_frames(reader))
        finally:
            writer.join()


def _hello_of(first: bytes) -> tuple[Metadata, str]:
    """The metadata and the stream a hello names; :class:`ValueError` if ``first`` is not
    one."""
    said = msgpack.unpackb(first)
    if not isinstance(said, dict):
        raise ValueError(f"a hello of {len(first)} bytes that is not a map")
    auth = tuple((str(k), str(v)) for k, v in said.get("auth") or [])
    return auth, str(said.get("stream", BATCHES))


def _frames(reader: Any) -> Iterator[bytes]:
    """The client's frames until its connection ends (a torn frame ends it too: the
    calls read before it are answered, if the connection still takes answers)."""
    try:
        while (data := read_frame(reader, MAX_MESSAGE_BYTES)) is not None:
            yield data
    except (OSError, ssl.SSLError) as exc:
        log.debug("a batch stream's connection ended: %s", exc)
