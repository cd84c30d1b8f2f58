"""The batches of a ``FOR DATABASE`` changefeed job on Spark, as the driver asks its
reader for them, against a real node (no Spark; end to end on Spark:
tests/spark/test_spark_database_changefeeds.py).

A batch ``(lo, hi]`` reads every table the database held at any time in it: a table
created within it from ``lo`` (it has no rows before its creation), one dropped within
it up to the tick before its drop. The tables are read from the catalog as of the
window, so the partitions of a batch read again from the query's checkpoint are the
same (exactly-once into files)."""

from __future__ import annotations

import itertools
from typing import Any

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


def read_tables(
    job: ChangefeedStreamReader, lo: FeedOffset, hi: FeedOffset
) -> dict[int, tuple[str, Timestamp]]:
    """The tables the batch ``(lo, hi]`` reads: each one's topic and how far it reads."""
    parts = [p.value for p in job.partitions(lo.to_json(), hi.to_json())]
    assert all(p.piece.lo == lo.resolved for p in parts)
    tables = {}
    for part in parts:
        assert part.topic is not None
        tables[part.target.table_id] = (part.topic, part.piece.hi)
    return tables


def windows_past(job: ChangefeedStreamReader, start: FeedOffset, ts: Timestamp) -> list[FeedOffset]:
    """The offsets of the batches from ``start`` until one ends at or past ``ts``."""
    windows = [start]
    while windows[-1].resolved < ts:
        windows.append(next_window(job, windows[-1]))
    return windows


def planned(job: ChangefeedStreamReader, windows: list[FeedOffset]) -> list[dict[int, Any]]:
    return [read_tables(job, lo, hi) for lo, hi in itertools.pairwise(windows)]


def test_each_batch_reads_the_tables_of_its_window_each_up_to_its_drop(db: DB) -> None:
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY)")
    start = db.now()
    db.sql("INSERT INTO shop.a VALUES (1)")
    db.sql("CREATE TABLE shop.n (k INT PRIMARY KEY)")
    db.sql("INSERT INTO shop.n VALUES (1)")
    created = db.now()
    a, n = table_id(db, "a"), table_id(db, "n")
    job = reader(db, start)
    try:
        joined = windows_past(job, FeedOffset(start), created)
        tables = planned(job, joined)
        assert tables[0][a][0] == "a"
        assert tables[-1] == {a: ("a", joined[-1].resolved), n: ("n", joined[-1].resolved)}

        db.sql("DROP TABLE shop.a")
        dropped = db.now()
        windows = windows_past(job, joined[-1], dropped)
        db.sql("INSERT INTO shop.n VALUES (2)")
        windows += windows_past(job, windows[-1], db.now())[1:]  # one after the drop
        later = planned(job, windows)
    finally:
        job.stop()
    drops = [
        v.ts
        for v in db.export(catalog.descriptor_span(), created, dropped)
        if v.key == catalog.descriptor_key(a)
    ]
    (drop,) = drops
    with_a = [t for t in later if a in t]
    assert with_a, "a was not read up to its drop"
    assert with_a[-1][a] == ("a", min(drop.prev(), with_a[-1][n][1]))  # up to its drop
    assert later[-1] == {n: ("n", windows[-1].resolved)}  # a left

    # A query started again from its checkpoint plans every batch as it was planned,
    # though the tables changed since: they are read as of each batch's window.
    db.sql("CREATE TABLE shop.z (k INT PRIMARY KEY)")
    again = reader(db, start)
    try:
        assert planned(again, joined) == tables
        assert planned(again, windows) == later
    finally:
        again.stop()


def test_a_dropped_database_ends_the_job_once_its_last_window_is_read(db: DB) -> None:
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY)")
    start = db.now()
    db.sql("INSERT INTO shop.a VALUES (1)")
    before_drop = db.now()
    db.sql("DROP DATABASE shop CASCADE")
    job = reader(db, start)
    try:
        windows = [FeedOffset(start)]
        with pytest.raises(ChangefeedError, match=r"database \[\d+\] was dropped"):
            while True:  # until the window after the drop
                windows.append(next_window(job, windows[-1]))
        # NB: read through the drop (its commit timestamp is above before_drop)
        assert len(windows) >= 2 and windows[-1].resolved >= before_drop
        first_tables = read_tables(job, windows[0], windows[1])
        assert [topic for topic, _hi in first_tables.values()] == ["a"]
    finally:
        job.stop()
