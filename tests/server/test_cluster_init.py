"""Starting a cluster as CockroachDB users do: every node with the same ``--join`` list,
then ``feedkv init`` once (:mod:`feedkv.server.init_server`, :mod:`feedkv.cli.init`)."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import feedkv
from feedkv.cli.credentials import Login
from feedkv.cli.init import run_init
from feedkv.cli.main import main
from feedkv.errors import FeedKVError
from feedkv.kv.dialer import nodes
from feedkv.server.cluster import load_ident
from feedkv.server.node import Node
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.node_process import NodeProcess, free_port
from feedkv.testing.waiting import run_threads, wait_until

WAITING = "waiting for `feedkv init"


def waiting_node(store: Path, port: int, join: str) -> NodeProcess:
    """A secure node process on ``port`` started with ``--join join`` (it waits for
    `feedkv init` while its store knows no cluster)."""
    node = NodeProcess(
        store,
        "--changefeed-runner",
        "thread",
        "--listen",
        f"127.0.0.1:{port}",
        "--join",
        join,
        wait=False,
    )
    node.address = f"127.0.0.1:{port}"
    return node


def start_waiting(base: Path, count: int = 3) -> list[NodeProcess]:
    """``count`` node processes started with the same --join list of them all, none of
    which knows a cluster: they wait for `feedkv init`. The caller kills them."""
    base.mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in range(count)]
    join = ",".join(f"127.0.0.1:{port}" for port in ports)
    started: list[NodeProcess] = []
    try:
        for index, port in enumerate(ports):
            started.append(waiting_node(base / f"n{index + 1}", port, join))
    except BaseException:
        for node in started:
            node.kill_all()
        raise
    return started


@pytest.fixture
def joining(tmp_path: Path) -> Iterator[list[NodeProcess]]:
    started = start_waiting(tmp_path)
    try:
        yield started
    finally:
        for node in started:
            node.kill_all()


def _sql(url: str, statement: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``statement`` with ``feedkv sql`` over the node's SQL port; its output."""
    code = main(["sql", "--url", url, "--certs-dir", str(shared_certs_dir()), "-e", statement])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.slow(60)
def test_nodes_started_with_one_join_list_wait_for_init_then_form_a_cluster(
    joining: list[NodeProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    wait_until(
        lambda: all(WAITING in node.log.read_text() for node in joining),
        timeout_s=60,
        what="every node to say it waits for init",
    )
    certs = str(shared_certs_dir())
    first = joining[1]  # NB: any node of the list may be the one initialized
    status = ["node", "status", "--url", f"feedkv://{first.address}", "--certs-dir", certs]
    assert main(status) == 1  # it serves its port, and says why it cannot answer yet
    assert "waiting for `feedkv init`: it knows no cluster yet" in capsys.readouterr().err
    assert main(["init", "--url", f"feedkv://{first.address}", "--certs-dir", certs]) == 0
    assert "Cluster successfully initialized" in capsys.readouterr().out
    for node in joining:
        node.wait_started()
    with feedkv.connect(first.url) as db:
        wait_until(
            lambda: sum(1 for n in nodes(db) if n["live"]) == 3,
            timeout_s=60,
            what="the three nodes to be live",
        )
        ids = {n["address"]: n["id"] for n in nodes(db)}
    assert ids[first.address] == 1  # the node initialized bootstrapped the cluster

    def sql_addresses() -> dict[str, str]:
        assert main(["node", "status", "--url", first.url, "--format", "json"]) == 0
        listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        return {n["address"]: n["sql_address"] for n in listed}

    # NB: a node opens its SQL port after it joined: the others hear of it by gossip
    served = {n.address: urlsplit(n.sql_url).netloc.rpartition("@")[2] for n in joining}
    wait_until(lambda: sql_addresses() == served, timeout_s=30, what="every SQL address")

    _sql(joining[0].sql_url, "CREATE TABLE kv (k INT PRIMARY KEY, v STRING)", capsys)
    for index, node in enumerate(joining):
        _sql(node.sql_url, f"INSERT INTO kv VALUES ({index}, 'from n{index}')", capsys)
    for node in joining:
        out = _sql(node.sql_url, "SELECT k, v FROM kv ORDER BY k", capsys)
        assert "(3 rows)" in out and all(f"from n{i}" in out for i in range(3)), out
    gossip = _sql(
        joining[2].sql_url,
        f"SELECT sql_address FROM crdb_internal.gossip_nodes WHERE address = '{first.address}'",
        capsys,
    )
    assert served[first.address] in gossip, gossip
    for node in joining:  # each SQL port is its own node's
        out = _sql(node.sql_url, "SELECT crdb_internal.node_id()", capsys)
        assert out.splitlines()[2].strip() == str(ids[node.address]), out

    for node in joining:
        assert main(["init", "--url", f"feedkv://{node.address}", "--certs-dir", certs]) == 1
        assert "cluster has already been initialized" in capsys.readouterr().err
        assert node.log.read_text().count(WAITING) == 1  # logged once, not each round


def test_init_of_a_node_started_without_join_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node without --join bootstrapped its cluster at its start, as before."""
    with Node(tmp_path / "solo", listen="127.0.0.1:0", join=[]) as node:
        assert node.bootstrapped_cluster
        assert main(["init", "--url", node.url, "--insecure"]) == 1
    assert "error: cluster has already been initialized" in capsys.readouterr().err


def test_init_asks_for_certs_dir_or_insecure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--url", "feedkv://127.0.0.1:1"]) == 1
    assert "--certs-dir DIR" in capsys.readouterr().err


def test_init_of_a_secure_node_without_its_certs_says_what_to_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `feedkv node status` says it: not gRPC's "Init call failed: failed to connect
    to all addresses; ... Socket closed"."""
    certs = shared_certs_dir()
    with Node(tmp_path / "secure", listen="127.0.0.1:0", join=[], certs_dir=certs) as node:
        assert main(["init", "--url", node.url, "--insecure"]) == 1
    err = capsys.readouterr().err
    assert f"no feedkv node answered at {node.url.removeprefix('feedkv://')}" in err, err
    assert "a secure node needs its CA: --certs-dir" in err, err


def test_a_node_whose_join_list_names_only_itself_says_it_waits_for_init_then_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It logs once what it waits for (no other node will bring it a cluster: init
    here), `feedkv node status` against it says the same instead of failing obscurely,
    and SIGTERM stops it without joining anything."""
    port = free_port()
    node = NodeProcess(
        tmp_path / "alone",
        "--insecure",
        "--changefeed-runner",
        "thread",
        "--listen",
        f"127.0.0.1:{port}",
        "--join",
        f"127.0.0.1:{port}",
        wait=False,
    )
    try:
        wait_until(lambda: WAITING in node.log.read_text(), timeout_s=60, what="the wait")
        logged = node.log.read_text()
        assert f"--join names only this node (127.0.0.1:{port})" in logged, logged
        assert f"`feedkv init --url feedkv://127.0.0.1:{port}`" in logged, logged
        assert main(["node", "status", "--url", f"feedkv://127.0.0.1:{port}"]) == 1
        err = capsys.readouterr().err
        assert f"the node at 127.0.0.1:{port} is waiting for `feedkv init`" in err, err
        assert f"`feedkv init --url feedkv://127.0.0.1:{port}`" in err, err
        assert node.terminate() == 0
        assert "stopped before it served" in node.log.read_text()
        assert node.log.read_text().count(WAITING) == 1
        assert not (tmp_path / "alone" / "cluster.json").exists()  # it is in no cluster
    finally:
        node.kill_all()


def _init(node: NodeProcess) -> str:
    """Run `feedkv init` against ``node``: ``"ok"``, or the error it raised."""
    login = Login(f"feedkv://{node.address}", str(shared_certs_dir()), "root")
    try:
        run_init(login, io.StringIO())
    except FeedKVError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def _race(started: list[NodeProcess], pair: tuple[int, int]) -> None:
    """Fire `feedkv init` at the two nodes of ``pair`` together and check that they made
    one cluster of all of ``started``."""
    wait_until(
        lambda: all(WAITING in node.log.read_text() for node in started),
        timeout_s=60,
        what="every node to wait for init",
    )
    barrier = threading.Barrier(2)
    results: dict[int, str] = {}

    def fire(index: int) -> Callable[[], None]:
        def run() -> None:
            barrier.wait(timeout=30)
            results[index] = _init(started[index])

        return run

    run_threads([fire(index) for index in pair], deadline_s=60)
    winners = [index for index in pair if results[index] == "ok"]
    assert len(winners) == 1, results
    (winner,) = winners
    (loser,) = [index for index in pair if index != winner]
    refused = results[loser]
    assert "cluster has already been initialized" in refused, refused
    assert started[winner].address in refused, refused  # it names who bootstraps

    for node in started:
        node.wait_started()
    idents = [load_ident(node.store) for node in started]
    assert None not in idents, idents
    assert len({ident.cluster_id for ident in idents if ident is not None}) == 1, idents

    def all_live(db: feedkv.DB) -> list[dict[str, Any]] | None:
        listed = nodes(db)
        return listed if sum(1 for n in listed if n["live"]) == len(started) else None

    with feedkv.connect(started[loser].url) as db:
        listed = wait_until(lambda: all_live(db), timeout_s=60, what="every node live")
    assert sorted(n["address"] for n in listed) == sorted(n.address for n in started)
    assert next(n["address"] for n in listed if n["id"] == 1) == started[winner].address


@pytest.mark.slow(20)
def test_two_inits_at_once_on_two_nodes_make_one_cluster(tmp_path: Path) -> None:
    """The race of issue 37: two `feedkv init` fired together at two different waiting
    nodes of one --join list. One bootstraps; the other is told the cluster is
    initialized and by which node; all three nodes are in that one cluster."""
    for attempt, pair in enumerate([(0, 1), (1, 2), (2, 0)]):
        started = start_waiting(tmp_path / f"attempt{attempt}")
        try:
            _race(started, pair)
        finally:
            for node in started:
                node.kill_all()


@pytest.mark.slow(20)
def test_init_needs_a_majority_of_the_join_list_and_can_be_retried_on_another_node(
    joining: list[NodeProcess],
) -> None:
    """With two of three nodes down, init fails and says why (no majority granted the
    claim) and gives its own claim back; once one of them is up again, init on *it*
    bootstraps (the first node's grant is free), the first joins, and so does the last
    when it starts: one cluster."""
    wait_until(
        lambda: all(WAITING in node.log.read_text() for node in joining),
        timeout_s=60,
        what="every node to wait for init",
    )
    first, second, third = joining
    join = ",".join(node.address for node in joining)  # as start_waiting gave them
    second.kill_all()
    third.kill_all()
    failed = _init(first)
    assert failed.startswith("NodeUnavailableError"), failed
    assert "2 of the 3 nodes at --join must be waiting and grant it" in failed, failed
    assert f"{first.address}: granted" in failed, failed
    assert "feedkv init` again" in failed, failed

    waited = third.log.read_text().count(WAITING)  # NB: the log is appended to
    joining[2] = third = waiting_node(third.store, int(third.address.rpartition(":")[2]), join)
    wait_until(
        lambda: third.log.read_text().count(WAITING) > waited, timeout_s=60, what="n3 to wait"
    )
    assert _init(third) == "ok"
    for node in (first, third):
        node.wait_started()
    port = int(second.address.rpartition(":")[2])
    joining[1] = second = waiting_node(second.store, port, join)
    second.wait_started()
    idents = [load_ident(node.store) for node in joining]
    assert None not in idents, idents
    assert len({ident.cluster_id for ident in idents if ident is not None}) == 1, idents
    assert {ident.node_id for ident in idents if ident is not None} == {1, 2, 3}
    assert idents[2] is not None and idents[2].node_id == 1  # the node init ran on bootstrapped it
