"""The feedkv Spark source reads as the user it is given (``certs_dir`` and ``user``) on
a real local Spark against a secure node: the tables that user may SELECT, batch and
stream; any other table fails the query with an error naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import StructType

import feedkv
from feedkv import DB
from feedkv.changefeed.jobs import HistoryHold
from feedkv.errors import InvalidArgumentError
from feedkv.kv.store import StoreConfig
from feedkv.spark.offsets import FeedOffset
from feedkv.spark.source import FeedKVDataSource, SourceOptions
from feedkv.sql import catalog
from feedkv.testing.certs import make_certs_dir


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[DB]:
    """A secure embedded node on loopback: alice may SELECT rides, not payments."""
    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    store = tmp_path_factory.mktemp("secure") / "store"
    db = feedkv.connect(store, certs_dir=certs, listen="127.0.0.1:0", config=config)
    db.sql("CREATE USER alice")
    db.sql("CREATE TABLE rides (id INT PRIMARY KEY, city STRING)")
    db.sql("CREATE TABLE payments (id INT PRIMARY KEY, card STRING)")
    db.sql("INSERT INTO rides VALUES (1, 'rome'), (2, 'oslo')")
    db.sql("INSERT INTO payments VALUES (1, '4111-1111')")
    db.sql("GRANT SELECT ON rides TO alice")
    yield db
    db.close()


def _table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return catalog.table_by_name(snapshot, database, name).id


def _reader(spark: Any, db: DB, certs: Path, table: str, *, stream: bool = False) -> Any:
    source = spark.readStream if stream else spark.read
    return (
        source.format("feedkv")
        .option("url", db.serving_url().partition("?")[0])
        .option("certs_dir", str(certs))
        .option("user", "alice")
        .option("table", table)
    )


def test_a_user_with_select_reads_the_table(spark: Any, secure: DB, certs: Path) -> None:
    rows = _reader(spark, secure, certs, "rides").load().orderBy("id").collect()
    assert [(r.id, r.city, r["__op"]) for r in rows] == [
        (1, "rome", "insert"),
        (2, "oslo", "insert"),
    ]


def _holds(db: DB) -> list[HistoryHold]:
    return [HistoryHold.from_json(kv.value) for kv in db.scan(*catalog.hold_span())]


@pytest.mark.parametrize("changefeed", [False, True], ids=["select", "select-changefeed"])
def test_a_user_with_select_streams_the_table(
    spark: Any, secure: DB, certs: Path, tmp_path: Path, changefeed: bool
) -> None:
    """With CHANGEFEED too, the node holds the table's history for the stream while it
    runs (and drops the hold when it stops); with SELECT alone, nothing holds it."""
    table = "trips" if changefeed else "rides"
    if changefeed:
        secure.sql("CREATE TABLE trips (id INT PRIMARY KEY, city STRING)")
        secure.sql("INSERT INTO trips VALUES (1, 'rome'), (2, 'oslo')")
        secure.sql("GRANT SELECT, CHANGEFEED ON trips TO alice")
    seen: list[Any] = []
    holds: list[list[HistoryHold]] = []

    def batch(df: Any, _batch: int) -> None:
        seen.extend(df.collect())
        holds.append(_holds(secure))

    query = (
        _reader(spark, secure, certs, table, stream=True)
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sorted((r.id, r.city) for r in seen) == [(1, "rome"), (2, "oslo")]
    assert holds
    if changefeed:
        table_id = _table_id(secure, "trips")
        assert all([h.table_id for h in during] == [table_id] for during in holds)
    else:
        assert holds == [[]] * len(holds)


@pytest.mark.parametrize("changefeed", [False, True], ids=["select", "select-changefeed"])
def test_the_stream_reader_holds_and_releases_through_the_node(
    secure: DB, certs: Path, changefeed: bool
) -> None:
    """The reader as Spark drives it, without Spark: a hold from its first offset until
    it stops, placed by the node for a user with CHANGEFEED; none with SELECT alone."""
    table = f"held_{changefeed}".lower()
    secure.sql(f"CREATE TABLE {table} (id INT PRIMARY KEY)")
    secure.sql(f"GRANT {'SELECT, CHANGEFEED' if changefeed else 'SELECT'} ON {table} TO alice")
    url = secure.serving_url().partition("?")[0]
    options = {"url": url, "table": table, "certs_dir": str(certs), "user": "alice"}
    table_id = _table_id(secure, table)
    reader = FeedKVDataSource(options).streamReader(StructType())
    start = FeedOffset.from_json(reader.initialOffset()).resolved
    try:
        placed = [h.since for h in _holds(secure) if h.table_id == table_id]
        assert placed == ([start] if changefeed else [])
    finally:
        reader.stop()
    assert [h for h in _holds(secure) if h.table_id == table_id] == []


def test_a_table_without_select_fails_naming_it(spark: Any, secure: DB, certs: Path) -> None:
    with pytest.raises(Exception, match="SELECT privilege on relation payments") as info:
        _reader(spark, secure, certs, "payments").load().collect()
    assert "4111" not in str(info.value)


def test_a_revoke_holds_for_the_next_query(spark: Any, secure: DB, certs: Path) -> None:
    secure.sql("CREATE TABLE fares (id INT PRIMARY KEY)")
    secure.sql("INSERT INTO fares VALUES (7)")
    secure.sql("GRANT SELECT ON fares TO alice")
    assert [r.id for r in _reader(spark, secure, certs, "fares").load().collect()] == [7]
    secure.sql("REVOKE SELECT ON fares FROM alice")
    with pytest.raises(Exception, match="SELECT privilege on relation fares"):
        _reader(spark, secure, certs, "fares").load().collect()


def test_credentials_options_are_checked() -> None:
    url = "feedkv://127.0.0.1:26258"
    options = SourceOptions.parse({"url": url, "table": "t", "certs_dir": "/c", "user": "al"})
    assert options.url == f"{url}?certs_dir=%2Fc&user=al"
    with pytest.raises(InvalidArgumentError, match="password needs certs_dir"):
        SourceOptions.parse({"url": url, "table": "t", "user": "al", "password": "pw"})
    with pytest.raises(InvalidArgumentError, match="password needs the option user"):
        SourceOptions.parse({"url": url, "table": "t", "certs_dir": "/c", "password": "pw"})
    with pytest.raises(InvalidArgumentError, match="password is empty"):
        SourceOptions.parse({"url": url, "table": "t", "password": ""})
    with pytest.raises(InvalidArgumentError, match="user='al' needs certs_dir"):
        SourceOptions.parse({"url": url, "table": "t", "user": "al"})
    with pytest.raises(InvalidArgumentError, match="differs from the url's"):
        SourceOptions.parse({"url": f"{url}?user=bo&certs_dir=/c", "table": "t", "user": "al"})
