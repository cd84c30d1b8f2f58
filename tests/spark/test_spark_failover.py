"""A Spark streaming read from three ``feedkv start --replicas 3`` processes, given all
three in its URL, outlives the SIGKILL of the node its clients connected through while a
task is in the middle of reading: the task's client moves to the next node of the URL
and reads the rest of its piece there, so the query goes on (a local master retries no
task: the query failed) and no row is lost or read twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.paused_source import GO, PausedFeedKVDataSource
from feedkv.testing.waiting import wait_until

DEADLINE_S = 90.0
ROWS = 12_000  # the initial scan: more than one Arrow batch (8192 rows), six scan pages


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "nodes", 3, "--replicas", "3", rebalance_interval="0s") as c:
        yield c


@pytest.mark.slow(50)
def test_a_streaming_read_goes_on_when_its_node_dies_while_a_task_reads(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    url = cluster.all_nodes_url()
    db = feedkv.connect(url)
    assert db.gateway_node() == 1  # as every client's of the URL: the node killed below
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql(f"INSERT INTO t SELECT i, 'row ' || i::STRING FROM generate_series(1, {ROWS}) AS g(i)")
    # NB: the node killed holds the table's lease too: the task's next page must move
    db.sql("ALTER TABLE t RELOCATE LEASE VALUES (1, 1)")

    def placed() -> bool:
        """Three replicas of each range and n1 the table's lease holder, as every node
        sees it (the survivors then address the range to its other replicas)."""
        ranges = cluster.agreed_ranges() or []
        replicated = all(len(r.replicas) == 3 for r in ranges)
        return bool(ranges) and replicated and ranges[-1].lease_holder == 1

    wait_until(placed, timeout_s=DEADLINE_S, what="the table's replicas and lease, agreed")
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    spark.dataSource.register(PausedFeedKVDataSource)
    seen: list[tuple[int, str]] = []

    def collect(df: Any, _batch: int) -> None:
        seen.extend((row["k"], row["__op"]) for row in df.select("k", "__op").collect())

    query = (
        spark.readStream.format("feedkv_paused")
        .option("url", url)
        .option("table", "t")
        .option("pause_dir", str(pause_dir))
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        wait_until(
            lambda: any(pause_dir.glob("reading-*")) or query.exception(),
            timeout_s=DEADLINE_S,
            what="a task in the middle of the initial scan",
        )
        assert query.exception() is None, query.exception()
        cluster.kill(0)
        (pause_dir / GO).touch()
        db.sql("INSERT INTO t VALUES ($1, 'after')", ROWS + 1)  # a change, after the kill
        wait_until(
            lambda: len(seen) > ROWS or query.exception(),
            timeout_s=DEADLINE_S,
            what="every row, and the change after the kill",
        )
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
        (pause_dir / GO).touch()
        db.close()
    keys = sorted(k for k, _op in seen)
    assert keys == list(range(1, ROWS + 2)), f"{len(keys)} rows, {len(set(keys))} distinct"
    assert {op for _k, op in seen} == {"insert"}
