"""``/health`` and ``/health?ready=1`` on the HTTP port of ``feedkv start`` processes,
as a load balancer asks CockroachDB's: ready while the node takes clients, 503 saying
why while it waits for `feedkv init` or once it is decommissioned; a malformed query is
refused."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest

from feedkv.cli.main import main
from feedkv.cli.node import run_node_decommission
from feedkv.server.http import health
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_process import NodeProcess, free_port
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


@pytest.mark.slow(20)
def test_a_node_waiting_for_init_answers_health_and_is_not_ready_until_init(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new node started with --join serves its HTTP port while it waits for `feedkv
    init`: /health is 200 (the process is up: a liveness probe must not restart it),
    /health?ready=1 503 saying it waits for init, and the metrics 503; once
    initialized, it is ready."""
    port, http_port = free_port(), free_port()
    node = NodeProcess(
        tmp_path / "waiting",
        "--changefeed-runner",
        "thread",
        "--listen",
        f"127.0.0.1:{port}",
        "--join",
        f"127.0.0.1:{port}",
        "--http-addr",
        f"127.0.0.1:{http_port}",
        wait=False,
    )
    base = f"https://127.0.0.1:{http_port}"

    def get(path: str) -> httpx.Response | None:
        try:
            return httpx.get(base + path, verify=node.http_verify, timeout=10)
        except httpx.TransportError:
            return None  # not listening yet

    try:
        alive = wait_until(lambda: get("/health"), timeout_s=DEADLINE_S, what="/health")
        assert (alive.status_code, alive.json()) == (200, {})
        waiting = get("/health?ready=1")
        assert waiting is not None and waiting.status_code == 503, waiting
        error = waiting.json()["error"]
        assert error.startswith(f"node is not ready: the node at 127.0.0.1:{port} is waiting "), (
            error
        )
        assert "waiting for `feedkv init`" in error, error
        metrics = get("/_status/vars")
        assert metrics is not None and metrics.status_code == 503
        assert "waiting for `feedkv init`" in metrics.json()["error"]

        certs = str(shared_certs_dir())
        assert main(["init", "--url", f"feedkv://127.0.0.1:{port}", "--certs-dir", certs]) == 0
        assert "Cluster successfully initialized" in capsys.readouterr().out
        node.wait_started()
        assert node.http_url == base  # the same port serves on
        ready = wait_until(
            lambda: (a := get("/health?ready=1")) is not None and a.status_code == 200 and a,
            timeout_s=DEADLINE_S,
            what="the initialized node to be ready",
        )
        assert ready.json() == {}
        scraped = get("/_status/vars")
        assert scraped is not None and scraped.status_code == 200
        assert "liveness_livenodes" in scraped.text
    finally:
        node.kill_all()
