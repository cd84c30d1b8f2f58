"""A changefeed job on Spark into an Iceberg changelog in a REST catalog (the loopback
test catalog, which outlives the node), its driver (the node running it) SIGKILLed
while windows land: after the restart every version is in the changelog once and no
window end is committed twice."""

from __future__ import annotations

from pathlib import Path

import pytest

import feedkv.lake
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import parse_sink_uri, sink_defaults
from feedkv.changefeed.sinks.iceberg import IcebergPlace
from feedkv.changefeed.sinks.lake_tables import RESOLVED_KEY
from feedkv.testing.iceberg_rest import IcebergRestServer
from feedkv.testing.lake_rows import logical_now, wait_lake_past
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.sql_workload import Counter
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DRIVER_ARGS = ("--spark-master", "local[2]", "--closed-ts-target", "200ms")


def window_ends(uri: str, table: str) -> list[Timestamp]:
    """The window end each snapshot of ``table`` records, in commit order."""
    parsed = parse_sink_uri(uri, sink_defaults(uri, parse_options((), now=Timestamp(0))))
    catalog = IcebergPlace.of(parsed).open()
    try:
        snapshots = catalog.load_table(("feeds", table)).snapshots()
        return [Timestamp.parse(s.summary[RESOLVED_KEY]) for s in snapshots]
    finally:
        catalog.close()


@pytest.mark.soak  # NB: the same crash into Delta runs in the regular suite (test_spark_lake_crash)
@pytest.mark.timeout(600)
def test_a_killed_driver_commits_each_window_into_a_rest_catalog_exactly_once(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    store = tmp_path / "store"
    with IcebergRestServer(str(tmp_path / "rest"), credential="feedkv:s3cret") as server:
        uri = f"iceberg://crash/feeds?catalog_uri={server.url}&credential=feedkv:s3cret"
        nodes.append(NodeProcess(store, *DRIVER_ARGS))
        with feedkv.connect(nodes[0].url) as db:
            db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
            db.sql("INSERT INTO a VALUES (1, 0)")
            [(job_id,)] = db.sql(
                f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' "
                "WITH lake_mode = 'changelog', min_checkpoint_frequency = '200ms'"
            ).rows
            counter = Counter(nodes[0].url).start()
            first = wait_lake_past(db, job_id, uri, logical_now(db))
            # Windows keep landing while the counter runs; the kill comes in the middle.
            wait_until(
                lambda: (
                    (m := feedkv.lake.read_consistent(uri)) is not None
                    and m.resolved > first.resolved
                ),
                timeout_s=120,
                what="another window in the lake",
            )
            counter.wait_for(5)
        orphans = nodes[0].kill_all()
        counter.stop()

        nodes.append(NodeProcess(store, *DRIVER_ARGS))
        with feedkv.connect(nodes[1].url) as db:
            db.sql("UPDATE a SET v = v + 1 WHERE k = 1")
            [(final,)] = db.sql("SELECT v FROM a WHERE k = 1").rows
            marker = wait_lake_past(db, job_id, uri, logical_now(db))
            db.sql(f"CANCEL JOB {job_id}")

        changes = feedkv.lake.read_tables(uri, marker)["a"].to_pylist()
        ends = window_ends(uri, "a")
    kinds = ("insert", "update_postimage")
    after = sorted(r["v"] for r in changes if r["_change_type"] in kinds)
    before = sorted(r["v"] for r in changes if r["_change_type"] == "update_preimage")
    assert after == list(range(final + 1))  # every version once: nothing lost, nothing twice
    assert before == list(range(final))
    assert ends == sorted(set(ends)), "a window was committed twice"
    assert not orphans, f"processes outlived their killed node: {orphans}"
    assert nodes[1].terminate(timeout_s=120) == 0
