"""What a client learns of a cluster's nodes: one :class:`NodeInfo` per node, as the node
it asks sees them (the ``Nodes`` call; :mod:`feedkv.server.cluster` answers it).

``feedkv node status``, ``crdb_internal.gossip_nodes`` and
``crdb_internal.gossip_liveness`` all read these, so they agree. Wall times are the
answering node's clock: ``updated_at`` is when it last heard the node's heartbeat (its
own: now) and ``expiration`` when it will see the node dead without another one.

A transport that can say which nodes there are is a :class:`NodeSource`: a cluster's
dialer (it asks its gateway) and an embedded node of its own (which is node 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from feedkv.util.build import BUILD_TAG
from feedkv.util.locality import NO_LOCALITY, Locality

__all__ = ["NodeInfo", "NodeSource", "node_of_its_own"]


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: int
    address: str  # host:port of its gRPC server ("": an embedded node that does not listen)
    epoch: int  # grows at each start of the node
    live: bool
    ranges: int  # ranges it holds a replica of
    offset_ns: int | None  # its clock minus the answering node's (None: not measured)
    started_at_ns: int | None = None  # wall time it started (None: not known)
    updated_at_ns: int | None = None  # wall time its last heartbeat was heard (None: never)
    expiration_ns: int | None = None  # wall time it is seen dead without another heartbeat
    leases: int | None = None  # ranges whose lease it holds (None: not told; then ``ranges``)
    membership: str = "active"  # or decommissioning, decommissioned (feedkv.kv.membership)
    locality: Locality = NO_LOCALITY  # its --locality tiers (none: started without)
    sql_address: str = ""  # host:port of its SQL port ("": it serves none, or not yet)
    build: str = ""  # the build tag it runs (feedkv.util.build; "": not told)
    # its liveness record had not expired at the answering node's now (CockroachDB's
    # is_available: the heartbeat's expiration, where is_live is the node being heard)
    available: bool = False
    # it drains (it is stopping, or was drained with `feedkv node drain` and not restarted
    # since): no lease or replica moves to it (CockroachDB's is_draining)
    draining: bool = False

    def encode(self) -> dict[str, Any]:
        """The ``Nodes`` call's map of the node (msgpack)."""
        return {
            "id": self.node_id,
            "address": self.address,
            "epoch": self.epoch,
            "live": self.live,
            "ranges": self.ranges,
            "offset_ns": self.offset_ns,
            "started_at": self.started_at_ns,
            "updated_at": self.updated_at_ns,
            "expiration": self.expiration_ns,
            "leases": self.leases,
            "membership": self.membership,
            "locality": str(self.locality),
            "sql_address": self.sql_address,
            "build": self.build,
            "available": self.available,
            "draining": self.draining,
        }

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> NodeInfo:
        return cls(
            int(raw["id"]),
            str(raw["address"]),
            int(raw["epoch"]),
            bool(raw["live"]),
            int(raw["ranges"]),
            raw.get("offset_ns"),
            raw.get("started_at"),
            raw.get("updated_at"),
            raw.get("expiration"),
            raw.get("leases"),
            str(raw.get("membership", "active")),
            Locality.parse(str(raw.get("locality", ""))),
            str(raw.get("sql_address", "")),
            str(raw.get("build", "")),
            bool(raw.get("available", False)),
            bool(raw.get("draining", False)),
        )


@runtime_checkable
class NodeSource(Protocol):
    def nodes(self) -> list[NodeInfo]:
        """Every node known, by id (blocks on a call to the gateway node)."""
        ...

    def gateway_node(self) -> int:
        """The id of the node requests enter the cluster through (may block on a call
        to it)."""
        ...


def node_of_its_own(
    node_id: int, ranges: int, wall_ns: int, address: str = "", sql_address: str = ""
) -> NodeInfo:
    """A node in no cluster, at wall time ``wall_ns``: live, its first epoch, holding
    every range."""
    return NodeInfo(
        node_id,
        address,
        1,
        True,
        ranges,
        0,
        None,
        wall_ns,
        None,
        ranges,
        sql_address=sql_address,
        build=BUILD_TAG,
        available=True,
    )
