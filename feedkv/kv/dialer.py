"""Reaching the nodes of a cluster: a transport per node, and the nodes' own calls.

A :class:`ClusterDialer` is the :class:`~feedkv.kv.router.Transport` of a client of a
cluster (and of each node's own router): the node it connects to, its *gateway*,
answers range lookups and the clock, and :meth:`ClusterDialer.dial` gives the transport
to the node a range's descriptor names, connecting on first use. On a single node every
range names the gateway, so nothing more is ever dialled.

Node-to-node calls (heartbeats, joins, range snapshots: :mod:`feedkv.server.cluster`)
and the ``Nodes`` call a client uses to learn addresses are unary gRPC methods of the
node's service whose messages are msgpack maps (:func:`call`): internal, few and
small, so they need no protobuf schema of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc
import msgpack

from feedkv.errors import InvalidArgumentError, NodeUnavailableError, PermissionDeniedError
from feedkv.kv.address import split_host_port
from feedkv.kv.api import BatchRequest, BatchResponse
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.node_status import NodeInfo
from feedkv.kv.router import Transport
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, call_metadata
from feedkv.util.hlc import Timestamp

__all__ = ["ClusterDialer", "RemoteNodes", "call", "nodes"]

CALL_TIMEOUT_S = 10.0


def call(
    channel: grpc.Channel, method: str, message: dict[str, Any], timeout_s: float = CALL_TIMEOUT_S
) -> dict[str, Any]:
    """Call the node's msgpack method ``method``; raises :class:`PermissionDeniedError`
    when the node refuses the caller (its credentials, or what they allow), and
    :class:`NodeUnavailableError` when the node cannot be reached or the call fails
    there."""
    stub = channel.unary_unary(f"/{SERVICE}/{method}")
    try:
        reply = stub(msgpack.packb(message), timeout=timeout_s, metadata=call_metadata(channel))
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            raise PermissionDeniedError(str(exc.details())) from exc
        details = exc.details() if hasattr(exc, "details") else str(exc)
        raise NodeUnavailableError(f"{method} call failed: {details}") from exc
    answer: dict[str, Any] = msgpack.unpackb(reply)
    return answer


def nodes(client: Any) -> list[dict[str, Any]]:
    """The nodes as the node ``client`` (a :class:`feedkv.DB`) connects to sees them,
    as maps: id, address, epoch, live, ranges, clock offset (ns), ... (see
    :meth:`NodeInfo.encode`)."""
    if not hasattr(client, "nodes"):
        raise InvalidArgumentError(f"{type(client).__name__} is no feedkv client: connect()")
    return [info.encode() for info in client.nodes()]


class RemoteNodes:
    """What a client knows of the nodes, asked of its gateway (``Nodes``) when it meets
    a node it does not know. ``ask(method, message)`` calls the gateway's msgpack
    method (:func:`call`, through a gateway that may move: :meth:`forget_gateway`)."""

    def __init__(self, ask: Callable[[str, dict[str, Any]], dict[str, Any]]) -> None:
        self._ask = ask
        self._lock = threading.Lock()
        self._gateway: int | None = None
        self._addresses: dict[int, str] = {}

    def gateway_node(self) -> int:
        if self._gateway is None:
            self._refresh()
        return self._gateway or 0

    def forget_gateway(self) -> int | None:
        """The gateway moved to another node: which one it is is asked anew. Returns
        the id of the node it was (``None``: not asked yet)."""
        with self._lock:
            old, self._gateway = self._gateway, None
        return old

    def address(self, node_id: int) -> str | None:
        if node_id not in self._addresses:
            self._refresh()
        return self._addresses.get(node_id)

    def relearn(self, node_id: int) -> str | None:
        """Where ``node_id`` listens, asked of the gateway now (a node that restarted
        may listen elsewhere); ``None``: the gateway does not know it. Raises
        :class:`NodeUnavailableError` when the gateway cannot be reached: this client
        can learn nothing more, and must connect through another node."""
        try:
            self._refresh()
        except NodeUnavailableError as exc:
            raise NodeUnavailableError(
                f"node n{node_id} could not be reached, and neither could this client's "
                f"gateway, to learn where it listens now: connect through another node "
                f"({exc})"
            ) from exc
        return self._addresses.get(node_id)

    def status(self) -> list[NodeInfo]:
        """Every node as the gateway sees it now (and their addresses learnt anew)."""
        answer = self._ask("Nodes", {})
        found = [NodeInfo.decode(raw) for raw in answer["nodes"]]
        with self._lock:
            self._gateway = answer["me"]
            self._addresses = {n.node_id: n.address for n in found}
        return found

    def _refresh(self) -> None:
        answer = self._ask("Nodes", {})
        with self._lock:
            self._gateway = answer["me"]
            self._addresses = {n["id"]: n["address"] for n in answer["nodes"]}


class ClusterDialer:
    def __init__(
        self,
        gateway: Transport,
        *,
        gateway_node: Callable[[], int],
        addresses: Callable[[int], str | None],
        nodes: Callable[[], list[NodeInfo]],
        relearn: Callable[[int], str | None] | None = None,
        seen_dead: Callable[[int], bool] | None = None,
        connect_timeout_s: float = 5.0,
        tls: ClientTLS | None = None,
    ) -> None:
        """``gateway_node()``: the gateway's node id; ``addresses(node_id)``: where a node
        listens (``None``: not known); ``nodes()``: every node as the gateway sees it;
        ``relearn(node_id)``: where a node listens, asked anew (by default
        ``addresses``: a node's own view is kept fresh by gossip); ``seen_dead(node_id)``:
        whether liveness sees the node dead (by default: whether the last dial of it
        failed); ``tls``: the identity other nodes are called as (``None``: plaintext)."""
        self._tls = tls
        self._seen_dead = seen_dead
        self._failed: set[int] = set()  # nodes whose last dial failed
        self._nodes = nodes
        self._relearn = relearn or addresses
        self._dialled: dict[int, str] = {}  # the address each node was last dialled at
        self.gateway = gateway
        self._gateway_node = gateway_node
        self._addresses = addresses
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._peers: dict[int, GrpcTransport] = {}

    def send(self, batch: BatchRequest) -> BatchResponse:
        return self.gateway.send(batch)

    def now(self) -> Timestamp:
        return self.gateway.now()

    def gateway_node(self) -> int:
        """The id of the node this dialer's requests enter the cluster through."""
        return self._gateway_node()

    def nodes(self) -> list[NodeInfo]:
        return self._nodes()

    def dial(self, node_id: int) -> Transport:
        if node_id == self._gateway_node():
            return self.gateway
        with self._lock:
            known = self._peers.get(node_id)
        if known is not None:
            return known
        address = self._addresses(node_id)
        parsed = split_host_port(address) if address is not None else None
        if address is None or parsed is None:
            raise NodeUnavailableError(f"node n{node_id} is not known to this node (yet)")
        with self._lock:
            self._dialled[node_id] = address
        try:
            transport = GrpcTransport(
                *parsed, connect_timeout_s=self._connect_timeout_s, tls=self._tls
            )
        except NodeUnavailableError as exc:
            with self._lock:
                self._failed.add(node_id)
            raise NodeUnavailableError(
                f"node n{node_id} at {address} is unavailable (its ranges wait for it): {exc}"
            ) from None
        with self._lock:
            self._failed.discard(node_id)
            raced = self._peers.setdefault(node_id, transport)
        if raced is not transport:
            transport.close()
        return raced

    def seen_dead(self, node_id: int) -> bool:
        """Whether ``node_id`` is known down (see :class:`~feedkv.kv.router.NodeHealth`)."""
        if self._seen_dead is not None:
            return self._seen_dead(node_id)
        with self._lock:
            return node_id in self._failed

    def redial(self, node_id: int) -> bool:
        """After ``node_id`` could not be reached: ask where it listens now, and if that
        is not where it was dialled (it restarted elsewhere), drop the connection so the
        next :meth:`dial` connects there. Returns whether the address changed (never
        for the gateway: a client reaches it only at the address it was given)."""
        with self._lock:
            dialled = self._dialled.get(node_id)
        if dialled is None or node_id == self._gateway_node():
            return False
        address = self._relearn(node_id)
        if address is None or address == dialled:
            return False
        self.forget(node_id)
        return True

    def adopt(self, node_id: int, transport: GrpcTransport) -> None:
        """The client's gateway moved away from ``node_id``: ``transport``, its old
        connection, stays the way to that node (a call fails at once while the node is
        down, where dialling it anew would wait out the connect timeout each time, and
        the channel reconnects when the node returns there). This dialer owns it."""
        with self._lock:
            self._dialled.setdefault(node_id, transport.address)
            raced = self._peers.setdefault(node_id, transport)
        if raced is not transport:
            transport.close()

    def forget(self, node_id: int) -> None:
        """Drop the connection to a node (it moved to another address)."""
        with self._lock:
            transport = self._peers.pop(node_id, None)
        if transport is not None:
            transport.close()

    def close(self) -> None:
        with self._lock:
            peers, self._peers = list(self._peers.values()), {}
        for transport in peers:
            transport.close()
        self.gateway.close()
