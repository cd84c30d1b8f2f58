"""A node that refuses a request for a range it no longer holds tells the client where
the range is now (the descriptor its directory holds), as CockroachDB's
NotLeaseHolderError carries the range's descriptor: the client's router follows it
without looking the range up. Three in-process nodes on loopback (real gRPC and Raft);
the range's replicas are moved by hand (the replicate loop is idle), so the client's
cache names only nodes the range left."""

from __future__ import annotations

from pathlib import Path

import pytest

import feedkv
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.server.cluster import ClusterConfig
from feedkv.server.node import Node
from feedkv.testing.node_cluster import node_cluster
from feedkv.testing.waiting import wait_until

DEADLINE_S = 60.0
KEY = b"t/key"
# NB: the replicate loop never runs in the test: the replicas stay where it puts them
STILL = ClusterConfig(replicas=1, rebalance_interval_s=0, replicate_interval_s=3600)


def _descriptor(node: Node, range_id: int) -> RangeDescriptor:
    return next(d for d in node.store.descriptors() if d.range_id == range_id)


def _await_lease(node: Node, range_id: int) -> None:
    loop = node.store.replicas
    assert loop is not None
    wait_until(
        lambda: loop.holds_lease(range_id),
        timeout_s=DEADLINE_S,
        what=f"the lease of r{range_id} on {node.node_id}",
    )


def _reported(node: Node, replicas: tuple[int, ...]) -> bool:
    """Whether ``node``'s directory puts KEY's range on ``replicas`` (lease holder first)."""
    cluster = node.cluster
    assert cluster is not None
    cluster.report()
    found = cluster.directory.lookup(KEY)
    return bool(found) and found[0].replicas == replicas


@pytest.mark.slow(20)
def test_a_request_to_nodes_the_range_left_follows_their_answer_without_a_lookup(
    tmp_path: Path,
) -> None:
    with (
        node_cluster(tmp_path, cluster_config=STILL) as nodes,
        feedkv.connect(nodes[0].url) as db,
    ):
        n1, n2, n3 = nodes
        db.split(b"t/")
        db.put(KEY, b"v1")
        range_id = next(d.range_id for d in n1.store.descriptors() if d.contains_key(KEY))
        n1.store.start_replicating(range_id)
        _await_lease(n1, range_id)
        n1.store.add_replica(range_id, 2)
        # the client caches the range on n1 and n2, its lease on n1
        cache = db._router.ranges
        cache.evict(next(d for d in cache.cached() if d.contains_key(KEY)))
        assert db.get(KEY) == b"v1"
        cached = next(d for d in cache.cached() if d.contains_key(KEY))
        assert set(cached.replicas) == {1, 2}

        # the range goes to n3 alone: added there, its lease moved there, then n1 and
        # n2 removed
        n1.store.add_replica(range_id, 3)
        member = n1.cluster
        assert member is not None
        _await_lease(n1, range_id)
        member.move_lease(_descriptor(n1, range_id), 3)
        _await_lease(n3, range_id)
        n3.store.remove_replica(range_id, 1)
        n3.store.remove_replica(range_id, 2)
        for gone in (n1, n2):
            wait_until(
                lambda gone=gone: all(d.range_id != range_id for d in gone.store.descriptors()),
                timeout_s=DEADLINE_S,
                what=f"{gone.node_id} to drop its replica",
            )
            wait_until(
                lambda gone=gone: _reported(gone, (3,)),
                timeout_s=DEADLINE_S,
                what=f"{gone.node_id} to hear where the range went",
            )

        lookups = cache.lookups
        db.put(KEY, b"v2")  # to n1 (the cached lease holder), which points to n3
        assert db.get(KEY) == b"v2"
        assert cache.lookups == lookups  # no range lookup: the refusal told where
        cached = next(d for d in cache.cached() if d.contains_key(KEY))
        assert cached.replicas == (3,)
