"""Range ids across a cluster of real node processes come from one counter: small and
unique, however many nodes split at once (feedkv.kv.range_id_alloc)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.kv.range_id_alloc import RANGE_IDS_KEY
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

PARTS = (b"rid/a", b"rid/b", b"rid/c")
SPLITS_PER_NODE = 15


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("rids"), 3, rebalance_interval="0s") as started:
        yield started


@pytest.mark.slow(60)
def test_concurrent_splits_on_every_node_take_small_distinct_ids(cluster: LocalCluster) -> None:
    db = cluster.connect(0)
    for part in (*PARTS, b"rid/d"):
        db.split(part)
    for node, part in enumerate(PARTS, start=1):
        db.relocate(part, node)
    leaders = {r.replicas[0] for r in db.ranges() if any(r.span.start == part for part in PARTS)}
    assert leaders == {1, 2, 3}
    errors: list[BaseException] = []

    def split_part(index: int) -> None:
        client = cluster.connect(index)
        try:
            for i in range(SPLITS_PER_NODE):
                client.split(PARTS[index] + b"/%03d" % i)
        except BaseException as exc:  # NB: reported below, on the test's thread
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=split_part, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # NB: a node learns the others' splits from their heartbeats
    wait_until(
        lambda: len(db.ranges()) == 5 + 3 * SPLITS_PER_NODE,
        timeout_s=30,
        what="every split to reach node n1's directory",
    )
    ids = [r.range_id for r in db.ranges()]
    assert len(set(ids)) == len(ids), sorted(ids)
    assert max(ids) < 1000, sorted(ids)
    assert int(db.get(RANGE_IDS_KEY) or b"0") >= max(ids)  # they came from the counter


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, "--replicas", "3", rebalance_interval="0s") as started:
        yield started


@pytest.mark.slow(60)
def test_the_counters_own_replicated_range_splits_and_a_restarted_node_keeps_counting(
    replicated: LocalCluster,
) -> None:
    """The range holding the counter splits (its right-hand id is taken through that
    very range, before the split is proposed to its Raft log), at the counter and just
    past it; a node restarted takes its ids from the counter still."""
    db = replicated.connect(0)
    wait_until(
        lambda: all(len(r.replicas) == 3 for r in db.ranges()),
        timeout_s=60,
        what="r1 to have three replicas",
    )
    _, right = db.split(RANGE_IDS_KEY)
    _, past = db.split(RANGE_IDS_KEY + b"\x00")
    _, below = db.split(b"\x00")
    before = {right.range_id, past.range_id, below.range_id}
    assert len(before) == 3 and max(before) < 1000, before
    replicated.kill(1)
    replicated.restart(1)
    replicated.heal()
    splits = [db.split(b"rid/%d" % i)[1].range_id for i in range(4)]
    with replicated.connect(1) as restarted:
        splits += [restarted.split(b"rid/x%d" % i)[1].range_id for i in range(4)]
    ids = [r.range_id for r in db.ranges()]
    assert len(set(ids)) == len(ids), sorted(ids)
    assert not before & set(splits)
    assert max(ids) < 1000, sorted(ids)
    assert int(db.get(RANGE_IDS_KEY) or b"0") >= max(ids)  # they came from the counter
