"""The node's side of ``Blob`` and ``BlobPut`` (:mod:`feedkv.changefeed.sinks.node_blobs`):
another node's changefeed writes, reads, renames, deletes and lists the files of a
``nodelocal://<this node>/<path>`` sink below this node's external I/O directory, each
path confined to it (:func:`~feedkv.security.external_io.confine`) as a local sink's is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import msgpack

from feedkv.changefeed.sink import SinkError, TerminalSinkError
from feedkv.changefeed.sinks.cloud_storage import LocalBlobs
from feedkv.changefeed.sinks.node_blobs import BLOB_METHOD, PUT_METHOD, BlobRequest
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.security.external_io import confine

__all__ = ["blob_handlers"]

# A put is written to a temporary file as its pieces come (the file appears whole, or
# not at all); one that grows past this is refused as it passes it.
_MAX_FILE_BYTES = 1 << 30


def blob_handlers(root: Path | None) -> dict[str, grpc.RpcMethodHandler]:
    """The two methods' handlers, serving below ``root`` (``None``: the node has no
    external I/O directory, and refuses every call)."""

    def serve(raw: bytes, context: Any) -> bytes:
        def run() -> dict[str, Any]:
            request = BlobRequest.parse(raw)
            blobs = _blobs(root, request)
            if request.op == "get":
                return {"data": blobs.get(request.name)}
            if request.op == "rename":
                blobs.rename(request.name, _name(blobs, request.to))
            elif request.op == "delete":
                blobs.delete(request.name)
            elif request.op == "list":
                return {"names": blobs.list(request.name)}
            else:
                raise InvalidArgumentError(f"{BLOB_METHOD}: a put goes through {PUT_METHOD}")
            return {}

        return _answer(context, run)

    def serve_put(pieces: Iterator[bytes], context: Any) -> bytes:
        def run() -> dict[str, Any]:
            request = BlobRequest.parse(next(pieces, b""))
            if request.op != "put":
                raise InvalidArgumentError(f"{PUT_METHOD}: the first message must be a put")
            _blobs(root, request).put_pieces(request.name, _bounded(pieces))
            return {}

        return _answer(context, run)

    return {
        BLOB_METHOD: grpc.unary_unary_rpc_method_handler(serve),
        PUT_METHOD: grpc.stream_unary_rpc_method_handler(serve_put),
    }


def _bounded(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """``pieces``, refused once they pass :data:`_MAX_FILE_BYTES`."""
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > _MAX_FILE_BYTES:
            raise InvalidArgumentError(f"{PUT_METHOD}: a file is at most {_MAX_FILE_BYTES} bytes")
        yield piece


def _blobs(root: Path | None, request: BlobRequest) -> LocalBlobs:
    """The directory ``request`` names below ``root``, its name checked to stay in it."""
    if root is None:
        raise TerminalSinkError(
            "this node has no external I/O directory: it keeps no nodelocal:// files"
        )
    blobs = LocalBlobs(str(confine(request.directory, root)))
    _name(blobs, request.name)
    return blobs


def _name(blobs: LocalBlobs, name: str) -> str:
    """``name``, if it stays within ``blobs``' directory."""
    confine(os.path.join(blobs.root, name), Path(blobs.root))
    return name


def _answer(context: Any, run: Callable[[], dict[str, Any]]) -> bytes:
    """``run()``'s answer, or the call aborted with the status its error maps to."""
    try:
        return msgpack.packb(run())  # type: ignore[no-any-return]
    except (InvalidArgumentError, SQLError, TerminalSinkError) as exc:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        raise  # unreachable: abort raises
    except SinkError as exc:
        context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        raise  # unreachable: abort raises
