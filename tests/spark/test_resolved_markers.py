"""A Spark changefeed job's resolved markers, written by the driver as batches commit
(without Spark: the writer is driven as the driver drives it, against a real node)."""

from __future__ import annotations

import itertools
from pathlib import Path

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.spark.changefeed_job import ChangefeedStreamWriter, JobOptions, TaskResult
from feedkv.sql import catalog
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import key_next


def writer(db: DB, out: Path, **options: str) -> ChangefeedStreamWriter:
    """A job's writer for table t (created before), starting now."""
    now = db.now()
    snapshot = catalog.Snapshot(db, now)
    table_id = catalog.table_by_name(
        snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t"
    ).id
    spec = ChangefeedSpec(
        targets=(Target(table_id),),
        topics={table_id: "t"},
        options=parse_options(options.items(), now=now),
        start=now,
        sink_uri=f"file://{out}",
    )
    return ChangefeedStreamWriter(JobOptions(db.serving_url(), spec))


def markers(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob("*.RESOLVED"))


def commit(writer: ChangefeedStreamWriter, batch_id: int, lo: Timestamp, hi: Timestamp) -> None:
    writer.commit([TaskResult(resolved=hi, lo=lo)], batch_id)


def test_markers_come_at_most_every_resolved_interval(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    out = tmp_path / "out"
    # NB: markers come no more often than min_checkpoint_frequency (30 s by default)
    job = writer(db, out, resolved="10s", min_checkpoint_frequency="10s")
    seconds = iter([0.0, 4.0, 9.9, 10.0, 15.0])  # when each batch commits
    job.clock = lambda: next(seconds)
    times = [db.now() for _ in range(6)]
    for batch_id, (lo, hi) in enumerate(itertools.pairwise(times)):
        commit(job, batch_id, lo, hi)
    assert len(markers(out)) == 2  # at 0 s and at 10 s


def test_the_marker_at_end_time_is_always_written(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    out = tmp_path / "out"
    end = Timestamp(db.now().wall + 200_000_000, 0)  # within the clock's max offset
    job = writer(db, out, resolved="1h", end_time=f"{end.wall}.{end.logical:010d}")
    first, second = db.now(), db.now()
    commit(job, 0, first, second)
    commit(job, 1, second, end)
    assert len(markers(out)) == 2


def test_the_marker_one_tick_before_a_stopping_schema_change_is_always_written(
    db: DB, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    out = tmp_path / "out"
    job = writer(db, out, resolved="1h", schema_change_policy="stop")
    first, second = db.now(), db.now()
    commit(job, 0, first, second)
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    snapshot = catalog.Snapshot(db, db.now())
    table = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    [kv] = db.scan(catalog.descriptor_key(table.id), key_next(catalog.descriptor_key(table.id)))
    commit(job, 1, second, kv.ts.prev())  # the job's last batch: it stops at the change
    assert len(markers(out)) == 2
