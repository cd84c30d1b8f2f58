"""Stopping a node of a replicated cluster (three in-process nodes on loopback, real gRPC):
the calls in flight finish (Raft goes on while they do), then the other nodes' Raft
streams into it end, so the stop lasts as long as its slowest call, not the server's
whole grace (10 s by default: every stop of a node used to take it). The nodes here hand
no lease over as they stop (``lease_transfer_wait_s=0``), so that n2 still leads the
range of the write held in it: how a drain hands the leases over is
``test_node_drain.py``'s."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import NodeUnavailableError
from feedkv.kv.address import split_host_port
from feedkv.kv.api import BatchRequest, BatchResponse, Header, Put, PutResponse
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.server.cluster import ClusterConfig
from feedkv.server.node import Node
from feedkv.testing.node_cluster import await_replicas, node_cluster
from feedkv.testing.waiting import wait_until

DEADLINE_S = 60.0
GRACE_S = 600.0  # NB: the stop must end long before it: when the call in flight ends
WRITE = Put(b"slow", b"written while stopping")


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    config = ClusterConfig(replicas=3, rebalance_interval_s=0, lease_transfer_wait_s=0)
    with node_cluster(tmp_path, cluster_config=config) as started:
        yield started


class _Stopping:
    """n2 (holding the lease of WRITE's range) stopping with WRITE held as it arrived,
    so the node drains until :meth:`release`: :attr:`client` sent WRITE to n2 alone
    (:attr:`answers` gets its answer, or the error it raised); the stop's grace is far
    longer than the test's deadline."""

    def __init__(self, nodes: list[Node]) -> None:
        self.node = node = nodes[1]
        member = node.cluster
        assert member is not None
        with feedkv.connect(nodes[0].url) as db:
            await_replicas(db, 3, timeout_s=DEADLINE_S)
            db.relocate(WRITE.key, 2)  # the lease of its range to n2
        # NB: n2 leads the range: n1 and n3 send their answers to it
        wait_until(
            lambda: member.raft_listener.connections > 0,
            timeout_s=DEADLINE_S,
            what="Raft connections",
        )
        entered, self.gate = threading.Event(), threading.Event()
        intercept = node.store.intercept

        def held(batch: BatchRequest) -> BatchResponse | None:
            if batch.requests == (WRITE,):
                entered.set()
                self.gate.wait(DEADLINE_S)
            return intercept(batch) if intercept is not None else None

        node.store.intercept = held
        host, port = split_host_port(node.url.removeprefix("feedkv://")) or ("", 0)
        self.client = GrpcTransport(host, port)
        self.answers: list[BatchResponse | Exception] = []
        self.in_flight = threading.Thread(target=self._send)
        self.in_flight.start()
        self.stopping = threading.Thread(target=node.stop, kwargs={"grace_s": GRACE_S})
        wait_until(entered.is_set, timeout_s=DEADLINE_S, what="the write to arrive")
        self.stopping.start()
        server = node.server
        assert server is not None
        wait_until(lambda: server.draining, timeout_s=DEADLINE_S, what="the drain")

    def _send(self) -> None:
        try:
            self.answers.append(self.client.send(BatchRequest(Header(), (WRITE,))))
        except Exception as exc:  # the test's to show
            self.answers.append(exc)

    def release(self) -> None:
        """Let WRITE go on; the stop ends once it is answered."""
        self.gate.set()
        wait_until(lambda: not self.stopping.is_alive(), timeout_s=DEADLINE_S, what="the stop")
        self.in_flight.join(DEADLINE_S)

    def close(self) -> None:
        self.gate.set()
        self.in_flight.join(DEADLINE_S)
        self.client.close()


@pytest.fixture
def stopping(nodes: list[Node]) -> Iterator[_Stopping]:
    held = _Stopping(nodes)
    try:
        yield held
    finally:
        held.close()


@pytest.mark.slow(20)
def test_a_stop_lets_a_replicated_write_in_flight_commit_then_ends_the_peers_raft_connections(
    nodes: list[Node], stopping: _Stopping
) -> None:
    """The write held goes on once the drain began: Raft still runs, so it commits on
    a quorum, and the stop ends right after."""
    member = stopping.node.cluster
    assert member is not None
    stopping.release()
    (answer,) = stopping.answers
    assert isinstance(answer, BatchResponse), answer
    assert [type(r) for r in answer.responses] == [PutResponse]
    assert member.raft_listener.connections == 0
    with feedkv.connect(nodes[0].url) as db:
        assert db.get(WRITE.key) == b"written while stopping"


@pytest.mark.slow(20)
def test_a_write_a_draining_node_refuses_was_not_applied_and_goes_to_the_next_lease_holder(
    nodes: list[Node], stopping: _Stopping
) -> None:
    """While n2 drains, a write sent to it is refused before it is evaluated, in words
    that say so (not as ambiguous, SQLSTATE 40003): alone (a unary call) or beside the
    held one (on the client's stream). A client's router takes the refusal as a node
    away and waits for the range's next lease holder, where the write applies."""
    host, port = split_host_port(stopping.node.url.removeprefix("feedkv://")) or ("", 0)
    alone = GrpcTransport(host, port)
    try:
        with pytest.raises(NodeUnavailableError, match="draining"):
            alone.send(BatchRequest(Header(), (Put(b"slow/alone", b"x"),)))
    finally:
        alone.close()
    with pytest.raises(NodeUnavailableError):  # NB: streamed: WRITE is in flight on it
        stopping.client.send(BatchRequest(Header(), (Put(b"slow/streamed", b"x"),)))

    with feedkv.connect(nodes[0].url) as db:
        # NB: the client knows n2 holds the lease (n1's directory may not yet)
        cache = db._router.ranges
        desc = cache.get(WRITE.key)
        cache.insert([replace(desc, replicas=(2, *(n for n in desc.replicas if n != 2)))])
        lookups = cache.lookups
        outcome: list[object] = []

        def put() -> None:
            try:
                outcome.append(db.put(b"slow/routed", b"y"))
            except Exception as exc:  # the test's to show
                outcome.append(exc)

        writer = threading.Thread(target=put)
        writer.start()
        # NB: refused by n2 and pointed back there by n1 and n3, the router looks the
        # range up again and waits (an ambiguous answer would have ended the put)
        wait_until(lambda: cache.lookups > lookups, timeout_s=DEADLINE_S, what="a retry")
        assert not outcome, outcome
        stopping.release()
        writer.join(DEADLINE_S)
        assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
        assert db.get(b"slow/routed") == b"y"
        assert db.get(b"slow/alone") is None and db.get(b"slow/streamed") is None
