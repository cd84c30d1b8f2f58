"""The client side of a node's stream of feeds (a :class:`FeedTransport`).

One :class:`GrpcFeedTransport` per client and node keeps one connection to the node's
batch port open for its feeds (:mod:`feedkv.rangefeed.service`), made on the first
registration: the node's ``BatchPort`` gRPC call names the port, and the hello carries
what the gRPC channel's calls carry. Registrations of every feed of the client share it:
each gets a wire tag, and a reader thread hands incoming events to the owning feed's
stream. A feed whose stream is full waits for its consumer to take: the connection reads
nothing meanwhile, so TCP holds the node back, and a catch-up scan goes at the
consumer's pace, as it does in-process. So the feeds of one client share their pace as
they share the connection: a consumer that is slow but keeps taking slows the others.
One that has taken nothing for ``consumer_wait_s`` (counted from its last take, so a
stalled consumer holds the connection that long once, whatever its number of ranges) is
cut off as on the server: ``SLOW_CONSUMER``, and the server is told to unregister. When
the connection breaks, every registration on it ends with ``DISCONNECTED`` and the next
registration opens a new one; the multi-range client retries with backoff, which is
what reconnecting means. A node that refuses the caller ends its registrations with
``PERMISSION_DENIED``.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable, Hashable
from typing import BinaryIO

import grpc
from google.protobuf.message import DecodeError

from feedkv.errors import (
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
    PermissionDeniedError,
)
from feedkv.kv.batch_socket import ended_by
from feedkv.kv.framed_socket import frame, read_frame
from feedkv.kv.grpc_transport import dial_stream
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import MAX_MESSAGE_BYTES, span_to_proto, timestamp_to_proto
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason
from feedkv.rangefeed.registration import event_size, values_size
from feedkv.rangefeed.stream import EventStream, ValueBatch
from feedkv.rangefeed.waker import Waker
from feedkv.rangefeed.wire import RANGEFEED, event_from_proto, values_from_proto
from feedkv.security.tls import ClientTLS
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["GrpcFeedTransport"]

DIAL_TIMEOUT_S = 5.0  # to ask for the node's batch port, connect and be welcomed


class _ClientRegistration:
    """A registration as the client sees it (what an :class:`EventStream` queues for)."""

    __slots__ = ("done", "mux", "queued", "stream", "tag", "wire_tag")

    def __init__(self, tag: Hashable, wire_tag: int, stream: EventStream, mux: _Mux) -> None:
        self.tag = tag
        self.wire_tag = wire_tag
        self.stream = stream
        self.mux = mux
        self.queued = 0
        self.done = False

    def end(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self.stream.push_final(self, error)


class _Mux:
    """One connection carrying feeds, and the registrations riding on it. Its reader
    thread opens it (``dial``, which raises as
    :func:`~feedkv.kv.grpc_transport.dial_stream` does), so that registering never waits
    for a node; what is sent before the node welcomes it waits for the welcome. A dial
    that fails ends every registration: ``PERMISSION_DENIED`` if the node refused the
    caller (retrying cannot help), else ``DISCONNECTED`` (the connection is then no
    longer :attr:`alive`, and the next registration dials again)."""

    def __init__(
        self,
        dial: Callable[[], tuple[socket.socket, BinaryIO]],
        address: str,
        consumer_wait_s: float,
    ) -> None:
        self.address = address
        self._consumer_wait_s = consumer_wait_s
        self.regs: dict[int, _ClientRegistration] = {}
        self.alive = True
        self._lock = threading.Lock()  # guards regs and alive
        self._send_lock = threading.Lock()  # guards the two below; a request goes whole
        self._sock: socket.socket | None = None  # once the node welcomed the connection
        self._unsent: list[bytes] = []  # the requests made before that
        self._cutting = False  # the connection is to end (set once, before its cut)
        self._waker = Waker()
        self._reader = threading.Thread(
            target=self._run, args=(dial,), name="feedkv-rangefeed-client", daemon=True
        )
        self._reader.start()

    def add(self, reg: _ClientRegistration, request: pb.RangeFeedRequest) -> None:
        with self._lock:
            if not self.alive:
                reg.end(Error(ErrorReason.DISCONNECTED, f"the stream to {self.address} closed"))
                return
            self.regs[reg.wire_tag] = reg
        self._send(request)

    def remove(self, reg: _ClientRegistration) -> None:
        with self._lock:
            if self.regs.pop(reg.wire_tag, None) is None or not self.alive:
                return
        self._send(pb.RangeFeedRequest(unregister=pb.RangeFeedUnregister(tag=reg.wire_tag)))

    def _send(self, request: pb.RangeFeedRequest) -> None:
        data = frame(request.SerializeToString())
        with self._send_lock:
            if self._sock is None:
                self._unsent.append(data)  # NB: dropped if the dial fails: the feeds end
                return
            try:
                self._sock.sendall(data)
            except OSError:
                self._cut()  # NB: the reader ends every feed on it, and hears why

    def close(self) -> None:
        """Cut the connection and wait for the reader, which ends every feed on it (first
        here, so a reader waiting for a feed's consumer stops waiting)."""
        self._cut()
        with self._lock:
            regs = list(self.regs.values())
        for reg in regs:
            reg.end(Error(ErrorReason.DISCONNECTED, f"the stream to {self.address} closed"))
        if threading.current_thread() is not self._reader:
            self._reader.join()

    def _cut(self) -> None:
        """End the connection: the reader wakes (or, still dialing, cuts what it gets)."""
        self._cutting = True
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                # NB: the plain socket's shutdown, not SSLSocket's (which drops its TLS
                # state under the reader): it wakes the reader blocked in a receive
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def _run(self, dial: Callable[[], tuple[socket.socket, BinaryIO]]) -> None:
        reason = "the node closed the stream"
        denied = False
        try:
            sock, reader = dial()
            sock.settimeout(None)
            with self._send_lock:
                self._sock, unsent, self._unsent = sock, self._unsent, []
                if self._cutting:  # NB: _cut set it before it read _sock: it missed sock
                    self._cut()
                with contextlib.suppress(OSError):  # NB: a failed send breaks the reading
                    for request in unsent:
                        sock.sendall(request)
            with reader:
                while (data := read_frame(reader, MAX_MESSAGE_BYTES)) is not None:
                    if not data:
                        end = ended_by(read_frame(reader, MAX_MESSAGE_BYTES))
                        reason, denied = str(end), end.denied
                        break
                    self._deliver(pb.RangeFeedEvents.FromString(data))
        except PermissionDeniedError as exc:  # the dial
            reason, denied = str(exc), True
        except InvalidArgumentError as exc:
            reason = f"the node sent a malformed event: {exc}"
        except (OSError, ValueError, DecodeError, FeedKVError) as exc:
            reason = str(exc)  # NB: ssl.SSLError is an OSError; a failed dial's FeedKVError
        except BaseException as exc:  # a bug: the feeds must still end, and hear why
            reason = f"the client failed: {exc!r}"
            raise
        finally:
            with self._lock:
                self.alive = False
                regs, self.regs = self.regs, {}
            self._cut()
            with self._send_lock:  # NB: not under a sender's feet (TLS sockets mind)
                if self._sock is not None:
                    self._sock.close()
            error = (
                Error(ErrorReason.PERMISSION_DENIED, reason)  # terminal: retrying cannot help
                if denied
                else Error(
                    ErrorReason.DISCONNECTED, f"the stream to {self.address} broke: {reason}"
                )
            )
            self._waker.close()  # wakes what waits for a gap's end
            for reg in regs.values():
                reg.end(error)

    def _deliver(self, batch: pb.RangeFeedEvents) -> None:
        """Hand each registration its events (a run of values decoded once, as one batch
        for every registration it names), then wake their consumers, paced."""
        streams: set[EventStream] = set()
        for msg in batch.events:
            if msg.WhichOneof("kind") == "values":
                values = values_from_proto(msg.values)
                size = values_size(values.values)
                for tag in msg.values.tags:
                    self._push(tag, values, size, streams)
            else:
                event = event_from_proto(msg)
                self._push(msg.tag, event, event_size(event), streams)
        self._waker.defer(streams, -1)
        self._waker.flush()

    def _push(
        self,
        wire_tag: int,
        item: ValueBatch | Checkpoint | Error,
        size: int,
        streams: set[EventStream],
    ) -> None:
        reg = self.regs.get(wire_tag)
        if reg is None:
            return  # unregistered meanwhile
        if isinstance(item, Error):
            with self._lock:
                self.regs.pop(wire_tag, None)
            reg.end(item)
            return
        if reg.stream.push(reg, item, size, wake=False):
            streams.add(reg.stream)
            return
        # Full: its consumer is busy with what it took. The others are woken before the
        # connection waits for it.
        self._waker.defer(streams, -1)
        self._waker.flush()
        streams.clear()
        reg.stream.wake()
        left = reg.stream.taken_at + self._consumer_wait_s - time.monotonic()
        if left > 0 and reg.stream.push_wait(reg, item, size, left):
            return
        self.remove(reg)
        message = (
            f"the feed's consumer took nothing for {self._consumer_wait_s:g} s, or the "
            "client's rangefeed budget stayed spent"
        )
        reg.end(Error(ErrorReason.SLOW_CONSUMER, message))


class GrpcFeedTransport:
    """Registers feeds with the node at the other end of ``channel`` over one stream,
    TLS as ``tls`` (``None``: plaintext; as the channel's). ``budget_bytes`` bounds what the
    client holds for all its feeds, ``per_registration`` the values queued for one range
    of a feed; ``consumer_wait_s`` is how long the connection waits, from a feed's last
    take, for a full feed to take before cutting it off (it reads nothing for the other
    feeds meanwhile)."""

    def __init__(
        self,
        channel: grpc.Channel,
        address: str,
        *,
        tls: ClientTLS | None,
        budget_bytes: int = 256 << 20,
        per_registration: int = 4096,
        consumer_wait_s: float = 5.0,
    ) -> None:
        self.address = address
        self._consumer_wait_s = consumer_wait_s
        self._channel = channel
        self._tls = tls
        self._budget = Budget(budget_bytes)
        self._per_registration = per_registration
        self._wire_tags = itertools.count(1)
        self._lock = threading.Lock()
        self._mux: _Mux | None = None
        self._closed = False

    def local_node(self) -> int:
        return 0  # NB: a single node's, or a cluster's gateway (which names it)

    def reconnect(self, channel: grpc.Channel, address: str) -> None:
        """Register over ``channel`` to ``address`` from now on (the client's gateway
        moved to another node). The feeds on the old stream end ``DISCONNECTED`` as it
        breaks and register again; streams made by :meth:`new_stream` go on."""
        with self._lock:
            self._channel, self.address = channel, address
            mux, self._mux = self._mux, None
        if mux is not None:
            mux.close()

    def new_stream(self) -> EventStream:
        return EventStream(self._budget, per_registration=self._per_registration)

    @property
    def broken(self) -> bool:
        """Whether the stream to the node ended under its feeds (the node went away)."""
        mux = self._mux
        return mux is not None and not mux.alive

    def register(
        self,
        tag: Hashable,
        span: Span,
        start_ts: Timestamp,
        with_diff: bool,
        stream: EventStream,
        *,
        values: bool = True,
        timestamp_order: bool = False,
        node_id: int = 0,  # this transport's node's ranges only
    ) -> object:
        with self._lock:
            if self._closed:
                raise NodeUnavailableError(f"the rangefeed client of {self.address} is closed")
            if self._mux is None or not self._mux.alive:
                self._mux = _Mux(self._dial, self.address, self._consumer_wait_s)
            mux = self._mux
        wire_tag = next(self._wire_tags)
        reg = _ClientRegistration(tag, wire_tag, stream, mux)
        request = pb.RangeFeedRequest()
        register = request.register
        register.tag = wire_tag
        span_to_proto(span, register.span)
        timestamp_to_proto(start_ts, register.start_ts)
        register.with_diff = with_diff
        register.checkpoints_only = not values
        register.timestamp_runs = True
        register.timestamp_order = timestamp_order
        mux.add(reg, request)
        return reg

    def unregister(self, handle: object) -> None:
        if not isinstance(handle, _ClientRegistration):
            raise InvalidArgumentError(f"not a registration of this transport: {handle!r}")
        handle.mux.remove(handle)
        handle.end(Error(ErrorReason.UNREGISTERED, "unregistered by the consumer"))

    def close(self) -> None:
        """End every feed (``DISCONNECTED``) and refuse new ones. Idempotent."""
        with self._lock:
            self._closed = True
            mux, self._mux = self._mux, None
        if mux is not None:
            mux.close()
        self._budget.close()

    def _dial(self) -> tuple[socket.socket, BinaryIO]:
        """A connection to the node's batch port for this client's feeds (on the
        connection's reader thread)."""
        return dial_stream(self._channel, self.address, self._tls, DIAL_TIMEOUT_S, RANGEFEED)
