"""The client side of the ``RangeFeed`` gRPC stream (a :class:`FeedTransport`).

One :class:`GrpcFeedTransport` per client and node keeps one bidirectional stream open,
created on the first registration. Registrations of every feed of the client share it:
each gets a wire tag, and a reader thread hands incoming events to the owning feed's
stream. A feed whose stream is full waits for its consumer to take: the connection reads
nothing meanwhile, so gRPC's flow control holds the node back, and a catch-up scan goes
at the consumer's pace, as it does in-process. So the feeds of one client share their
pace as they share the connection: a consumer that is slow but keeps taking slows the
others. One that has taken nothing for ``consumer_wait_s`` (counted from its last take,
so a stalled consumer holds the connection that long once, whatever its number of
ranges) is cut off as on the server: ``SLOW_CONSUMER``, and the server is told to
unregister. When the connection breaks, every registration on it ends with
``DISCONNECTED`` and the next registration opens a new stream; the multi-range client
retries with backoff, which is what reconnecting means.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Hashable
from typing import Any

import grpc

from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import SERVICE, span_to_proto, timestamp_to_proto
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason
from feedkv.rangefeed.registration import event_size, values_size
from feedkv.rangefeed.stream import EventStream, ValueBatch
from feedkv.rangefeed.waker import Waker
from feedkv.rangefeed.wire import event_from_proto, values_from_proto
from feedkv.security.tls import call_metadata
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["GrpcFeedTransport"]


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
    """One open ``RangeFeed`` call and the registrations riding on it."""

    def __init__(
        self, method: Any, address: str, consumer_wait_s: float, metadata: Any = None
    ) -> None:
        self.address = address
        self._consumer_wait_s = consumer_wait_s
        self.regs: dict[int, _ClientRegistration] = {}
        self.alive = True
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[pb.RangeFeedRequest | None] = queue.SimpleQueue()
        self._waker = Waker()
        self._call = method(iter(self._requests.get, None), metadata=metadata)
        self._reader = threading.Thread(
            target=self._read, name="feedkv-rangefeed-client", daemon=True
        )
        self._reader.start()

    def add(self, reg: _ClientRegistration, request: pb.RangeFeedRequest) -> None:
        with self._lock:
            if not self.alive:
                reg.end(Error(ErrorReason.DISCONNECTED, f"the stream to {self.address} closed"))
                return
            self.regs[reg.wire_tag] = reg
        self._requests.put(request)

    def remove(self, reg: _ClientRegistration) -> None:
        with self._lock:
            if self.regs.pop(reg.wire_tag, None) is None or not self.alive:
                return
        self._requests.put(pb.RangeFeedRequest(unregister=pb.RangeFeedUnregister(tag=reg.wire_tag)))

    def close(self) -> None:
        """Cancel the call and wait for the reader, which ends every feed on it (first
        here, so a reader waiting for a feed's consumer stops waiting)."""
        self._requests.put(None)
        self._call.cancel()
        with self._lock:
            regs = list(self.regs.values())
        for reg in regs:
            reg.end(Error(ErrorReason.DISCONNECTED, f"the stream to {self.address} closed"))
        if threading.current_thread() is not self._reader:
            self._reader.join()

    def _read(self) -> None:
        reason = "the node closed the stream"
        denied = False
        try:
            for batch in self._call:
                self._deliver(batch)
        except grpc.RpcError as exc:
            details = exc.details() if hasattr(exc, "details") else None
            reason = str(details or exc)
            code = exc.code() if hasattr(exc, "code") else None
            denied = code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        except InvalidArgumentError as exc:
            reason = f"the node sent a malformed event: {exc}"
            self._call.cancel()
        except BaseException as exc:  # a bug: the feeds must still end, and hear why
            reason = f"the client failed: {exc!r}"
            self._call.cancel()
            raise
        finally:
            with self._lock:
                self.alive = False
                regs, self.regs = self.regs, {}
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
    """Registers feeds with one node over one stream. ``budget_bytes`` bounds what the
    client holds for all its feeds, ``per_registration`` the values queued for one range
    of a feed; ``consumer_wait_s`` is how long the connection waits, from a feed's last
    take, for a full feed to take before cutting it off (it reads nothing for the other
    feeds meanwhile)."""

    def __init__(
        self,
        channel: grpc.Channel,
        address: str,
        *,
        budget_bytes: int = 256 << 20,
        per_registration: int = 4096,
        consumer_wait_s: float = 5.0,
    ) -> None:
        self.address = address
        self._consumer_wait_s = consumer_wait_s
        self._channel = channel
        self._method = _range_feed_method(channel)
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
        method = _range_feed_method(channel)
        with self._lock:
            self._channel, self._method, self.address = channel, method, address
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
                self._mux = _Mux(
                    self._method, self.address, self._consumer_wait_s, call_metadata(self._channel)
                )
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


def _range_feed_method(channel: grpc.Channel) -> Any:
    return channel.stream_stream(
        f"/{SERVICE}/RangeFeed",
        request_serializer=pb.RangeFeedRequest.SerializeToString,
        response_deserializer=pb.RangeFeedEvents.FromString,
    )
