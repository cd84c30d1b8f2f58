"""Rangefeed events and registrations as protobuf messages (see ``feedkv.proto``)."""

from __future__ import annotations

from feedkv.errors import InvalidArgumentError
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import span_from_proto, span_to_proto, timestamp_from_proto, timestamp_to_proto
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value

__all__ = ["event_from_proto", "event_to_proto"]


def event_to_proto(tag: int, event: Event, out: pb.RangeFeedEvent) -> None:
    out.tag = tag
    if isinstance(event, Value):
        msg = out.value
        msg.key = event.key
        if event.value is not None:
            msg.value.bytes = event.value
        timestamp_to_proto(event.ts, msg.ts)
        if event.prev_value is not None:
            msg.prev_value.bytes = event.prev_value
    elif isinstance(event, Checkpoint):
        span_to_proto(event.span, out.checkpoint.span)
        timestamp_to_proto(event.ts, out.checkpoint.ts)
    else:
        out.error.reason = event.reason.value
        out.error.message = event.message
        if event.threshold is not None:
            timestamp_to_proto(event.threshold, out.error.threshold)


def event_from_proto(msg: pb.RangeFeedEvent) -> Event:
    kind = msg.WhichOneof("kind")
    if kind == "value":
        value = msg.value
        return Value(
            value.key,
            value.value.bytes if value.HasField("value") else None,
            timestamp_from_proto(value.ts),
            value.prev_value.bytes if value.HasField("prev_value") else None,
        )
    if kind == "checkpoint":
        return Checkpoint(
            span_from_proto(msg.checkpoint.span), timestamp_from_proto(msg.checkpoint.ts)
        )
    if kind == "error":
        error = msg.error
        try:
            reason = ErrorReason(error.reason)
        except ValueError as exc:
            raise InvalidArgumentError(f"unknown rangefeed error reason {error.reason!r}") from exc
        threshold = timestamp_from_proto(error.threshold) if error.HasField("threshold") else None
        return Error(reason, error.message, threshold)
    raise InvalidArgumentError(f"a rangefeed event with no kind (tag {msg.tag})")
