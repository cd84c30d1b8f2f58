"""Waiting for ``feedkv init``: how a node started with ``--join`` and an empty store
learns whether it joins a cluster or bootstraps one, as in CockroachDB.

Every node of a new cluster starts with the same ``--join`` list; none of them knows a
cluster yet, so none can hand out node ids. Each serves its gRPC port meanwhile (an
:class:`InitServer`, answering ``Init``, ``Claim`` and ``Release``) and asks the nodes
at ``--join`` to join it, round after round, without a deadline. ``feedkv init --url
feedkv://HOST:PORT`` calls ``Init`` on one of them: that node first takes the claim to
bootstrap at a majority of its ``--join`` list (:mod:`feedkv.server.init_claim`), so
that two inits sent at once to two nodes make one cluster; then it bootstraps the
cluster (node 1, range r1) and, once its real server listens on the same port, answers
the others' ``Join``. The init that lost the claim is told ``cluster has already been
initialized`` and which node bootstraps it; its node joins that cluster. A node whose
join round succeeded refuses ``Init`` and ``Claim`` in CockroachDB's words, as every
member does (:meth:`feedkv.server.cluster.Cluster.dispatch`).

NB: a join round and ``Init`` take one lock, so a node never both joins a cluster and
bootstraps another: ``Init`` waits for the round in flight (each call of it bounded by
``JOIN_CALL_S``). ``Claim`` and ``Release`` do not take it: the claimants of two inits
call each other while each holds its own.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
import msgpack

from feedkv.errors import NodeUnavailableError, PermissionDeniedError
from feedkv.kv.address import host_port
from feedkv.kv.dialer import call
from feedkv.kv.server import guarded_handlers, listen
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, ServerTLS, open_channel
from feedkv.server.cluster import ALREADY_INITIALIZED, join_hint, join_once
from feedkv.server.init_claim import (
    Answer,
    ClaimAnswer,
    ClaimBook,
    Outcome,
    claimant_name,
    holder_address,
    quorum,
    tally,
)

__all__ = ["CLAIM_METHOD", "INIT_METHOD", "RELEASE_METHOD", "InitServer", "await_init"]

log = logging.getLogger(__name__)
T = TypeVar("T")

INIT_METHOD = "Init"
CLAIM_METHOD = "Claim"
RELEASE_METHOD = "Release"
JOIN_CALL_S = 2.0  # how long one node of a join round may take to answer
JOIN_POLL_S = 0.5  # how long a node waits between join rounds
CLAIM_CALL_S = 2.0  # how long one node may take to answer a claim
INIT_CLAIM_S = 5.0  # how long `feedkv init` tries to take the claim (its call waits longer)
_WAITING = "is waiting for `feedkv init`: it knows no cluster yet"  # what others look for


class InitServer:
    """The gRPC port of a node waiting for its cluster: ``Init`` asks it to bootstrap
    one, ``Claim``/``Release`` are another waiting node's claim to
    (:mod:`feedkv.server.init_claim`), ``Join`` is refused as unavailable (the caller
    tries again later)."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: ServerTLS | None,
        *,
        join: Sequence[str],
        store_dir: Path,
        client_tls: ClientTLS | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``port`` 0 picks one (:attr:`port`); ``tls``: only root and the nodes may
        call (``None``: plaintext, anyone); ``join``: the nodes it joins, and whose
        majority must grant it the claim before it bootstraps; ``store_dir``: where
        the claim it granted is kept; ``client_tls``: how it calls them; ``rng``: the
        pauses between claim rounds (seeded in tests)."""
        self.join = list(join)
        self.lock = threading.Lock()  # held by a join round, and by Init
        self.init_requested = threading.Event()
        self.claims = ClaimBook(store_dir)
        self._client_tls = client_tls
        self._rng = rng or random.Random()
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=4, thread_name_prefix="feedkv-init"),
            options=[("grpc.so_reuseport", 0)],  # NB: as the node's server: a port is one node's
        )
        handlers = {
            INIT_METHOD: grpc.unary_unary_rpc_method_handler(self._init),
            CLAIM_METHOD: grpc.unary_unary_rpc_method_handler(self._claim),
            RELEASE_METHOD: grpc.unary_unary_rpc_method_handler(self._release),
            "Join": grpc.unary_unary_rpc_method_handler(self._join),
        }
        if tls is not None:
            handlers = guarded_handlers(handlers, tls)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers), _Waiting(self))
        )
        self.port = listen(self._server, host, port, tls)
        # who this node is to the others' claim books (and to a refused init's user)
        self.address = host_port(host, self.port)
        self._claimant = claimant_name(self.address, self.claims.token)
        self._server.start()

    def _init(self, data: bytes, context: Any) -> bytes:
        # NB: "here" marks this node's own state: the caller may know it by another
        # address than the one it listens on (0.0.0.0, a host name)
        with self.lock:
            if self.claims.member:
                answer: dict[str, Any] = {"refused": ALREADY_INITIALIZED, "here": True}
            elif self.init_requested.is_set():
                answer = {"refused": ALREADY_INITIALIZED, "by": self.address, "here": True}
            else:
                answer = self._take_claim()
        return msgpack.packb(answer)  # type: ignore[no-any-return]

    def _take_claim(self) -> dict[str, Any]:
        """Claim rounds until one decides or ``INIT_CLAIM_S`` passes (under the lock:
        no join round meanwhile); what ``Init`` answers."""
        deadline = time.monotonic() + INIT_CLAIM_S
        pause = threading.Event()
        rounds = 0
        while True:
            rounds += 1
            answers, outcome = self._claim_round()
            if outcome.won:
                self.init_requested.set()
                log.info(
                    "bootstrapping a new cluster, as `feedkv init` asked (claim granted "
                    "by %d of the %d nodes at --join)",
                    sum(1 for a in answers if a.answer is Answer.GRANTED),
                    len(set(self.join)),
                )
                return {}
            self._release_all()
            if outcome.member:
                log.info("`feedkv init` refused: the node at %s is a member", outcome.member)
                return {"refused": ALREADY_INITIALIZED, "member": outcome.member}
            if outcome.holder:
                holder = holder_address(outcome.holder, answers)
                log.info("`feedkv init` refused: the node at %s bootstraps", holder)
                return {"refused": ALREADY_INITIALIZED, "by": holder}
            if time.monotonic() > deadline:
                failed = _undecided(answers, self.join)
                log.warning("`feedkv init` failed after %d claim rounds: %s", rounds, failed)
                return {"failed": failed}
            # NB: random pauses, so that two claimants that split the votes part ways
            pause.wait(self._rng.uniform(0.05, 0.25))

    def _claim_round(self) -> tuple[list[ClaimAnswer], Outcome]:
        own = replace(self.claims.claim(self._claimant), address=self.address)
        # NB: every node at once, so that a round takes one CLAIM_CALL_S at most however
        # many nodes drop the calls, well within what `feedkv init` waits
        answers = self._each_node(lambda address: _ask(address, self._claimant, self._client_tls))
        return answers, tally(answers, self.join, own)

    def _release_all(self) -> None:
        self.claims.release(self._claimant)

        def release(address: str) -> None:
            try:
                with open_channel(address, [], self._client_tls) as channel:
                    call(channel, RELEASE_METHOD, {"claimant": self._claimant}, CLAIM_CALL_S)
            except (NodeUnavailableError, PermissionDeniedError) as exc:
                # NB: the grant there stays until this node claims again (it is granted
                # again) and other inits are told it holds it
                log.info("the claim at %s is not released: %s", address, exc)

        self._each_node(release)

    def _each_node(self, ask: Callable[[str], T]) -> list[T]:
        """``ask`` of every address of the join list, at once; the answers in its order."""
        with ThreadPoolExecutor(
            max_workers=max(1, len(self.join)), thread_name_prefix="feedkv-claim"
        ) as pool:
            return list(pool.map(ask, self.join))

    def _claim(self, data: bytes, context: Any) -> bytes:
        answer = self.claims.claim(_claimant_of(data, context))
        reply = {"answer": answer.answer.value, "holder": answer.holder, "token": answer.token}
        return msgpack.packb(reply)  # type: ignore[no-any-return]

    def _release(self, data: bytes, context: Any) -> bytes:
        self.claims.release(_claimant_of(data, context))
        return msgpack.packb({})  # type: ignore[no-any-return]

    def _join(self, data: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.UNAVAILABLE, self.waiting())
        raise NodeUnavailableError("unreachable: abort raises")

    def waiting(self) -> str:
        """What a call this node cannot answer yet is told (``feedkv node status``)."""
        return (
            f"the node at {self.address} {_WAITING}; `feedkv init --url "
            f"feedkv://{self.address}` (or on another node of its --join list "
            f"{','.join(self.join)}) bootstraps one"
        )

    def stop(self) -> None:
        """Close the port (an ``Init`` answered is sent first)."""
        self._server.stop(1.0).wait()


def _claimant_of(data: bytes, context: Any) -> str:
    """The claimant a ``Claim`` or ``Release`` names; a malformed one aborts the call."""
    try:
        message = msgpack.unpackb(data)
    except (ValueError, msgpack.UnpackException):
        message = None
    claimant = message.get("claimant") if isinstance(message, dict) else None
    if not isinstance(claimant, str) or not claimant:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected {claimant: a name}")
        raise NodeUnavailableError("unreachable: abort raises")
    return claimant


def _ask(address: str, claimant: str, tls: ClientTLS | None) -> ClaimAnswer:
    """The claim asked of the node at ``address``."""
    try:
        with open_channel(address, [], tls) as channel:
            answer = call(channel, CLAIM_METHOD, {"claimant": claimant}, CLAIM_CALL_S)
    except (NodeUnavailableError, PermissionDeniedError) as exc:
        return ClaimAnswer(address, Answer.UNREACHED, reason=str(exc))
    if "refused" in answer:  # a member: Cluster.dispatch
        return ClaimAnswer(address, Answer.MEMBER)
    return ClaimAnswer(
        address,
        Answer(answer["answer"]),
        holder=str(answer.get("holder", "")),
        token=str(answer.get("token", "")),
    )


def _undecided(answers: Sequence[ClaimAnswer], join: Sequence[str]) -> str:
    """Why no claim round decided, for ``feedkv init`` to show."""
    parts = []
    for a in answers:
        if a.answer is Answer.GRANTED:
            parts.append(f"{a.address}: granted")
        elif a.answer is Answer.HELD:
            parts.append(f"{a.address}: held by the node at {holder_address(a.holder, answers)}")
        else:
            parts.append(f"{a.address}: {a.reason}")
    return (
        f"no node took the claim to bootstrap the cluster: {quorum(join)} of the "
        f"{len(set(join))} nodes at --join must be waiting and grant it ({'; '.join(parts)}); "
        "start the nodes that are down, or run `feedkv init` again"
    )


class _Waiting:
    """A gRPC generic handler: every other call (a client's batch, ``feedkv node
    status``) is refused as unavailable, saying why."""

    def __init__(self, server: InitServer) -> None:
        self._server = server

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        def refuse(request: Any, context: Any) -> bytes:
            context.abort(grpc.StatusCode.UNAVAILABLE, self._server.waiting())
            raise NodeUnavailableError("unreachable: abort raises")

        return grpc.unary_unary_rpc_method_handler(refuse)


def await_init(server: InitServer, tls: ClientTLS | None) -> tuple[str, int] | None:
    """Ask the nodes at the server's join list to join their cluster until one does
    (returns the cluster id and this node's id) or ``feedkv init`` asks ``server`` to
    bootstrap one (returns ``None``). Blocks without a deadline; logs once that it
    waits."""
    join = server.join
    waiting_logged = False
    while True:
        with server.lock:
            if server.init_requested.is_set():
                return None
            answer, failures = join_once(join, tls, JOIN_CALL_S, server.claims.token)
            if answer is not None:
                server.claims.become_member()
                return answer
        if not waiting_logged:
            log.warning("%s", _waiting_for(server, failures))
            waiting_logged = True
        server.init_requested.wait(JOIN_POLL_S)


def _waiting_for(server: InitServer, failures: Sequence[str]) -> str:
    """What a node that waits for ``feedkv init`` logs once: what it waits for, and how
    to give it that."""
    me = server.address
    if set(server.join) == {me}:
        return (
            f"--join names only this node ({me}): no other node will bring it a cluster; "
            f"waiting for `feedkv init --url feedkv://{me}` to bootstrap one here (or start "
            "it with --join naming a member of a cluster)"
        )
    unreached = [f for f in failures if _WAITING not in f]
    return (
        f"no node at --join {','.join(server.join)} knows a cluster yet"
        + (f" ({'; '.join(unreached)}{join_hint(unreached)})" if unreached else "")
        + ": waiting for `feedkv init --url feedkv://HOST:PORT` on one of them to "
        f"bootstrap it (this node is feedkv://{me})"
    )
