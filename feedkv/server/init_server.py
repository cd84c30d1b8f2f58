"""Waiting for ``feedkv init``: how a node started with ``--join`` and an empty store
learns whether it joins a cluster or bootstraps one, as in CockroachDB.

Every node of a new cluster starts with the same ``--join`` list; none of them knows a
cluster yet, so none can hand out node ids. Each serves its gRPC port meanwhile (an
:class:`InitServer`, answering ``Init`` alone) and asks the nodes at ``--join`` to join
it, round after round, without a deadline. ``feedkv init --url feedkv://HOST:PORT`` calls
``Init`` on one of them: that node bootstraps the cluster (node 1, range r1) and, once its
real server listens on the same port, answers the others' ``Join``. A node whose join
round succeeded refuses ``Init`` with CockroachDB's message, as every member does
(:meth:`feedkv.server.cluster.Cluster.dispatch`).

NB: a join round and ``Init`` take one lock, so a node never both joins a cluster and
bootstraps another: ``Init`` waits for the round in flight (each call of it bounded by
``JOIN_CALL_S``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import msgpack

from feedkv.errors import NodeUnavailableError
from feedkv.kv.server import guarded_handlers, listen
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, ServerTLS
from feedkv.server.cluster import ALREADY_INITIALIZED, join_hint, join_once

__all__ = ["INIT_METHOD", "InitServer", "await_init"]

log = logging.getLogger(__name__)

INIT_METHOD = "Init"
JOIN_CALL_S = 2.0  # how long one node of a join round may take to answer
JOIN_POLL_S = 0.5  # how long a node waits between join rounds
_WAITING = "this node is waiting for `feedkv init`: it knows no cluster yet"


class InitServer:
    """The gRPC port of a node waiting for its cluster: ``Init`` asks it to bootstrap
    one; ``Join`` is refused as unavailable (the caller tries again later)."""

    def __init__(self, host: str, port: int, tls: ServerTLS | None) -> None:
        """``port`` 0 picks one (:attr:`port`); ``tls``: only root and the nodes may
        call (``None``: plaintext, anyone)."""
        self.lock = threading.Lock()  # held by a join round, and by Init
        self.init_requested = threading.Event()
        self.joined = False  # set under lock: Init is refused from then on
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=4, thread_name_prefix="feedkv-init"),
            options=[("grpc.so_reuseport", 0)],  # NB: as the node's server: a port is one node's
        )
        handlers = {
            INIT_METHOD: grpc.unary_unary_rpc_method_handler(self._init),
            "Join": grpc.unary_unary_rpc_method_handler(self._join),
        }
        if tls is not None:
            handlers = guarded_handlers(handlers, tls)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers), _Waiting())
        )
        self.port = listen(self._server, host, port, tls)
        self._server.start()

    def _init(self, data: bytes, context: Any) -> bytes:
        with self.lock:
            if self.joined:
                return msgpack.packb({"refused": ALREADY_INITIALIZED})  # type: ignore[no-any-return]
            self.init_requested.set()
        log.info("bootstrapping a new cluster, as `feedkv init` asked")
        return msgpack.packb({})  # type: ignore[no-any-return]

    def _join(self, data: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.UNAVAILABLE, _WAITING)
        raise NodeUnavailableError("unreachable: abort raises")

    def stop(self) -> None:
        """Close the port (an ``Init`` answered is sent first)."""
        self._server.stop(1.0).wait()


class _Waiting:
    """A gRPC generic handler: every other call (a client's batch, ``feedkv node
    status``) is refused as unavailable, saying why."""

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        def refuse(request: Any, context: Any) -> bytes:
            context.abort(grpc.StatusCode.UNAVAILABLE, _WAITING)
            raise NodeUnavailableError("unreachable: abort raises")

        return grpc.unary_unary_rpc_method_handler(refuse)


def await_init(
    server: InitServer, join: Sequence[str], tls: ClientTLS | None
) -> tuple[str, int] | None:
    """Ask the nodes at ``join`` to join their cluster until one does (returns the
    cluster id and this node's id) or ``feedkv init`` asks ``server`` to bootstrap one
    (returns ``None``). Blocks without a deadline; logs once that it waits."""
    waiting_logged = False
    while True:
        with server.lock:
            if server.init_requested.is_set():
                return None
            answer, failures = join_once(join, tls, JOIN_CALL_S)
            if answer is not None:
                server.joined = True
                return answer
        if not waiting_logged:
            unreached = [f for f in failures if _WAITING not in f]
            log.warning(
                "no node at --join %s knows a cluster yet%s: waiting for `feedkv init "
                "--url feedkv://HOST:PORT` on one of the nodes to bootstrap it",
                ",".join(join),
                f" ({'; '.join(unreached)}{join_hint(unreached)})" if unreached else "",
            )
            waiting_logged = True
        server.init_requested.wait(JOIN_POLL_S)
