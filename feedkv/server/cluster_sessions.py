"""The SQL sessions of a cluster's nodes, for ``SHOW [CLUSTER] SESSIONS`` / ``QUERIES``
and ``CANCEL QUERY | SESSION`` on any node (:mod:`feedkv.sql.session_activity`), as
CockroachDB's status server fans them out.

Each node serves two calls of the cluster's (node-to-node calls: on a secure node only
nodes and root may make them, :func:`feedkv.kv.server.guarded_handlers`): ``Sessions`` answers
the node's own sessions as :class:`~feedkv.sql.active_sessions.SessionRecord` maps,
which the asking node filters for its user; ``CancelActivity`` cancels a session or
query of the node's for the user the asking node names, under the same rules as a
``CANCEL`` run on the node itself. :class:`ClusterPeers` is the asking side: it asks the
other live nodes at once, each within :data:`ASK_TIMEOUT_S`, and tells of a node that is
not live or did not answer instead of waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from feedkv.errors import FeedKVError, NodeUnavailableError
from feedkv.sql.active_sessions import CancelOutcome, SessionRecord, SessionRegistry

__all__ = ["ASK_TIMEOUT_S", "ClusterPeers", "session_methods"]

ASK_TIMEOUT_S = 5.0
SESSIONS, CANCEL = "Sessions", "CancelActivity"


class Nodes(Protocol):
    """What :class:`ClusterPeers` needs of the node's cluster membership
    (:class:`~feedkv.server.cluster.Cluster`)."""

    def peers(self) -> list[tuple[int, bool]]: ...

    def call_node(
        self, node_id: int, method: str, message: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]: ...


class ClusterPeers:
    """The other nodes of ``nodes``' cluster, as a registry's
    :class:`~feedkv.sql.active_sessions.Peers`."""

    def __init__(self, nodes: Nodes) -> None:
        self._nodes = nodes

    def sessions(self) -> list[tuple[int, list[SessionRecord] | str]]:
        peers = self._nodes.peers()

        def ask(peer: tuple[int, bool]) -> tuple[int, list[SessionRecord] | str]:
            node_id, live = peer
            if not live:
                return node_id, f"node n{node_id} is not live"
            try:
                answer = self._nodes.call_node(node_id, SESSIONS, {}, ASK_TIMEOUT_S)
            except FeedKVError as exc:
                return node_id, f"node n{node_id} did not answer: {exc}"
            return node_id, [SessionRecord.decode(r) for r in answer["sessions"]]

        if not peers:
            return []
        with ThreadPoolExecutor(max_workers=len(peers), thread_name_prefix="feedkv-ask") as pool:
            return list(pool.map(ask, peers))

    def cancel(
        self, node_id: int, target: str, *, sessions: bool, user: str, admin: bool
    ) -> CancelOutcome:
        if node_id not in dict(self._nodes.peers()):
            return "not found"  # NB: the id names no node of this cluster
        message = {"id": target, "sessions": sessions, "user": user, "admin": admin}
        try:
            answer = self._nodes.call_node(node_id, CANCEL, message, ASK_TIMEOUT_S)
        except FeedKVError as exc:
            what = "session" if sessions else "query"
            raise NodeUnavailableError(
                f"cannot cancel {what} {target}: its node n{node_id} did not answer: {exc}"
            ) from exc
        outcome: CancelOutcome = answer["outcome"]
        return outcome


def session_methods(
    registry: SessionRegistry,
) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The node's side of the two calls, over its ``registry``."""

    def list_sessions(message: dict[str, Any]) -> dict[str, Any]:
        return {"sessions": [record.encode() for record in registry.records()]}

    def cancel(message: dict[str, Any]) -> dict[str, Any]:
        outcome = registry.cancel(
            str(message["id"]),
            sessions=bool(message["sessions"]),
            user=str(message["user"]),
            admin=bool(message["admin"]),
        )
        return {"outcome": outcome}

    return {SESSIONS: list_sessions, CANCEL: cancel}
