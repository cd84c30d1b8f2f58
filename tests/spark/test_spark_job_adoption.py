"""A Spark changefeed job into a file sink, adopted by another node after a SIGKILL of
the node that ran it, emits every row from its high-water mark on: the adopting node's
query starts a checkpoint of its own, numbering its batches from 0 again, and these
are a new run of batches, not replays of the first run's (whose manifests would have
the new batches' files dropped)."""

from __future__ import annotations

import glob
import json
import threading
from pathlib import Path

import pytest

from feedkv.db import DB
from feedkv.errors import AmbiguousResultError
from feedkv.spark.runner import RUN_FILE, checkpoint_run
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 180.0
# NB: a look at the job is a SQL query through a node of the cluster (about 0.1 s here):
# asked back to back for the minute Spark takes to start, the queries took a core from
# the nodes and the JVM they waited for
POLL_S = 0.5
SPARK_ARGS = ("--changefeed-runner", "spark", "--spark-master", "local[1]")


def _job(db: DB, job_id: int) -> tuple[int, str]:
    rows = db.sql(
        f"SELECT coordinator_id, running_status FROM crdb_internal.jobs WHERE job_id = {job_id}"
    ).rows
    return rows[0][0], rows[0][1] or ""


@pytest.mark.slow(120)
def test_a_job_adopted_after_its_node_dies_loses_no_row(tmp_path: Path) -> None:
    extern = tmp_path / "extern"
    with LocalCluster(
        tmp_path / "nodes",
        3,
        "--replicas",
        "3",
        *SPARK_ARGS,
        "--external-io-dir",
        str(extern),
        rebalance_interval="0s",
    ) as cluster:
        db = cluster.connect(2)
        db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
        [(job_id,)] = db.sql(
            "CREATE CHANGEFEED FOR kv INTO 'nodelocal://self/cdc' "
            "WITH resolved = '1s', min_checkpoint_frequency = '1s'"
        ).rows
        wait_until(
            lambda: "resolved" in _job(db, job_id)[1],
            timeout_s=DEADLINE_S,
            poll_s=POLL_S,
            what="the job",
        )
        victim = _job(db, job_id)[0]
        gateway = next(i for i in range(3) if i + 1 != victim)
        db.close()
        db = cluster.connect(gateway)
        stop = threading.Event()
        written: list[int] = []

        def writer() -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    db.sql("UPSERT INTO kv VALUES ($1, 'x')", i)
                except AmbiguousResultError:  # in flight at the kill: there or not
                    continue
                written.append(i)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            wait_until(lambda: len(written) > 100, timeout_s=DEADLINE_S, what="writes")
            cluster.kill(victim - 1)
            wait_until(
                lambda: _job(db, job_id)[0] != victim and "resolved" in _job(db, job_id)[1],
                timeout_s=DEADLINE_S,
                poll_s=POLL_S,
                what="another node to run the job",
            )
            after = len(written)
            wait_until(lambda: len(written) > after + 100, timeout_s=DEADLINE_S)
        finally:
            stop.set()
            thread.join()
        last = db.now()
        sink = extern  # nodelocal://self/cdc of either node: both share the directory

        def resolved_past_last() -> bool:
            markers = glob.glob(str(sink / "cdc" / "**" / "*.RESOLVED"), recursive=True)
            resolved = [json.loads(Path(m).read_text())["resolved"] for m in markers]
            return any(r >= str(last) for r in resolved)

        wait_until(
            resolved_past_last, timeout_s=DEADLINE_S, poll_s=POLL_S, what="a marker past the end"
        )
        emitted = set()
        for name in glob.glob(str(sink / "cdc" / "**" / "*.ndjson"), recursive=True):
            for line in Path(name).read_text().splitlines():
                emitted.add(json.loads(line)["key"][0])
        keys = {row[0] for row in db.sql("SELECT k FROM kv").rows}
        assert len(keys) > 200
        assert sorted(keys - emitted) == []
        # each node's query kept a run of its own (the victim's checkpoint, and the
        # adopter's), so the sink's manifests lie in two run folders
        runs = glob.glob(str(sink / ".cdc.feedkv" / "jobs" / str(job_id) / "manifests" / "*"))
        assert len(runs) == 2, runs
        db.close()


def test_a_checkpoint_keeps_its_run_and_an_older_one_has_none(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    run = checkpoint_run(fresh)
    assert run.isalnum() and len(run) == 16
    assert checkpoint_run(fresh) == run  # the query started again on its checkpoint
    assert (fresh / RUN_FILE).read_text() == run + "\n"
    assert checkpoint_run(tmp_path / "another") != run
    older = tmp_path / "older"
    (older / "offsets").mkdir(parents=True)  # a checkpoint begun before runs were kept
    assert checkpoint_run(older) == ""
