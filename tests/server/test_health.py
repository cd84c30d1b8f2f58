"""``/health`` and ``/health?ready=1`` on the HTTP port of ``feedkv start`` processes,
as a load balancer asks CockroachDB's: ready while the node takes clients, 503 saying
why once it is decommissioned; a malformed query is refused."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest

from feedkv.cli.node import run_node_decommission
from feedkv.server.http import health
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0


def _get(process: NodeProcess, query: str) -> httpx.Response:
    return httpx.get(f"{process.http_url}/health{query}", verify=process.http_verify, timeout=10)


@pytest.mark.slow(20)
def test_ready_turns_503_once_the_node_is_decommissioned(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 2, rebalance_interval="0s") as cluster:
        leaving = cluster.processes[1]
        assert leaving is not None
        for query in ("", "?ready=1", "?ready=true", "?ready=0"):
            answer = _get(leaving, query)
            assert (answer.status_code, answer.json()) == (200, {}), (query, answer.text)
        bad = _get(leaving, "?ready=yes-please")
        assert bad.status_code == 400
        assert "is not a boolean; use ready=1" in bad.json()["error"]
        assert _get(leaving, "?readdy=1").status_code == 400

        out = io.StringIO()
        code = run_node_decommission(cluster.url(0), [2], stdout=out, timeout_s=DEADLINE_S)
        assert code == 0, out.getvalue()
        not_ready = wait_until(
            lambda: (a := _get(leaving, "?ready=1")).status_code == 503 and a,
            timeout_s=DEADLINE_S,
            what="node 2's /health?ready=1 to say it is not ready",
        )
        # NB: it learns so from its own read of the memberships ("it left the cluster")
        # or from a node that turns its heartbeat away ("it may not rejoin"), either first
        error = not_ready.json()["error"]
        assert error.startswith("node is not ready: node n2 is decommissioned: "), error
        # the process still runs: plain /health (liveness) stays 200
        assert _get(leaving, "").status_code == 200
        staying = cluster.processes[0]
        assert staying is not None
        assert _get(staying, "?ready=1").status_code == 200


def test_health_reads_only_a_boolean_ready() -> None:
    assert health("", "decommissioned") == (200, {})
    assert health("ready=1", None) == (200, {})
    assert health("ready=1", "its clock is off") == (
        503,
        {"error": "node is not ready: its clock is off"},
    )
    assert health("ready=f", "its clock is off") == (200, {})
    assert health("ready=maybe", None)[0] == 400
    assert health("node=1", None) == (
        400,
        {"error": "unknown parameter 'node'; /health takes only ready=1"},
    )
