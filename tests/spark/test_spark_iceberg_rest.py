"""A changefeed job on a real local Spark into Iceberg tables of a REST catalog (the
loopback test catalog, with OAuth2 client credentials) whose warehouse is an S3 bucket
(moto's server): its tasks stage rows in the bucket, not on local disk; the query is
stopped and started again (PAUSE / RESUME) mid-stream; every retained marker reads back
as the source did then, and the bank's total across the two tables holds at each."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import parse_sink_uri, sink_defaults
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.iceberg import IcebergPlace
from feedkv.changefeed.sinks.lake_tables import STAGING
from feedkv.testing.iceberg_rest import IcebergRestServer
from feedkv.testing.lake_rows import logical_now, wait_lake_past
from feedkv.testing.s3_server import S3_KEYS, moto_s3_server
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

CREDENTIAL = "feedkv:s3cret"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3_server() as url:
        yield url


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_KEYS["AWS_REGION"],
    )


def job_status(db: DB, job_id: int) -> str:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    return str(dict(zip(result.columns, result.rows[0], strict=True))["status"])


def transfer(db: DB, step: int) -> None:
    """Move ``step`` from a's row 1 to b's in one transaction: the total stays 200."""
    session = db.session()
    try:
        session.execute("BEGIN")
        session.execute(f"UPDATE a SET v = v - {step} WHERE k = 1")
        session.execute(f"UPDATE b SET v = v + {step} WHERE k = 1")
        session.execute(f"INSERT INTO a VALUES ({10 + step}, {step})")
        session.execute("COMMIT")
    finally:
        session.close()


def check_marker(db: DB, uri: str, marker: feedkv.lake.Marker) -> None:
    tables = feedkv.lake.read_tables(uri, marker)
    for name in ("a", "b"):
        result = db.sql(f"SELECT k, v FROM {name} AS OF SYSTEM TIME {marker.resolved}")
        source = sorted(tuple(r) for r in result.rows)
        assert sorted((r["k"], r["v"]) for r in tables[name].to_pylist()) == source, name
    total = sum(r["v"] for t in tables.values() for r in t.to_pylist() if r["k"] == 1)
    assert total == 200, marker


@pytest.mark.slow(60)
@pytest.mark.timeout(600)
def test_a_spark_job_mirrors_into_a_rest_catalog_whose_warehouse_is_a_bucket(
    db: DB, tmp_path: Path, s3_endpoint: str
) -> None:
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    s3 = s3_client(s3_endpoint)
    s3.create_bucket(Bucket=bucket)
    storage = {
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": S3_KEYS["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": S3_KEYS["AWS_SECRET_ACCESS_KEY"],
        "s3.region": S3_KEYS["AWS_REGION"],
    }
    with IcebergRestServer(
        str(tmp_path / "rest"),
        credential=CREDENTIAL,
        location=f"s3://{bucket}/wh",
        properties=storage,
    ) as server:
        # NB: a catalog name of its own, so its local fallback staging is its own too
        uri = f"iceberg://{bucket}/feeds?catalog_uri={server.url}&credential={CREDENTIAL}"
        db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
        db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
        db.sql("INSERT INTO a VALUES (1, 100)")
        db.sql("INSERT INTO b VALUES (1, 100)")
        [(job_id,)] = db.sql(
            f"CREATE CHANGEFEED FOR TABLE a, b INTO '{uri}' WITH min_checkpoint_frequency = '200ms'"
        ).rows
        for step in (1, 2):
            transfer(db, step)
        check_marker(db, uri, wait_lake_past(db, job_id, uri, logical_now(db)))

        # The query stopped and started again from its checkpoint, with writes between.
        db.sql(f"PAUSE JOB {job_id}")
        wait_until(lambda: job_status(db, job_id) == "paused", timeout_s=120, what="paused")
        paused_at = feedkv.lake.read_consistent(uri)
        transfer(db, 3)
        db.sql(f"RESUME JOB {job_id}")
        transfer(db, 4)
        last = wait_lake_past(db, job_id, uri, logical_now(db))
        db.sql(f"CANCEL JOB {job_id}")

        check_marker(db, uri, last)
        assert paused_at is not None and paused_at.resolved < last.resolved
        parsed = parse_sink_uri(uri, sink_defaults(uri, parse_options((), now=Timestamp(0))))
        tables = lake.lake_tables(parsed)
        try:
            retained = tables.marker_history()
        finally:
            tables.close()
        assert len(retained) >= 2
        for resolved in retained:  # every retained marker, read as of its time
            marker = feedkv.lake.read_consistent(uri, at=resolved)
            assert marker is not None and marker.resolved == resolved
            check_marker(db, uri, marker)

        listed = s3.list_objects_v2(Bucket=bucket, Prefix="wh/")
        keys = [o["Key"] for o in listed.get("Contents", [])]
        assert any(k.startswith("wh/feeds/a/data/") for k in keys), keys
        # the tasks staged in the bucket (never on local disk), and each commit removed
        # what its batch staged (NB: pyarrow leaves empty "directory" objects)
        assert not Path(IcebergPlace.of(parsed).staging).exists()
        assert [k for k in keys if f"/{STAGING}/" in k and not k.endswith("/")] == []
