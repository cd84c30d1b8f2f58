"""Stopping a node of a replicated cluster (three in-process nodes on loopback, real gRPC):
the calls in flight finish (Raft goes on while they do), then the other nodes' Raft
streams into it end, so the stop lasts as long as its slowest call, not the server's
whole grace (10 s by default: every stop of a node used to take it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv.kv.address import split_host_port
from feedkv.kv.api import BatchRequest, BatchResponse, Header, Put, PutResponse
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.server.cluster import ClusterConfig
from feedkv.server.node import Node
from feedkv.testing.waiting import wait_until

DEADLINE_S = 60.0
GRACE_S = 600.0  # NB: the stop must end long before it: when the call in flight ends
WRITE = Put(b"slow", b"written while stopping")


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    config = StoreConfig(sync=False)
    cluster = ClusterConfig(replicas=3, rebalance_interval_s=0)
    first = Node(
        tmp_path / "n1", listen="127.0.0.1:0", join=[], config=config, cluster_config=cluster
    )
    started = [first]
    try:
        address = first.url.removeprefix("feedkv://")
        for name in ("n2", "n3"):
            started.append(
                Node(
                    tmp_path / name,
                    listen="127.0.0.1:0",
                    join=[address],
                    config=config,
                    cluster_config=cluster,
                )
            )
        yield started
    finally:
        for node in started:
            node.stop(grace_s=0)


@pytest.mark.slow(20)
def test_a_stop_lets_a_replicated_write_in_flight_commit_then_ends_the_peers_raft_streams(
    nodes: list[Node],
) -> None:
    """n2 holds the lease of the write's range; the write is held as it arrives, the
    stop starts (its grace far longer than the test's deadline), then the write goes
    on: Raft still runs, so it commits on a quorum, and the stop ends right after."""
    node = nodes[1]
    member = node.cluster
    assert member is not None
    with feedkv.connect(nodes[0].url) as db:
        wait_until(
            lambda: all(len(r.replicas) == 3 for r in db.ranges()),
            timeout_s=DEADLINE_S,
            what="three replicas",
        )
        db.relocate(b"slow", 2)  # the lease of its range to n2
    # NB: n2 leads the range: n1 and n3 stream their answers to it
    wait_until(lambda: member.raft_streams_in > 0, timeout_s=DEADLINE_S, what="Raft streams")
    entered, gate = threading.Event(), threading.Event()
    intercept = node.store.intercept

    def held(batch: BatchRequest) -> BatchResponse | None:
        if batch.requests == (WRITE,):
            entered.set()
            gate.wait(DEADLINE_S)
        return intercept(batch) if intercept is not None else None

    node.store.intercept = held
    host, port = split_host_port(node.url.removeprefix("feedkv://")) or ("", 0)
    client = GrpcTransport(host, port)
    answers: list[BatchResponse] = []
    in_flight = threading.Thread(
        target=lambda: answers.append(client.send(BatchRequest(Header(), (WRITE,))))
    )
    in_flight.start()
    stopping = threading.Thread(target=node.stop, kwargs={"grace_s": GRACE_S})
    try:
        wait_until(entered.is_set, timeout_s=DEADLINE_S, what="the write to arrive")
        stopping.start()
        server = node.server
        assert server is not None
        wait_until(lambda: server.draining, timeout_s=DEADLINE_S, what="the drain")
        gate.set()
        wait_until(lambda: not stopping.is_alive(), timeout_s=DEADLINE_S, what="the stop")
        in_flight.join(DEADLINE_S)
        assert [type(a.responses[0]) for a in answers] == [PutResponse]
        assert member.raft_streams_in == 0
        with feedkv.connect(nodes[0].url) as db:
            assert db.get(b"slow") == b"written while stopping"
    finally:
        gate.set()
        client.close()
