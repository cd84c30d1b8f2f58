"""The cloud storage sink into S3, against a moto server on loopback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from feedkv import DB
from feedkv.testing.sink_conformance import SinkSetup, bucket_setup
from feedkv.testing.waiting import wait_until

KEYS = "AWS_ACCESS_KEY_ID=test&AWS_SECRET_ACCESS_KEY=test&AWS_REGION=us-east-1"


def test_changefeed_files_land_in_the_bucket_with_resolved_markers(
    db: DB, s3_endpoint: str, s3: Any
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 's3://feeds/cdc?{KEYS}&AWS_ENDPOINT={s3_endpoint}' "
        "WITH resolved='0s', min_checkpoint_frequency='0s'"
    )
    client = s3

    def listing() -> list[str]:
        found = client.list_objects_v2(Bucket="feeds", Prefix="cdc/").get("Contents", [])
        names = sorted(o["Key"] for o in found)
        return names if any(n.endswith(".RESOLVED") for n in names) else []

    names = wait_until(listing, timeout_s=30, what="a resolved file in the bucket")
    data = [n for n in names if n.endswith(".ndjson")]
    rows = [
        json.loads(line)
        for name in data
        for line in client.get_object(Bucket="feeds", Key=name)["Body"].read().splitlines()
    ]
    assert [r["after"] for r in rows] == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]
    assert names.index(data[0]) < names.index(next(n for n in names if n.endswith(".RESOLVED")))


def test_a_bucket_is_required(db: DB) -> None:
    from feedkv.errors import SQLError

    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError, match="needs a bucket"):
        db.sql("CREATE CHANGEFEED FOR t INTO 's3:///prefix'")


# The sink contract.


@pytest.fixture(params=["", "&partition_format=flat&file_size=256"], ids=["daily", "small-files"])
def s3_setup(request: pytest.FixtureRequest, s3_endpoint: str, s3: Any) -> SinkSetup:
    """moto's state is shared by every server of the process: a bucket of its own."""
    query: str = request.param

    def bodies(bucket: str) -> list[bytes]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="kit/")
        names = sorted(o["Key"] for page in pages for o in page.get("Contents", []))
        return [s3.get_object(Bucket=bucket, Key=n)["Body"].read() for n in names]

    return bucket_setup(
        lambda bucket: f"s3://{bucket}/kit?{KEYS}&AWS_ENDPOINT={s3_endpoint}{query}",
        lambda bucket: s3.create_bucket(Bucket=bucket),
        bodies,
    )


def test_the_s3_sink_keeps_the_sink_contract(s3_setup: SinkSetup) -> None:
    s3_setup.check()
