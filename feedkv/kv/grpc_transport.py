"""The client side of the node's gRPC service (a :class:`feedkv.kv.router.Transport`)."""

from __future__ import annotations

from typing import Any

import grpc

from feedkv.errors import AmbiguousResultError, NodeUnavailableError
from feedkv.kv.address import host_port
from feedkv.kv.api import (
    BatchRequest,
    BatchResponse,
    ConditionalPut,
    DeleteRange,
    EndTxn,
    HeartbeatTxn,
    Merge,
    PushTxn,
    Put,
    ResolveIntent,
    Split,
)
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.server import MAX_MESSAGE_BYTES, SERVICE
from feedkv.kv.wire import (
    batch_request_to_proto,
    batch_response_from_proto,
    timestamp_from_proto,
)
from feedkv.util.hlc import Timestamp

__all__ = ["GrpcTransport"]

_MUTATIONS = (
    Put,
    ConditionalPut,
    DeleteRange,
    EndTxn,
    HeartbeatTxn,
    PushTxn,
    ResolveIntent,
    Split,
    Merge,
)


class GrpcTransport:
    """One channel to one node. Connecting waits up to ``connect_timeout_s`` for the node
    and raises :class:`NodeUnavailableError` if it does not answer."""

    def __init__(self, host: str, port: int, *, connect_timeout_s: float = 5.0) -> None:
        self.address = host_port(host, port)
        self._channel = grpc.insecure_channel(
            self.address,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.enable_http_proxy", 0),
            ],
        )
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout_s)
        except grpc.FutureTimeoutError as exc:
            self._channel.close()
            raise NodeUnavailableError(
                f"no feedkv node answered at {self.address} within {connect_timeout_s:g} s; "
                "is `feedkv start` running there?"
            ) from exc
        self._batch = self._channel.unary_unary(
            f"/{SERVICE}/Batch",
            request_serializer=pb.BatchRequest.SerializeToString,
            response_deserializer=pb.BatchResponse.FromString,
        )
        self._now = self._channel.unary_unary(
            f"/{SERVICE}/Now",
            request_serializer=pb.NowRequest.SerializeToString,
            response_deserializer=pb.NowResponse.FromString,
        )

    @property
    def channel(self) -> grpc.Channel:
        """The channel, for services of layers above (rangefeeds) to share."""
        return self._channel

    def send(self, batch: BatchRequest) -> BatchResponse:
        msg = batch_request_to_proto(batch)
        try:
            reply = self._batch(msg)
        except grpc.RpcError as exc:
            raise self._translate(exc, batch) from exc
        return batch_response_from_proto(reply)

    def now(self) -> Timestamp:
        try:
            reply = self._now(pb.NowRequest())
        except grpc.RpcError as exc:
            raise NodeUnavailableError(f"node {self.address}: {_details(exc)}") from exc
        return timestamp_from_proto(reply.now)

    def _translate(self, exc: Any, batch: BatchRequest) -> Exception:
        if any(isinstance(r, _MUTATIONS) for r in batch.requests):
            return AmbiguousResultError(
                f"the connection to {self.address} failed during a write ({_details(exc)}); "
                "it may or may not have been applied"
            )
        return NodeUnavailableError(f"node {self.address}: {_details(exc)}")

    def close(self) -> None:
        self._channel.close()


def _details(exc: Any) -> str:
    details = exc.details() if hasattr(exc, "details") else None
    return str(details or exc)
