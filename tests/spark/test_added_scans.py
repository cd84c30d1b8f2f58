"""Tables added to a Spark changefeed job ``WITH initial_scan`` (``ALTER CHANGEFEED ...
ADD``), without Spark: the reader's offsets and partitions as the driver asks for them,
against a real node. The first batch of the run scans the added tables, and only them,
as of the offset it resumes from; later offsets carry which were scanned, so a query
started again from its checkpoint scans them no more. End to end on Spark:
tests/spark/test_spark_jobs.py."""

from __future__ import annotations

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.spark.changefeed_job import ChangefeedStreamReader, JobOptions
from feedkv.spark.offsets import FeedOffset
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp


def table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return catalog.table_by_name(snapshot, database, name).id


def reader(db: DB, start: Timestamp, scan_tables: frozenset[int]) -> ChangefeedStreamReader:
    """The reader of a job on t and w resumed from ``start``, scanning ``scan_tables``."""
    ids = {name: table_id(db, name) for name in ("t", "w")}
    spec = ChangefeedSpec(
        targets=tuple(Target(i) for i in ids.values()),
        topics={i: name for name, i in ids.items()},
        options=parse_options([("initial_scan", "no")], now=start),
        start=start,
        sink_uri="null://",
        scan_tables=scan_tables,
    )
    return ChangefeedStreamReader(JobOptions(db.serving_url(), spec))


def test_the_first_batch_scans_the_added_tables_only_then_changes_follow(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    db.sql("CREATE TABLE w (id INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1)")
    db.sql("INSERT INTO w VALUES (1), (2)")
    w = table_id(db, "w")
    resumed_at = db.now()
    job = reader(db, resumed_at, frozenset({w}))
    start = FeedOffset(resumed_at).to_json()  # the checkpoint's last offset

    end = job.latestOffset(start, job.getDefaultReadLimit())
    assert FeedOffset.from_json(end) == FeedOffset(resumed_at, None, (w,))
    pieces = [p.value for p in job.partitions(start, end)]
    assert pieces and {p.target.table_id for p in pieces} == {w}
    assert all(p.piece.is_scan and p.piece.hi == resumed_at for p in pieces)

    db.sql("INSERT INTO t VALUES (2)")
    written = db.now()

    def moved() -> FeedOffset | None:
        found = FeedOffset.from_json(job.latestOffset(end, job.getDefaultReadLimit()))
        return found if found.resolved >= written else None

    later = wait_until(moved, timeout_s=30, what="a window of changes after the scan")
    assert later.added_scans == (w,)  # carried: a restarted query does not scan again
    windows = [p.value for p in job.partitions(end, later.to_json())]
    assert {p.target.table_id for p in windows} == {table_id(db, "t"), w}
    assert not any(p.piece.is_scan for p in windows)
    job.stop()


def test_a_run_with_no_scan_due_drops_the_added_scans_it_resumes_with(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    db.sql("CREATE TABLE w (id INT PRIMARY KEY)")
    w = table_id(db, "w")
    resumed_at = db.now()
    job = reader(db, resumed_at, frozenset())  # the mark moved past w's scan
    start = FeedOffset(resumed_at, None, (w,)).to_json()
    db.sql("INSERT INTO w VALUES (1)")
    written = db.now()

    def moved() -> FeedOffset | None:
        found = FeedOffset.from_json(job.latestOffset(start, job.getDefaultReadLimit()))
        return found if found.resolved >= written else None

    later = wait_until(moved, timeout_s=30, what="a window of changes")
    assert later.added_scans == ()
    assert not any(p.value.piece.is_scan for p in job.partitions(start, later.to_json()))
    job.stop()


def test_a_scan_due_for_tables_already_scanned_in_this_run_is_not_read_again(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    db.sql("CREATE TABLE w (id INT PRIMARY KEY)")
    w = table_id(db, "w")
    resumed_at = db.now()
    job = reader(db, resumed_at, frozenset({w}))
    scanned = FeedOffset(resumed_at, None, (w,))
    end = FeedOffset.from_json(job.latestOffset(scanned.to_json(), job.getDefaultReadLimit()))
    assert end.added_scans == (w,)
    pieces = job.partitions(scanned.to_json(), end.to_json())
    assert not any(p.value.piece.is_scan for p in pieces)
    job.stop()
