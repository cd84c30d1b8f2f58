"""Schema changes under changefeed jobs on Spark: ``schema_change_policy`` and dropped
tables mean what they mean for the changefeed core (``stop`` ends the job resolved up to
one tick before the change, ``nobackfill`` leaves the rewritten rows out)."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

from feedkv import DB
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import key_next

DEADLINE_S = 240.0  # Spark starts slowly on a loaded machine
FAST = "resolved = '200ms', min_checkpoint_frequency = '200ms'"


def create(db: DB, out: Path, options: str) -> int:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{out}' WITH updated, {FAST}, {options}"
    ).rows
    return int(job_id)


def messages(out: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(glob.glob(f"{out}/*/*.ndjson"))
        for line in Path(path).read_text().splitlines()
    ]


def resolved(out: Path) -> Timestamp | None:
    marks = [json.loads(Path(p).read_text())["resolved"] for p in glob.glob(f"{out}/*/*.RESOLVED")]
    return max((Timestamp.parse(m) for m in marks), default=None)


def status(db: DB, job_id: int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    [row] = result.rows
    return dict(zip(result.columns, row, strict=True))


def ended(db: DB, job_id: int) -> dict[str, Any]:
    def failed() -> dict[str, Any] | None:
        job = status(db, job_id)
        return job if job["status"] == "failed" else None

    job = wait_until(failed, timeout_s=DEADLINE_S, poll_s=0.2, what=f"job {job_id} to fail")
    assert job is not None
    return job


def resolve_to_now(db: DB, job_id: int, out: Path) -> None:
    """Wait until job ``job_id`` has resolved past everything written so far."""
    now = db.now()
    wait_until(
        lambda: (resolved(out) or Timestamp(0, 0)) >= now or db.changefeeds.error(job_id),
        timeout_s=DEADLINE_S,
        what=f"job {job_id} to resolve past {now}",
    )
    assert db.changefeeds.error(job_id) is None


def descriptor_ts(db: DB, name: str) -> Timestamp:
    """When the current version of table ``name`` was written."""
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, catalog.DEFAULT_DATABASE)
    key = catalog.descriptor_key(catalog.table_by_name(snapshot, database, name).id)
    [kv] = db.scan(key, key_next(key))
    return kv.ts


def test_stop_ends_the_job_resolved_one_tick_before_the_change(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = create(db, out, "schema_change_policy = 'stop'")
    wait_until(lambda: len(messages(out)) >= 2, timeout_s=DEADLINE_S, what="the initial scan")
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    change = descriptor_ts(db, "t")
    db.sql("INSERT INTO t VALUES (3, 'c', 8)")
    job = ended(db, job_id)
    assert job["error"] == (  # as the changefeed core says it, not a Spark dump
        f"schema change occurred at {change}: table 't' added column(s) n (version 2); "
        f"the changefeed stopped, resolved up to {change.prev()}"
    )
    assert resolved(out) == change.prev()
    assert sorted(m["after"]["k"] for m in messages(out)) == [1, 2]


def test_nobackfill_leaves_the_rewritten_rows_out(spark: Any, db: DB, tmp_path: Path) -> None:
    out = tmp_path / "out"
    job_id = create(db, out, "schema_change_policy = 'nobackfill'")
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    db.sql("INSERT INTO t VALUES (3, 'c', 8)")
    resolve_to_now(db, job_id, out)
    assert sorted((m["after"]["k"], m["after"].get("n")) for m in messages(out)) == [
        (1, None),  # the initial scan, before the column existed
        (2, None),
        (3, 8),
    ]
    db.changefeeds.cancel(job_id)


def test_a_dropped_table_ends_the_job(spark: Any, db: DB, tmp_path: Path) -> None:
    out = tmp_path / "out"
    job_id = create(db, out, "schema_change_policy = 'backfill'")
    wait_until(lambda: resolved(out) is not None, timeout_s=DEADLINE_S, what="a resolved mark")
    db.sql("DROP TABLE t")
    job = ended(db, job_id)
    assert job["error"].startswith('"t" was dropped at ')


def test_column_changes_scan_the_rows_again_at_a_change_that_rewrites_none(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = create(db, out, "schema_change_events = 'column_changes'")
    db.sql("UPDATE t SET v = 'a2' WHERE k = 1")
    db.sql("ALTER TABLE t ADD COLUMN n INT")  # nullable, no default: no row is rewritten
    change = descriptor_ts(db, "t")
    db.sql("UPDATE t SET n = 5 WHERE k = 1")
    resolve_to_now(db, job_id, out)
    got = messages(out)  # in file-name order
    rescanned = [m for m in got if m["updated"] == str(change)]
    assert sorted((m["after"]["k"], m["after"]["n"]) for m in rescanned) == [(1, None), (2, None)]
    first = [(m["after"]["v"], m["after"].get("n", "-")) for m in got if m["after"]["k"] == 1]
    assert first == [("a", "-"), ("a2", "-"), ("a2", None), ("a2", 5)]
    db.changefeeds.cancel(job_id)
