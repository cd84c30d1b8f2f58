"""Stopping a node of a replicated cluster (three in-process nodes on loopback, real gRPC):
the other nodes' Raft streams into it end, so the stop waits for the calls in flight
only, not for the server's grace (10 s by default: every stop of a node used to take
it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.kv.address import split_host_port
from feedkv.kv.api import BatchRequest, BatchResponse, Get, GetResponse, Header
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.server.cluster import ClusterConfig
from feedkv.server.node import Node
from feedkv.testing.waiting import wait_until

DEADLINE_S = 60.0
GRACE_S = 600.0  # NB: the stop must end long before it: when the call in flight ends


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
def test_a_stop_waits_for_the_call_in_flight_and_not_for_the_peers_raft_streams(
    nodes: list[Node],
) -> None:
    node = nodes[1]
    member = node.cluster
    assert member is not None
    # NB: n1 leads the ranges it replicates to n2: it streams Raft messages to n2
    wait_until(lambda: member.raft_streams_in > 0, timeout_s=DEADLINE_S, what="n1's stream")
    entered, gate = threading.Event(), threading.Event()
    intercept = node.store.intercept

    def slow(batch: BatchRequest) -> BatchResponse | None:
        if batch.requests != (Get(b"slow"),):
            return intercept(batch) if intercept is not None else None
        entered.set()
        gate.wait(DEADLINE_S)
        return BatchResponse((GetResponse(b"answered while stopping"),), node.store.clock.now())

    node.store.intercept = slow
    host, port = split_host_port(node.url.removeprefix("feedkv://")) or ("", 0)
    client = GrpcTransport(host, port)
    answers: list[BatchResponse] = []
    in_flight = threading.Thread(
        target=lambda: answers.append(client.send(BatchRequest(Header(), (Get(b"slow"),))))
    )
    in_flight.start()
    stopping = threading.Thread(target=node.stop, kwargs={"grace_s": GRACE_S})
    try:
        wait_until(entered.is_set, timeout_s=DEADLINE_S, what="the slow call to arrive")
        stopping.start()
        wait_until(lambda: member.raft_streams_in == 0, timeout_s=DEADLINE_S, what="streams ended")
        assert stopping.is_alive()  # NB: the gate holds the call, and so the stop
        gate.set()
        wait_until(lambda: not stopping.is_alive(), timeout_s=DEADLINE_S, what="the stop")
        in_flight.join(DEADLINE_S)
        assert [a.responses for a in answers] == [(GetResponse(b"answered while stopping"),)]
    finally:
        gate.set()
        client.close()
