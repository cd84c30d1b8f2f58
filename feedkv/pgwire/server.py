"""The SQL port: a TCP listener speaking the PostgreSQL v3 protocol, one thread per
connection, each running a :class:`~feedkv.pgwire.connection.Connection`.

A thread per connection because SQL sessions block (a statement waits on KV reads,
intents and commits), as the rest of the node does; an idle connection costs a thread
parked in ``recv``. Backpressure is the socket's: a client that stops reading blocks
its own thread in ``sendall``, and its connection reads nothing more meanwhile, so
nothing is buffered past one statement's result.

A protocol error or a dead peer ends that connection alone: its thread rolls back the
session's open transaction and closes the socket; the listener and the other
connections go on. CancelRequests arrive on connections of their own and are matched
to the connection with that process id and secret.

Draining (a node's drain) takes no new clients and ends each connection between
statements, as CockroachDB's drain does: a new connection is refused after its startup
message with a FATAL ``57P01 server is not accepting clients, try another node`` (the
listener stays open, so a client learns why rather than meeting a closed port); one
waiting for its client's next message ends at once, one running a statement once that
statement's answer is sent, each with a FATAL ``57P01 server is shutting down`` (a
driver reads it as the server going away, not as a statement that may or may not have
run) and TLS's close_notify. Stopping drains, then closes the listener. A sinkless changefeed
never ends by itself, so it is ended at once (with 57P01, not a cancel's 57014); a
statement still running at the grace's end is cancelled and its socket shut. NB: an
open transaction between statements is rolled back at once, where CockroachDB waits up
to ``server.shutdown.transactions.timeout`` for it.

TLS (a secure node): the first message must be an SSLRequest, answered ``S``, after
which the socket is wrapped and the startup goes on encrypted; the verified client
certificate's CN, if one was presented, is handed to the connection's authenticator.
A plaintext startup is refused (28000: connect with ``sslmode=verify-full``); a
CancelRequest (no session, only its secret) is taken in plaintext too, as PostgreSQL
does. An insecure node answers an SSLRequest ``N`` (in the connection).

Port choice (``feedkv start``): SQL clients connect on 26257 as to CockroachDB
(``postgresql://root@127.0.0.1:26257/defaultdb?sslmode=disable``); the gRPC port that
used to default to 26257 defaults to 26258, since grpcio cannot share its port with
another protocol without a proxy on every call's path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, Self

from cryptography import x509

from feedkv.errors import SQLError
from feedkv.pgwire import messages as m
from feedkv.pgwire.auth import Authenticator, LoopbackTrust, Refusing
from feedkv.pgwire.connection import Connection, SessionFactory
from feedkv.security.revocation import Revocations, revoked_message
from feedkv.util.cpu import counted

__all__ = ["PGServer"]

log = logging.getLogger(__name__)

_READ_BYTES = 1 << 16


class PGServer:
    """Serves SQL sessions made by ``sessions(user, database)`` on ``host:port`` (port
    0: any free one; :attr:`port` says which). ``authenticator(cert_user)`` makes each
    connection's authentication step, given the CN of the client certificate the TLS
    handshake verified (``None``: none; :class:`~feedkv.pgwire.auth.LoopbackTrust` by
    default). ``tls``: TLS connections only (``None``: plaintext)."""

    def __init__(
        self,
        sessions: SessionFactory,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        authenticator: Callable[[str | None], Authenticator] = LoopbackTrust,
        max_message_bytes: int = m.DEFAULT_MAX_MESSAGE_BYTES,
        tls: ssl.SSLContext | None = None,
        revocations: Revocations | None = None,
    ) -> None:
        """``revocations``: the revoked client certificates, refused (with TLS)."""
        self._sessions = sessions
        self._tls = tls
        self._revocations = revocations
        self._authenticator = authenticator
        self._max_message_bytes = max_message_bytes
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        self.host = host
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._connections: dict[int, tuple[Connection, socket.socket]] = {}
        self._threads: set[threading.Thread] = set()
        self._next_process_id = 1
        self._draining = False
        self._stopped = False
        # NB: written once by drain and never read, so it stays readable: it wakes every
        # TLS connection's thread (made before the drain) waiting for its client
        self._wake_read, self._wake_write = os.pipe()
        self._acceptor = threading.Thread(
            target=self._accept, name=f"pgwire-accept-{self.port}", daemon=True
        )

    def start(self) -> None:
        self._acceptor.start()

    @property
    def connections(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._connections)

    @property
    def running(self) -> int:
        """Connections running a query now (which a CancelRequest would stop)."""
        with self._lock:
            return sum(conn.busy for conn, _sock in self._connections.values())

    @property
    def draining(self) -> bool:
        """Whether the server takes no new clients (:meth:`drain`)."""
        return self._draining

    def drain(self, grace_s: float = 5.0) -> None:
        """Take no new clients (each is refused with 57P01, see the module docstring)
        and end every connection between statements (their open transactions roll
        back), waiting up to ``grace_s`` for the statements running; then cancel those
        left and close their sockets. The port stays open until :meth:`stop`.
        Idempotent."""
        with self._lock:
            if self._draining:
                return
            self._draining = True
            connections = list(self._connections.items())
            threads = list(self._threads)
        os.write(self._wake_write, b"\0")
        for _process_id, (conn, sock) in connections:
            if not conn.busy and not isinstance(sock, ssl.SSLSocket):
                # NB: wakes a plaintext connection waiting for its client's next bytes (it
                # reads the end of its input, then sees the drain); one running a
                # statement sees the drain after it, its input left open (a client's
                # next statement arriving at an input shut down was answered by a reset,
                # which lost it the 57P01 sent before it)
                _shut_input(sock)
            if conn.streaming:
                conn.shut_down()  # a streaming changefeed ends now: it would never finish
        deadline = time.monotonic() + grace_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = [self._connections.get(process_id) for process_id, _ in connections]
        for found in left:
            if found is not None:
                found[0].shut_down()
                _shut(found[1])
        for thread in threads:
            thread.join(grace_s)

    def stop(self, grace_s: float = 5.0) -> None:
        """:meth:`drain`, then close the port. Idempotent."""
        self.drain(grace_s)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        _shut(self._listener)
        self._listener.close()
        if self._acceptor.is_alive():
            self._acceptor.join(grace_s)
        with self._lock:
            threads = list(self._threads)
            refused = list(self._connections.values())  # NB: each waits for its startup
        for _conn, sock in refused:
            _shut(sock)
        for thread in threads:
            thread.join(grace_s)
        if not any(thread.is_alive() for thread in threads):
            os.close(self._wake_read)
            os.close(self._wake_write)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return  # the listener was closed: the server stops
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopped:
                    sock.close()
                    return
                process_id = self._next_process_id
                self._next_process_id += 1
                thread = threading.Thread(
                    target=counted(self._serve),
                    args=(sock, peer[0], process_id),
                    name=f"pgwire-conn-{process_id}",
                    daemon=True,
                )
                self._threads.add(thread)
            thread.start()

    def _serve(self, sock: socket.socket, peer_host: str, process_id: int) -> None:
        cert_user: str | None = None
        if self._tls is not None:
            try:
                secured = self._secure(sock, peer_host)
            except (OSError, ValueError) as exc:
                log.info("SQL connection from %s refused: TLS failed: %s", peer_host, exc)
                secured = None
            if secured is None:
                sock.close()
                with self._lock:
                    self._threads.discard(threading.current_thread())
                return
            sock, cert_user, revoked = secured
            if revoked is not None:
                refusal = Refusing(SQLError("28000", revoked), warn=True)
                self._run(sock, peer_host, process_id, None, refusal)
                return
        self._run(sock, peer_host, process_id, cert_user)

    def _secure(
        self, sock: socket.socket, peer_host: str
    ) -> tuple[socket.socket, str | None, str | None] | None:
        """The TLS step: ``(the wrapped socket, the client certificate's CN, why that
        certificate is refused: revoked)``, or ``None`` when the client would not speak
        TLS (it has been told why)."""
        if self._tls is None:
            raise RuntimeError("_secure without TLS")
        sock.settimeout(_HANDSHAKE_S)
        while True:
            head = _read_exactly(sock, 8)
            length, code = struct.unpack("!ii", head)
            if length == 8 and code == _GSSENC_REQUEST:
                sock.sendall(b"N")
                continue
            break
        if length == 8 and code == _SSL_REQUEST:
            sock.sendall(b"S")
            wrapped = self._tls.wrap_socket(sock, server_side=True)
            wrapped.settimeout(None)
            cert_user = _cert_user(wrapped.getpeercert())
            revoked = None
            if cert_user is not None and self._revocations is not None:
                der = wrapped.getpeercert(binary_form=True)
                serial = x509.load_der_x509_certificate(der).serial_number if der else 0
                if self._revocations.is_revoked(serial):
                    revoked = revoked_message(cert_user, serial)
            return wrapped, cert_user, revoked
        if length == 16 and code == _CANCEL_REQUEST:
            process_id, secret = struct.unpack("!ii", _read_exactly(sock, 8))
            self._cancel(process_id, secret)
            return None
        log.info("SQL connection from %s refused: plaintext to a secure node", peer_host)
        sock.sendall(
            m.error_response(
                "28000",
                "this node is secure and takes TLS connections only: connect with "
                "sslmode=verify-full (or require)",
                severity="FATAL",
            )
        )
        return None

    def _run(
        self,
        sock: socket.socket,
        peer_host: str,
        process_id: int,
        cert_user: str | None,
        authenticator: Authenticator | None = None,
    ) -> None:
        with self._lock:
            refused = self._draining
        if refused:
            authenticator = Refusing(_NOT_ACCEPTING)
        conn = Connection(
            self._sessions,
            authenticator or self._authenticator(cert_user),
            process_id=process_id,
            secret=secrets.randbits(31),
            peer_host=peer_host,
            on_cancel=self._cancel,
            send=sock.sendall,
            peer_gone=lambda: _peer_gone(sock),
            max_message_bytes=self._max_message_bytes,
            client_address=_address(sock, peer_host),
            terminate=lambda: _shut(sock),
        )
        with self._lock:
            self._connections[process_id] = (conn, sock)
        try:
            # NB: a connection the drain refuses is not woken by it: it reads its startup.
            # A plaintext one reads blocking, with no poll first (a system call and a wait
            # for the GIL less a statement: 7-8% more pgbench transactions/s), and the
            # drain ends its input; a TLS one polls its socket and the drain's pipe, as
            # ending a TLS connection's input under its reader breaks the connection.
            waiting = None
            if isinstance(sock, ssl.SSLSocket):
                waiting = _InputWait(sock, None if refused else self._wake_read)
            while not conn.closed:
                if (self._draining and not refused) or (waiting is not None and not waiting.wait()):
                    sock.sendall(_SHUTTING_DOWN)
                    break
                data = sock.recv(_READ_BYTES)
                if not data:
                    if self._draining and not refused:
                        sock.sendall(_SHUTTING_DOWN)
                    break
                out = conn.receive(data)
                if out:
                    sock.sendall(out)
        except OSError as exc:
            log.debug("SQL connection %d from %s ended: %s", process_id, peer_host, exc)
        except Exception:
            log.exception("SQL connection %d from %s failed", process_id, peer_host)
        finally:
            try:
                conn.close()
            finally:
                _close(sock)
                with self._lock:
                    self._connections.pop(process_id, None)
                    self._threads.discard(threading.current_thread())

    def _cancel(self, process_id: int, secret: int) -> None:
        with self._lock:
            found = self._connections.get(process_id)
        if found is not None and secrets.compare_digest(
            found[0].secret.to_bytes(4, signed=True), secret.to_bytes(4, signed=True)
        ):
            found[0].cancel()


_SHUTTING_DOWN = m.error_response("57P01", "server is shutting down", severity="FATAL")
_NOT_ACCEPTING = SQLError("57P01", "server is not accepting clients, try another node")
_HANDSHAKE_S = 10.0
_CLOSE_NOTIFY_S = 1.0  # how long a closing TLS connection waits for the peer's close_notify
# the request codes of the 8-byte messages that may precede TLS (as messages.py's)
_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102


class _InputWait:
    """Waits for a connection's next bytes from its client, or for the server to stop."""

    def __init__(self, sock: socket.socket, wake: int | None) -> None:
        """``wake``: readable once the server drains (``None``: not woken)."""
        self._sock = sock
        self._wake = wake
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        if wake is not None:
            self._poll.register(wake, select.POLLIN)

    def wait(self) -> bool:
        """Block until the client's bytes arrive (or its connection ends): ``True``;
        ``False`` once the server stops."""
        if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
            return True  # NB: decrypted already, so the raw socket may have nothing
        ready = dict(self._poll.poll())
        return self._wake not in ready


def _address(sock: socket.socket, host: str) -> str:
    """The client's ``host:port`` (its host alone if the socket no longer says)."""
    try:
        peer = sock.getpeername()
    except OSError:
        return host
    return f"{peer[0]}:{peer[1]}"


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("the client closed the connection during the TLS step")
        data += chunk
    return data


def _cert_user(cert: dict[str, Any] | None) -> str | None:
    """The CN of a verified client certificate (``None``: none was presented)."""
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return None


def _close(sock: socket.socket) -> None:
    """Close a connection's socket; a TLS one with TLS's close_notify first. NB: libpq
    (and any OpenSSL 3 client) reads an end of stream without one as an error: its
    cancel request, which waits for the server to close, failed with "SSL error:
    unexpected eof while reading" although the query was cancelled."""
    if isinstance(sock, ssl.SSLSocket):
        with contextlib.suppress(OSError, ValueError):
            sock.settimeout(_CLOSE_NOTIFY_S)
            sock = sock.unwrap()
    sock.close()


def _peer_gone(sock: socket.socket) -> bool:
    """Whether the client closed its end (or the connection broke): a peek that finds
    the end of the stream. Bytes waiting to be read mean it is still there (on a TLS
    socket the peek is of the raw stream: encrypted bytes count as well)."""
    try:
        return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _shut_input(sock: socket.socket) -> None:
    """Wake a thread blocked in ``recv`` on the plaintext ``sock``: it reads the end of
    its input."""
    with contextlib.suppress(OSError):  # not connected, or already closed
        sock.shutdown(socket.SHUT_RD)


def _shut(sock: socket.socket) -> None:
    """Wake a thread blocked in ``accept`` or ``recv`` on ``sock``."""
    with contextlib.suppress(OSError):  # not connected, or already closed
        sock.shutdown(socket.SHUT_RDWR)
