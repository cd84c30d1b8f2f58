"""Length-prefixed frames on a TCP connection, opened as gRPC opens its own.

Why a plain socket beside gRPC at all: a message on grpcio's sync stream costs ~55-70 µs
of CPU on each side (measured against ~10 µs for a frame on a plain socket), almost all
of it thread hand-offs inside grpcio. The connections that carry many small messages
(Raft's between nodes, :mod:`feedkv.server.raft_socket`; a client's concurrent batches,
:mod:`feedkv.kv.batch_socket`) so use frames on a socket of their own.

A frame is a 4-byte big-endian length and that many bytes. A connection is opened the
way the gRPC channel to the same node is: through the HTTP proxy ``grpc_proxy`` names
when it is set (every connection between nodes takes one way, which
:mod:`feedkv.testing.partition` cuts), and with TLS when the channel has it, the node
proven by the cluster's CA and its host name.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
from typing import BinaryIO
from urllib.parse import urlsplit

from feedkv.errors import NodeUnavailableError
from feedkv.kv.address import host_port
from feedkv.security.tls import ClientTLS

__all__ = ["connect", "frame", "read_frame"]

_LENGTH = struct.Struct(">I")
_PROXY_HEAD_LIMIT = 8192  # a CONNECT answer's head


def frame(body: bytes) -> bytes:
    """``body`` as one frame."""
    return _LENGTH.pack(len(body)) + body


def read_frame(reader: BinaryIO, limit: int) -> bytes | None:
    """The next frame's body (``None``: the connection ended between frames); raises
    :class:`ConnectionError` when it ends inside one, or a length is beyond ``limit``
    (not a sender of these frames, or a message larger than the receiver takes)."""
    head = reader.read(_LENGTH.size)
    if not head:
        return None
    if len(head) < _LENGTH.size:
        raise ConnectionError("the connection ended inside a frame's length")
    (size,) = _LENGTH.unpack(head)
    if size > limit:
        raise ConnectionError(f"a frame of {size} bytes: more than {limit}")
    body = reader.read(size)
    if len(body) < size:
        raise ConnectionError("the connection ended inside a frame")
    return body


def connect(
    host: str, port: int, tls: ClientTLS | None, timeout: float, what: str
) -> socket.socket:
    """A connection to ``host:port`` (TLS as ``tls``, plaintext when ``None``) whose
    sends and receives time out after ``timeout``. Raises
    :class:`~feedkv.errors.NodeUnavailableError` naming ``what`` was dialed."""
    try:
        sock = _open(host, port, timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = tls.ssl_context().wrap_socket(sock, server_hostname=host)
    except (OSError, ssl.SSLError) as exc:
        raise NodeUnavailableError(f"cannot connect to {what} {host}:{port}: {exc}") from exc
    return sock


def _open(host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to ``host:port``, through ``grpc_proxy`` when it is set (as
    gRPC's own, :func:`~feedkv.security.tls.open_channel`). Raises :class:`OSError`."""
    proxy = os.environ.get("grpc_proxy")  # noqa: SIM112 (gRPC reads it so)
    if not proxy:
        return socket.create_connection((host, port), timeout=timeout)
    parts = urlsplit(proxy)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout)
    try:
        target = host_port(host, port)
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        # NB: nothing follows the answer's head before this side speaks (the receiver
        # sends nothing first, TLS included), so reading past it loses nothing
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(1024)
            if not chunk or len(head) > _PROXY_HEAD_LIMIT:
                raise ConnectionError(f"the proxy {proxy} ended the CONNECT to {target}")
            head += chunk
        status = head.split(b"\r\n", 1)[0].split()
        if len(status) < 2 or status[1] != b"200":
            raise ConnectionError(f"the proxy {proxy} refused the CONNECT to {target}: {head!r}")
    except BaseException:
        sock.close()
        raise
    return sock
