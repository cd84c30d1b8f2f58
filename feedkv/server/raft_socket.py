"""The connection that carries Raft messages from one node to another: a TCP socket.

Why not a gRPC stream: a request on grpcio's sync stream costs ~55-70 µs of CPU on each
side (measured against ~10 µs for a length-prefixed frame on a plain socket), almost all
of it thread hand-offs (the channel's thread that pulls the request iterator, the one
that completes each send, the server's poller waking the handler), and a replicated
commit makes about three of them. Here the sending node's thread for the peer writes its
frames itself and the receiving node's thread for the connection reads them itself.

A frame is a 4-byte big-endian length and that many bytes of msgpack: one request as
:class:`~feedkv.server.raft_transport.RaftTransport` makes them. The first frame of a
connection is its hello, ``{"from": node id, "auth": metadata}``: on a secure cluster the
connection is TLS (the receiver proven by its ``node.crt``, as gRPC's channels prove it)
and ``auth`` is the metadata a gRPC call to the same node would carry, a claim for that
node signed with the sender's certificate key, checked by the node's
:class:`~feedkv.security.call_auth.CallVerifier` and its user against
:data:`~feedkv.kv.access.ADMIN_USERS`, as every gRPC call between nodes is. A connection
lives at most ``STREAM_LIFETIME_S`` (the sender then opens another), so its credentials
are checked again at least that often. The receiver sends nothing back.

A node listens for these on a port of its own (``feedkv start --raft-addr``; by default
any free port on its gRPC host); a sender asks for it with the node's ``RaftPort`` gRPC
call each time it connects (one unary call a minute), rather than the port being
gossiped with the node's address: the node descriptor and its encoding stay as they
are, and a node restarted on another port is found again at once.

A node whose gRPC goes through a proxy (``grpc_proxy`` set: gRPC then opens each
connection with an HTTP ``CONNECT``) opens its Raft connections through it too, so that
every connection between nodes takes one way (:mod:`feedkv.testing.partition` cuts nodes
apart there).
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any, BinaryIO

import msgpack

from feedkv.errors import NodeUnavailableError, PermissionDeniedError
from feedkv.kv.access import ADMIN_USERS
from feedkv.kv.framed_socket import FramedListener, connect, frame
from feedkv.kv.framed_socket import read_frame as read_any_frame
from feedkv.security.call_auth import Metadata
from feedkv.security.tls import ClientTLS, ServerTLS

__all__ = ["MAX_FRAME", "RaftListener", "dial", "frame", "read_frame"]

log = logging.getLogger(__name__)

MAX_FRAME = 64 << 20  # larger than any request (CHUNK_BYTES and its envelope)


def read_frame(reader: BinaryIO) -> bytes | None:
    """The next frame's body (``None``: the connection ended between frames); raises
    :class:`ConnectionError` when it ends inside one, or a length is beyond
    :data:`MAX_FRAME` (not a sender of these frames)."""
    return read_any_frame(reader, MAX_FRAME)


def dial(
    host: str, port: int, node_id: int, auth: Metadata | None, tls: ClientTLS | None, timeout: float
) -> socket.socket:
    """A connection to the Raft port ``port`` of the node at ``host``, its hello sent
    (``auth``: what proves this node, ``None`` on a plaintext cluster). Sends on it time out
    after ``timeout``. Raises :class:`~feedkv.errors.NodeUnavailableError`."""
    sock = connect(host, port, tls, timeout, "the Raft port")
    hello = {"from": node_id, "auth": list(auth) if auth is not None else None}
    try:
        sock.sendall(frame(msgpack.packb(hello)))
    except (OSError, ssl.SSLError) as exc:
        sock.close()
        raise NodeUnavailableError(f"cannot connect to the Raft port {host}:{port}: {exc}") from exc
    return sock


class RaftListener:
    """Takes other nodes' Raft connections on ``host`` and ``port`` (0: any free one; the
    one taken is :attr:`port`), a thread per connection handing each request (unpacked)
    to ``on_request``, which runs on that thread. ``tls``: check each connection's hello
    as a gRPC call between nodes is checked (``None``: plaintext, no check). Raises
    :class:`OSError` when it cannot listen there."""

    def __init__(
        self,
        host: str,
        tls: ServerTLS | None,
        on_request: Callable[[dict[str, Any]], None],
        *,
        port: int = 0,
    ) -> None:
        self._tls = tls
        self._on_request = on_request
        self._listener = FramedListener(host, port, tls, self._serve, name="raft", join=True)
        self.port = self._listener.port

    @property
    def connections(self) -> int:
        """How many other nodes' connections this node is taking now."""
        return self._listener.connections

    def stop(self) -> None:
        """Close the port and every connection (their senders drop what they held, as on
        a lost connection, and connect to this node's next life); returns once their
        threads ended. Idempotent."""
        self._listener.stop()

    def _serve(self, sock: socket.socket, peer: Any) -> None:
        # NB: the reader holds the socket open: it is closed with it
        with sock.makefile("rb") as reader:
            hello = read_frame(reader)
            if hello is None:
                return
            try:
                self._check(msgpack.unpackb(hello))
            except PermissionDeniedError as exc:
                log.warning("refused a Raft connection from %s: %s", peer, exc)
                return
            sock.settimeout(None)
            while (data := read_frame(reader)) is not None:
                self._on_request(msgpack.unpackb(data))

    def _check(self, hello: dict[str, Any]) -> None:
        """Raises :class:`~feedkv.errors.PermissionDeniedError` unless the hello proves a
        node (or root) of this cluster."""
        if self._tls is None:
            return
        auth = hello.get("auth") or []
        user = self._tls.verifier.caller([(str(k), v) for k, v in auth])
        if user not in ADMIN_USERS:
            raise PermissionDeniedError(f"user {user!r} may not send Raft messages")
