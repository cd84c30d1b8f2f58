"""The batches of a ``FOR DATABASE`` changefeed job on Spark, as the driver asks its
reader for them, against a real node (no Spark; end to end on Spark:
tests/spark/test_spark_database_changefeeds.py).

A window never crosses a change of the tables the job watches: it ends one tick before
a table joins or leaves, and the next window reads the tables of the moment. The tables
of a window are read from the catalog as of its start, so the partitions of a batch
read again from the query's checkpoint are the same (exactly-once into files)."""

from __future__ import annotations

import itertools

import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedError, ChangefeedSpec
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.spark.changefeed_job import ChangefeedStreamReader, JobOptions
from feedkv.spark.offsets import FeedOffset
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0


def table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    return catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "shop"), name).id


def reader(db: DB, start: Timestamp) -> ChangefeedStreamReader:
    """The reader of a job on database shop from ``start``, with no initial scan."""
    snapshot = catalog.Snapshot(db, start)
    database = catalog.database_by_name(snapshot, "shop")
    tables = catalog.list_tables(snapshot, database)
    spec = ChangefeedSpec(
        targets=tuple(Target(t.id) for t in tables),
        topics={t.id: t.name for t in tables},
        options=parse_options([("initial_scan", "no")], now=start),
        start=start,
        sink_uri="null://",
        database_id=database.id,
    )
    return ChangefeedStreamReader(JobOptions(db.serving_url(), spec))


def next_window(job: ChangefeedStreamReader, start: FeedOffset) -> FeedOffset:
    """The next window after ``start`` (once the job's tables are resolved past it)."""

    def window() -> FeedOffset | None:
        found = FeedOffset.from_json(job.latestOffset(start.to_json(), job.getDefaultReadLimit()))
        return found if found.resolved > start.resolved else None

    end = wait_until(window, timeout_s=DEADLINE, what=f"a window after {start.resolved}")
    assert end is not None
    return end


def read_tables(job: ChangefeedStreamReader, lo: FeedOffset, hi: FeedOffset) -> dict[int, str]:
    """The tables (and their topics) the batch ``(lo, hi]`` reads."""
    parts = [p.value for p in job.partitions(lo.to_json(), hi.to_json())]
    assert all(p.piece.lo == lo.resolved and p.piece.hi == hi.resolved for p in parts)
    tables = {p.target.table_id: p.topic for p in parts}
    assert None not in tables.values()
    return tables  # type: ignore[return-value]


def test_a_window_ends_before_a_table_joins_and_the_next_reads_it(db: DB) -> None:
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY)")
    start = db.now()
    db.sql("INSERT INTO shop.a VALUES (1)")
    db.sql("CREATE TABLE shop.n (k INT PRIMARY KEY)")
    db.sql("INSERT INTO shop.n VALUES (1)")
    created = catalog.Snapshot(db, db.now())
    a, n = table_id(db, "a"), table_id(db, "n")
    # when n was created: the first version of its descriptor
    versions = list(db.export(catalog.descriptor_span(), start, created.ts))
    born = min(v.ts for v in versions if v.key == catalog.descriptor_key(n))
    job = reader(db, start)
    try:
        first = FeedOffset(start)
        before = next_window(job, first)
        assert before.resolved == born.prev()  # held one tick before n joined
        assert read_tables(job, first, before) == {a: "a"}
        assert read_tables(job, first, before) == {a: "a"}  # the same when read again

        after = next_window(job, before)
        assert read_tables(job, before, after) == {a: "a", n: "n"}

        db.sql("DROP TABLE shop.a")
        dropped = db.now()
        windows = [after]
        while windows[-1].resolved < dropped:
            windows.append(next_window(job, windows[-1]))
        tables = [read_tables(job, lo, hi) for lo, hi in itertools.pairwise(windows)]
        assert tables[0] == {a: "a", n: "n"}  # a leaves at its drop, not before
        assert tables[-1] == {n: "n"}
    finally:
        job.stop()

    # A query started again from its checkpoint plans every batch as it was planned,
    # though the tables changed since: they are read as of each batch's start.
    db.sql("CREATE TABLE shop.z (k INT PRIMARY KEY)")
    again = reader(db, start)
    try:
        assert read_tables(again, first, before) == {a: "a"}
        assert read_tables(again, before, after) == {a: "a", n: "n"}
        assert [read_tables(again, lo, hi) for lo, hi in itertools.pairwise(windows)] == tables
    finally:
        again.stop()


def test_a_dropped_database_ends_the_job_once_its_last_window_is_read(db: DB) -> None:
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY)")
    start = db.now()
    db.sql("INSERT INTO shop.a VALUES (1)")
    db.sql("DROP DATABASE shop CASCADE")
    gone = db.now()
    job = reader(db, start)
    try:
        windows = [FeedOffset(start)]
        with pytest.raises(ChangefeedError, match=r"database \[\d+\] was dropped"):
            while windows[-1].resolved < gone:
                windows.append(next_window(job, windows[-1]))
        assert len(windows) >= 2  # the rows before the drop were read first
        first_tables = read_tables(job, windows[0], windows[1])
        assert list(first_tables.values()) == ["a"]
    finally:
        job.stop()
