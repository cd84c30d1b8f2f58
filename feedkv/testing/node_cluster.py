"""A replicated cluster of nodes inside the calling process, on loopback (real gRPC and
Raft between them), for tests and benches that reach into a node (its store, its
cluster, its server) as a cluster of processes (:mod:`feedkv.testing.cluster`) does not
let them.

``with node_cluster(base) as nodes:`` starts node ``n1`` (it bootstraps the cluster) and
the others joining it, each with its store under ``base``, and stops them all at the
end (a node the test stopped already is left as it is: a stop is idempotent).
:func:`await_replicas` waits until every range has its replicas.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from feedkv.kv.db import KVClient
from feedkv.kv.store import StoreConfig
from feedkv.server.cluster import ClusterConfig
from feedkv.server.node import Node
from feedkv.testing.waiting import wait_until

__all__ = ["await_replicas", "node_cluster"]


@contextmanager
def node_cluster(
    base: Path,
    nodes: int = 3,
    *,
    config: StoreConfig | None = None,
    cluster_config: ClusterConfig | None = None,
) -> Iterator[list[Node]]:
    """``nodes`` nodes of one cluster, ``n1`` first. ``config``: every store's (default:
    no fsync); ``cluster_config``: every node's (default: ranges replicated on three
    nodes and never rebalanced, so they stay where a test puts them)."""
    config = config or StoreConfig(sync=False)
    cluster_config = cluster_config or ClusterConfig(replicas=3, rebalance_interval_s=0)
    started: list[Node] = []
    try:
        join: list[str] = []
        for index in range(nodes):
            node = Node(
                base / f"n{index + 1}",
                listen="127.0.0.1:0",
                join=join,
                config=config,
                cluster_config=cluster_config,
            )
            started.append(node)
            join = join or [node.url.removeprefix("feedkv://")]
        yield started
    finally:
        for node in started:
            node.stop(grace_s=0)


def await_replicas(db: KVClient, replicas: int = 3, *, timeout_s: float = 60.0) -> None:
    """Wait until every range ``db`` sees has ``replicas`` replicas."""
    wait_until(
        lambda: all(len(r.replicas) == replicas for r in db.ranges()),
        timeout_s=timeout_s,
        what=f"{replicas} replicas of every range",
    )
