"""``LocalCluster(init=True)``: nodes started with one ``--join`` list and then
``feedkv init``, as CockroachDB's users start a cluster; a node killed comes back on its
port with that list and finds its cluster."""

from __future__ import annotations

import socket
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


class _FirstPortTaken(LocalCluster):
    """Hands its first node a port another process listens on, as when a port
    :func:`~feedkv.testing.node_process.free_port` saw free is taken before the node
    binds it."""

    held: socket.socket | None = None

    @classmethod
    def _free_port(cls) -> int:
        if cls.held is None:
            cls.held = socket.create_server(("127.0.0.1", 0))
            port: int = cls.held.getsockname()[1]
            return port
        return LocalCluster._free_port()


@pytest.mark.slow(15)
def test_an_init_mode_cluster_whose_port_was_taken_starts_on_other_ports(
    tmp_path: Path,
) -> None:
    try:
        with _FirstPortTaken(tmp_path, 1, rebalance_interval="0s", insecure=True, init=True) as c:
            assert _FirstPortTaken.held is not None
            taken = _FirstPortTaken.held.getsockname()[1]
            assert c.ports[0] != taken
            assert c.address(0) == f"127.0.0.1:{c.ports[0]}"
            with c.connect(0) as db:
                db.put(b"k", b"v")
                assert db.get(b"k") == b"v"
    finally:
        if _FirstPortTaken.held is not None:
            _FirstPortTaken.held.close()
            _FirstPortTaken.held = None
