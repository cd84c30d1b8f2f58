"""A failing sink does not look healthy (issue 43, item 1).

What CockroachDB does, and these tests hold feedkv to:

- A changefeed treats errors as retryable unless they are terminal, and retries them
  ("By default, changefeeds treat errors as retryable except for some specific terminal
  errors", https://www.cockroachlabs.com/docs/v23.1/monitor-and-debug-changefeeds); while
  it retries, the job's running status holds the retryable error and when it happened
  (cockroachdb/cockroach#61906, "cdc: Record retryable error in job status", which added
  the timestamp so an old error is recognisable). Its backoff starts over once the
  high-water mark moves (cockroachdb/cockroach#164933).
- ``on_error='pause'`` pauses a job on a terminal error, not on a retryable one.
- CREATE CHANGEFEED reaches the sink where CockroachDB does: it dials Kafka (a broker list
  it cannot dial fails the statement with "unable to dial", cockroachdb/cockroach#136616)
  and checks cloud storage (a bucket the credentials cannot write was found only by its
  retries, cockroachdb/cockroach#43216); a webhook is not reached until rows flow.
"""

from __future__ import annotations

import datetime
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import TerminalSinkError, make_sink, parse_sink_uri
from feedkv.errors import SQLError
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 60.0
KEYS = "AWS_ACCESS_KEY_ID=test&AWS_SECRET_ACCESS_KEY=test&AWS_REGION=us-east-1"
# One quick retry inside the sink, so that the changefeed sees the failure soon.
QUICK_RETRY = """webhook_sink_config='{"Retry": {"Max": 1, "Backoff": "10ms"}}'"""
RETRYABLE = re.compile(r"running: retryable error at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC")


def show(db: DB, job_id: int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    (row,) = result.rows
    return dict(zip(result.columns, row, strict=True))


def create(db: DB, uri: str, options: str = "") -> int:
    with_options = f" WITH {options}" if options else ""
    (job_id,) = db.sql(f"CREATE CHANGEFEED FOR t INTO '{uri}'{with_options}").rows[0]
    assert isinstance(job_id, int)
    return job_id


def dead_address() -> str:
    """An address on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    return db


# Retryable: the job runs on, saying what fails and since when.


@pytest.mark.parametrize("on_error", ["fail", "pause"])
def test_a_webhook_nobody_listens_on_shows_its_retryable_error_and_when(
    table: DB, on_error: str
) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0, tzinfo=None)
    address = dead_address()
    job_id = create(table, f"webhook-https://{address}/x", f"on_error='{on_error}', {QUICK_RETRY}")

    def retrying() -> dict[str, Any] | None:
        job = show(table, job_id)
        return job if RETRYABLE.match(job["running_status"]) else None

    job = wait_until(retrying, timeout_s=DEADLINE, what="the retryable error in the status")
    assert (job["status"], job["error"]) == ("running", "")
    assert f"cannot post a batch of 2 messages of t to https://{address}/x" in job["running_status"]
    match = RETRYABLE.match(job["running_status"])
    assert match is not None
    when = datetime.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S")
    assert before <= when <= datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert re.search(r"\(retrying in [\d.]+ s\)", job["running_status"])


def test_backoff_doubles_up_to_its_cap_and_starts_over_after_progress() -> None:
    from feedkv.changefeed.retrying import backoff

    waits = [backoff(n, first_s=0.2, max_s=10.0) for n in range(1, 10)]
    assert waits == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 10.0]
    assert backoff(10_000, first_s=1.0, max_s=60.0) == 60.0


# Terminal: the job fails, or pauses under on_error='pause'.


@pytest.mark.parametrize(("on_error", "status"), [("fail", "failed"), ("pause", "paused")])
def test_a_sink_directory_that_stops_being_one_ends_the_job(
    table: DB, tmp_path: Path, on_error: str, status: str
) -> None:
    out = tmp_path / "out"
    job_id = create(
        table,
        f"file://{out}",
        f"on_error='{on_error}', resolved='100ms', min_checkpoint_frequency='100ms'",
    )
    wait_until(lambda: list(out.rglob("*.RESOLVED")), timeout_s=DEADLINE, what="a marker")
    shutil.rmtree(out)
    out.write_text("a file where the directory was")
    table.sql("INSERT INTO t VALUES (3, 'c')")

    def ended() -> dict[str, Any] | None:
        job = show(table, job_id)
        return job if job["status"] == status else None

    job = wait_until(ended, timeout_s=DEADLINE, what=f"the job {status}")
    assert "Not a directory" in job["error"]
    assert "must be a directory this node can write to" in job["error"]


def test_a_file_sink_that_cannot_hold_files_is_refused_at_create(table: DB) -> None:
    with pytest.raises(SQLError) as raised:
        table.sql("CREATE CHANGEFEED FOR t INTO 'file:///proc/self'")
    assert raised.value.code == "22023"
    assert "the file:// sink cannot be used: cannot write changefeed file /proc/self/" in (
        raised.value.message
    )
    assert table.sql("SHOW CHANGEFEED JOBS").rows == []


def test_a_file_that_stops_taking_writes_raises_a_terminal_sink_error(tmp_path: Path) -> None:
    uri = parse_sink_uri(f"file://{tmp_path}/out", ChangefeedOptions())
    sink = make_sink(uri, ChangefeedOptions(), start=Timestamp(1, 0))
    try:
        (tmp_path / "out").rmdir()
        (tmp_path / "out").write_text("")
        with pytest.raises(TerminalSinkError, match="Not a directory"):
            sink.emit_resolved(Timestamp(2, 0), ["t"])
    finally:
        sink.close()


# Reached at CREATE: cloud storage and Kafka.


def test_s3_without_credentials_is_refused_at_create(
    table: DB, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NB: boto3 looks for credentials in the environment, its files and the instance
    # metadata service; none of them may answer here.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(SQLError) as raised:
        table.sql(f"CREATE CHANGEFEED FOR t INTO 's3://feeds/cdc?AWS_ENDPOINT={s3_endpoint}'")
    assert raised.value.code == "22023"
    assert "Unable to locate credentials" in raised.value.message
    assert "AWS_ENDPOINT" not in raised.value.message.partition(";")[0]  # no URI query
    assert "check the bucket and the credentials" in raised.value.message
    assert table.sql("SHOW CHANGEFEED JOBS").rows == []


def test_s3_with_a_bucket_that_does_not_exist_is_refused_at_create(
    table: DB, s3_endpoint: str
) -> None:
    with pytest.raises(SQLError) as raised:
        table.sql(f"CREATE CHANGEFEED FOR t INTO 's3://nope/cdc?{KEYS}&AWS_ENDPOINT={s3_endpoint}'")
    assert raised.value.code == "22023"
    assert "NoSuchBucket" in raised.value.message
    assert table.sql("SHOW CHANGEFEED JOBS").rows == []


def test_s3_that_works_leaves_no_trace_of_the_check(table: DB, s3_endpoint: str, s3: Any) -> None:
    # NB: moto keeps its buckets per process: a prefix of this test's own
    job_id = create(table, f"s3://feeds/probed?{KEYS}&AWS_ENDPOINT={s3_endpoint}")
    table.sql(f"CANCEL JOB {job_id}")
    found = s3.list_objects_v2(Bucket="feeds", Prefix="probed/").get("Contents", [])
    assert not [o["Key"] for o in found if ".feedkv-probe-" in o["Key"]]


def test_kafka_without_a_broker_is_refused_at_create(table: DB) -> None:
    from feedkv.changefeed.sinks import kafka

    address = dead_address()
    with pytest.raises(SQLError) as raised:
        table.sql(f"CREATE CHANGEFEED FOR t INTO 'kafka://{address}'")
    assert raised.value.code == "08000"
    assert f"cannot reach the Kafka brokers at {address}" in raised.value.message
    assert f"within {kafka.DIAL_TIMEOUT:g} s" in raised.value.message
    assert table.sql("SHOW CHANGEFEED JOBS").rows == []
