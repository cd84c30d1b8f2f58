"""Node localities and changefeeds' ``execution_locality``, on three ``feedkv start``
processes: n1 in ``region=us-east1``, n2 and n3 in ``region=us-west1``.

CockroachDB (docs "Changefeeds in Multi-Region Deployments", "How does a changefeed
work"): ``cockroach start --locality region=us-east1,zone=a`` gives a node its tiers,
which ``crdb_internal.gossip_nodes`` and ``cockroach node status`` show;
``execution_locality`` pins "the coordination of the changefeed job and the nodes that
process the changefeed messages to the defined locality" (a node matches when it has
every tier of the filter), and a filter no node matches is an error: "no instances
found matching locality filter ...". When the coordinator fails its role moves to
another node, which must match too.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from feedkv.cli.node import run_node_status
from feedkv.errors import SQLError
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until
from feedkv.testing.webhook_endpoint import WebhookEndpoint

LOCALITIES = ("region=us-east1,zone=a", "region=us-west1,zone=b", "region=us-west1,zone=c")
DEADLINE_S = 90.0


def three_regions(base: Path) -> LocalCluster:
    return LocalCluster(
        base,
        3,
        rebalance_interval="0s",  # every range stays on n1: n2 and n3 may be killed
        node_args=lambda index: ("--locality", LOCALITIES[index]),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three nodes the tests leave running."""
    with three_regions(tmp_path_factory.mktemp("nodes")) as started:
        yield started


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three nodes of a test that kills some."""
    with three_regions(tmp_path / "nodes") as started:
        yield started


def test_the_nodes_lists_show_each_nodes_locality(cluster: LocalCluster) -> None:
    """``crdb_internal.gossip_nodes.locality`` and ``feedkv node status``, read from a
    node that learned the others' descriptors by gossip."""
    want = {i + 1: locality for i, locality in enumerate(LOCALITIES)}
    with cluster.connect(2) as db:

        def gossiped() -> bool:
            rows = db.sql("SELECT node_id, locality FROM crdb_internal.gossip_nodes").rows
            return dict(rows) == want

        wait_until(gossiped, timeout_s=DEADLINE_S, what="n3 to know every node's locality")
    out = io.StringIO()
    assert run_node_status(cluster.url(2), "json", out) == 0
    listed = {n["id"]: n["locality"] for n in map(json.loads, out.getvalue().splitlines())}
    assert listed == want


@pytest.mark.slow(30)
def test_a_changefeed_runs_only_on_nodes_matching_its_execution_locality(
    own_cluster: LocalCluster,
) -> None:
    """Created on n1 (us-east1), the job is coordinated by a us-west1 node, and every
    message is emitted there (the enriched envelope's ``source`` names the node and its
    locality). When that node dies, the other us-west1 node adopts the job, never n1;
    with both dead the job waits for one of them, saying so."""
    endpoint = WebhookEndpoint()
    db = own_cluster.connect(0)

    def messages() -> list[dict[str, Any]]:
        return list(endpoint.rows())

    try:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        db.sql("INSERT INTO t VALUES (1, 'before')")
        [(job_id,)] = db.sql(
            f"CREATE CHANGEFEED FOR t INTO '{endpoint.uri()}' WITH "
            "execution_locality='region=us-west1', envelope=enriched, "
            "enriched_properties='source'"
        ).rows

        def coordinator() -> str | None:
            rows = db.sql(f"SELECT coordinator_id, status FROM [SHOW JOBS] WHERE job_id = {job_id}")
            [(node, status)] = rows.rows
            assert status == "running"
            return f"n{node}" if node is not None else None  # an INT8, as CockroachDB's

        first = wait_until(coordinator, timeout_s=DEADLINE_S, what="a node to run the job")
        assert first in ("n2", "n3")
        wait_until(lambda: len(messages()) >= 1, timeout_s=DEADLINE_S, what="the initial scan")
        sources = {
            (m["source"]["node_id"], m["source"]["source_node_locality"]) for m in messages()
        }
        assert sources == {(first[1:], LOCALITIES[int(first[1:]) - 1])}

        own_cluster.kill(int(first[1:]) - 1)
        db.sql("INSERT INTO t VALUES (2, 'after')")
        second = wait_until(
            lambda: (c := coordinator()) not in (None, first) and c,
            timeout_s=DEADLINE_S,
            what="the job to move off its dead coordinator",
        )
        assert second in ("n2", "n3") and second != first

        def after_move() -> list[dict[str, Any]]:
            return [m for m in messages() if m["after"] == {"k": 2, "v": "after"}]

        moved = wait_until(after_move, timeout_s=DEADLINE_S, what="the row written after the move")
        assert {m["source"]["node_id"] for m in moved} == {second[1:]}
        assert {m["source"]["source_node_locality"] for m in moved} == {
            LOCALITIES[int(second[1:]) - 1]
        }

        # with both us-west1 nodes dead the job waits, saying for what; n1 never runs it
        own_cluster.kill(int(second[1:]) - 1)
        db.sql("INSERT INTO t VALUES (3, 'while waiting')")

        def status() -> tuple[object, object]:
            sql = f"SELECT running_status, coordinator_id FROM [SHOW JOBS] WHERE job_id = {job_id}"
            [(running_status, node)] = db.sql(sql).rows
            return running_status, node

        waiting = "waiting for a live node matching execution_locality region=us-west1"
        wait_until(
            lambda: status()[0] == waiting, timeout_s=DEADLINE_S, what="the job to say it waits"
        )
        assert status()[1] != 1
        # a us-west1 node back: it resumes the job, and the row written meanwhile arrives
        own_cluster.restart(int(first[1:]) - 1)
        wait_until(
            lambda: [m for m in messages() if m["after"] == {"k": 3, "v": "while waiting"}],
            timeout_s=DEADLINE_S,
            what="the row written while the job waited",
        )
        assert coordinator() == first
        # no message, before or after the moves, came from n1
        assert "1" not in {m["source"]["node_id"] for m in messages()}
    finally:
        db.close()
        endpoint.close()


def test_a_filter_no_node_matches_is_refused_and_a_matching_node_runs_the_job(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    with cluster.connect(1) as db:
        db.sql("CREATE TABLE refused (k INT PRIMARY KEY)")
        for wanted in ("region=eu-west1", "region=us-east1,zone=b"):
            with pytest.raises(SQLError) as refused:
                db.sql(
                    f"CREATE CHANGEFEED FOR refused INTO 'file://{tmp_path / 'out'}' "
                    f"WITH execution_locality='{wanted}'"
                )
            assert f"no instances found matching locality filter {wanted}" in str(refused.value)
        # a tier other than the first matches too: n1 is the one node in zone a
        [(job_id,)] = db.sql(
            f"CREATE CHANGEFEED FOR refused INTO 'file://{tmp_path / 'zone'}' "
            "WITH execution_locality='zone=a'"
        ).rows

        def coordinator() -> object:
            [(node,)] = db.sql(
                f"SELECT coordinator_id FROM [SHOW JOBS] WHERE job_id = {job_id}"
            ).rows
            return node

        assert wait_until(coordinator, timeout_s=DEADLINE_S, what="n1 to run the job") == 1
        # ALTER CHANGEFEED checks a new filter as CREATE does, and changes nothing then
        db.sql(f"PAUSE JOB {job_id}")
        with pytest.raises(SQLError) as refused:
            db.sql(f"ALTER CHANGEFEED {job_id} SET execution_locality = 'region=mars'")
        assert "no instances found matching locality filter region=mars" in str(refused.value)
        db.sql(f"ALTER CHANGEFEED {job_id} SET execution_locality = 'zone=c'")
        db.sql(f"RESUME JOB {job_id}")
        assert wait_until(
            lambda: coordinator() == 3, timeout_s=DEADLINE_S, what="n3 to run the altered job"
        )


@pytest.mark.slow(15)
def test_a_nodelocal_sink_writes_on_the_node_it_names_wherever_the_job_runs(
    tmp_path: Path,
) -> None:
    """``nodelocal://1/cdc`` is below n1's external I/O directory whichever node runs the
    job (CockroachDB's blob service): the job runs on a us-west1 node and writes through
    n1; when that node dies the other us-west1 node adopts it and writes there too, so
    every row is in n1's directory and none on n2 or n3. CREATE on a node checks the
    named node's directory as it checks a local one."""
    externs = [tmp_path / f"extern{index}" for index in (1, 2, 3)]
    own_cluster = LocalCluster(
        tmp_path / "nodes",
        3,
        rebalance_interval="0s",
        node_args=lambda i: ("--locality", LOCALITIES[i], "--external-io-dir", str(externs[i])),
    )
    db = own_cluster.connect(0)
    outs = [extern / "cdc" for extern in externs]

    def rows() -> set[tuple[int, str]]:
        found = set()
        for path in outs[0].rglob("*.ndjson"):
            for line in path.read_text().splitlines():
                after = json.loads(line)["after"]
                found.add((after["k"], after["v"]))
        return found

    try:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        db.sql("INSERT INTO t VALUES (1, 'before')")
        [(job_id,)] = db.sql(
            "CREATE CHANGEFEED FOR t INTO 'nodelocal://1/cdc' WITH "
            "execution_locality='region=us-west1', resolved='200ms', "
            "min_checkpoint_frequency='200ms'"
        ).rows

        def coordinator() -> str | None:
            [(node,)] = db.sql(f"SELECT coordinator_id FROM [SHOW JOBS] WHERE job_id = {job_id}")
            return f"n{node}" if node is not None else None  # an INT8, as CockroachDB's

        first = wait_until(coordinator, timeout_s=DEADLINE_S, what="a node to run the job")
        assert first in ("n2", "n3")
        wait_until(lambda: rows() == {(1, "before")}, timeout_s=DEADLINE_S, what="n1's file")
        own_cluster.kill(int(first[1:]) - 1)
        db.sql("INSERT INTO t VALUES (2, 'after')")
        second = wait_until(
            lambda: (c := coordinator()) not in (None, first) and c,
            timeout_s=DEADLINE_S,
            what="the move",
        )
        wait_until(
            lambda: (2, "after") in rows(), timeout_s=DEADLINE_S, what="the row after the move"
        )
        assert rows() == {(1, "before"), (2, "after")}
        assert not outs[1].exists() and not outs[2].exists()
        runner = own_cluster.processes[int(second[1:]) - 1]
        assert runner is not None
        with psycopg.connect(runner.sql_url, autocommit=True) as conn:
            for sink, why in (
                ("nodelocal://1/../escape", "outside the node's external I/O directory"),
                ("nodelocal://9/cdc", "n9"),
            ):
                with pytest.raises(psycopg.Error, match=why):
                    conn.execute(f"CREATE CHANGEFEED FOR t INTO '{sink}'")
    finally:
        db.close()
        own_cluster.close()
