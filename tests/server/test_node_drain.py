"""A node of a replicated cluster that stops first hands the leases of the ranges it
leads to other nodes (CockroachDB's lease drain), and marks itself draining so that none
comes back: writes to those ranges go on at the new lease holders instead of waiting out
an election timeout once the node is gone. Three in-process nodes on loopback, real gRPC
and Raft (:mod:`feedkv.testing.node_cluster`)."""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

import feedkv
from feedkv.errors import InvalidArgumentError
from feedkv.kv.address import split_host_port
from feedkv.kv.api import BatchRequest, BatchResponse, Get, Header
from feedkv.kv.db import KVClient
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.server.cluster import ClusterConfig
from feedkv.server.node import Node
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_cluster import await_replicas, node_cluster
from feedkv.testing.waiting import wait_until

DEADLINE_S = 20.0
KEYS = (b"a", b"b", b"c")  # each in a range of its own, led by n2
HOLD = Get(b"held")  # a call n2 holds as it arrives, so that its stop drains until let go


def _lead_on_n2(db: KVClient) -> None:
    await_replicas(db, 3, timeout_s=60.0)
    for key in KEYS[1:]:
        db.split(key)
    await_replicas(db, 3, timeout_s=60.0)
    for key in KEYS:
        db.relocate(key, 2)


def _lease_holders(nodes: list[Node], db: KVClient) -> dict[bytes, set[int]]:
    """The nodes whose replicas hold the lease of each key's range (as of their loops'
    last turn; the node's id for each, among the nodes still running)."""
    held: dict[bytes, set[int]] = {}
    for key in KEYS:
        range_id = next(r.range_id for r in db.ranges() if r.span.contains_key(key))
        held[key] = {
            node.store.node_id
            for node in nodes
            if (loop := node.store.replicas) is not None and loop.holds_lease(range_id)
        }
    return held


def _outcome(work: Callable[[], object]) -> object:
    """What ``work`` returns, or what it raises."""
    try:
        return work()
    except Exception as exc:  # the test's to show
        return exc


def _in_thread(work: Callable[[], object]) -> list[object]:
    """Run ``work`` on a thread and return its outcome, waited for up to DEADLINE_S."""
    outcome: list[object] = []
    threading.Thread(target=lambda: outcome.append(_outcome(work)), daemon=True).start()
    wait_until(lambda: bool(outcome), timeout_s=DEADLINE_S, what="the call")
    return outcome


@pytest.mark.slow(30)
def test_a_draining_node_hands_every_lease_over_and_none_comes_back(tmp_path: Path) -> None:
    with node_cluster(tmp_path) as nodes, feedkv.connect(nodes[0].url) as db:
        _lead_on_n2(db)
        n2 = nodes[1]
        loop = n2.store.replicas
        assert n2.cluster is not None and loop is not None
        # NB: the loop counts a lease it took at its next turn
        wait_until(lambda: len(loop.leases()) >= len(KEYS), timeout_s=DEADLINE_S, what="n2 leads")

        kept = n2.cluster.drain_leases()

        assert kept == [] and loop.leases() == []
        up = [nodes[0], nodes[2]]
        # the others' lookups name the new lease holders at once (not n2 until their
        # next heartbeats: clients would be sent to n2 as it stops)
        for node in up:
            assert node.cluster is not None
            directory = node.cluster.directory
            assert 2 not in [directory.lookup(key)[0].lease_holder for key in KEYS]
        wait_until(
            lambda: all(len(h) == 1 for h in _lease_holders(up, db).values()),
            timeout_s=DEADLINE_S,
            what="the leases on n1 and n3",
        )
        for node in up:
            member = node.cluster
            assert member is not None
            wait_until(
                lambda m=member: 2 in m.liveness.draining(),  # type: ignore[misc]
                timeout_s=DEADLINE_S,
                what="the others to know n2 drains",
            )
        with pytest.raises(InvalidArgumentError, match="n2 is draining"):
            db.relocate(KEYS[0], 2)
        assert n2.store.replicas.leases() == []
        # n2 still serves while it drains: a client that thinks it leads is sent on
        cache = db._router.ranges
        desc = cache.get(KEYS[0])
        cache.insert([replace(desc, replicas=(2, *(n for n in desc.replicas if n != 2)))])
        db.put(KEYS[0], b"sent to n2")
        assert db.get(KEYS[0]) == b"sent to n2"


@pytest.mark.slow(30)
def test_writes_while_the_node_drains_go_on_at_the_new_lease_holders(tmp_path: Path) -> None:
    """n2 stops with a call held in it, so its server drains until the test lets the
    call go: by then the leases it held are on n1 and n3 (handed over, not won in an
    election once n2 is gone: n2 is still up and its Raft still runs), and writes that a
    client sends to n2 are refused by it and applied there."""
    with node_cluster(tmp_path) as nodes, feedkv.connect(nodes[0].url) as db:
        _lead_on_n2(db)
        n2 = nodes[1]
        entered, gate = threading.Event(), threading.Event()
        intercept = n2.store.intercept

        def held(batch: BatchRequest) -> BatchResponse | None:
            if batch.requests == (HOLD,):
                entered.set()
                gate.wait(DEADLINE_S)
            return intercept(batch) if intercept is not None else None

        n2.store.intercept = held
        host, port = split_host_port(n2.url.removeprefix("feedkv://")) or ("", 0)
        client = GrpcTransport(host, port)
        # NB: its answer does not matter (n2 no longer leads its range by then)
        in_flight = threading.Thread(
            target=lambda: _outcome(lambda: client.send(BatchRequest(Header(), (HOLD,)))),
            daemon=True,
        )
        stopping = threading.Thread(target=n2.stop, kwargs={"grace_s": 600.0}, daemon=True)
        try:
            in_flight.start()
            wait_until(entered.is_set, timeout_s=DEADLINE_S, what="the held call")
            stopping.start()
            server = n2.server
            assert server is not None
            wait_until(lambda: server.draining, timeout_s=DEADLINE_S, what="the drain")

            up = [nodes[0], nodes[2]]
            # NB: n2 is up and its Raft runs: without a handover it would lead on
            wait_until(
                lambda: all(len(h) == 1 for h in _lease_holders(up, db).values()),
                timeout_s=DEADLINE_S,
                what="the leases on n1 and n3 while n2 drains",
            )
            cache = db._router.ranges
            for key in KEYS:  # NB: the client thinks n2 still leads
                desc = cache.get(key)
                cache.insert([replace(desc, replicas=(2, *(n for n in desc.replicas if n != 2)))])
                db.put(key, b"written while n2 drains")
            assert stopping.is_alive()  # n2 still drains
        finally:
            gate.set()
            in_flight.join(DEADLINE_S)
            client.close()
        wait_until(lambda: not stopping.is_alive(), timeout_s=DEADLINE_S, what="the stop")
        assert [db.get(key) for key in KEYS] == [b"written while n2 drains"] * len(KEYS)


@pytest.mark.slow(30)
def test_a_drain_hands_each_lease_to_a_caught_up_voter_not_one_behind(tmp_path: Path) -> None:
    """n1 hears nothing of n2's ranges (their Raft messages to it are dropped as they
    arrive), so its replicas fall behind while n3's keep up. n1 is the voter a drain
    would pick otherwise (the lowest id among voters equally loaded), and a transfer to
    it would wait until it caught up: here for ever (the wait is far longer than the
    test's deadline). The drain hands every lease to n3 instead."""
    config = ClusterConfig(replicas=3, rebalance_interval_s=0, lease_transfer_wait_s=600.0)
    with (
        node_cluster(tmp_path, cluster_config=config) as nodes,
        feedkv.connect(nodes[0].url) as db,
    ):
        _lead_on_n2(db)
        n1, n2, _ = nodes
        led = {next(r.range_id for r in db.ranges() if r.span.contains_key(k)) for k in KEYS}
        loop, lagging = n1.store.replicas, n2.store.replicas
        assert loop is not None and lagging is not None and n2.cluster is not None
        receive = loop.receive

        def deaf_to_n2(batch: list[tuple[int, bytes]], sender: int = 0) -> None:
            kept = [m for m in batch if sender != 2 or m[0] not in led]
            if kept:
                receive(kept, sender)

        loop.receive = deaf_to_n2  # type: ignore[method-assign]
        for key in KEYS:
            db.put(key + b"/1", b"n1 misses this")

        def behind() -> bool:
            lags = [lagging.voters_behind(range_id) for range_id in led]
            return all(lag.get(1, 0) and lag.get(3) == 0 for lag in lags)

        wait_until(behind, timeout_s=DEADLINE_S, what="n1 behind and n3 caught up")

        assert _in_thread(n2.cluster.drain_leases) == [[]]
        assert all(h == {3} for h in _lease_holders(nodes, db).values())
        loop.receive = receive  # type: ignore[method-assign]


@pytest.mark.slow(30)
def test_writes_while_a_node_drains_end_none_ambiguous(tmp_path: Path) -> None:
    """Writers share n1's own client (as its SQL sessions do: their concurrent batches to
    n2 travel on one stream), and others have clients of their own, while n2 stops,
    handing its leases over: every write applies, none fails, none ends ambiguous.
    (Before, n1 dropped its connection to n2 as soon as it heard n2 drain, news it took
    for a restart, and the writes in flight on it ended as 'result is ambiguous', SQL's
    40003; and now and then clients sent to n2 by lookups that still named it as lease
    holder met gRPC's stop, a cancellation, as ambiguous.)"""
    with node_cluster(tmp_path) as nodes, feedkv.connect(nodes[0].url) as db:
        _lead_on_n2(db)
        n1, n2, _ = nodes
        assert n1.cluster is not None
        shared = KVClient(n1.cluster.dialer)
        own = [feedkv.connect(n1.url) for _ in range(8)]
        outcomes: Counter[str] = Counter()
        counting = threading.Lock()
        done = threading.Event()

        def write(writer: int, client: KVClient) -> None:
            for n in itertools.count():
                if done.is_set():
                    return
                key = KEYS[n % len(KEYS)] + b"/%d/%d" % (writer, n)
                outcome = _outcome(lambda k=key: client.put(k, b"v"))  # type: ignore[misc]
                kind = type(outcome).__name__ if isinstance(outcome, Exception) else "ok"
                with counting:
                    outcomes[kind] += 1

        clients = [shared] * 8 + own
        writers = [
            threading.Thread(target=write, args=(i, client), daemon=True)
            for i, client in enumerate(clients)
        ]
        try:
            for writer in writers:
                writer.start()
            wait_until(lambda: outcomes["ok"] >= 200, timeout_s=DEADLINE_S, what="writes")
            assert _in_thread(n2.stop) == [None]
            after = outcomes["ok"]
            wait_until(lambda: outcomes["ok"] >= after + 200, timeout_s=DEADLINE_S, what="more")
        finally:
            done.set()
            for writer in writers:
                writer.join(DEADLINE_S)
            for client in {id(c): c for c in clients}.values():
                client.close()
        assert set(outcomes) == {"ok"}, outcomes


@pytest.mark.slow(30)
def test_the_last_node_stops_without_waiting_for_a_lease_transfer(tmp_path: Path) -> None:
    """Each node stopping in turn hands its leases to those still up and not draining;
    the last has none to hand them to and stops at once (the bound here is far longer
    than the test's deadline)."""
    config = ClusterConfig(replicas=3, rebalance_interval_s=0, lease_transfer_wait_s=600.0)
    with node_cluster(tmp_path, cluster_config=config) as nodes:
        with feedkv.connect(nodes[0].url) as db:
            _lead_on_n2(db)
        for node in reversed(nodes):
            assert _in_thread(node.stop) == [None]
        n1 = nodes[0]
        assert n1.cluster is not None and n1.cluster.liveness.draining() == {1, 2, 3}


@pytest.mark.xdist_group("cluster")
@pytest.mark.slow(60)
def test_a_crashed_peer_still_seen_live_takes_no_lease_and_is_not_waited_for(
    tmp_path: Path,
) -> None:
    """n1 SIGKILLed, then n2 SIGTERMed before liveness sees n1 dead (9 s): n1 does not
    answer n2's heartbeat, so n2 hands its leases to n3 (n1, the lowest id among
    voters equally loaded, would be chosen otherwise, and the wait, far longer than the
    test's deadline, run out, or until n1 looked dead). (n3 alone is no quorum then:
    nothing is written after.)"""
    with LocalCluster(
        tmp_path, 3, "--replicas", "3", "--lease-transfer-wait", "600s", rebalance_interval="0s"
    ) as cluster:
        with cluster.connect(1) as db:
            _lead_on_n2(db)
        cluster.kill(0)
        n2 = cluster.processes[1]
        assert n2 is not None
        # NB: a deadline only: a node that waits out its bound fails here, with its stacks
        assert n2.terminate(timeout_s=DEADLINE_S) == 0
        cluster.processes[1] = None
        log = (n2.store / "logs" / "feedkv.log").read_text()
        moves = [
            line["message"]
            for line in map(json.loads, log.splitlines())
            if line["message"].startswith("draining: moving the lease")
        ]
        assert len(moves) >= len(KEYS) and all(m.endswith(" to n3") for m in moves), moves


@pytest.mark.xdist_group("cluster")
@pytest.mark.slow(60)
def test_sql_writes_while_a_node_process_drains_end_none_ambiguous(tmp_path: Path) -> None:
    """psql-like clients of n1 and n3 write rows of a table whose ranges n2 leads while
    n2 is SIGTERMed: every statement succeeds; none fails with 40003 ('result is
    ambiguous'), as each did when its gateway cut its writes to n2 on hearing n2
    drain."""
    with LocalCluster(
        tmp_path, 3, "--replicas", "3", rebalance_interval="0s", insecure=True
    ) as cluster:
        gateways = [cluster.processes[0], cluster.processes[2]]
        assert all(node is not None for node in gateways)
        urls = [node.sql_url for node in gateways if node is not None]
        with psycopg.connect(urls[0], autocommit=True) as conn:
            conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
        with cluster.connect(0) as db:
            await_replicas(db, 3, timeout_s=60.0)
            for r in db.ranges():
                db.relocate(r.span.start or b"\x00", 2)
        outcomes: Counter[str] = Counter()
        counting = threading.Lock()
        done = threading.Event()

        def write(writer: int) -> None:
            with psycopg.connect(urls[writer % 2], autocommit=True) as session:
                for n in itertools.count():
                    if done.is_set():
                        return
                    try:
                        session.execute("UPSERT INTO kv VALUES (%s, 'v')", (writer << 32 | n,))
                        kind = "ok"
                    except psycopg.Error as exc:
                        kind = exc.sqlstate or type(exc).__name__
                    with counting:
                        outcomes[kind] += 1

        writers = [threading.Thread(target=write, args=(i,), daemon=True) for i in range(8)]
        try:
            for writer in writers:
                writer.start()
            wait_until(lambda: outcomes["ok"] >= 100, timeout_s=DEADLINE_S, what="writes")
            n2 = cluster.processes[1]
            assert n2 is not None
            assert n2.terminate(timeout_s=DEADLINE_S) == 0
            cluster.processes[1] = None
            after = outcomes["ok"]
            wait_until(lambda: outcomes["ok"] >= after + 100, timeout_s=DEADLINE_S, what="more")
        finally:
            done.set()
            for writer in writers:
                writer.join(DEADLINE_S)
        assert set(outcomes) == {"ok"}, outcomes


@pytest.mark.slow(30)
def test_a_drained_node_that_stays_up_hands_over_a_lease_it_comes_to_hold(
    tmp_path: Path,
) -> None:
    """n2, drained and up (``feedkv node drain``), is made to lead a range behind the
    cluster's back (its lease holder's Raft hands it the leadership, as an election
    would once that holder died): its replicate loop hands the lease on again."""
    with node_cluster(tmp_path) as nodes, feedkv.connect(nodes[0].url) as db:
        _lead_on_n2(db)
        n1, n2, _ = nodes
        assert n2.drain() == 0
        up = [n1, nodes[2]]
        wait_until(
            lambda: all(len(h) == 1 for h in _lease_holders(up, db).values()),
            timeout_s=DEADLINE_S,
            what="the leases on n1 and n3",
        )
        key = next(k for k, held in _lease_holders(up, db).items() if held == {1})
        range_id = next(r.range_id for r in db.ranges() if r.span.contains_key(key))
        loop, drained = n1.store.replicas, n2.store.replicas
        assert loop is not None and drained is not None
        term = loop.term(range_id)

        loop.transfer_lease(range_id, 2)

        # NB: its view of the new leader comes before its lease state says it let go
        wait_until(
            lambda: (
                drained.term(range_id) >= term + 2
                and drained.status(range_id)[0] in (1, 3)
                and not drained.holds_lease(range_id)
            ),
            timeout_s=DEADLINE_S,
            what="n2 to win the range's lease, then hand it over",
        )
        db.put(key, b"written after")
        assert db.get(key) == b"written after"
