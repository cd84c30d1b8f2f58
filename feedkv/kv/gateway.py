"""A client's gateway: the node it enters a cluster through, moved when that node dies.

A client of a cluster (``feedkv://h1:p1,h2:p2,h3:p3``, as libpq's and CockroachDB's
multi-host URLs) connects through the first node of the list that answers. That node
answers the calls that go to no range in particular: range lookups, the clock, the list
of nodes, and registrations of feeds on its own replicas. CockroachDB leaves moving a
client whose gateway died to its driver or load balancer; feedkv's client does it
itself, with the list it was given.

:class:`Gateway` is that node's transport. When a call to it fails with
:class:`~feedkv.errors.NodeUnavailableError` (the call never reached the node, or was a
read: nothing was applied), it dials the other nodes of the list in order, starting
after the one that failed, for up to ``rounds`` rounds with a pause doubling between
them; the first that answers becomes the gateway and the call goes again there. A node
whose process died refuses the connection at once
(:func:`~feedkv.kv.grpc_transport.await_ready`); one whose host does not answer costs
``move_connect_timeout_s``. If none answers, the error names every node and what each
said. A
:class:`~feedkv.errors.NodeUnavailableError` the gateway answered with (a node it
called is down) moves nothing. A write that failed in flight
is :class:`~feedkv.errors.AmbiguousResultError` (it may have been applied): it is never
sent again, and the next call, meeting the dead node, moves the gateway. A batch
addressed to a range moves the gateway too but is not sent again here: the
:class:`~feedkv.kv.router.Router` picks the range's next replica itself.

A URL of one node has nothing to move to: its channel reconnects by itself when the
node returns.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from feedkv.errors import NodeUnavailableError
from feedkv.kv.address import host_port
from feedkv.kv.api import BatchRequest, BatchResponse
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.security.tls import ClientTLS
from feedkv.util.hlc import Timestamp

__all__ = ["Gateway"]

T = TypeVar("T")

ROUNDS = 3  # times the whole list is tried before a move gives up
FIRST_PAUSE_S = 0.2  # between rounds, doubling
MOVE_CONNECT_TIMEOUT_S = 2.0  # a node being moved to answers within this or is skipped

# ``(old, new)``: the gateway moved from ``old`` to ``new``; the callback owns ``old``
Moved = Callable[[GrpcTransport, GrpcTransport], None]


class Gateway:
    def __init__(
        self,
        addresses: Sequence[tuple[str, int]],
        *,
        tls: ClientTLS | None = None,
        label: str = "",
        connect_timeout_s: float = 5.0,
        move_connect_timeout_s: float = MOVE_CONNECT_TIMEOUT_S,
        rounds: int = ROUNDS,
        first_pause_s: float = FIRST_PAUSE_S,
    ) -> None:
        """Connect through the first node of ``addresses`` that answers within
        ``connect_timeout_s`` (:class:`NodeUnavailableError` naming each when none
        does). ``label``: the URL, for errors. A later move waits
        ``move_connect_timeout_s`` for each node, over ``rounds`` rounds at most."""
        if not addresses:
            raise NodeUnavailableError("a gateway needs at least one node's address")
        self._addresses = [host_port(host, port) for host, port in addresses]
        self._parsed = list(addresses)
        self._tls = tls
        self._label = label or ",".join(self._addresses)
        self._move_connect_timeout_s = move_connect_timeout_s
        self._rounds = rounds
        self._first_pause_s = first_pause_s
        self._lock = threading.Lock()  # held while moving: one move at a time
        self._closing = threading.Event()
        self._retired: list[GrpcTransport] = []
        # called after each move (see Moved); set by who wires the client together
        self.on_move: Moved | None = None
        failures = self._try_each(range(len(self._parsed)), connect_timeout_s)
        if isinstance(failures, GrpcTransport):
            self._current = failures
            return
        if len(self._addresses) == 1:
            raise failures[0]
        raise self._none_answered(failures, "") from failures[-1]

    @property
    def transport(self) -> GrpcTransport:
        """The transport to the gateway now."""
        return self._current

    @property
    def address(self) -> str:
        return self._current.address

    def call(self, fn: Callable[[GrpcTransport], T]) -> T:
        """``fn(gateway transport)``; when it raises :class:`NodeUnavailableError`, again
        through the node the gateway moves to (``fn`` must be safe to repeat: a read,
        or a call that failed before it was sent)."""
        for _ in range(len(self._addresses)):
            failed = self._current
            try:
                return fn(failed)
            except NodeUnavailableError as exc:
                if not _unreachable(exc):
                    raise
                self.move_from(failed, exc)
        return fn(self._current)

    def move_from(self, failed: GrpcTransport, error: NodeUnavailableError) -> GrpcTransport:
        """After ``failed`` (a gateway transport) met ``error``: the gateway now, moved to
        another node of the list unless another caller moved it already. Raises
        ``error`` for a list of one node, and :class:`NodeUnavailableError` naming each
        node when none answers."""
        with self._lock:
            if self._current is not failed:
                return self._current
            if len(self._addresses) == 1 or self._closing.is_set():
                raise error
            start = self._addresses.index(failed.address) + 1
            n = len(self._addresses)
            order = [(start + i) % n for i in range(n)]  # the failed node last
            failures: list[NodeUnavailableError] = []
            found: GrpcTransport | None = None
            pause = self._first_pause_s
            for round_ in range(self._rounds):
                if round_ and self._closing.wait(pause):
                    break
                pause *= 2
                answer = self._try_each(order, self._move_connect_timeout_s)
                if isinstance(answer, GrpcTransport):
                    found = answer
                    break
                failures = answer
            if found is None:
                why = f"the gateway {failed.address} stopped answering ({error}); "
                raise self._none_answered(failures, why)
            self._current = found
        moved = self.on_move
        if moved is not None:
            moved(failed, self._current)
        else:
            with self._lock:
                self._retired.append(failed)
        return self._current

    def _try_each(
        self, order: Sequence[int] | range, timeout_s: float
    ) -> GrpcTransport | list[NodeUnavailableError]:
        """The transport to the first node of ``order`` that answers, else why each
        did not."""
        failures: list[NodeUnavailableError] = []
        for index in order:
            host, port = self._parsed[index]
            try:
                return GrpcTransport(host, port, connect_timeout_s=timeout_s, tls=self._tls)
            except NodeUnavailableError as exc:
                failures.append(exc)
        return failures

    def _none_answered(
        self, failures: list[NodeUnavailableError], why: str
    ) -> NodeUnavailableError:
        return NodeUnavailableError(
            f"{why}none of the {len(self._addresses)} nodes of {self._label} answered: "
            + "; ".join(str(f) for f in failures)
        )

    def send(self, batch: BatchRequest) -> BatchResponse:
        if batch.header.range_id == 0:  # a lookup, or a request the node routes
            return self.call(lambda transport: transport.send(batch))
        failed = self._current
        try:
            return failed.send(batch)
        except NodeUnavailableError as exc:
            # NB: moved for the calls that follow; this one the router sends to the
            # range's next replica (the new gateway may hold none)
            if _unreachable(exc):
                with contextlib.suppress(NodeUnavailableError):  # the router says what it tried
                    self.move_from(failed, exc)
            raise

    def now(self) -> Timestamp:
        return self.call(lambda transport: transport.now())

    def close(self) -> None:
        """Close the connection (and those moved away from, unless handed on)."""
        self._closing.set()
        with self._lock:
            retired, self._retired = self._retired, []
            current = self._current
        for transport in (*retired, current):
            transport.close()


def _unreachable(error: NodeUnavailableError) -> bool:
    """Whether ``error`` says the gateway could not be reached: the transport raises it
    from gRPC's error. One the node answered with (a node it called is down) comes
    rebuilt from the node's answer, with no cause: the gateway is alive, and stays."""
    return error.__cause__ is not None
