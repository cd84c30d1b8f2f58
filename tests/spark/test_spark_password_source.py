"""The feedkv Spark source logs in with a password (options ``user`` and ``password``,
``certs_dir`` holding only the CA) on a real local Spark against a secure node: it reads
and streams what the user may SELECT; the password shows in no URL, plan or repr, and a
wrong one fails the query saying so."""

from __future__ import annotations

import pickle
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.spark.source import SourceOptions
from feedkv.testing.certs import make_certs_dir

PASSWORD = "spark-pw-7f3a"


@pytest.fixture(scope="module")
def ca_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """``(the node's certs dir, a directory with only its ca.crt)``."""
    certs = make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root",))
    ca = tmp_path_factory.mktemp("ca-only")
    shutil.copy(certs / "ca.crt", ca / "ca.crt")
    yield certs, ca


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, ca_only: tuple[Path, Path]) -> Iterator[DB]:
    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    store = tmp_path_factory.mktemp("secure") / "store"
    db = feedkv.connect(store, certs_dir=ca_only[0], listen="127.0.0.1:0", config=config)
    db.sql(f"CREATE USER paula WITH PASSWORD '{PASSWORD}'")
    db.sql("CREATE TABLE rides (id INT PRIMARY KEY, city STRING)")
    db.sql("INSERT INTO rides VALUES (1, 'rome'), (2, 'oslo')")
    db.sql("GRANT SELECT ON rides TO paula")
    yield db
    db.close()


def _options(db: DB, ca: Path, password: str = PASSWORD) -> dict[str, str]:
    return {
        "url": db.serving_url().partition("?")[0],
        "certs_dir": str(ca),
        "user": "paula",
        "password": password,
        "table": "rides",
    }


def _reader(spark: Any, source: Any, options: dict[str, str]) -> Any:
    reader = source.format("feedkv")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def test_the_options_name_the_password_without_holding_it_in_sight() -> None:
    options = SourceOptions.parse(
        {"url": "feedkv://127.0.0.1:1", "table": "t", "certs_dir": "/c", "user": "paula"}
        | {"password": PASSWORD}
    )
    assert PASSWORD not in options.url and "login=" in options.url
    assert PASSWORD not in repr(options)
    assert pickle.loads(pickle.dumps(options)).password == PASSWORD


def test_a_password_user_reads_the_table(
    spark: Any, secure: DB, ca_only: tuple[Path, Path]
) -> None:
    frame = _reader(spark, spark.read, _options(secure, ca_only[1])).load()
    rows = frame.orderBy("id").collect()
    assert [(r.id, r.city) for r in rows] == [(1, "rome"), (2, "oslo")]
    plans = frame._jdf.queryExecution().toString()
    assert "feedkv" in plans.lower()
    assert PASSWORD not in plans


def test_a_password_user_streams_the_table(
    spark: Any, secure: DB, ca_only: tuple[Path, Path], tmp_path: Path
) -> None:
    seen: list[Any] = []
    query = (
        _reader(spark, spark.readStream, _options(secure, ca_only[1]))
        .load()
        .writeStream.foreachBatch(lambda df, _batch: seen.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sorted((r.id, r.city) for r in seen) == [(1, "rome"), (2, "oslo")]


def test_a_wrong_password_fails_the_query_saying_so(
    spark: Any, secure: DB, ca_only: tuple[Path, Path]
) -> None:
    with pytest.raises(Exception, match="wrong user name or password") as info:
        _reader(spark, spark.read, _options(secure, ca_only[1], "not-it")).load().collect()
    assert "not-it" not in str(info.value)


def test_a_running_stream_fails_once_its_select_is_revoked(
    spark: Any, secure: DB, ca_only: tuple[Path, Path], tmp_path: Path
) -> None:
    """The stream has nothing new to read, so only the node ending its rangefeed (the
    driver follows the table's resolved timestamp with one) can stop it."""
    secure.sql("CREATE TABLE fares (id INT PRIMARY KEY)")
    secure.sql("INSERT INTO fares VALUES (1)")
    secure.sql("GRANT SELECT ON fares TO paula")
    first = threading.Event()
    query = (
        _reader(spark, spark.readStream, _options(secure, ca_only[1]) | {"table": "fares"})
        .load()
        .writeStream.foreachBatch(lambda df, _batch: df.count() and first.set())
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        assert first.wait(120), "the stream's first batch"
        secure.sql("REVOKE SELECT ON fares FROM paula")
        with pytest.raises(Exception, match="does not have SELECT privilege on relation fares"):
            query.awaitTermination(120)
            raise AssertionError("the stream still runs 120 s after the REVOKE")
    finally:
        query.stop()
