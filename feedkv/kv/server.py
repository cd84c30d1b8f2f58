"""The node's gRPC service and batch port: the batch API over the wire.

Each batch is decoded (:mod:`feedkv.kv.wire`), applied through the store and its
response encoded. A feedkv error, including a malformed request, is returned inside the
response (``BatchResponse.error``) so the client can raise the same class. Bytes that do
not parse as a message are answered the same way on ``Batch``, and end a stream as
malformed after the calls read before them are answered. Either way the node keeps
serving.

Batches arrive two ways. ``Batch`` is one unary gRPC call per batch, for other clients
(feedkv's own sends every batch on its stream). A stream carries a client's batches,
many to a message both ways when it sends them concurrently, one stream per client, on
the node's batch port (:mod:`feedkv.kv.batch_socket`:
framed messages on a TCP connection, which cost a fraction of a gRPC stream's). A gRPC
call costs Python about 0.3 ms of CPU on each side, more than applying a small batch,
so 32 clients doing unary calls cannot pass ~3,000 calls/s on two cores; on a stream
the cost is shared by the batches that travel together. The stream's reader starts each
batch in the store, and the batch is answered as soon as it is applied, whatever the
order.

Stopping drains: a stream stops reading, answers every batch it read, and announces its
end; a batch it never read was never applied, and the client reports it as such.
The server refuses new calls, before evaluating anything (a batch is answered with
:class:`~feedkv.errors.NodeUnavailableError`, so its client sends it elsewhere rather
than report it as ambiguous), and waits for those in flight, up to the grace; its port
closes after them, once no call came for a moment (``QUIET_S``), and the batch port
with it, so a stop lasts as long as its slowest call in flight, not the whole grace. A
stream of a layer above on the batch port (a client's rangefeeds) counts as a call in
flight: that layer ends it before the stop (the node's feeds end ``NODE_SHUTDOWN``).
"""

from __future__ import annotations

import contextlib
import logging
import operator
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, NamedTuple

import grpc
import msgpack

from feedkv.errors import (
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
    PermissionDeniedError,
)
from feedkv.kv.access import ADMIN_USERS, USER_METHODS, ReadAccess, reads_of
from feedkv.kv.address import host_port
from feedkv.kv.api import BatchRequest, BatchResponse
from feedkv.kv.batch_socket import BATCHES, BatchListener, Opener, Served
from feedkv.kv.cancellation import CallCancels
from feedkv.kv.command import Applied
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.store import Store
from feedkv.kv.wire import (
    MAX_MESSAGE_BYTES,
    SERVICE,
    batch_request_from_proto,
    batch_response_to_proto,
    error_to_proto,
    parse_message,
    parse_messages,
    timestamp_to_proto,
)
from feedkv.security.call_auth import AUDIENCE_METHOD, Metadata
from feedkv.security.tls import AuthenticatedContext, ServerTLS, peer_user
from feedkv.storage.engine import Completion

__all__ = ["ADMIN_USERS", "NodeServer", "StreamOpener", "guarded_handlers", "listen"]

log = logging.getLogger(__name__)

# A reply message holds the answers ready when it is sent, up to about this many bytes.
MAX_REPLIES_BYTES = 4 << 20
# A stream's calls read and not yet answered: at this many its reader stops reading until
# answers leave, so a client that sends calls and reads no answers is held back by TCP
# rather than holding the node's memory.
MAX_CALLS_IN_FLIGHT = 4096
_POLL_S = 0.2
DRAINING = "the node is draining (shutting down)"  # a call refused meanwhile is told so
# A draining server stops once no call came for QUIET_S (waiting at most QUIET_MAX_S for
# that, after the calls in flight ended): the clients still sent here (by a stale cache)
# are refused, and learn where to go, before gRPC's stop cuts off whatever arrives (a
# cancellation: a write then ends ambiguous)
QUIET_S = 0.1
QUIET_MAX_S = 1.0
# NB: refused while draining by its handler (in its answer), which its client reads as
# nothing applied
_BATCHES = frozenset({"Batch"})
# Checks a batch before it is applied (raises PermissionDeniedError); None: any batch.
BatchCheck = Callable[[BatchRequest], None] | None
# Serves a stream of a layer above on the batch port for a user (None: a plaintext node)
# for as long as it is entered (see NodeServer's ``more_streams``).
StreamOpener = Callable[[str | None], AbstractContextManager[Served]]


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
        tls: ServerTLS | None = None,
        access: ReadAccess | None = None,
        batch_listen: tuple[str, int] | None = None,
        more_streams: dict[str, StreamOpener] | None = None,
    ) -> None:
        """``more_methods`` adds methods served by layers above, ``more_streams`` streams
        on the batch port (the rangefeeds'): each opener makes the served side of a
        stream for the user its hello proves (``None`` on a plaintext node), who may
        open it as it may call :data:`USER_METHODS`. ``tls``: serve TLS, every call from
        a client certificate of :data:`ADMIN_USERS` (``None``: plaintext, every call
        taken). ``access``: with ``tls``, other users may also call
        :data:`USER_METHODS` to read what it allows (see :mod:`feedkv.kv.access`;
        ``None``: they may call nothing). ``batch_listen``: the host and port of the
        batch port (``None``: any free port of ``host``). Raises
        :class:`~feedkv.errors.NodeUnavailableError` when it cannot listen on either."""
        self.store = store
        self._tls = tls
        self._access = access
        self._draining = threading.Event()
        self._in_flight = threading.Condition()  # guards the count below
        self._counted = 0  # calls in flight
        self._arrived = 0.0  # when the last of them came (monotonic)
        self._calls = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="feedkv-call")
        self._cancels = CallCancels()  # the batches their clients may give up on
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
                request_deserializer=None,  # parsed by _batch (see wire.parse_message)
                response_serializer=pb.BatchResponse.SerializeToString,
            ),
            "BatchPort": grpc.unary_unary_rpc_method_handler(
                self._batch_port,
                request_deserializer=None,
                response_serializer=None,
            ),
            "CancelCall": grpc.unary_unary_rpc_method_handler(
                self._cancel_call,
                request_deserializer=pb.CancelCallRequest.FromString,
                response_serializer=pb.CancelCallResponse.SerializeToString,
            ),
            "Now": grpc.unary_unary_rpc_method_handler(
                self._now,
                request_deserializer=pb.NowRequest.FromString,
                response_serializer=pb.NowResponse.SerializeToString,
            ),
            **(more_methods or {}),
        }
        if tls is not None:
            users = USER_METHODS if access is not None else frozenset()
            handlers = guarded_handlers(handlers, tls, users)
        handlers = {
            name: self._count(handler, refuse=name not in _BATCHES)
            for name, handler in handlers.items()
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),)
        )
        self.port = listen(self._server, host, port, tls)
        self.host = host
        batch_host, batch_port = batch_listen or (host, 0)
        try:
            openers: dict[str, Opener] = {
                name: partial(self._guarded_stream, name, open)
                for name, open in (more_streams or {}).items()
            }
            openers[BATCHES] = self._socket_stream
            self._batch_listener = BatchListener(batch_host, tls, openers, port=batch_port)
        except OSError as exc:
            self._server.stop(None)
            where = host_port(batch_host, batch_port)
            raise NodeUnavailableError(
                f"cannot listen on {where} (the batch port): {exc.strerror}"
            ) from exc

    def start(self) -> None:
        self._server.start()

    @property
    def draining(self) -> bool:
        """Whether :meth:`stop` began: new calls are refused, those in flight go on."""
        return self._draining.is_set()

    def stop(self, grace_s: float = 10.0, *, end_streams: Callable[[], None] | None = None) -> None:
        """Refuse new calls, let calls in flight finish (up to ``grace_s``), then call
        ``end_streams()`` (it ends what this server does not serve but must outlast its
        calls: other nodes' Raft connections) and return once every call ended (those
        still running at the grace are cancelled).

        NB: the port stays open until the calls in flight end and none came for
        ``QUIET_S`` (up to ``QUIET_MAX_S`` more), and a call arriving meanwhile is
        refused here, before anything is evaluated, in words its client can act on: a
        batch as :class:`~feedkv.errors.NodeUnavailableError` (nothing applied: send it
        elsewhere), a stream's batches by its clean end, another call as
        ``UNAVAILABLE``. gRPC's own refusal of a call that races its stop is a
        cancellation, which a client cannot tell from a write cut off mid-way
        (ambiguous); only calls in that last moment still meet it, when clients sent
        here by stale caches stopped coming."""
        self._draining.set()
        deadline = time.monotonic() + grace_s
        with self._in_flight:
            while self._counted and (left := deadline - time.monotonic()) > 0:
                self._in_flight.wait(left)
            settled_by = min(deadline, time.monotonic() + QUIET_MAX_S)
            while (quiet := self._arrived + QUIET_S - time.monotonic()) > 0 and (
                left := settled_by - time.monotonic()
            ) > 0:
                self._in_flight.wait(min(quiet, left))
        self._batch_listener.stop()
        stopped = self._server.stop(max(0.0, deadline - time.monotonic()))
        if end_streams is not None:
            end_streams()
        stopped.wait()
        self._calls.shutdown(wait=True)

    def _count(self, handler: grpc.RpcMethodHandler, *, refuse: bool) -> grpc.RpcMethodHandler:
        """``handler`` with its calls counted from their start until gRPC ends them
        (answered, failed or cancelled: a stop waits for them); ``refuse``: a call that
        arrives while the node drains is refused as ``UNAVAILABLE`` (see :meth:`stop`)."""

        def leave() -> None:
            with self._in_flight:
                self._counted -= 1
                self._in_flight.notify_all()

        def counted(behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
            def call(request: Any, context: Any) -> Any:
                if refuse and self._draining.is_set():
                    context.abort(grpc.StatusCode.UNAVAILABLE, DRAINING)
                with self._in_flight:
                    self._counted += 1
                    self._arrived = time.monotonic()
                # NB: by gRPC's callback, not a finally: a stream's generator left in a
                # reference cycle would run its finally only when the collector finds it
                if not context.add_callback(leave):
                    leave()  # it ended already
                return behavior(request, context)

            return call

        kinds = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
        replaced = {
            kind: counted(behavior)
            for kind in kinds
            if (behavior := getattr(handler, kind)) is not None
        }
        wrapped: grpc.RpcMethodHandler = handler._replace(**replaced)
        return wrapped

    def wait(self) -> None:
        self._server.wait_for_termination()

    def _check(self, context: Any) -> BatchCheck:
        """What each batch of this call's caller must pass: nothing for the nodes and
        root (and on a plaintext node), else its :meth:`ReadAccess.check`."""
        return self._check_for(peer_user(context))

    def _check_for(self, user: str | None) -> BatchCheck:
        if self._tls is None or self._access is None:
            return None  # NB: with tls and no access, only admins got this far
        if user is None or user in ADMIN_USERS:
            return None
        access = self._access

        def check(batch: BatchRequest) -> None:
            try:
                reads = reads_of(batch)
            except PermissionDeniedError as exc:
                raise PermissionDeniedError(f"user {user}: {exc}") from None
            access.check(user, reads)

        return check

    def _batch(self, data: bytes, context: Any) -> pb.BatchResponse:
        response = pb.BatchResponse()
        check = self._check(context)

        def send() -> BatchResponse:
            if self._draining.is_set():
                raise NodeUnavailableError(f"{DRAINING}: the batch was not applied")
            msg = parse_message(pb.BatchRequest, data)
            batch = batch_request_from_proto(msg)
            if check is not None:
                check(batch)
            if msg.cancel_token:
                return self._cancels.run(msg.cancel_token, partial(self.store.send, batch))
            return self.store.send(batch)

        _respond(response, send)
        return response

    def _socket_stream(self, metadata: Metadata) -> AbstractContextManager[Served]:
        """A client's batch stream on the batch port (:mod:`feedkv.kv.batch_socket`),
        its hello's ``metadata`` checked as a stream of a layer above is (the refusals
        name it ``BatchStream``) as it opens, and again before each message of calls it
        reads (as each gRPC call's is: a password changed, a user dropped, a certificate
        revoked or credentials expired end the stream, ``denied``)."""
        return self._guarded_stream("BatchStream", partial(self._batches, metadata), metadata)

    def _batches(self, metadata: Metadata, user: str | None) -> AbstractContextManager[Served]:
        still = partial(self._caller, metadata, "BatchStream") if self._tls is not None else None
        served = _ServedStream(
            self.store,
            self._calls,
            self._cancels,
            self._draining,
            self._check_for(user),
            still_allowed=still,
        )
        return contextlib.nullcontext(served)

    def _caller(self, metadata: Metadata, stream: str) -> str:
        """The user whose ``metadata`` opens a ``stream`` (raises as the gRPC guard
        would)."""
        assert self._tls is not None
        try:
            return self._tls.verifier.caller(metadata)
        except PermissionDeniedError as exc:
            raise PermissionDeniedError(f"{stream}: {exc}") from None

    @contextlib.contextmanager
    def _guarded_stream(
        self, name: str, open: StreamOpener, metadata: Metadata
    ) -> Iterator[Served]:
        """A stream on the batch port (``open`` makes its served side), opened for the
        user the hello's ``metadata`` proves (``None`` on a plaintext node), who may open
        it as it may call :data:`USER_METHODS`; counted as a call in flight while it
        lasts (a stop waits for it: a layer above ends its own streams first)."""
        user = None
        if self._tls is not None:
            user = self._caller(metadata, name)
            if user not in ADMIN_USERS and self._access is None:
                raise PermissionDeniedError(_raw_kv_refusal(name, user))
        with self._in_flight:
            self._counted += 1
            self._arrived = time.monotonic()
        try:
            with open(user) as served:
                yield served
        finally:
            with self._in_flight:
                self._counted -= 1
                self._in_flight.notify_all()

    def _batch_port(self, request: bytes, context: Any) -> bytes:
        return bytes(msgpack.packb({"port": self._batch_listener.port}))

    def _cancel_call(self, msg: pb.CancelCallRequest, context: Any) -> pb.CancelCallResponse:
        return pb.CancelCallResponse(running=self._cancels.cancel(msg.token))

    def _now(self, msg: pb.NowRequest, context: Any) -> pb.NowResponse:
        return pb.NowResponse(now=timestamp_to_proto(self.store.clock.now()))


def _respond(out: pb.BatchResponse, respond: Callable[[], BatchResponse]) -> None:
    """Put ``respond()``'s response, or the error it raised, into ``out``."""
    try:
        batch_response_to_proto(respond(), out)
    except FeedKVError as exc:
        # NB: answered here, so its traceback goes: it holds this frame, whose
        # ``respond`` may hold the attempt that holds the error (a cycle for the GC).
        exc.__traceback__ = None
        error_to_proto(exc, out.error)
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        exc.__traceback__ = None
        error_to_proto(InvalidArgumentError(f"malformed request: {exc}"), out.error)


class _Call(NamedTuple):
    """A streamed call being applied: its first attempt, and what gives its response once
    that completes (raising the batch's error)."""

    id: int
    attempt: Completion[Applied]
    finish: Callable[[], BatchResponse]


def _start(store: Store, msg: pb.BatchCall, check: BatchCheck, cancels: CallCancels) -> _Call:
    """Decode the call's batch, check it, and start it in ``store`` (its client may give
    up on it through ``cancels``); a batch that does not decode, or is refused (or could
    not be checked), gets a failed attempt."""
    try:
        batch = batch_request_from_proto(msg.request)
        if check is not None:
            check(batch)
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        failed = Completion.failed(InvalidArgumentError(f"malformed request: {exc}"))
        return _Call(msg.id, failed, lambda: failed.result().response)
    except FeedKVError as exc:  # refused, or the grants could not be read
        exc.__traceback__ = None
        refused: Completion[Applied] = Completion.failed(exc)
        return _Call(msg.id, refused, lambda: refused.result().response)
    attempt = store.start(batch)
    finish = partial(store.finish, batch, attempt)
    token = msg.request.cancel_token
    return _Call(msg.id, attempt, partial(cancels.run, token, finish) if token else finish)


class _ServedStream:
    """One client's batch stream (:class:`~feedkv.kv.batch_socket.Served`).

    :meth:`read` decodes each call and starts it in the store, so a write goes straight
    to the commit queue from the reader thread; the commit thread hands the outcome back.
    :meth:`replies` answers the calls as they complete, many to a message; a call that
    met a conflict (an intent to push, a timestamp to move) is finished on the call pool,
    where it may wait. While ``MAX_CALLS_IN_FLIGHT`` calls wait for their answers to
    leave, :meth:`read` reads no more. The stream ends once the client is done, or the
    node drains, and every call read has been answered. If it stopped reading for a
    reason of the stream's, :attr:`end` says which (the kinds of
    :mod:`feedkv.kv.batch_socket`): bytes that were not a message (``malformed``), or a
    caller whose credentials no longer pass (``denied``) or cannot be checked now
    (``unavailable``); it checks them before each message of calls, with
    ``still_allowed``, which raises as the gRPC guard would.
    """

    def __init__(
        self,
        store: Store,
        pool: ThreadPoolExecutor,
        cancels: CallCancels,
        draining: threading.Event,
        check: BatchCheck = None,
        *,
        still_allowed: Callable[[], object] | None = None,
    ) -> None:
        self._store = store
        self._still_allowed = still_allowed
        self._cancels = cancels
        self._check = check
        self._pool = pool
        self._draining = draining
        self._done: queue.SimpleQueue[_Call | _Reply | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_flight: set[int] = set()  # ids of the calls read and not yet answered
        self._room = threading.Condition(self._lock)  # answers left: the reader may read
        self._client_done = False
        self._ended = False
        self.end: tuple[str, str] | None = None  # why it stopped reading, if it did

    def read(self, frames: Iterator[bytes]) -> None:
        store = self._store
        done = self._done
        try:
            for frame in parse_messages(pb.BatchCalls, frames):
                if self._still_allowed is not None:
                    try:
                        self._still_allowed()
                    except PermissionDeniedError as exc:
                        self.end = ("denied", str(exc))
                        return
                    except FeedKVError as exc:  # the caller cannot be checked now
                        self.end = ("unavailable", str(exc))
                        return
                for msg in frame.calls:
                    with self._lock:
                        while len(self._in_flight) >= MAX_CALLS_IN_FLIGHT and not (
                            self._ended or self._draining.is_set()
                        ):
                            self._room.wait(_POLL_S)
                        if self._ended or self._draining.is_set():
                            return  # unread calls: the client learns they were not applied
                        if msg.id in self._in_flight:
                            # NB: its answer could not be told from the first call's
                            raise InvalidArgumentError(
                                f"malformed stream: call id {msg.id} is already in flight"
                            )
                        self._in_flight.add(msg.id)
                    call = _start(store, msg, self._check, self._cancels)
                    call.attempt.add_done_callback(partial(done.put, call))
        except InvalidArgumentError as exc:
            self.end = ("malformed", str(exc))
        finally:
            with self._lock:
                self._client_done = True
            done.put(None)  # wake replies() to see it

    def _finish(self, call: _Call) -> None:
        """On the call pool: resolve the call's conflicts, then answer it."""
        self._done.put(_Reply(call.id, _reply(call)))

    def _answer(self, item: _Call | _Reply | None) -> _Reply | None:
        """The serialized reply to ``item`` if it is ready; else hands it to the call
        pool."""
        if item is None or isinstance(item, _Reply):
            return item
        if not self._store.settled(item.attempt):
            self._pool.submit(self._finish, item)
            return None
        return _Reply(item.id, _reply(item))

    def direct(self, send_now: Callable[[bytes], bool]) -> None:
        """Answers leave in :meth:`replies` only."""

    def replies(self) -> Iterator[bytes]:
        """Serialized ``BatchReplies`` messages: each reply is serialized on its own and
        the message is their concatenation (how protobuf merges repeated fields), so no
        reply is copied and each message's size is known as it grows."""
        done = self._done
        while True:
            try:
                item = done.get(timeout=_POLL_S)
            except queue.Empty:
                item = None
            replies: list[_Reply] = []
            size = 0
            while True:
                reply = self._answer(item)
                if reply is not None:
                    replies.append(reply)
                    size += len(reply.data)
                if size >= MAX_REPLIES_BYTES:
                    break
                try:
                    item = done.get_nowait()
                except queue.Empty:
                    break
            with self._lock:
                self._in_flight.difference_update(map(_reply_id, replies))
                self._room.notify()
                if not self._in_flight and (self._client_done or self._draining.is_set()):
                    self._ended = True
            if replies:
                yield b"".join(map(_reply_data, replies))
            if self._ended:
                return


class _Reply(NamedTuple):
    id: int
    data: bytes  # a serialized BatchReplies of one reply


# NB: C-level getters: a generator over a message's replies resumed once per reply
_reply_id = operator.itemgetter(0)
_reply_data = operator.itemgetter(1)


def _reply(call: _Call) -> bytes:
    """The call's answer, serialized as a ``BatchReplies`` message of one reply."""
    one = pb.BatchReplies()
    _respond(one.replies.add(id=call.id).response, call.finish)
    return one.SerializeToString()


def _login(tls: ServerTLS, data: bytes, context: Any) -> bytes:
    """``Login``: a password for a session token (:mod:`feedkv.security.call_auth`)."""
    try:
        request = msgpack.unpackb(data)
        user, password = request["user"], request["password"]
        if not isinstance(user, str) or not isinstance(password, str):
            raise TypeError("user and password must be strings")
    except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed Login request: {exc}")
    host = context.peer().rpartition(":")[0]
    try:
        token, lifetime_s = tls.verifier.login(user, password, host)
    except PermissionDeniedError as exc:
        log.warning("refused a gRPC login as %r from %s: %s", user, host, exc)
        context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
    except FeedKVError as exc:  # the user's record could not be read
        context.abort(grpc.StatusCode.UNAVAILABLE, f"cannot log in now: {exc}")
    return bytes(msgpack.packb({"token": token, "lifetime_s": lifetime_s}))


def listen(server: grpc.Server, host: str, port: int, tls: ServerTLS | None) -> int:
    """Make ``server`` listen on ``host:port`` (port 0: any free one), with ``tls`` or
    in plaintext; returns the port, or raises
    :class:`~feedkv.errors.NodeUnavailableError` saying why it cannot."""
    address = host_port(host, port)
    try:
        if tls is None:
            bound: int = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, tls.grpc_credentials())
    except RuntimeError as exc:
        raise NodeUnavailableError(f"cannot listen on {address}: {exc}") from exc
    if bound == 0:
        raise NodeUnavailableError(f"cannot listen on {address}: the address is in use")
    return bound


def guarded_handlers(
    handlers: dict[str, grpc.RpcMethodHandler],
    tls: ServerTLS,
    for_users: frozenset[str] = frozenset(),
) -> dict[str, grpc.RpcMethodHandler]:
    """``handlers`` with each call's credentials checked (methods in ``for_users``: any
    user; the others: :data:`ADMIN_USERS`), plus the methods a client calls to get
    credentials: ``Login`` and the audience of certificate claims."""
    guarded = {name: _guarded(name, h, tls, name in for_users) for name, h in handlers.items()}
    guarded["Login"] = grpc.unary_unary_rpc_method_handler(
        partial(_login, tls),
        request_deserializer=None,  # msgpack, read by _login
        response_serializer=None,
    )
    # what certificate claims must be made for: no secret (a claim also needs the
    # user's key), and the client asks before it can make one
    guarded[AUDIENCE_METHOD] = grpc.unary_unary_rpc_method_handler(
        lambda request, context: tls.verifier.audience.encode(),
        request_deserializer=None,
        response_serializer=None,
    )
    return guarded


def _raw_kv_refusal(method: str, user: str) -> str:
    return (
        f"{method}: the raw KV API is only for nodes and root; user {user!r} "
        "must use SQL (the SQL port), or read the tables it may SELECT"
    )


def _guarded(
    method: str, handler: grpc.RpcMethodHandler, tls: ServerTLS, for_users: bool
) -> grpc.RpcMethodHandler:
    """``handler`` with each call's credentials checked first (see
    :mod:`feedkv.security.call_auth`), then its user against :data:`ADMIN_USERS` (or,
    when ``for_users``, any user: the handler checks what it reads); the handler gets
    the context as an :class:`AuthenticatedContext`."""
    kinds = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
    behaviors = {kind: getattr(handler, kind) for kind in kinds}
    verifier = tls.verifier

    def guarded(behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def call(request: Any, context: Any) -> Any:
            try:
                user = verifier.caller(context.invocation_metadata())
            except PermissionDeniedError as exc:
                log.warning("refused %s from %s: %s", method, context.peer(), exc)
                context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{method}: {exc}")
            except FeedKVError as exc:  # the user's record could not be read
                context.abort(grpc.StatusCode.UNAVAILABLE, f"{method}: {exc}")
            if user not in ADMIN_USERS and not for_users:
                log.warning("refused %s from %s (user %r)", method, context.peer(), user)
                context.abort(grpc.StatusCode.PERMISSION_DENIED, _raw_kv_refusal(method, user))
            return behavior(request, AuthenticatedContext(context, user))

        return call

    replaced = {kind: guarded(b) for kind, b in behaviors.items() if b is not None}
    return handler._replace(**replaced)
