"""What SHOW CHANGEFEED JOBS says of a changefeed job on Spark while its query starts,
at its creation and after PAUSE / RESUME: that the query is starting (its high-water
mark cannot move meanwhile), never an initial scan the job does not run, then its
high-water mark as the batches commit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.jobs import running_status
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.registry import CLAIMED_STATUS, FIRST_RESOLVED_STATUS
from feedkv.changefeed.rows import Target
from feedkv.spark.runner import STARTING_STATUS, SparkJob
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE_S = 240.0  # Spark starts slowly on a loaded machine
RESOLVED = re.compile(r"running: resolved=\d+\.\d{9},\d+")


def show_job(db: DB, job_id: int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    [row] = result.rows
    return dict(zip(result.columns, row, strict=True))


def statuses_until_resolved_past(
    db: DB, job_id: int, above: Timestamp | None
) -> tuple[list[str], dict[str, Any]]:
    """Every running_status SHOW CHANGEFEED JOB gave until it showed a high-water mark
    past ``above`` (any, for ``None``), and that row."""
    seen: list[str] = []

    def moved() -> dict[str, Any] | None:
        job = show_job(db, job_id)
        assert job["status"] == "running", job
        seen.append(job["running_status"])
        mark = job["high_water_timestamp"]
        if mark is None or not RESOLVED.fullmatch(job["running_status"]):
            return None
        past = above is None or Timestamp.parse(format(mark, "f")) > above
        return job if past else None

    row = wait_until(moved, timeout_s=DEADLINE_S, poll_s=0.05, what="the mark to move")
    return seen, row


def test_a_spark_job_says_its_query_is_starting_until_a_batch_runs(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'before')")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{tmp_path / 'out'}' WITH "
        "initial_scan = 'no', resolved = '200ms', min_checkpoint_frequency = '200ms'"
    ).rows
    seen, _ = statuses_until_resolved_past(db, job_id, None)
    allowed = {"", CLAIMED_STATUS, STARTING_STATUS, FIRST_RESOLVED_STATUS}
    assert set(seen[:-1]) <= allowed, seen  # never "running: initial scan": none runs

    db.sql(f"PAUSE JOB {job_id}")
    # NB: PAUSE JOB waits for the runner to stop the query, up to a bound a loaded
    # machine may pass
    paused = wait_until(
        lambda: (job := show_job(db, job_id))["status"] == "paused" and job,
        timeout_s=DEADLINE_S,
        what="the job to pause",
    )
    assert paused["running_status"] == "paused"
    mark = Timestamp.parse(format(paused["high_water_timestamp"], "f"))
    db.sql(f"RESUME JOB {job_id}")
    seen, row = statuses_until_resolved_past(db, job_id, mark)
    assert set(seen[:-1]) <= {"", CLAIMED_STATUS, STARTING_STATUS, running_status(mark)}, seen
    assert RESOLVED.fullmatch(row["running_status"])


def test_a_spark_job_is_starting_until_its_query_ran_a_batch(
    spark: Any, tmp_path: Path, db: DB
) -> None:
    now = db.now()
    spec = ChangefeedSpec((Target(1),), {1: "t"}, parse_options((), now=now), now)
    job = SparkJob(db.serving_url(), 7, spec, tmp_path / "checkpoint")
    assert job.starting_status == STARTING_STATUS
    job.close()  # closed before it ran: its query never starts
    job.run()
    assert job.starting_status == STARTING_STATUS
