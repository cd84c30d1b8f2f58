"""``feedkv node decommission`` on four ``feedkv start --replicas 3`` processes: the
node's replicas (and the leases it held) move to the other nodes first, a rangefeed
over its ranges goes on without a gap, then the node is decommissioned and the cluster
refuses it."""

from __future__ import annotations

import contextlib
import csv
import io
import threading
from pathlib import Path

import pytest

from feedkv.cli.node import run_node_decommission, run_node_recommission, run_node_status
from feedkv.db import DB
from feedkv.errors import AmbiguousResultError, InvalidArgumentError
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.feed_validator import check_resolved_feed, read_until_resolved
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 90.0
FEED_SPAN = Span(b"feed/", b"feed0")


def _replicated(db: DB, factor: int = 3) -> bool:
    return all(len(r.replicas) == factor for r in db.ranges())


def _membership(db: DB, node_id: int) -> str:
    return next(n.membership for n in db.nodes() if n.node_id == node_id)


@pytest.mark.slow(60)
def test_a_decommissioned_lease_holder_hands_over_its_replicas_and_feeds_follow(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, 4, "--replicas", "3", rebalance_interval="0s") as cluster:
        db = cluster.connect(0)
        # the first node's --replicas made the default zone
        [(_, zone)] = db.sql("SHOW ZONE CONFIGURATION FOR RANGE default").rows
        assert zone.endswith("num_replicas = 3")
        wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
        (feed_range,) = [r for r in db.ranges() if r.span.contains_key(FEED_SPAN.start)]
        victim = feed_range.lease_holder
        gateway = next(i for i in range(4) if i + 1 != victim)
        db.close()
        db = cluster.connect(gateway)
        since = db.now()
        stop = threading.Event()
        written: list[int] = []

        def writer() -> None:
            i = 0
            while not stop.is_set():
                with contextlib.suppress(AmbiguousResultError):  # in flight at a removal
                    db.put(b"feed/%03d" % (i % 50), b"v%d" % i)
                    written.append(i)
                i += 1

        out = io.StringIO()
        thread = threading.Thread(target=writer)
        with db.rangefeed([FEED_SPAN], since) as feed:
            thread.start()
            try:
                wait_until(lambda: len(written) > 30, timeout_s=DEADLINE_S, what="writes")
                code = run_node_decommission(
                    cluster.url(gateway), [victim], stdout=out, timeout_s=DEADLINE_S
                )
                before = len(written)
                wait_until(lambda: len(written) > before + 30, timeout_s=DEADLINE_S)
            finally:
                stop.set()
                thread.join()
            last = db.put(b"feed/last", b"end")
            events = read_until_resolved(feed, last, timeout_s=DEADLINE_S)
        assert code == 0
        assert "No more data reported on target nodes" in out.getvalue()
        assert "| decommissioned" in out.getvalue()
        ranges = db.ranges()
        assert all(victim not in r.replicas for r in ranges), ranges
        assert all(len(r.replicas) == 3 for r in ranges), ranges
        history = check_resolved_feed(events, db, FEED_SPAN, since, last)
        assert len(history) > 60

        assert _membership(db, victim) == "decommissioned"
        status = io.StringIO()
        assert run_node_status(cluster.url(gateway), "csv", status) == 0
        by_id = {row["id"]: row for row in csv.DictReader(io.StringIO(status.getvalue()))}
        assert by_id[str(victim)]["membership"] == "decommissioned"
        # the cluster refuses it: its heartbeats are turned away, so it is seen dead
        wait_until(
            lambda: not next(n.live for n in db.nodes() if n.node_id == victim),
            timeout_s=DEADLINE_S,
            what="the decommissioned node refused",
        )
        # gone for good: node status leaves it out, as CockroachDB's does, but for
        # --decommission
        status = io.StringIO()
        assert run_node_status(cluster.url(gateway), "csv", status) == 0
        assert str(victim) not in {
            row["id"] for row in csv.DictReader(io.StringIO(status.getvalue()))
        }
        status = io.StringIO()
        assert run_node_status(cluster.url(gateway), "csv", status, decommission=True) == 0
        by_id = {row["id"]: row for row in csv.DictReader(io.StringIO(status.getvalue()))}
        assert by_id[str(victim)]["is_decommissioning"] == "true"
        with pytest.raises(InvalidArgumentError, match="cannot be recommissioned"):
            run_node_recommission(cluster.url(gateway), [victim])
        db.close()
        # started again, it is turned away by the cluster, and exits saying why
        cluster.kill(victim - 1)
        with pytest.raises(RuntimeError, match="the node did not start") as refused:
            cluster.restart(victim - 1)
        assert f"node n{victim} is decommissioned: it may not rejoin" in str(refused.value)


def test_decommission_refuses_an_unknown_node_and_changes_nothing(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 2, rebalance_interval="0s") as cluster:
        with pytest.raises(InvalidArgumentError, match="n7 not in the cluster"):
            run_node_decommission(cluster.url(0), [7], stdout=io.StringIO())
        with pytest.raises(InvalidArgumentError, match="no active node"):
            run_node_decommission(cluster.url(0), [1, 2], stdout=io.StringIO())
        with cluster.connect(0) as db:
            db.sql("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 2")
            with pytest.raises(InvalidArgumentError, match="fewer than the 2 replicas"):
                run_node_decommission(cluster.url(0), [2], stdout=io.StringIO())
            db.sql("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 1")
            assert {_membership(db, n) for n in (1, 2)} == {"active"}
            # decommissioning, without waiting, then taken back
            out = io.StringIO()
            assert run_node_decommission(cluster.url(0), [2], wait=False, stdout=out) == 0
            wait_until(lambda: _membership(db, 2) == "decommissioning", timeout_s=DEADLINE_S)
            assert run_node_recommission(cluster.url(0), [2], stdout=io.StringIO()) == 0
            wait_until(lambda: _membership(db, 2) == "active", timeout_s=DEADLINE_S)


@pytest.mark.slow(30)
def test_decommission_moves_ranges_held_alone_off_a_node_of_a_sharded_cluster(
    tmp_path: Path,
) -> None:
    """Without replication (``--replicas 1``) a range held alone on the node becomes a
    Raft group, gains a replica on another node, hands it the lease and leaves."""
    with LocalCluster(tmp_path, 3, rebalance_interval="1s") as cluster:
        db = cluster.connect(0)
        for i in range(6):
            db.split(b"t%d" % i)
        for i in range(60):
            db.put(b"t%d/%02d" % (i % 6, i), b"v%d" % i)
        wait_until(
            lambda: any(2 in r.replicas for r in db.ranges()),
            timeout_s=DEADLINE_S,
            what="a range on n2",
        )
        code = run_node_decommission(
            cluster.url(0), [2], stdout=io.StringIO(), timeout_s=DEADLINE_S
        )
        assert code == 0
        ranges = db.ranges()
        assert all(r.replicas in ((1,), (3,)) for r in ranges), ranges
        assert [db.get(b"t%d/%02d" % (i % 6, i)) for i in range(60)] == [
            b"v%d" % i for i in range(60)
        ]
        db.close()
