"""``feedkv start --raft-addr``: a node takes other nodes' Raft connections on the port it
is given (a firewall between nodes can name it), and a cluster whose nodes all have one
replicates through them (a port in use: tests/cli/test_start.py)."""

from __future__ import annotations

from pathlib import Path

import grpc
import msgpack
import pytest

from feedkv.kv.wire import SERVICE
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_process import free_port
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0


def _raft_port(url: str) -> int:
    """The Raft port the node at ``url`` names to the nodes that connect to it."""
    with grpc.insecure_channel(url.removeprefix("feedkv://")) as channel:
        ask = channel.unary_unary(f"/{SERVICE}/RaftPort")
        answer = msgpack.unpackb(ask(msgpack.packb({}), timeout=10.0))
    return int(answer["port"])


@pytest.mark.slow(30)
def test_a_cluster_on_fixed_raft_ports_listens_there_and_replicates(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    with LocalCluster(
        tmp_path,
        3,
        "--replicas",
        "3",
        rebalance_interval="0s",
        insecure=True,
        node_args=lambda index: ("--raft-addr", f"127.0.0.1:{ports[index]}"),
    ) as cluster:
        assert [_raft_port(cluster.url(i)) for i in range(3)] == ports
        with cluster.connect(0) as db:
            wait_until(
                lambda: all(len(r.replicas) == 3 for r in db.ranges()),
                timeout_s=DEADLINE_S,
                what="three replicas of every range",
            )
            # NB: a write commits only once a quorum's logs hold it: the Raft ports carry it
            db.put(b"fixed/key", b"through the fixed ports")
        with cluster.connect(2) as db:
            assert db.get(b"fixed/key") == b"through the fixed ports"
