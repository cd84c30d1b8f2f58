"""The server side of the ``RangeFeed`` gRPC stream: many registrations on one stream.

A client opens one bidirectional stream per node. Each ``RangeFeedRegister`` message
registers a span under the client's tag; every event of every registration goes into one
:class:`~feedkv.rangefeed.stream.EventStream`, and the handler sends what it holds in
batches (at most ``MAX_BATCH_EVENTS`` events or about ``MAX_BATCH_BYTES`` per message).
``checkpoints_only`` asks for checkpoints without values; older clients never set it and
get values, as before.
When the client closes the stream, its registrations are unregistered; when the node
stops, every registration's ``NODE_SHUTDOWN`` error is sent before the stream ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterator
from typing import Any

import grpc

from feedkv.errors import FeedKVError, InvalidArgumentError
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import parse_messages, span_from_proto, timestamp_from_proto
from feedkv.rangefeed.event import ErrorReason
from feedkv.rangefeed.registration import Registration, event_size
from feedkv.rangefeed.store_feeds import StoreFeeds
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.rangefeed.wire import event_to_proto
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MIN, Span

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_EVENTS", "RangeFeedService"]

log = logging.getLogger(__name__)

MAX_BATCH_EVENTS = 1000
MAX_BATCH_BYTES = 4 << 20
_POLL_S = 0.2


class RangeFeedService:
    def __init__(self, feeds: StoreFeeds) -> None:
        self.feeds = feeds

    def handler(self) -> grpc.RpcMethodHandler:
        return grpc.stream_stream_rpc_method_handler(
            self._serve,
            request_deserializer=None,  # parsed by _read (see kv.wire.parse_message)
            response_serializer=pb.RangeFeedEvents.SerializeToString,
        )

    def _serve(self, frames: Iterator[bytes], context: Any) -> Iterator[pb.RangeFeedEvents]:
        stream = self.feeds.new_stream()
        regs: dict[int, Registration] = {}
        client_done = threading.Event()
        malformed: list[str] = []
        reader = threading.Thread(
            target=self._read,
            args=(
                parse_messages(pb.RangeFeedRequest, frames),
                stream,
                regs,
                client_done,
                malformed,
            ),
            name="feedkv-rangefeed-reader",
            daemon=True,
        )
        reader.start()
        try:
            while context.is_active():
                items = stream.take_batches(_POLL_S)
                if items:
                    yield from _batches(items)
                elif client_done.is_set() or self.feeds.closed:
                    break
        finally:
            for reg in list(regs.values()):
                self.feeds.unregister(reg)
            stream.close()
        if malformed:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, malformed[0])

    def _read(
        self,
        requests: Iterator[pb.RangeFeedRequest],
        stream: EventStream,
        regs: dict[int, Registration],
        client_done: threading.Event,
        malformed: list[str],
    ) -> None:
        """Registers and unregisters as the client asks; bytes that are not a request
        stop the reading, and ``malformed`` gets the reason."""
        try:
            for msg in requests:
                kind = msg.WhichOneof("kind")
                if kind == "register":
                    regs[msg.register.tag] = self._register(msg.register, stream)
                elif kind == "unregister":
                    reg = regs.pop(msg.unregister.tag, None)
                    if reg is not None:
                        self.feeds.unregister(reg)
        except grpc.RpcError:
            pass  # the client went away; the handler cleans up
        except InvalidArgumentError as exc:
            malformed.append(str(exc))
        finally:
            client_done.set()

    def _register(self, msg: pb.RangeFeedRegister, stream: EventStream) -> Registration:
        try:
            span = span_from_proto(msg.span)
            start_ts = timestamp_from_proto(msg.start_ts)
        except (InvalidArgumentError, ValueError) as exc:
            return _refused(msg.tag, stream, ErrorReason.INVALID_REQUEST, str(exc))
        try:
            return self.feeds.register(
                msg.tag, span, start_ts, msg.with_diff, stream, values=not msg.checkpoints_only
            )
        except InvalidArgumentError as exc:
            return _refused(msg.tag, stream, ErrorReason.INVALID_REQUEST, str(exc))
        except FeedKVError as exc:
            return _refused(msg.tag, stream, ErrorReason.NODE_SHUTDOWN, str(exc))


def _refused(tag: int, stream: EventStream, reason: ErrorReason, message: str) -> Registration:
    """A registration that ends before it starts, so the client hears why."""
    reg = Registration(tag, Span(KEY_MIN, b"\x00"), Timestamp(0, 0), False, stream)
    reg.end(reason, message)
    return reg


def _batches(items: list[tuple[Hashable, StreamItem]]) -> Iterator[pb.RangeFeedEvents]:
    batch = pb.RangeFeedEvents()
    size = 0
    for tag, item in items:
        for event in item.values if isinstance(item, ValueBatch) else (item,):
            event_to_proto(tag, event, batch.events.add())  # type: ignore[arg-type]
            size += event_size(event)
            if len(batch.events) >= MAX_BATCH_EVENTS or size >= MAX_BATCH_BYTES:
                yield batch
                batch = pb.RangeFeedEvents()
                size = 0
    if batch.events:
        yield batch
