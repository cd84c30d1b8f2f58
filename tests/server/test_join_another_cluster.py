"""A node restarted with ``--join`` naming another cluster's node keeps to its own
cluster, as it must, and says so in its log as a warning (as CockroachDB logs "node
belongs to cluster X but is attempting to connect to a gossip network for cluster Y"),
where it used to be silent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")


def _warnings(node: NodeProcess) -> list[str]:
    log = node.store / "logs" / "feedkv.log"
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [line["message"] for line in lines if line["level"] == "warning"]


@pytest.mark.slow(30)
def test_a_node_joining_another_clusters_node_warns_and_keeps_its_own(tmp_path: Path) -> None:
    a = NodeProcess(tmp_path / "a", "--insecure")
    b = NodeProcess(tmp_path / "b", "--insecure")
    try:
        assert b.terminate() == 0
        b = NodeProcess(tmp_path / "b", "--insecure", "--join", a.address)
        wait_until(
            lambda: any("belongs to cluster" in w for w in _warnings(b)),
            timeout_s=60,
            what="b to warn that a is another cluster's node",
        )
        warned = [w for w in _warnings(b) if "belongs to cluster" in w]
        for warning in warned:  # NB: every 10 s while it goes on
            assert warning.startswith(
                f"heartbeat to {a.address} failed: the node at {a.address} belongs to cluster "
            )
            assert warning.endswith("(does --join name another cluster's node?)")
    finally:
        a.terminate()
        b.terminate()
