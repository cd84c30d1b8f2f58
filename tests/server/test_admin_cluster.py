"""The admin page of a node in a cluster of ``feedkv start`` processes: every node with
its liveness, and the cluster's ranges, whichever node holds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from feedkv.server.http import OVERVIEW_PATH
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

DEADLINE = 60.0


def test_a_nodes_page_shows_the_whole_cluster(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster", nodes=2) as cluster:
        process = cluster.processes[1]
        assert process is not None and process.http_url
        with cluster.connect(0) as db:
            db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
            db.sql("ALTER USER root WITH PASSWORD 'root-pw'")  # the page's login (secure)
            ranges = {r.range_id for r in db.ranges()}

        def overview() -> dict[str, Any]:
            response = httpx.get(
                process.http_url + OVERVIEW_PATH,
                verify=process.http_verify,
                auth=("root", "root-pw"),
                timeout=10,
            )
            assert response.status_code == 200, response.text
            data: dict[str, Any] = response.json()
            return data

        def whole() -> dict[str, Any] | None:
            d = overview()
            live = {n["node_id"]: n["live"] for n in d["nodes"]}
            shown = {r["range_id"] for r in d["ranges"]}
            return d if live == {"n1": True, "n2": True} and shown >= ranges else None

        data = wait_until(
            whole, timeout_s=DEADLINE, what="node 2's page to show both nodes and every range"
        )
        assert data["node"] == "n2"
        # nodes started without --locality have none
        assert [n["locality"] for n in data["nodes"]] == ["", ""]
        assert all(r["replicas"] for r in data["ranges"])


def test_the_clusters_job_statistics_are_reported_by_one_node(tmp_path: Path) -> None:
    """``jobs_changefeed_currently_paused`` counts every paused job of the cluster on
    one node and none on the others, so a sum over the nodes (as Prometheus dashboards
    take it) counts each job once, as CockroachDB's one poll-jobs-stats job reports."""
    with LocalCluster(tmp_path / "cluster", nodes=2, insecure=True) as cluster:
        with cluster.connect(0) as db:
            db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
            [(job_id,)] = db.sql("CREATE CHANGEFEED FOR t INTO 'null://'").rows
            db.sql(f"PAUSE JOB {job_id}")
        nodes = [p for p in cluster.processes if p is not None]

        def paused(process: Any) -> float:
            text = httpx.get(process.http_url + "/_status/vars", timeout=10).text
            line = next(
                line
                for line in text.splitlines()
                if line.startswith("jobs_changefeed_currently_paused ")
            )
            return float(line.split()[1])

        wait_until(
            lambda: sorted(paused(p) for p in nodes) == [0.0, 1.0],
            timeout_s=DEADLINE,
            what="one node to report the paused job, the other none",
        )
