"""Stopping a whole replicated cluster with SIGTERM (as an operator or a container
orchestrator does): every node drains and exits 0, even the last one, which has no
quorum left to record where its changefeed jobs ended (their leases expire instead);
and quietly: a request that waits for a range gives up at once when its node stops
(no "gave up routing ... after 50 attempts" a while later)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 90.0


def _runs_jobs(node: NodeProcess) -> bool:
    return "running it here" in (node.store / "logs" / "feedkv.log").read_text()


def _warned_while_stopping(node: NodeProcess) -> list[str]:
    """The warnings and errors ``node`` logged from its drain on."""
    text = (node.store / "logs" / "feedkv.log").read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    drained = next(i for i, line in enumerate(lines) if line["message"] == "draining")
    return [
        f"{line['logger']}: {line['message']}"
        for line in lines[drained:]
        if line["level"] in ("warning", "error", "critical")
    ]


def _stop(node: NodeProcess) -> int:
    # NB: a deadline only: a node that never exits fails here, with its stacks
    return node.terminate(timeout_s=2 * DEADLINE_S)


@pytest.mark.slow(90)
def test_the_node_running_the_jobs_stops_last_without_a_quorum(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 3, "--replicas", "3", rebalance_interval="0s") as cluster:
        with cluster.connect(0) as db:
            db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
            db.sql("INSERT INTO t VALUES (1)")
            db.sql(
                "CREATE CHANGEFEED FOR t INTO 'null://' "
                "WITH resolved='100ms', min_checkpoint_frequency='100ms'"
            )

            def running() -> bool:
                jobs = db.sql("SELECT status, high_water_timestamp FROM [SHOW CHANGEFEED JOBS]")
                return len(jobs.rows) == 1 and all(
                    status == "running" and high_water for status, high_water in jobs.rows
                )

            wait_until(running, timeout_s=DEADLINE_S, what="the job past its scan")
        nodes = [p for p in cluster.processes if p is not None]
        runners = [node for node in nodes if _runs_jobs(node)]
        assert len(runners) == 1, "one node runs the job"
        others = [node for node in nodes if node is not runners[0]]
        assert [_stop(node) for node in others] == [0, 0]
        assert _stop(runners[0]) == 0  # its job's record is out of reach: it exits anyway
        assert all("feedkv node stopped" in node.log.read_text() for node in nodes)
        assert {node.store.name: _warned_while_stopping(node) for node in nodes} == {
            node.store.name: [] for node in nodes
        }
