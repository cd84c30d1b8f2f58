"""``feedkv node ...`` as a CockroachDB operator runs it: ``--insecure`` taken by the
node commands and ``debug rangefeed`` as ``cockroach node status --insecure`` does (they
were refused with "unrecognized arguments: --insecure"), and not together with
``--certs-dir``; a recommission of an active node warns that it has nothing to do;
``node ls`` and ``node status NODE_ID`` as CockroachDB's (they were refused by the parser),
and the nodes decommissioned and gone left out unless ``--decommission``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pytest

from feedkv.cli.main import main
from feedkv.cli.node import clock_offset_ms, listed_nodes
from feedkv.cli.sql import write_result
from feedkv.kv.node_status import NodeInfo
from feedkv.server.node import Node
from feedkv.sql.session import Result


def test_node_status_and_decommission_take_insecure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Node(tmp_path / "solo", listen="127.0.0.1:0", join=[]) as node:
        assert main(["node", "status", "--url", node.url, "--insecure", "--format", "json"]) == 0
        (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert listed["id"] == 1 and listed["is_live"] is True
        # the cluster's only node cannot go: refused by the cluster, not by the parser
        assert main(["node", "decommission", "1", "--url", node.url, "--insecure"]) == 1
        assert "would leave no active node" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [["node", "status"], ["node", "recommission", "1"], ["debug", "rangefeed", "k"]],
)
def test_insecure_and_certs_dir_do_not_go_together(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--insecure", "--certs-dir", "certs"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_recommission_of_an_active_node_warns_that_it_has_nothing_to_take_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As cockroach node recommission warns; it said "The affected nodes must be
    restarted to rejoin the cluster fully." of a node that never left."""
    with Node(tmp_path / "solo", listen="127.0.0.1:0", join=[]) as node:
        assert main(["node", "recommission", "1", "--url", node.url, "--insecure"]) == 0
    captured = capsys.readouterr()
    assert "warning: node n1 is not decommissioning: nothing to take back" in captured.err
    assert "must be restarted" not in captured.out


def test_node_ls_and_status_of_one_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Node(tmp_path / "solo", listen="127.0.0.1:0", join=[]) as node:
        url = ["--url", node.url, "--insecure", "--format", "json"]
        assert main(["node", "ls", *url]) == 0
        assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [{"id": 1}]
        assert main(["node", "status", "1", "--decommission", *url]) == 0
        (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert listed["id"] == 1
        assert listed["is_decommissioning"] is False and listed["is_draining"] is False
        assert main(["node", "status", "7", *url]) == 1
        assert "node n7 not in the cluster; its nodes are n1" in capsys.readouterr().err


def _node(node_id: int, live: bool, membership: str) -> NodeInfo:
    return NodeInfo(node_id, f"h{node_id}:1", 1, live, 0, None, membership=membership)


def test_decommissioned_nodes_that_are_gone_are_left_out_unless_asked_for() -> None:
    nodes = [
        _node(3, False, "decommissioned"),
        _node(1, True, "active"),
        _node(2, True, "decommissioned"),  # still running: listed, as CockroachDB does
        _node(4, False, "active"),  # dead but a member: listed
    ]
    assert [n.node_id for n in listed_nodes(nodes)] == [1, 2, 4]
    assert [n.node_id for n in listed_nodes(nodes, gone_too=True)] == [1, 2, 3, 4]
    assert [n.node_id for n in listed_nodes(nodes, [3])] == [3]


def test_node_drain_leaves_the_node_up_draining_and_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``feedkv node drain`` of a node in no other program's hands but this test's: it
    drains (is_draining, ``/health?ready=1`` 503) and stays up; a
    --shutdown of it is refused (only ``feedkv start`` can be stopped from outside), as is
    a node not in the cluster."""
    with Node(tmp_path / "solo", listen="127.0.0.1:0", join=[], http_addr="127.0.0.1:0") as node:
        url = ["--url", node.url, "--insecure"]
        assert httpx.get(f"{node.http_url}/health?ready=1").status_code == 200
        assert main(["node", "drain", "7", *url]) == 1
        assert "node n7 not in the cluster; its nodes are n1" in capsys.readouterr().err
        assert main(["node", "drain", "1", "--shutdown", *url]) == 1
        assert "runs inside another program" in capsys.readouterr().err

        assert main(["node", "drain", *url]) == 0

        assert capsys.readouterr().out.splitlines() == [
            "node is draining... remaining: 0 (complete)",
            "drain ok",
        ]
        assert main(["node", "status", *url, "--format", "json"]) == 0
        (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert listed["is_draining"] is True and listed["is_live"] is True
        answer = httpx.get(f"{node.http_url}/health?ready=1")
        assert answer.status_code == 503
        assert "the node is draining" in answer.json()["error"]
        assert httpx.get(f"{node.http_url}/health").status_code == 200  # still up


@pytest.mark.parametrize(
    "command",
    [["node", "status", "--insecure"], ["node", "ls"], ["sql", "-e", "SELECT 1"], ["init"]],
)
def test_url_without_a_scheme_is_refused_not_opened_as_a_store(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # NB: a bare HOST:PORT was opened as a new store directory of that name, and
    # `node status` then listed that empty store's one node as if it were the cluster
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main([*command, "--url", "127.0.0.1:26258"])
    assert exited.value.code == 2
    assert "did you mean feedkv://127.0.0.1:26258?" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_clock_offset_that_rounds_to_zero_prints_unsigned() -> None:
    # NB: a clock 40 us behind printed as "-0" in node status's clock_offset_ms
    offsets = [clock_offset_ms(-40_000), clock_offset_ms(-60_000), clock_offset_ms(1_250_000)]
    out = io.StringIO()
    write_result(Result(("clock_offset_ms",), [(o,) for o in offsets], "SELECT 3"), "csv", out)
    assert out.getvalue().split() == ["clock_offset_ms", "0", "-0.1", "1.2"]
    assert clock_offset_ms(None) is None
