"""Changefeed jobs on Spark into lake tables: a batch is a window, its tasks stage their
rows and the driver's commit commits the window once per table, so a replayed batch
writes nothing new. Most run the writer as Spark calls it, without Spark; one runs a
job on a real local Spark and checks the Delta tables against ``AS OF SYSTEM TIME``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import sink_defaults
from feedkv.changefeed.sinks.iceberg import IcebergPlace
from feedkv.changefeed.sinks.lake import STAGING
from feedkv.spark.blocks import block_row, marker_row
from feedkv.spark.changefeed_job import ChangefeedStreamWriter, JobOptions
from feedkv.testing.iceberg_rest import IcebergRestServer
from feedkv.testing.lake_rows import Change, lake_rows, logical_now, wait_lake_past
from feedkv.testing.s3_server import S3_KEYS, moto_s3_server
from feedkv.util.hlc import Timestamp

URL = "feedkv://127.0.0.1:1"  # never dialled: the lake writer needs no node
START = Timestamp(1_700_000_000_000_000_000, 0)


def ts(n: int) -> Timestamp:
    return Timestamp(START.wall + n * 1_000_000, 0)


def make_writer(lake: Path | str) -> ChangefeedStreamWriter:
    """The writer of job 7 (tables a and b) into ``lake``: a sink URI, or a Delta
    directory."""
    uri = lake if isinstance(lake, str) else f"delta://{lake}"
    spec = ChangefeedSpec(
        targets=(Target(104), Target(105)),
        topics={104: "a", 105: "b"},
        options=sink_defaults(uri, parse_options((), now=START)),
        start=START,
        sink_uri=uri,
    )
    return ChangefeedStreamWriter(JobOptions(URL, spec, job_id=7))


def task(lo: Timestamp, hi: Timestamp, topic: str, *changes: Change) -> Iterator[pa.RecordBatch]:
    """A task's Spark rows: its piece's marker, then its rows in one block."""
    yield marker_row(lo, hi)
    if changes:
        yield block_row(topic, 1, lake_rows(*changes))


def staged(lake: Path) -> list[Path]:
    return sorted(p for p in (lake / STAGING).rglob("*") if p.is_file())


def rows_of(lake: Path, table: str) -> list[dict[str, Any]]:
    return sorted(feedkv.lake.read_tables(str(lake))[table].to_pylist(), key=lambda r: r["k"])


def test_tasks_stage_their_rows_and_the_commit_lands_them_as_one_window(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    writer = make_writer(lake)
    first = writer.write(task(ts(0), ts(10), "a", (1, "x", "c", ts(1))))
    second = writer.write(task(ts(0), ts(10), "b", (2, "y", "c", ts(2))))
    assert len(staged(lake)) == 2
    assert feedkv.lake.read_consistent(str(lake)) is None

    writer.commit([first, second], 0)

    marker = feedkv.lake.read_consistent(str(lake))
    assert marker is not None and marker.resolved == ts(10)
    assert rows_of(lake, "a") == [{"k": 1, "v": "x"}]
    assert rows_of(lake, "b") == [{"k": 2, "v": "y"}]
    assert staged(lake) == []
    # Delta's own exactly-once bookkeeping, as Spark's Delta sink keeps it
    assert DeltaTable(str(lake / "a")).transaction_version("feedkv-7") == 0


def test_a_replayed_batch_writes_nothing_new(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    batch = [("a", (1, "x", "c", ts(1))), ("b", (2, "y", "c", ts(2)))]
    for _run in range(2):  # the driver died after the commit; Spark runs batch 0 again
        writer = make_writer(lake)
        results = [writer.write(task(ts(0), ts(10), topic, change)) for topic, change in batch]
        writer.commit(results, 0)
        if _run == 0:
            first = feedkv.lake.read_consistent(str(lake))

    again = feedkv.lake.read_consistent(str(lake))
    assert again == first
    assert rows_of(lake, "a") == [{"k": 1, "v": "x"}]
    assert staged(lake) == []


def test_an_aborted_batch_leaves_nothing_staged(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    writer = make_writer(lake)
    result = writer.write(task(ts(0), ts(10), "a", (1, "x", "c", ts(1))))
    writer.abort([result], 0)
    assert staged(lake) == []
    assert feedkv.lake.read_consistent(str(lake)) is None


def test_tasks_stage_their_rows_in_the_bucket_of_a_delta_s3_lake(s3_lake: str, s3: Any) -> None:
    bucket = urlsplit(s3_lake).netloc
    writer = make_writer(s3_lake)
    first = writer.write(task(ts(0), ts(10), "a", (1, "x", "c", ts(1))))
    second = writer.write(task(ts(0), ts(10), "b", (2, "y", "c", ts(2))))
    assert len(bucket_keys(s3, bucket, f"feeds/{STAGING}/7/")) == 2

    writer.commit([first, second], 0)

    marker = feedkv.lake.read_consistent(s3_lake)
    assert marker is not None and marker.resolved == ts(10)
    assert marker.versions == {"a": 0, "b": 0}
    tables = feedkv.lake.read_tables(s3_lake, marker)
    assert tables["a"].to_pylist() == [{"k": 1, "v": "x"}]
    assert tables["b"].to_pylist() == [{"k": 2, "v": "y"}]
    assert bucket_keys(s3, bucket, f"feeds/{STAGING}/") == []
    aborted = writer.write(task(ts(10), ts(20), "a", (3, "z", "c", ts(11))))
    writer.abort([aborted], 1)
    assert bucket_keys(s3, bucket, f"feeds/{STAGING}/") == []


def test_tasks_of_a_rest_catalog_lake_stage_their_rows_locally(tmp_path: Path) -> None:
    with IcebergRestServer(str(tmp_path / "rest")) as server:
        uri = f"iceberg://lake44/feeds?catalog_uri={server.url}"
        writer = make_writer(uri)
        result = writer.write(task(ts(0), ts(10), "a", (1, "x", "c", ts(1))))
        root = IcebergPlace.of(writer.uri).staging
        staged = [Path(root) / name for name, _ in result.staged]
        assert staged and all(p.is_file() for p in staged)

        writer.commit([result], 0)

        assert not any(p.exists() for p in staged)
        assert feedkv.lake.read_tables(uri)["a"].to_pylist() == [{"k": 1, "v": "x"}]


def s3_io(endpoint: str) -> dict[str, str]:
    """pyiceberg's storage properties for moto's S3 server."""
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": S3_KEYS["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": S3_KEYS["AWS_SECRET_ACCESS_KEY"],
        "s3.region": S3_KEYS["AWS_REGION"],
    }


def staged_files(s3: Any, bucket: str) -> list[str]:
    """The files staged under the warehouse. NB: not the empty "directory" objects
    pyarrow's S3 file system leaves when it deletes a folder's last file."""
    return [k for k in bucket_keys(s3, bucket, f"wh/feeds/{STAGING}/") if not k.endswith("/")]


def test_tasks_of_a_rest_catalog_lake_stage_their_rows_in_its_object_store_warehouse(
    tmp_path: Path, s3_endpoint: str, s3: Any
) -> None:
    """Spark's tasks on other machines share no local directory with the driver: a REST
    catalog whose warehouse is in S3 has them stage rows there."""
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    with IcebergRestServer(
        str(tmp_path / "rest"), location=f"s3://{bucket}/wh", properties=s3_io(s3_endpoint)
    ) as server:
        uri = f"iceberg://{bucket}/feeds?catalog_uri={server.url}"  # NB: its own local staging
        writer = make_writer(uri)
        first = writer.write(task(ts(0), ts(10), "a", (1, "x", "c", ts(1))))
        second = writer.write(task(ts(0), ts(10), "b", (2, "y", "c", ts(2))))
        assert [k.rsplit("/", 2)[-2] for k in staged_files(s3, bucket)] == ["7", "7"]
        assert not Path(IcebergPlace.of(writer.uri).staging).exists()  # nothing local

        writer.commit([first, second], 0)

        assert staged_files(s3, bucket) == []
        marker = feedkv.lake.read_consistent(uri)
        assert marker is not None and marker.resolved == ts(10)
        tables = feedkv.lake.read_tables(uri, marker)
        assert tables["a"].to_pylist() == [{"k": 1, "v": "x"}]
        assert tables["b"].to_pylist() == [{"k": 2, "v": "y"}]
        assert any(
            k.startswith("wh/") and k.endswith(".parquet") for k in bucket_keys(s3, bucket, "wh/")
        )
        aborted = writer.write(task(ts(10), ts(20), "a", (3, "z", "c", ts(11))))
        assert staged_files(s3, bucket)
        writer.abort([aborted], 1)
        assert staged_files(s3, bucket) == []


# On Spark.


@pytest.mark.slow(50)
def test_spark_jobs_mirror_into_delta_and_log_changes_into_iceberg(db: DB, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    iceberg = f"iceberg://cat/feeds?warehouse={tmp_path}/warehouse"
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 100), (2, 0)")
    db.sql("INSERT INTO b VALUES (1, 100)")
    [(mirror,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, b INTO 'delta://{lake}' "
        "WITH min_checkpoint_frequency = '200ms'"
    ).rows
    [(changelog,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{iceberg}' "
        "WITH lake_mode = 'changelog', min_checkpoint_frequency = '200ms'"
    ).rows
    db.sql("UPDATE a SET v = 90 WHERE k = 1")
    db.sql("UPDATE b SET v = 110 WHERE k = 1")
    db.sql("DELETE FROM a WHERE k = 2")
    db.sql("INSERT INTO b VALUES (3, 30)")
    end = logical_now(db)

    wait_lake_past(db, changelog, iceberg, end)
    changes = feedkv.lake.read_tables(iceberg)["a"].to_pylist()
    assert sorted((r["_change_type"], r["k"], r["v"]) for r in changes) == [
        ("delete", 2, 0),
        ("insert", 1, 100),
        ("insert", 2, 0),
        ("update_postimage", 1, 90),
        ("update_preimage", 1, 100),
    ]
    marker = wait_lake_past(db, mirror, str(lake), end)
    tables = feedkv.lake.read_tables(str(lake), marker)
    for name in ("a", "b"):
        result = db.sql(f"SELECT * FROM {name} AS OF SYSTEM TIME {marker.resolved} ORDER BY k")
        source = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        assert sorted(tables[name].to_pylist(), key=lambda r: r["k"]) == source
    assert staged(lake) == []


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3_server() as url:
        yield url


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=S3_KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_KEYS["AWS_REGION"],
    )


@pytest.fixture
def s3_lake(s3_endpoint: str, s3: Any) -> str:
    """``delta+s3://`` into a new bucket of moto's server."""
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    params = "&".join(f"{k}={v}" for k, v in S3_KEYS.items())
    return f"delta+s3://{bucket}/feeds?{params}&AWS_ENDPOINT={s3_endpoint}"


def bucket_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.mark.slow(20)
def test_a_spark_job_mirrors_into_delta_tables_in_a_bucket(db: DB, s3_lake: str, s3: Any) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 100), (2, 0)")
    db.sql("INSERT INTO b VALUES (1, 100)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, b INTO '{s3_lake}' WITH min_checkpoint_frequency = '200ms'"
    ).rows
    session = db.session()
    try:  # one transaction across the two tables
        session.execute("BEGIN")
        session.execute("UPDATE a SET v = v - 30 WHERE k = 1")
        session.execute("UPDATE b SET v = v + 30 WHERE k = 1")
        session.execute("COMMIT")
    finally:
        session.close()
    db.sql("DELETE FROM a WHERE k = 2")
    end = logical_now(db)

    marker = wait_lake_past(db, job_id, s3_lake, end)
    tables = feedkv.lake.read_tables(s3_lake, marker)
    for name in ("a", "b"):
        result = db.sql(f"SELECT * FROM {name} AS OF SYSTEM TIME {marker.resolved} ORDER BY k")
        source = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        assert sorted(tables[name].to_pylist(), key=lambda r: r["k"]) == source
    bucket = urlsplit(s3_lake).netloc
    assert any(k.startswith("feeds/a/_delta_log/") for k in bucket_keys(s3, bucket, "feeds/"))
    db.changefeeds.cancel(job_id)
