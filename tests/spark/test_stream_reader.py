"""The feedkv source's stream reader without Spark, driven as Spark's driver drives it:
admission control over the initial scan, and the stream's hold on history, which each
commit moves up and stopping releases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import StructType

import feedkv
from feedkv import DB
from feedkv.changefeed.jobs import HistoryHold
from feedkv.changefeed.rows import Target
from feedkv.errors import BatchTimestampBeforeGCError, InvalidArgumentError
from feedkv.kv.store import Store, StoreConfig
from feedkv.spark.offsets import FeedOffset
from feedkv.spark.source import FeedKVDataSource, SourceOptions
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    """Serving gRPC (the reader is a client), closing 50 ms behind, collecting at once."""
    config = StoreConfig(
        sync=False,
        closed_ts_target_ns=50_000_000,
        closed_ts_interval_s=0.02,
        gc_ttl_ns=1_000_000,
        gc_interval_s=3600.0,
    )
    database = feedkv.connect(tmp_path / "store", config=config, changefeed_runner="thread")
    database.serving_url()
    yield database
    database.close()


def stream_reader(db: DB, **options: str) -> Any:
    source = FeedKVDataSource({"url": db.serving_url(), "table": "t", **options})
    return source.streamReader(StructType())


def rows_between(reader: Any, start: dict[str, Any], end: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        row
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for row in batch.to_pylist()
    ]


def store_of(db: DB) -> Store:
    assert db.node is not None
    return db.node.store


def as_of(ts: Timestamp) -> str:
    return f"{ts.wall}.{ts.logical:010d}"


def test_max_rows_per_trigger_counts_rows_of_several_families(db: DB) -> None:
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a STRING, b STRING, FAMILY f1 (k, a), FAMILY f2 (b))"
    )
    db.sql("INSERT INTO t VALUES " + ", ".join(f"({k}, 'a{k}', 'b{k}')" for k in range(10)))
    reader = stream_reader(db, initial_scan="yes", maxRowsPerTrigger="3")
    start = reader.initialOffset()
    batches = []
    while FeedOffset.from_json(start).scan_key is not None:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        batches.append([(r["k"], r["a"], r["b"]) for r in rows_between(reader, start, end)])
        reader.commit(end)
        start = end
    reader.stop()
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert [row for b in batches for row in b] == [(k, f"a{k}", f"b{k}") for k in range(10)]


def test_the_stream_holds_history_from_its_last_commit_until_it_stops(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'v0')")
    reader = stream_reader(db, cursor=as_of(db.now()))
    start = reader.initialOffset()
    db.sql("UPDATE t SET v = 'v1' WHERE k = 1")
    middle = db.now()
    db.sql("UPDATE t SET v = 'v2' WHERE k = 1")
    written = db.now()

    def latest() -> dict[str, Any]:
        return reader.latestOffset(start, ReadAllAvailable())

    wait_until(lambda: FeedOffset.from_json(latest()).resolved > written, what="resolved past")
    end = latest()
    assert [r["v"] for r in rows_between(reader, start, end)] == ["v1", "v2"]

    # Not committed yet: every version since the start is kept.
    store_of(db).collect_garbage()
    assert db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {as_of(middle)}").rows == [("v1",)]

    reader.commit(end)
    store_of(db).collect_garbage()
    with pytest.raises(BatchTimestampBeforeGCError):
        db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {as_of(middle)}")
    assert store_of(db).protected()  # the table, from the committed offset on

    reader.stop()
    assert store_of(db).protected() == []


def test_a_query_restarted_from_its_checkpoint_holds_history_from_there(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    reader = stream_reader(db)
    committed = FeedOffset(db.now()).to_json()  # from the checkpoint: no initialOffset
    reader.latestOffset(committed, ReadAllAvailable())
    assert [ts for _span, ts in store_of(db).protected()] == [
        FeedOffset.from_json(committed).resolved
    ] * 2
    reader.stop()


def test_a_hold_not_renewed_in_time_lapses(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    now = db.now()
    lapsed = HistoryHold("gone", 104, now, now.wall - 1)
    live = HistoryHold.renewed("here", 105, now, now)
    db.run_transaction(lapsed.put)
    db.run_transaction(live.put)
    assert [span for span, _ts in store_of(db).protected()] == [
        Target(105).span,
        Span.for_key(catalog.descriptor_key(105)),
    ]


def test_the_hold_lapses_after_gc_protect_expires_after(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    reader = stream_reader(db, gc_protect_expires_after="90s")
    before = db.now()
    reader.initialOffset()
    after = db.now()
    [hold] = [HistoryHold.from_json(kv.value) for kv in db.scan(*catalog.hold_span())]
    assert before.wall + 90 * 10**9 <= hold.expires <= after.wall + 90 * 10**9
    reader.stop()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"url": "feedkv://h:1", "table": "t", "curser": "1"}, "did you mean 'cursor'"),
        ({"table": "t"}, "needs the option 'url'"),
        ({"url": "feedkv://h:1", "table": "t", "initial_scan": "maybe"}, "yes or no"),
        ({"url": "feedkv://h:1", "table": "t", "maxRowsPerTrigger": "0"}, "a positive integer"),
        ({"url": "feedkv://h:1", "table": "t", "diff": "sure"}, "expected true or false"),
        (
            {"url": "feedkv://h:1", "table": "t", "gc_protect_expires_after": "soon"},
            "gc_protect_expires_after: bad duration 'soon'",
        ),
    ],
)
def test_bad_source_options_are_refused_naming_the_option(
    options: dict[str, str], says: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=says):
        SourceOptions.parse(options)


def test_a_stream_goes_on_through_the_next_node_of_its_url_when_its_node_dies(
    tmp_path: Path,
) -> None:
    """The source's URL lists two nodes of a cluster, the first of which the driver's
    client connects through; that node dies (its ranges are all on the other): the
    stream's next batch is planned, followed and read through the other node (the
    query failed with NodeUnavailableError in planPartitions)."""
    from feedkv.server.cluster import ClusterConfig

    config = StoreConfig(sync=False, closed_ts_target_ns=50_000_000, closed_ts_interval_s=0.02)
    still = ClusterConfig(rebalance_interval_s=0.0)  # the ranges stay on the first node
    first = feedkv.connect(
        tmp_path / "n1", config=config, listen="127.0.0.1:0", join=[], cluster_config=still,
        changefeed_runner="thread",
    )  # fmt: skip
    try:
        address = first.serving_url().removeprefix("feedkv://")
        gateway = feedkv.connect(
            tmp_path / "n2", config=config, listen="127.0.0.1:0", join=[address],
            cluster_config=still, changefeed_runner="thread",
        )  # fmt: skip
        first.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        first.sql("INSERT INTO t VALUES (1, 'a')")
        url = f"{gateway.serving_url()},{address}"
        source = FeedKVDataSource({"url": url, "table": "t", "initial_scan": "no"})
        reader = source.streamReader(StructType())
        try:
            start = reader.initialOffset()

            def batch_to(ts: Timestamp, after: dict[str, Any]) -> Any:
                def past() -> dict[str, Any] | None:
                    end = reader.latestOffset(after, ReadAllAvailable())
                    return end if FeedOffset.from_json(end).resolved >= ts else None

                return wait_until(past, timeout_s=30.0, what=f"a batch past {ts}")

            first.sql("INSERT INTO t VALUES (2, 'b')")
            middle = batch_to(first.now(), start)
            planned = reader.partitions(start, middle)
            gateway.close()  # the node the stream's client connected through
            # a task of a batch planned before: its worker's client is replaced
            assert [r["k"] for p in planned for b in reader.read(p) for r in b.to_pylist()] == [2]
            first.sql("INSERT INTO t VALUES (3, 'c')")
            end = batch_to(first.now(), middle)
            assert [r["k"] for r in rows_between(reader, middle, end)] == [3]
        finally:
            reader.stop()
    finally:
        first.close()
