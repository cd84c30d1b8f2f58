"""A changefeed job on Spark into a Delta changelog, its driver (the node running it)
SIGKILLed while windows land: after the restart each window is committed once."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

import feedkv.lake
from feedkv.changefeed.sinks.lake_tables import RESOLVED_KEY
from feedkv.testing.lake_rows import logical_now, wait_lake_past
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.sql_workload import Counter
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

# The driver killed mid-stream.

DRIVER_ARGS = ("--spark-master", "local[2]", "--closed-ts-target", "200ms")


def delta_windows(path: Path) -> list[tuple[int, Timestamp]]:
    """Every commit of the Delta table at ``path``, oldest first: (version, the window's
    end it records)."""
    return sorted(
        (int(c["version"]), Timestamp.parse(c[RESOLVED_KEY]))
        for c in DeltaTable(str(path)).history()
    )


@pytest.mark.slow(120)
@pytest.mark.timeout(600)
def test_a_killed_driver_commits_each_window_into_delta_exactly_once(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    store, lake = tmp_path / "store", tmp_path / "lake"
    uri = f"delta://{lake}"
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
                (m := feedkv.lake.read_consistent(uri)) is not None and m.resolved > first.resolved
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
    after = sorted(r["v"] for r in changes if r["_change_type"] in ("insert", "update_postimage"))
    before = sorted(r["v"] for r in changes if r["_change_type"] == "update_preimage")
    assert after == list(range(final + 1))  # every version once: nothing lost, nothing twice
    assert before == list(range(final))
    windows = delta_windows(lake / "a")
    ends = [end for _version, end in windows]
    assert ends == sorted(set(ends)), "a window was committed twice"
    assert not orphans, f"processes outlived their killed node: {orphans}"
    assert nodes[1].terminate(timeout_s=120) == 0
