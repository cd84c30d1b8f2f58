"""Length-prefixed frames on a TCP connection, opened as gRPC opens its own.

Why a plain socket beside gRPC at all: a message on grpcio's sync stream costs ~55-70 µs
of CPU on each side (measured against ~10 µs for a frame on a plain socket), almost all
of it thread hand-offs inside grpcio. The connections that carry many small messages
(Raft's between nodes, :mod:`feedkv.server.raft_socket`; a client's concurrent batches
and its rangefeeds, :mod:`feedkv.kv.batch_socket`) so use frames on a socket of their
own.

A frame is a 4-byte big-endian length and that many bytes. A connection is opened the
way the gRPC channel to the same node is: through the HTTP proxy ``grpc_proxy`` names
when it is set (every connection between nodes takes one way, which
:mod:`feedkv.testing.partition` cuts), and with TLS when the channel has it, the node
proven by the cluster's CA and its host name. A node takes them with a
:class:`FramedListener`: a thread per connection, which reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import ssl
import struct
import termios
import threading
from collections.abc import Callable
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from feedkv.errors import FeedKVError, NodeUnavailableError
from feedkv.kv.address import host_port
from feedkv.security.tls import ClientTLS, ServerTLS
from feedkv.util.cpu import counted

__all__ = [
    "FRAME_HEAD_BYTES",
    "FramedListener",
    "connect",
    "frame",
    "queued_bytes",
    "read_frame",
    "send_room",
]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
FRAME_HEAD_BYTES = _LENGTH.size  # a frame's bytes beyond its body
_OUTQ = struct.Struct("i")  # what TIOCOUTQ answers
_PROXY_HEAD_LIMIT = 8192  # a CONNECT answer's head
_HELLO_TIMEOUT_S = 10.0  # for a new connection's handshake and hello


def frame(body: bytes) -> bytes:
    """``body`` as one frame."""
    return _LENGTH.pack(len(body)) + body


def send_room(sock: socket.socket) -> int:
    """The bytes a write may add to ``sock``'s send buffer without waiting: a quarter of
    the buffer, as the kernel counts its bookkeeping against it too."""
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 4


def queued_bytes(sock: socket.socket) -> int:
    """The bytes ``sock``'s send buffer holds now (sent but not yet acknowledged, or not
    yet sent); raises :class:`OSError` once it is closed."""
    return int(_OUTQ.unpack(fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, bytes(_OUTQ.size)))[0])


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


class FramedListener:
    """Takes connections on ``host`` and ``port`` (0: any free one; the one taken is
    :attr:`port`), TLS as ``tls`` (``None``: plaintext), a thread named ``name`` per
    connection running ``serve(sock, peer)``: its receives time out after 10 s (for the
    hello: ``serve`` lifts that once it has read it) and its sends go at once
    (``TCP_NODELAY``). A connection ends when ``serve`` returns or raises (an
    :class:`OSError`, :class:`ValueError` or :class:`~feedkv.errors.FeedKVError` is
    logged, as a connection's end). ``join``: :meth:`stop` waits for those threads.
    Raises :class:`OSError` when it cannot listen."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: ServerTLS | None,
        serve: Callable[[socket.socket, Any], None],
        *,
        name: str,
        join: bool,
    ) -> None:
        self._context = tls.ssl_context(client_certs=False) if tls is not None else None
        self._serve = serve
        self._name = name
        self._join = join
        family = socket.AF_INET6 if ":" in host else socket.AF_INET  # an IPv6 literal
        self._socket = socket.create_server((host, port), family=family)
        self.port: int = self._socket.getsockname()[1]
        self._lock = threading.Lock()  # guards the three below
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, name=f"{name}-listen", daemon=True)
        self._acceptor.start()

    @property
    def connections(self) -> int:
        """How many connections are open now."""
        with self._lock:
            return len(self._connections)

    def stop(self) -> None:
        """Close the port and cut every connection still open (their peers see it broken),
        then wait for the acceptor (and the connections' threads, if ``join``).
        Idempotent."""
        with self._lock:
            self._closed = True
            connections = list(self._connections)
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # NB: wakes the blocked accept()
        self._socket.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                # NB: the plain socket's shutdown, not SSLSocket's (which drops its TLS
                # state under the reader): it wakes the thread blocked in a receive
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
        self._acceptor.join()
        if self._join:
            for thread in self._threads:
                thread.join()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self._socket.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                thread = threading.Thread(
                    target=counted(self._carry),
                    args=(conn, peer),
                    name=f"{self._name}-in",
                    daemon=True,
                )
                if self._join:
                    self._threads = [t for t in self._threads if t.is_alive()]
                    self._threads.append(thread)
                self._connections.add(conn)
            thread.start()

    def _carry(self, conn: socket.socket, peer: Any) -> None:
        sock = conn
        try:
            conn.settimeout(_HELLO_TIMEOUT_S)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = self._handshake(conn)
            self._serve(sock, peer)
        except (OSError, ValueError, FeedKVError) as exc:  # ssl.SSLError is an OSError
            log.debug("a %s connection from %s ended: %s", self._name, peer, exc)
        finally:
            with self._lock:
                self._connections.discard(sock)
            sock.close()

    def _handshake(self, conn: socket.socket) -> socket.socket:
        if self._context is None:
            return conn
        tls_conn = self._context.wrap_socket(conn, server_side=True)
        with self._lock:
            # NB: stop() shuts down what it finds here: the TLS socket from now on. One
            # that ran during the handshake found ``conn`` handed over to it already, so
            # its shutdown missed: the connection ends here instead.
            self._connections.discard(conn)
            self._connections.add(tls_conn)
            if self._closed:
                raise ConnectionAbortedError("the listener stopped")
        return tls_conn
