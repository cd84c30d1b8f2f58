"""The feedkv source and a changefeed job on a real local Spark session."""

from __future__ import annotations

import glob
import json
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import InvalidArgumentError
from feedkv.spark.source import SourceOptions
from feedkv.util.hlc import Timestamp

DEADLINE_S = 120.0


def wait_for(predicate: Any, timeout: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        pause.wait(0.2)
    return True


def make_table(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, price DECIMAL(10,2), ok BOOL)")
    db.sql("INSERT INTO t VALUES (1, 'a', 1.50, true), (2, 'b', 2.25, false), (3, 'c', NULL, true)")


def test_a_batch_read_is_the_table_as_of_a_timestamp_with_typed_columns(spark: Any, db: DB) -> None:
    make_table(db)
    before = db.now()
    db.sql("UPDATE t SET name = 'changed' WHERE id = 1")

    def reader() -> Any:  # NB: a DataFrameReader keeps the options it is given
        return spark.read.format("feedkv").option("url", db.serving_url()).option("table", "t")

    rows = reader().option("as_of", str(before)).load().orderBy("id").collect()
    assert [(r.id, r.name, r.price, r.ok) for r in rows] == [
        (1, "a", Decimal("1.50"), True),
        (2, "b", Decimal("2.25"), False),
        (3, "c", None, True),
    ]
    assert {r["__op"] for r in rows} == {"insert"}
    assert [r["__key"] for r in rows] == ["[1]", "[2]", "[3]"]
    now = reader().load().where("id = 1").collect()
    assert now[0].name == "changed"


def stream_rows(spark: Any, db: DB, checkpoint: Path, **options: str) -> list[Any]:
    """Everything a ``feedkv`` stream of table t with ``options`` reads (AvailableNow)."""
    seen: list[Any] = []
    reader = spark.readStream.format("feedkv").option("url", db.serving_url())
    for name, value in {"table": "t", **options}.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(lambda df, _batch: seen.extend(df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return seen


def test_a_stream_reads_the_initial_scan_then_every_change_with_ops_and_before(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    make_table(db)
    cursor = db.now()
    db.sql("UPDATE t SET name = 'x' WHERE id = 2")
    db.sql("DELETE FROM t WHERE id = 3")
    db.sql("INSERT INTO t VALUES (4, 'd', 4.00, true)")
    end = db.now()
    assert wait_for(lambda: all(r.closed_ts >= end for r in db.ranges()))

    with_diff = stream_rows(spark, db, tmp_path / "diff", cursor=str(cursor), diff="true")
    assert sorted(
        (r.id, r["__op"], r.name, r["__before"]["name"] if r["__before"] else None)
        for r in with_diff
    ) == [(2, "update", "x", "b"), (3, "delete", None, "c"), (4, "insert", "d", None)]

    # Without diff there is no __before, and an update is still told from an insert.
    plain = stream_rows(spark, db, tmp_path / "plain", cursor=str(cursor))
    assert "__before" not in plain[0].asDict()
    assert sorted((r.id, r["__op"], r.name) for r in plain) == [
        (2, "update", "x"),
        (3, "delete", None),
        (4, "insert", "d"),
    ]
    assert all(Timestamp.parse(r["__mvcc_ts"]) > cursor for r in plain)

    # With the initial scan, the rows as of the cursor come first, as inserts.
    scanned = stream_rows(spark, db, tmp_path / "scan", cursor=str(cursor), initial_scan="yes")
    assert [(r.id, r["__op"], r.name) for r in scanned[:3]] == [
        (1, "insert", "a"),
        (2, "insert", "b"),
        (3, "insert", "c"),
    ]
    assert sorted((r.id, r["__op"], r.name) for r in scanned[3:]) == sorted(
        (r.id, r["__op"], r.name) for r in plain
    )


def test_a_changefeed_job_runs_on_spark_and_its_files_match_the_store(
    db: DB, tmp_path: Path
) -> None:
    make_table(db)
    out = tmp_path / "out"
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{out}' "
        "WITH updated, key_in_value, resolved = '200ms', min_checkpoint_frequency = '200ms'"
    ).rows
    for i in range(5, 25):
        db.sql("INSERT INTO t VALUES ($1, 'n', 1.00, true)", i)
    db.sql("DELETE FROM t WHERE id < 10")
    end = db.now()

    def resolved() -> Timestamp:
        markers = [
            json.loads(Path(p).read_text())["resolved"] for p in glob.glob(f"{out}/*/*.RESOLVED")
        ]
        return max((Timestamp.parse(m) for m in markers), default=Timestamp(0, 0))

    assert wait_for(lambda: resolved() >= end or db.changefeeds.error(job_id) is not None)
    assert db.changefeeds.error(job_id) is None
    newest: dict[int, tuple[Timestamp, Any]] = {}
    lines = 0
    for path in glob.glob(f"{out}/*/*.ndjson"):
        for line in Path(path).read_text().splitlines():
            message = json.loads(line)
            lines += 1
            ts = Timestamp.parse(message["updated"])
            key = message["key"][0]
            if key not in newest or newest[key][0] < ts:
                newest[key] = (ts, message["after"])
    expected = db.sql(f"SELECT id FROM t AS OF SYSTEM TIME '{end}'").rows
    assert sorted(k for k, (_ts, after) in newest.items() if after is not None) == sorted(
        r[0] for r in expected
    )
    assert lines == 3 + 20 + 8  # scan, inserts, deletes (ids 1-3, 5-9): each exactly once
    db.changefeeds.cancel(job_id)


def test_code_written_for_deltas_change_data_feed_reads_a_feedkv_stream(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    """``changelog_columns=delta`` gives the rows and columns of Delta's Change Data Feed
    (docs.delta.io, "Change data feed": ``_change_type`` insert, update_preimage,
    update_postimage, delete; ``_commit_version``; ``_commit_timestamp``): the usual
    CDF consumer, which keeps each key's latest change by ``_commit_version`` and drops
    pre-images and deletes, rebuilds the table."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    make_table(db)
    cursor = db.now()
    db.sql("UPDATE t SET name = 'x' WHERE id = 2")
    db.sql("DELETE FROM t WHERE id = 3")
    db.sql("INSERT INTO t VALUES (4, 'd', 4.00, true)")
    db.sql("UPDATE t SET name = 'y' WHERE id = 4")
    end = db.now()
    assert wait_for(lambda: all(r.closed_ts >= end for r in db.ranges()))

    options = {"cursor": str(cursor), "initial_scan": "yes", "changelog_columns": "delta"}
    rows = stream_rows(spark, db, tmp_path / "cdf", **options)
    changes = sorted(
        (r.id, r._change_type, r.name) for r in rows if r._commit_version > cursor.wall
    )
    assert changes == [
        (2, "update_postimage", "x"),
        (2, "update_preimage", "b"),
        (3, "delete", "c"),  # a delete's row is the deleted one, whole
        (4, "insert", "d"),
        (4, "update_postimage", "y"),
        (4, "update_preimage", "d"),
    ]
    assert all(r._commit_timestamp is not None for r in rows)

    latest = (
        spark.createDataFrame(rows)
        .filter("_change_type != 'update_preimage'")
        .withColumn(
            "rank",
            F.row_number().over(Window.partitionBy("id").orderBy(F.desc("_commit_version"))),
        )
        .filter("rank = 1 AND _change_type != 'delete'")
    )
    rebuilt = sorted((r.id, r.name) for r in latest.collect())
    assert rebuilt == sorted((r[0], r[1]) for r in db.sql("SELECT id, name FROM t").rows)


def test_changelog_columns_takes_only_delta_and_not_with_diff(db: DB) -> None:
    base = {"url": db.serving_url(), "table": "t"}
    with pytest.raises(InvalidArgumentError, match="only 'delta'"):
        SourceOptions.parse({**base, "changelog_columns": "hudi"})
    with pytest.raises(InvalidArgumentError, match="do not go together"):
        SourceOptions.parse({**base, "changelog_columns": "delta", "diff": "true"})


def test_a_stream_whose_first_batch_failed_replays_it_from_its_checkpoint(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    """Spark replays a first batch that never committed with the end offset it logged
    and a first offset it asks for anew on the restart, made later: the batch still
    reads from where the first start began (the scan's timestamp; with no scan, the
    first offset's), and nothing is lost or read twice."""
    make_table(db)
    for options in ({}, {"initial_scan": "no"}):
        checkpoint = tmp_path / f"ck-{len(options)}"
        failing = (
            spark.readStream.format("feedkv")
            .option("url", db.serving_url())
            .option("table", "t")
            .options(**options)
            .load()
            .writeStream.foreachBatch(_outage)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        with pytest.raises(Exception, match="sink outage"):
            failing.awaitTermination()
        assert not list((checkpoint / "commits").glob("[0-9]*"))
        key = 10 + len(options)
        db.sql(f"INSERT INTO t VALUES ({key}, 'later', 1.00, true)")
        _wait_closed(db, db.now())
        rows = stream_rows(spark, db, checkpoint, **options)
        ids = sorted(r.id for r in rows)
        if options:  # no scan: the changes since the first start, the new row among them
            assert key in ids and len(ids) == len(set(ids))
        else:
            assert ids[:3] == [1, 2, 3] and key in ids and len(ids) == len(set(ids))


def _wait_closed(db: DB, end: Timestamp) -> None:
    assert wait_for(lambda: all(r.closed_ts >= end for r in db.ranges()))


def _outage(df: Any, batch: int) -> None:
    raise RuntimeError("simulated sink outage")


def test_a_stream_keeps_a_renamed_columns_values_under_its_name(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    """Rows written after ``RENAME COLUMN`` keep the column's values under the name the
    stream's schema has (its columns are found by id, not by name), and a column dropped
    and added again under its old name is not the column the stream had."""
    make_table(db)
    seen: list[Any] = []
    query = (
        spark.readStream.format("feedkv")
        .option("url", db.serving_url())
        .option("table", "t")
        .option("initial_scan", "no")
        .load()
        .writeStream.foreachBatch(lambda df, _batch: seen.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "renamed"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        assert wait_for(lambda: query.lastProgress is not None)
        db.sql("ALTER TABLE t RENAME COLUMN name TO label")
        db.sql("INSERT INTO t VALUES (5, 'five', 5.00, true)")
        db.sql("ALTER TABLE t DROP COLUMN ok")
        db.sql("ALTER TABLE t ADD COLUMN ok BOOL DEFAULT false")
        db.sql("INSERT INTO t VALUES (6, 'six', 6.00, true)")
        assert wait_for(lambda: any(r.id == 6 for r in seen))
    finally:
        query.stop()
    inserted = {r.id: (r.name, r.ok) for r in seen if r["__op"] == "insert"}
    assert inserted == {5: ("five", True), 6: ("six", None)}


def test_cursor_and_as_of_take_what_sql_takes_and_the_table_its_full_name() -> None:
    """``cursor`` and ``as_of`` as CockroachDB's cursor and AS OF SYSTEM TIME take
    them (a logical timestamp, '-10s', a date/time), and ``table`` the full name
    SHOW CHANGEFEED JOBS shows (database.public.table)."""
    base = {"url": "feedkv://127.0.0.1:1", "table": "shop.public.t"}
    options = SourceOptions.parse({**base, "cursor": "-10s", "as_of": "2026-01-02 03:04:05"})
    assert (options.database, options.table) == ("shop", "t")
    assert options.cursor is not None and options.as_of is not None
    assert 9 <= (time.time_ns() - options.cursor.wall) / 1e9 < 60
    assert options.as_of == Timestamp(1_767_323_045 * 10**9, 0)
    exact = SourceOptions.parse({**base, "cursor": "1700000000000000000.0000000002"}).cursor
    assert exact == Timestamp(1_700_000_000_000_000_000, 2)
    with pytest.raises(InvalidArgumentError, match="cursor='yesterday' is not a timestamp"):
        SourceOptions.parse({**base, "cursor": "yesterday"})
