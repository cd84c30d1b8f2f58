"""The client side of the node's gRPC service (a :class:`feedkv.kv.router.Transport`).

Batches travel on one stream per transport, a connection to the node's batch port
(:mod:`feedkv.kv.batch_socket`, and :mod:`feedkv.kv.server` for why a stream): each gets
a call number and waits for its answer, and the batches that queue up while a message is
being sent go together in the next one, so many callers share the cost of each message.
A lone caller's batch takes the stream too: a unary gRPC ``Batch`` call (which the node
still serves) cost it twice the time and three times the client's CPU (one session of
single-row puts: 1.1-1.3 ms and 240 us against 0.6-0.7 ms and 80 us, the node 550 us
against 260).

When the stream breaks, every batch waiting on it fails (a write as ambiguous: it may
have been applied) and the next batch opens a new stream. When the node ends the stream
itself, draining, or the stream never connected, the batches it did not answer were not
applied. The node checks a stream's credentials before each message of batches, as it
checks each gRPC call's: once they no longer pass (a password changed, a user dropped),
it ends the stream, and the batches it did not answer fail with
:class:`~feedkv.errors.PermissionDeniedError`. So that a hello's credentials never expire
in use, a stream takes new batches for ``STREAM_LIFETIME_S``; the next batch then opens
another, and the old one closes once its batches are answered.

A batch sent from a context whose caller may give up on it
(:data:`~feedkv.kv.cancellation.GIVE_UP`: a SQL statement that a client may cancel)
carries a token, and while it waits, every ``WATCH_S`` the transport's watch thread asks
whether its caller gave up; once it has, it calls ``CancelCall`` with the token, and the
caller waits on for the node's answer (see :mod:`feedkv.kv.cancellation`).
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import socket
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import grpc
import msgpack

from feedkv.errors import (
    AmbiguousResultError,
    InvalidArgumentError,
    NodeUnavailableError,
    PermissionDeniedError,
    RequestCanceledError,
)
from feedkv.kv.address import host_port, node_url_params, split_host_port
from feedkv.kv.api import (
    BatchRequest,
    BatchResponse,
    ConditionalPut,
    DeleteRange,
    EndTxn,
    HeartbeatTxn,
    Ingest,
    Merge,
    PushTxn,
    Put,
    ResolveIntent,
    Split,
)
from feedkv.kv.batch_socket import BATCHES, CallStream, StreamEnded, StreamRetired, greet
from feedkv.kv.cancellation import GIVE_UP, GiveUpWatch
from feedkv.kv.framed_socket import connect
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import (
    MAX_MESSAGE_BYTES,
    SERVICE,
    batch_request_to_proto,
    batch_response_from_proto,
    timestamp_from_proto,
)
from feedkv.security.call_auth import SessionClaims
from feedkv.security.tls import ClientTLS, call_metadata, open_channel
from feedkv.util.hlc import Timestamp

__all__ = ["GrpcTransport", "await_ready", "login", "unanswered", "url_tls"]

# How often a batch that waits for its answer asks whether its caller gave up.
WATCH_S = 0.1
# A stream takes new calls this long, then the next call opens another (whose hello
# carries fresh credentials: the node checks a stream's before each message, and a
# certificate claim expires after CERT_TOKEN_S).
STREAM_LIFETIME_S = 60.0
CANCEL_TIMEOUT_S = 2.0

log = logging.getLogger(__name__)

_MUTATIONS = (
    Put,
    ConditionalPut,
    DeleteRange,
    Ingest,
    EndTxn,
    HeartbeatTxn,
    PushTxn,
    ResolveIntent,
    Split,
    Merge,
)


def url_tls(
    url: str,
    certs_dir: str | Path | None = None,
    user: str | None = None,
    password: str | None = None,
) -> ClientTLS | None:
    """The TLS identity to dial ``url`` with: ``certs_dir`` (or the URL's
    ``?certs_dir=``) as ``user`` (or the URL's ``user=``, else root), proven by its
    client certificate, or by ``password`` when given; ``None``: plaintext, for an
    insecure node."""
    params = node_url_params(url)
    certs = certs_dir if certs_dir is not None else params.get("certs_dir")
    if certs is None:
        if password is not None:
            raise InvalidArgumentError(
                "a password is sent only over TLS: give certs_dir= (a directory with the "
                "cluster's ca.crt)"
            )
        return None
    return ClientTLS.load(certs, user or params.get("user") or "root", password=password)


def login(channel: grpc.Channel, user: str, password: str) -> tuple[str, float]:
    """Log ``user`` in at the node behind ``channel``: ``(session token, seconds it
    lives)``; :class:`PermissionDeniedError` for a wrong user name or password."""
    stub = channel.unary_unary(f"/{SERVICE}/Login")
    try:
        reply = stub(msgpack.packb({"user": user, "password": password}), timeout=10.0)
    except grpc.RpcError as exc:
        _raise_denied(exc)
        raise NodeUnavailableError(f"Login call failed: {_details(exc)}") from exc
    answer = msgpack.unpackb(reply)
    return str(answer["token"]), float(answer["lifetime_s"])


class GrpcTransport:
    """One channel to one node. Connecting waits up to ``connect_timeout_s`` for the node
    and raises :class:`NodeUnavailableError` if it does not answer. ``tls``: connect
    with TLS as that identity (a secure node refuses plaintext)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        connect_timeout_s: float = 5.0,
        tls: ClientTLS | None = None,
    ) -> None:
        self.address = host_port(host, port)
        self.tls = tls
        self._connect_timeout_s = connect_timeout_s
        self._channel = open_channel(
            self.address,
            [
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
            tls,
        )
        channel = self._channel
        claims = tls.claims() if tls is not None else None
        if isinstance(claims, SessionClaims):
            claims.attach(lambda user, password: login(channel, user, password))
        failed = await_ready(self._channel, connect_timeout_s)
        if failed is not None:
            # NB: closed on a thread of its own: a channel whose state was watched closes
            # only once gRPC's watcher wakes (0.2 s), which a refused dial need not wait
            threading.Thread(target=self._channel.close, name="feedkv-close", daemon=True).start()
            raise unanswered(self.address, failed, tls)
        self._cancel_call = self._channel.unary_unary(
            f"/{SERVICE}/CancelCall",
            request_serializer=pb.CancelCallRequest.SerializeToString,
            response_deserializer=pb.CancelCallResponse.FromString,
        )
        self._now = self._channel.unary_unary(
            f"/{SERVICE}/Now",
            request_serializer=pb.NowRequest.SerializeToString,
            response_deserializer=pb.NowResponse.FromString,
        )
        self._stream_lock = threading.Lock()  # guards the one below
        self._stream: CallStream | None = None
        self._watch = GiveUpWatch(self._cancel, WATCH_S)
        # A batch's cancel token: this transport's secret prefix and a count, unique and
        # not to be guessed by other clients. NB: not os.urandom per batch: a system
        # call lets the GIL go, and with 32 sessions in the process each statement then
        # waited to get it back (1.7 more context switches a statement, 15-20% of a
        # gRPC client's CPU a commit)
        self._token_prefix = os.urandom(8)
        self._token_counts = itertools.count(1)

    @property
    def channel(self) -> grpc.Channel:
        """The channel, for services of layers above (rangefeeds) to share."""
        return self._channel

    def send(self, batch: BatchRequest) -> BatchResponse:
        give_up = GIVE_UP.get()
        token = b""
        if give_up is not None:
            token = self._token_prefix + next(self._token_counts).to_bytes(8, "big")
            self._watch.watch(token, give_up)
        try:
            reply = self._send_streamed(batch, token)
        finally:
            if give_up is not None:
                self._watch.unwatch(token)
        try:
            return batch_response_from_proto(reply)
        except RequestCanceledError:
            if give_up is not None:
                give_up()  # the caller's own error (a statement's 57014, and why)
            raise

    def _send_streamed(self, batch: BatchRequest, token: bytes) -> pb.BatchResponse:
        """``batch`` on the stream, with ``token`` for ``CancelCall`` if its caller may
        give up on it."""
        one = pb.BatchCalls()
        request = one.calls.add().request
        batch_request_to_proto(batch, request)
        request.cancel_token = token
        try:
            while True:
                try:
                    reply = self._open_stream().call(one)
                    break
                except StreamRetired:
                    continue  # nothing was sent: on the stream that replaced it
        except StreamEnded as exc:
            if exc.denied:  # its credentials no longer pass: the call was not applied
                raise PermissionDeniedError(str(exc)) from exc
            if exc.maybe_applied:
                raise self._translate(exc, batch) from exc
            raise NodeUnavailableError(f"node {self.address}: {exc}") from exc
        return reply

    def _cancel(self, token: bytes) -> None:
        """Ask the node to give up the call of ``token`` (without waiting: on the watch
        thread); a call that fails is asked again at the next watch."""
        request = pb.CancelCallRequest(token=token)
        try:
            done = self._cancel_call.future(
                request, timeout=CANCEL_TIMEOUT_S, metadata=call_metadata(self._channel)
            )
        except (grpc.RpcError, ValueError) as exc:  # a closed channel
            log.debug("CancelCall to %s failed: %s", self.address, exc)
            return
        done.add_done_callback(self._cancel_done)

    def _cancel_done(self, done: Any) -> None:
        if done.exception() is not None:
            log.debug("CancelCall to %s failed: %s", self.address, done.exception())

    def _open_stream(self) -> CallStream:
        """The open stream, or a new one (:class:`NodeUnavailableError` if it cannot be
        opened: nothing was sent) once it ended or lived ``STREAM_LIFETIME_S``."""
        stream = self._stream
        if stream is None or stream.ended or time.monotonic() - stream.opened > STREAM_LIFETIME_S:
            with self._stream_lock:
                stream = self._stream
                if stream is not None and not stream.ended:
                    if time.monotonic() - stream.opened <= STREAM_LIFETIME_S:
                        return stream
                    stream.retire()
                stream = self._stream = self._connect_stream()
        return stream

    def _connect_stream(self) -> CallStream:
        """A connection to the node's batch port carrying this transport's batches."""
        return CallStream(
            *dial_stream(self._channel, self.address, self.tls, self._connect_timeout_s, BATCHES)
        )

    def now(self) -> Timestamp:
        try:
            reply = self._now(pb.NowRequest(), metadata=call_metadata(self._channel))
        except grpc.RpcError as exc:
            _raise_denied(exc)
            raise NodeUnavailableError(f"node {self.address}: {_details(exc)}") from exc
        return timestamp_from_proto(reply.now)

    def _translate(self, exc: Any, batch: BatchRequest) -> Exception:
        _raise_denied(exc)
        if _never_sent(exc):
            return NodeUnavailableError(f"node {self.address} is unreachable: {_details(exc)}")
        if any(isinstance(r, _MUTATIONS) for r in batch.requests):
            return AmbiguousResultError(
                f"the connection to {self.address} failed during a write ({_details(exc)}); "
                "it may or may not have been applied"
            )
        return NodeUnavailableError(f"node {self.address}: {_details(exc)}")

    def close(self) -> None:
        self._watch.close()
        with self._stream_lock:
            if self._stream is not None:
                self._stream.close()
        self._channel.close()


def dial_stream(
    channel: grpc.Channel, address: str, tls: ClientTLS | None, timeout_s: float, stream: str
) -> tuple[socket.socket, BinaryIO]:
    """A connection to the batch port of the node at the other end of ``channel``, whose
    gRPC port is at ``address`` (its ``BatchPort`` call names the port, on the same
    host), welcomed for a ``stream`` whose hello carries what the channel's calls carry;
    and its reader. Raises :class:`~feedkv.errors.NodeUnavailableError` (nothing was
    sent), or :class:`~feedkv.errors.PermissionDeniedError` (the node refused the
    caller)."""
    found = split_host_port(address)
    host = found[0] if found is not None else address
    metadata = call_metadata(channel)
    try:
        answer = channel.unary_unary(f"/{SERVICE}/BatchPort")(
            b"", timeout=timeout_s, metadata=metadata
        )
        port = int(msgpack.unpackb(answer)["port"])
    except grpc.RpcError as exc:
        _raise_denied(exc)
        raise NodeUnavailableError(
            f"the node at {address} is unavailable: asked for its batch port, {_details(exc)}"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise NodeUnavailableError(
            f"the node at {address} named a malformed batch port: {exc!r}"
        ) from exc
    sock = connect(host, port, tls, timeout_s, "the batch port")
    try:
        return sock, greet(sock, metadata, stream)
    except StreamEnded as exc:
        if exc.denied:
            raise PermissionDeniedError(str(exc)) from exc
        raise NodeUnavailableError(f"node {host_port(host, port)}: {exc}") from exc
    except (OSError, ValueError) as exc:  # ssl.SSLError too; a welcome not msgpack
        raise NodeUnavailableError(f"node {host_port(host, port)}: {exc}") from exc


_FAILED_AT_ONCE = "the connection failed at once (refused, or its TLS handshake failed)"


def unanswered(address: str, failed: str, tls: ClientTLS | None) -> NodeUnavailableError:
    """The error of a dial to ``address`` that :func:`await_ready` says ``failed``, with
    what to check: whether a node runs there, and whether it and the dial agree on TLS."""
    hint = (
        "is `feedkv start` running there, and does it trust this certificate "
        f"(TLS as {tls.user!r}, CA {tls.certs.ca_cert})?"
        if tls is not None
        else "is `feedkv start` running there? (a secure node needs its CA: "
        "--certs-dir on the command line, certs_dir= in a URL or feedkv.connect)"
    )
    if failed == _FAILED_AT_ONCE:
        failed = _why_not(address)
    return NodeUnavailableError(f"no feedkv node answered at {address}: {failed}; " + hint)


def _why_not(address: str) -> str:
    """Why a dial to ``address`` failed at once, as a plain connection finds it: gRPC
    says only that it did (a name that does not resolve, nothing listening, and a
    port that speaks something else all look alike to it)."""
    found = split_host_port(address)
    if found is None:
        return _FAILED_AT_ONCE
    host, port = found
    try:
        with socket.create_connection((host, port), timeout=2):
            pass
    except socket.gaierror as exc:
        return f"the host name {host!r} does not resolve ({exc.strerror})"
    except ConnectionRefusedError:
        return "the connection was refused: nothing listens there"
    except OSError as exc:
        return f"the connection failed: {exc.strerror or exc}"
    return (
        "something listens there but did not answer as a node's gRPC port does (is it "
        "another port of the node, such as its SQL port, or does one side use TLS and "
        "the other not?)"
    )


def await_ready(channel: grpc.Channel, timeout_s: float) -> str | None:
    """Connect ``channel``: ``None`` once it is ready, else why not. A connection that
    fails at once (refused: nothing listens there, as when a node's process died on a
    live host; or its TLS handshake failed) fails the wait at once, where gRPC would
    keep retrying it until the timeout; a host that does not answer costs the timeout."""
    states: queue.SimpleQueue[grpc.ChannelConnectivity] = queue.SimpleQueue()
    channel.subscribe(states.put, try_to_connect=True)
    deadline = time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                state = states.get(timeout=left)
            except queue.Empty:
                break
            if state is grpc.ChannelConnectivity.READY:
                return None
            if state in (
                grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                grpc.ChannelConnectivity.SHUTDOWN,
            ):
                return _FAILED_AT_ONCE
    finally:
        channel.unsubscribe(states.put)
    return f"nothing within {timeout_s:g} s"


def _raise_denied(exc: Any) -> None:
    """A call the node refused for who made it (its answer names the rule)."""
    code = exc.code() if hasattr(exc, "code") else None
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        raise PermissionDeniedError(_details(exc)) from exc


def _never_sent(exc: Any) -> bool:
    """Whether a call failed before it reached the node: no connection could be made
    (gRPC's pick failure), so nothing was applied and another replica may be tried."""
    code = exc.code() if hasattr(exc, "code") else None
    return code == grpc.StatusCode.UNAVAILABLE and "failed to connect to all addresses" in (
        _details(exc)
    )


def _details(exc: Any) -> str:
    details = exc.details() if hasattr(exc, "details") else None
    return str(details or exc)
