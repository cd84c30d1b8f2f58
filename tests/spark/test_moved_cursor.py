"""A Spark changefeed job whose high-water mark was moved (``ALTER CHANGEFEED ... SET
cursor``) while its query's checkpoint still ends at the old mark: the reader's first
batch reads every change after the new cursor, and the offsets after it carry the cursor
so no later batch reads from it again. The reader as the driver asks it, against a real
node (no Spark); end to end on Spark: tests/spark/test_spark_jobs.py."""

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


def reader(db: DB, cursor: Timestamp) -> ChangefeedStreamReader:
    """The reader of a job on t whose cursor was set to ``cursor`` (and which runs from
    there, as ALTER CHANGEFEED leaves it)."""
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    t = catalog.table_by_name(snapshot, database, "t").id
    spec = ChangefeedSpec(
        targets=(Target(t),),
        topics={t: "t"},
        options=parse_options([("cursor", str(cursor))], now=db.now()),
        start=cursor,
        sink_uri="null://",
    )
    return ChangefeedStreamReader(JobOptions(db.serving_url(), spec))


def test_the_first_batch_after_a_cursor_moved_back_reads_from_the_cursor(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    cursor = db.now()
    db.sql("INSERT INTO t VALUES (1)")
    high_water = db.now()  # where the query's checkpoint ends
    job = reader(db, cursor)
    start = FeedOffset(high_water).to_json()  # written before the cursor moved

    def window() -> FeedOffset | None:
        found = FeedOffset.from_json(job.latestOffset(start, job.getDefaultReadLimit()))
        return found if found.resolved > high_water else None

    end = wait_until(window, timeout_s=30, what="a window after the old high-water mark")
    assert end.cursor == cursor
    pieces = [p.value.piece for p in job.partitions(start, end.to_json())]
    assert pieces and all(p.lo == cursor and p.hi == end.resolved for p in pieces)

    # the batch after it reads from its own start: the cursor moved once
    db.sql("INSERT INTO t VALUES (2)")
    written = db.now()

    def later() -> FeedOffset | None:
        found = FeedOffset.from_json(job.latestOffset(end.to_json(), job.getDefaultReadLimit()))
        return found if found.resolved >= written else None

    after = wait_until(later, timeout_s=30, what="the next window")
    assert after.cursor == cursor
    pieces = [p.value.piece for p in job.partitions(end.to_json(), after.to_json())]
    assert pieces and all(p.lo == end.resolved for p in pieces)
    job.stop()
