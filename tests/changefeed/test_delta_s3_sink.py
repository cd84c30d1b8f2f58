"""``delta+s3://``: a changefeed's Delta tables in an S3 bucket, against moto's S3
server on loopback (in a process of its own: :mod:`feedkv.testing.s3_server`), read
back by deltalake and compared with ``AS OF SYSTEM TIME``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from deltalake import DeltaTable

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.sinks.lake_tables import RESOLVED_KEY
from feedkv.errors import SQLError
from feedkv.testing.s3_server import S3_KEYS, moto_s3_server
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

KEYS = S3_KEYS


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    with moto_s3_server() as url:
        yield url


@pytest.fixture
def bucket(s3_server: str) -> str:
    name = f"lake-{uuid.uuid4().hex[:12]}"
    client(s3_server).create_bucket(Bucket=name)
    return name


def client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        region_name=KEYS["AWS_REGION"],
    )


def lake_uri(bucket: str, endpoint: str) -> str:
    params = "&".join(f"{k}={v}" for k, v in KEYS.items())
    return f"delta+s3://{bucket}/feeds?{params}&AWS_ENDPOINT={endpoint}"


def as_of(db: DB, table: str, at: Timestamp) -> list[dict[str, Any]]:
    result = db.sql(f"SELECT * FROM {table} AS OF SYSTEM TIME {at} ORDER BY k")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def wait_marker_past(db: DB, uri: str, job_id: int) -> feedkv.lake.Marker:
    end = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]

    def reached() -> feedkv.lake.Marker | None:
        error = db.changefeeds.error(job_id)
        if error is not None:
            raise AssertionError(f"the changefeed failed: {error}")
        marker = feedkv.lake.read_consistent(uri)
        return marker if marker is not None and Decimal(str(marker.resolved)) >= end else None

    marker = wait_until(reached, timeout_s=60, what="the lake's marker past the writes")
    assert marker is not None
    return marker


def test_a_changefeed_mirrors_two_tables_into_delta_tables_in_a_bucket(
    db: DB, s3_server: str, bucket: str
) -> None:
    uri = lake_uri(bucket, s3_server)
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 100), (2, 0)")
    db.sql("INSERT INTO b VALUES (1, 100)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, b INTO '{uri}' WITH min_checkpoint_frequency = '0s'"
    ).rows
    first = wait_marker_past(db, uri, job_id)
    session = db.session()
    try:  # one transaction across the two tables
        session.execute("BEGIN")
        session.execute("UPDATE a SET v = v - 30 WHERE k = 1")
        session.execute("UPDATE b SET v = v + 30 WHERE k = 1")
        session.execute("COMMIT")
    finally:
        session.close()
    db.sql("DELETE FROM a WHERE k = 2")
    second = wait_marker_past(db, uri, job_id)

    for marker in (first, second):
        tables = feedkv.lake.read_tables(uri, marker)
        for name in ("a", "b"):
            rows = sorted(tables[name].to_pylist(), key=lambda r: r["k"])
            assert rows == as_of(db, name, marker.resolved), name
    # The tables are Delta tables in the bucket that any Delta reader opens there.
    storage = {
        **KEYS,
        "AWS_ENDPOINT_URL": s3_server,
        "AWS_ALLOW_HTTP": "true",
    }
    table = DeltaTable(f"s3://{bucket}/feeds/a", storage_options=storage)
    assert RESOLVED_KEY in table.history(1)[0]
    names = [o["Key"] for o in client(s3_server).list_objects_v2(Bucket=bucket)["Contents"]]
    assert "feeds/_feedkv_resolved" in names
    assert any(n.startswith("feeds/a/_delta_log/") for n in names)


def test_a_dropped_column_leaves_the_delta_table_in_the_bucket(
    db: DB, s3_server: str, bucket: str
) -> None:
    uri = lake_uri(bucket, s3_server)
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT, gone STRING)")
    db.sql("INSERT INTO a VALUES (1, 10, 'x'), (2, 20, 'y')")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' WITH min_checkpoint_frequency = '0s'"
    ).rows
    before = wait_marker_past(db, uri, job_id)
    db.sql("ALTER TABLE a DROP COLUMN gone")
    db.sql("INSERT INTO a VALUES (3, 30)")
    dropped = wait_marker_past(db, uri, job_id)

    for marker in (before, dropped):
        rows = sorted(feedkv.lake.read_tables(uri, marker)["a"].to_pylist(), key=lambda r: r["k"])
        assert rows == as_of(db, "a", marker.resolved)
    storage = {**KEYS, "AWS_ENDPOINT_URL": s3_server, "AWS_ALLOW_HTTP": "true"}
    table = DeltaTable(f"s3://{bucket}/feeds/a", storage_options=storage)
    assert [f.name for f in table.schema().fields] == ["k", "v"]
    old = DeltaTable(
        f"s3://{bucket}/feeds/a", version=before.versions["a"], storage_options=storage
    )
    assert [f.name for f in old.schema().fields] == ["k", "v", "gone"]


def test_a_replayed_window_commits_nothing_new_in_the_bucket(s3_server: str, bucket: str) -> None:
    from feedkv.changefeed.options import parse_options
    from feedkv.changefeed.sink import parse_sink_uri, sink_defaults
    from feedkv.changefeed.sinks import lake
    from feedkv.testing.lake_rows import lake_rows

    uri = lake_uri(bucket, s3_server)
    start = Timestamp(1_700_000_000_000_000_000, 0)
    options = parse_options((), now=start)
    parsed = parse_sink_uri(uri, sink_defaults(uri, options))
    window = Timestamp(start.wall + 10, 0)
    for _run in range(2):  # a restart commits the same window again
        sink = lake.make(parsed, options)
        sink.emit_batches([("a", lake_rows((1, "x", "c", Timestamp(start.wall + 5, 0))))])
        sink.commit_window(window, ["a"])
        sink.close()

    marker = feedkv.lake.read_consistent(uri)
    assert marker is not None and marker.resolved == window
    assert feedkv.lake.read_tables(uri, marker)["a"].to_pylist() == [{"k": 1, "v": "x"}]
    assert marker.versions == {"a": 0}


def test_older_markers_are_kept_in_the_bucket_and_read_at_their_time(
    s3_server: str, bucket: str
) -> None:
    from feedkv.changefeed.options import parse_options
    from feedkv.changefeed.sink import parse_sink_uri, sink_defaults
    from feedkv.changefeed.sinks import lake
    from feedkv.testing.lake_rows import lake_rows

    uri = lake_uri(bucket, s3_server) + "&marker_history=2"
    start = Timestamp(1_700_000_000_000_000_000, 0)
    options = parse_options((), now=start)
    parsed = parse_sink_uri(uri, sink_defaults(uri, options))
    ends = [Timestamp(start.wall + n, 0) for n in (10, 20, 30)]
    for n, end in enumerate(ends):
        sink = lake.make(parsed, options)
        kind = "c" if n == 0 else "u"
        sink.emit_batches([("a", lake_rows((1, f"x{n}", kind, Timestamp(end.wall - 5, 0))))])
        sink.commit_window(end, ["a"])
        sink.close()

    at_25 = feedkv.lake.read_tables(uri, at=Timestamp(start.wall + 25, 0))
    assert at_25["a"].to_pylist() == [{"k": 1, "v": "x1"}]
    with pytest.raises(feedkv.lake.LakeHistoryError, match=f"retains is at {ends[1]}"):
        feedkv.lake.read_consistent(uri, at=Timestamp(start.wall + 15, 0))
    keys = client(s3_server).list_objects_v2(Bucket=bucket, Prefix="feeds/_feedkv_markers/")
    assert len(keys.get("Contents", [])) == 2  # the oldest dropped past marker_history


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing", "cannot write into"),
        ("local", "is for tables in S3"),
    ],
)
def test_a_bucket_that_cannot_take_the_tables_is_refused_at_create(
    db: DB, s3_server: str, tmp_path: Path, where: str, message: str
) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    if where == "missing":
        uri = lake_uri(f"nope-{uuid.uuid4().hex[:8]}", s3_server)
    else:
        uri = f"delta://{tmp_path}/lake?AWS_REGION=us-east-1"
    with pytest.raises(SQLError, match=message):
        db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}'")
