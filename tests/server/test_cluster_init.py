"""Starting a cluster as CockroachDB users do: every node with the same ``--join`` list,
then ``feedkv init`` once (:mod:`feedkv.server.init_server`, :mod:`feedkv.cli.init`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import feedkv
from feedkv.cli.main import main
from feedkv.kv.dialer import nodes
from feedkv.server.node import Node
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.node_process import NodeProcess, free_port
from feedkv.testing.waiting import wait_until

WAITING = "waiting for `feedkv init"


@pytest.fixture
def joining(tmp_path: Path) -> Iterator[list[NodeProcess]]:
    """Three secure node processes started with the same --join list of all three,
    none of which knows a cluster: they wait for `feedkv init`."""
    ports = [free_port() for _ in range(3)]
    join = ",".join(f"127.0.0.1:{port}" for port in ports)
    started: list[NodeProcess] = []
    try:
        for index, port in enumerate(ports):
            node = NodeProcess(
                tmp_path / f"n{index + 1}",
                "--changefeed-runner",
                "thread",
                "--listen",
                f"127.0.0.1:{port}",
                "--join",
                join,
                wait=False,
            )
            node.address = f"127.0.0.1:{port}"
            started.append(node)
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


def test_a_node_waiting_for_init_stops_on_sigterm_without_joining(tmp_path: Path) -> None:
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
        assert node.terminate() == 0
        assert "stopped before it served" in node.log.read_text()
        assert not (tmp_path / "alone" / "cluster.json").exists()  # it is in no cluster
    finally:
        node.kill_all()
