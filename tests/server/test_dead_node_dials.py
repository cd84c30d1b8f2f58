"""A SIGKILLed node of a cluster of ``feedkv start`` processes costs its clients no
connect timeout: its port refuses at once, so a dial to it fails at once, a client
whose URL names it first connects through the next node, and a client moving off its
dead gateway passes it by (the connect timeouts here are long enough that waiting
one out would miss the test's deadline)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import NodeUnavailableError
from feedkv.kv.address import split_host_port
from feedkv.kv.dialer import ClusterDialer
from feedkv.kv.gateway import Gateway
from feedkv.kv.grpc_transport import url_tls
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0
LONG_S = 600.0  # a connect timeout no test waits out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, rebalance_interval="0s") as started:
        yield started


def _gateway(cluster: LocalCluster, addresses: list[str]) -> Gateway:
    parsed = [split_host_port(a) for a in addresses]
    return Gateway(
        [p for p in parsed if p is not None],
        tls=url_tls(cluster.url(0)),
        connect_timeout_s=LONG_S,
        move_connect_timeout_s=LONG_S,
    )


@pytest.mark.slow(20)
def test_a_killed_nodes_port_refuses_dials_and_clients_pass_it_by(cluster: LocalCluster) -> None:
    n1, n2, n3 = (cluster.address(i) for i in range(3))
    client = feedkv.connect(cluster.url(0))
    mover = _gateway(cluster, [n1, n3, n2])
    try:
        cluster.kill(2)
        dialer = client.transport
        assert isinstance(dialer, ClusterDialer)
        assert not dialer.seen_dead(3)
        with pytest.raises(NodeUnavailableError, match="refused: nothing listens there"):
            dialer.dial(3)  # never dialled before: a connection to make
        assert dialer.seen_dead(3)  # its replicas are tried last from now on

        first_dead = _gateway(cluster, [n3, n1, n2])
        assert first_dead.address == n1
        first_dead.close()

        cluster.kill(0)
        moved: list[str] = []

        def move() -> None:
            mover.now()  # its gateway n1 is dead: it moves, past the dead n3
            moved.append(mover.address)

        thread = threading.Thread(target=move)
        thread.start()
        wait_until(lambda: not thread.is_alive(), timeout_s=DEADLINE_S, what="the move to n2")
        assert moved == [n2]
    finally:
        mover.close()
        client.close()
