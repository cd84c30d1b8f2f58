"""A range's lease holder SIGKILLed right after it up-replicated the range (one replica
to three), before its heartbeat told the other nodes: the survivors hold replicas whose
descriptors name all three (the membership is applied with the range's own Raft log), so
reads and writes go on through them once they elect a lease holder, and no acknowledged
write is lost. Three ``feedkv start`` processes, their ranges on n1 alone until the
default zone asks for three replicas; the test does not wait for the nodes to agree on
the ranges (:meth:`LocalCluster.agreed_ranges`) before the kill."""

from __future__ import annotations

from pathlib import Path

import pytest

import feedkv
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0
KEYS = 20


@pytest.mark.slow(30)
def test_reads_and_writes_go_on_when_the_lease_holder_dies_right_after_up_replicating(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, 3, "--replicas", "1", rebalance_interval="0s") as cluster:
        # NB: through n1 first: once it dies, a call to it fails at once (the client keeps
        # its connection), so nothing waits out a connect timeout while the others elect
        db = feedkv.connect(cluster.all_nodes_url())
        for i in range(KEYS):
            db.put(b"k%02d" % i, b"v%d" % i)
        assert all(r.replicas == (1,) for r in db.ranges())
        db.sql("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 3")  # up-replicate
        # NB: n1's own view: it reports its ranges to itself at once, to the others at
        # its next heartbeat, which the kill comes before (likely)
        wait_until(
            lambda: all(len(r.replicas) == 3 for r in db.ranges()),
            timeout_s=DEADLINE_S,
            poll_s=0.02,
            what="three replicas of every range, as n1 sees them",
        )
        assert db.gateway_node() == 1
        assert all(r.lease_holder == 1 for r in db.ranges())
        cluster.kill(0)
        try:
            # NB: no retries here: the client waits out the election itself; a
            # NodeUnavailableError naming n1 alone is the bug
            assert [db.get(b"k%02d" % i) for i in range(KEYS)] == [b"v%d" % i for i in range(KEYS)]
            db.put(b"after", b"1")
            assert db.get(b"after") == b"1"
            assert db.gateway_node() in (2, 3)
            ranges = db.ranges()
            assert all(set(r.replicas) == {1, 2, 3} for r in ranges), ranges
        finally:
            db.close()
