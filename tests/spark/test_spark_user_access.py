"""The feedkv Spark source reads as the user it is given (``certs_dir`` and ``user``) on
a real local Spark against a secure node: the tables that user may SELECT, batch and
stream; any other table fails the query with an error naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import InvalidArgumentError
from feedkv.kv.store import StoreConfig
from feedkv.spark.source import SourceOptions
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


def test_a_user_with_select_streams_the_table(
    spark: Any, secure: DB, certs: Path, tmp_path: Path
) -> None:
    seen: list[Any] = []
    query = (
        _reader(spark, secure, certs, "rides", stream=True)
        .load()
        .writeStream.foreachBatch(lambda df, _batch: seen.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sorted((r.id, r.city) for r in seen) == [(1, "rome"), (2, "oslo")]


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
    with pytest.raises(InvalidArgumentError, match=r"a client certificate .* not a password"):
        SourceOptions.parse({"url": url, "table": "t", "user": "al", "password": "pw"})
    with pytest.raises(InvalidArgumentError, match="user='al' needs certs_dir"):
        SourceOptions.parse({"url": url, "table": "t", "user": "al"})
    with pytest.raises(InvalidArgumentError, match="differs from the url's"):
        SourceOptions.parse({"url": f"{url}?user=bo&certs_dir=/c", "table": "t", "user": "al"})
