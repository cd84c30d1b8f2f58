"""``nodelocal://<node>/<path>`` on another node: the files of a directory below that
node's external I/O directory, written through its ``Blob`` methods, as CockroachDB's
blob service carries a ``nodelocal`` sink's files to the node the URI names, whichever
node runs the job.

This module is both sides' messages and the caller's :class:`NodeBlobs` (a
:class:`~feedkv.changefeed.sinks.cloud_storage.BlobStore`); the node serves them in
:mod:`feedkv.server.blob_service`. ``BlobPut`` streams a file in pieces of
:data:`PIECE_BYTES` (a file may be larger than a gRPC message); ``Blob`` reads, renames,
deletes and lists. The methods are internal: on a secure node only nodes and root may
call them. A node that cannot be reached is a retryable :class:`SinkError` (the
changefeed waits for it, as for any sink that is down); a refusal (the path leaves the
directory, the node has none) is terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import msgpack

from feedkv.changefeed.sink import SinkError, TerminalSinkError
from feedkv.errors import InvalidArgumentError, InvariantViolation, NodeUnavailableError
from feedkv.kv.gateway import Gateway
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.router import Transport
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import call_metadata

__all__ = [
    "BLOB_METHOD",
    "OPS",
    "PIECE_BYTES",
    "PUT_METHOD",
    "BlobRequest",
    "NodeBlobs",
    "dialled_blobs",
]

BLOB_METHOD = "Blob"
PUT_METHOD = "BlobPut"
OPS = ("get", "rename", "delete", "list", "put")
PIECE_BYTES = 1 << 20  # a file travels in pieces of this size at most
_TIMEOUT_S = 30.0
# What no retry changes: the node refused the caller or the request.
_TERMINAL = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)


@dataclass(frozen=True, slots=True)
class BlobRequest:
    """``op`` on ``name`` (``rename``: to ``to``; ``list``: the names under the folder
    ``name``) in ``directory``, a path below the node's external I/O directory."""

    op: str
    directory: str
    name: str
    to: str = ""

    @classmethod
    def parse(cls, raw: bytes) -> BlobRequest:
        """:class:`InvalidArgumentError` names what is wrong with ``raw``."""
        try:
            msg = msgpack.unpackb(raw)
        except (ValueError, msgpack.UnpackException) as exc:
            raise InvalidArgumentError(f"{BLOB_METHOD}: not a message: {exc}") from None
        if not isinstance(msg, dict) or set(msg) != {"op", "dir", "name", "to"}:
            raise InvalidArgumentError(f"{BLOB_METHOD}: expected op, dir, name and to")
        if not all(isinstance(value, str) for value in msg.values()):
            raise InvalidArgumentError(f"{BLOB_METHOD}: op, dir, name and to are strings")
        if msg["op"] not in OPS:
            raise InvalidArgumentError(
                f"{BLOB_METHOD}: op {msg['op']!r} is not one of {', '.join(OPS)}"
            )
        if not msg["dir"] or "\0" in "".join(msg.values()):
            raise InvalidArgumentError(f"{BLOB_METHOD}: dir must be a path, without NUL bytes")
        return cls(msg["op"], msg["dir"], msg["name"], msg["to"])

    def encode(self) -> bytes:
        message = {"op": self.op, "dir": self.directory, "name": self.name, "to": self.to}
        return msgpack.packb(message)  # type: ignore[no-any-return]


class NodeBlobs:
    """The directory ``directory`` below node ``node_id``'s external I/O directory,
    reached over ``channel()`` (asked at each call, so a node that restarted elsewhere
    is found again)."""

    def __init__(self, channel: Callable[[], grpc.Channel], node_id: int, directory: str) -> None:
        self._channel = channel
        self.node_id = node_id
        self.directory = directory

    def put(self, name: str, data: bytes) -> None:
        def pieces() -> Iterator[bytes]:
            yield BlobRequest("put", self.directory, name).encode()
            for at in range(0, len(data), PIECE_BYTES):
                yield data[at : at + PIECE_BYTES]

        self._call("put", name, lambda channel, metadata: _put(channel, pieces(), metadata))

    def get(self, name: str) -> bytes | None:
        reply = self._unary(BlobRequest("get", self.directory, name))
        data = reply.get("data")
        return data if isinstance(data, bytes) else None

    def rename(self, name: str, new_name: str) -> None:
        self._unary(BlobRequest("rename", self.directory, name, new_name))

    def delete(self, name: str) -> None:
        self._unary(BlobRequest("delete", self.directory, name))

    def list(self, prefix: str) -> list[str]:
        names = self._unary(BlobRequest("list", self.directory, prefix)).get("names", [])
        return [name for name in names if isinstance(name, str)]

    def close(self) -> None:
        pass  # the channel is the dialler's, shared with the node's other calls

    def _unary(self, request: BlobRequest) -> dict[str, Any]:
        def send(channel: grpc.Channel, metadata: Any) -> bytes:
            stub = channel.unary_unary(f"/{SERVICE}/{BLOB_METHOD}")
            reply: bytes = stub(request.encode(), timeout=_TIMEOUT_S, metadata=metadata)
            return reply

        reply = msgpack.unpackb(self._call(request.op, request.name, send))
        return reply if isinstance(reply, dict) else {}

    def _call(self, op: str, name: str, send: Callable[[grpc.Channel, Any], bytes]) -> bytes:
        where = f"nodelocal://{self.node_id}/{self.directory}"
        try:
            channel = self._channel()
            return send(channel, call_metadata(channel))
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            error = TerminalSinkError if code in _TERMINAL else SinkError
            raise error(f"{op} {name!r} in {where}: node n{self.node_id}: {details}") from None
        except NodeUnavailableError as exc:  # the node is not known or cannot be dialled now
            raise SinkError(f"{op} {name!r} in {where}: {exc}") from exc


def dialled_blobs(dial: Callable[[int], Transport]) -> Callable[[int, str], NodeBlobs]:
    """Directories below other nodes' external I/O directories, each node reached as
    ``dial`` reaches it (a node's cluster, or a client's :class:`ClusterDialer`)."""

    def blobs(node_id: int, directory: str) -> NodeBlobs:
        def channel() -> grpc.Channel:
            transport = dial(node_id)
            if isinstance(transport, Gateway):  # the client's own node, wherever it is now
                transport = transport.transport
            if not isinstance(transport, GrpcTransport):
                raise InvariantViolation(f"node n{node_id} is dialled without gRPC")
            return transport.channel

        return NodeBlobs(channel, node_id, directory)

    return blobs


def _put(channel: grpc.Channel, pieces: Iterator[bytes], metadata: Any) -> bytes:
    stub = channel.stream_unary(f"/{SERVICE}/{PUT_METHOD}")
    reply: bytes = stub(pieces, timeout=_TIMEOUT_S, metadata=metadata)
    return reply
