"""The node's gRPC service: the batch API over the wire.

Each ``Batch`` call decodes the request (:mod:`feedkv.kv.wire`), applies it through the
store and encodes the response. A feedkv error, including a malformed request, is
returned inside the response (``BatchResponse.error``) so the client can raise the same
class; a request the server cannot even parse is rejected by gRPC itself. Either way the
node keeps serving.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from feedkv.errors import FeedKVError, InvalidArgumentError, NodeUnavailableError
from feedkv.kv.address import host_port
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.store import Store
from feedkv.kv.wire import (
    batch_request_from_proto,
    batch_response_to_proto,
    error_to_proto,
    timestamp_to_proto,
)

__all__ = ["MAX_MESSAGE_BYTES", "NodeServer", "SERVICE"]

log = logging.getLogger(__name__)

SERVICE = "feedkv.kv.Node"
MAX_MESSAGE_BYTES = 64 << 20


class NodeServer:
    """Serves ``store`` on ``host:port`` (port 0 picks a free one; see :attr:`port`)."""

    def __init__(
        self,
        store: Store,
        host: str,
        port: int,
        *,
        workers: int = 64,
        more_methods: dict[str, grpc.RpcMethodHandler] | None = None,
    ) -> None:
        """``more_methods`` adds methods served by layers above (the rangefeed stream)."""
        self.store = store
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="feedkv-rpc"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        handlers = {
            "Batch": grpc.unary_unary_rpc_method_handler(
                self._batch,
                request_deserializer=pb.BatchRequest.FromString,
                response_serializer=pb.BatchResponse.SerializeToString,
            ),
            "Now": grpc.unary_unary_rpc_method_handler(
                self._now,
                request_deserializer=pb.NowRequest.FromString,
                response_serializer=pb.NowResponse.SerializeToString,
            ),
            **(more_methods or {}),
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),)
        )
        address = host_port(host, port)
        try:
            self.port: int = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            raise NodeUnavailableError(f"cannot listen on {address}: {exc}") from exc
        if self.port == 0:
            raise NodeUnavailableError(f"cannot listen on {address}: the address is in use")
        self.host = host

    def start(self) -> None:
        self._server.start()

    def stop(self, grace_s: float = 10.0) -> None:
        """Refuse new calls, let calls in flight finish (up to ``grace_s``), then return."""
        self._server.stop(grace_s).wait()

    def wait(self) -> None:
        self._server.wait_for_termination()

    def _batch(self, msg: pb.BatchRequest, context: Any) -> pb.BatchResponse:
        try:
            batch = batch_request_from_proto(msg)
            return batch_response_to_proto(self.store.send(batch))
        except FeedKVError as exc:
            return _error_response(exc)
        except (KeyError, ValueError, TypeError, OverflowError) as exc:
            return _error_response(InvalidArgumentError(f"malformed request: {exc}"))

    def _now(self, msg: pb.NowRequest, context: Any) -> pb.NowResponse:
        return pb.NowResponse(now=timestamp_to_proto(self.store.clock.now()))


def _error_response(exc: FeedKVError) -> pb.BatchResponse:
    response = pb.BatchResponse()
    error_to_proto(exc, response.error)
    return response
