"""``LocalCluster(init=True)``: nodes started with one ``--join`` list and then
``feedkv init``, as CockroachDB's users start a cluster; a node killed comes back on its
port with that list and finds its cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedkv.server.cluster import load_ident
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")


@pytest.mark.slow(15)
def test_an_init_mode_cluster_is_one_cluster_and_a_node_restarts_on_its_port(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, 3, rebalance_interval="0s", insecure=True, init=True) as cluster:
        idents = [load_ident(tmp_path / f"n{index + 1}") for index in range(3)]
        assert None not in idents, idents
        assert len({ident.cluster_id for ident in idents if ident is not None}) == 1
        assert idents[0] is not None and idents[0].node_id == 1  # init ran on node 1
        assert [cluster.address(index) for index in range(3)] == [
            f"127.0.0.1:{port}" for port in cluster.ports
        ]
        db = cluster.connect(0)
        db.put(b"before", b"1")
        cluster.kill(2)
        cluster.restart(2)
        assert cluster.address(2) == f"127.0.0.1:{cluster.ports[2]}"
        wait_until(lambda: cluster.live_nodes(2) == 3, timeout_s=60, what="all three live")
        with cluster.connect(2) as again:
            assert again.get(b"before") == b"1"
        db.close()
