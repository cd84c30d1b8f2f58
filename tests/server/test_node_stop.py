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
from feedkv.server.node import Node
from feedkv.testing.node_cluster import await_replicas, node_cluster
from feedkv.testing.waiting import wait_until

DEADLINE_S = 60.0
GRACE_S = 600.0  # NB: the stop must end long before it: when the call in flight ends
WRITE = Put(b"slow", b"written while stopping")


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    with node_cluster(tmp_path) as started:
        yield started


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
        await_replicas(db, 3, timeout_s=DEADLINE_S)
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
