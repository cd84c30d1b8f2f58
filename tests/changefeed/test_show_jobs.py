"""SHOW JOBS, SHOW CHANGEFEED JOBS with CockroachDB 26.1's columns, and both read as
tables (``SELECT ... FROM [SHOW CHANGEFEED JOBS]``, ``crdb_internal.jobs``); the
``fraction_completed`` of an initial scan."""

from __future__ import annotations

import datetime
import json
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import Changefeed, ChangefeedSpec
from feedkv.changefeed.jobs import (
    CRDB_INTERNAL_JOBS_COLUMNS,
    JOBS_COLUMNS,
    SHOW_COLUMNS,
    JobRecord,
    put_job,
    running_status,
)
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.registry import (
    CLAIMED_STATUS,
    FIRST_RESOLVED_STATUS,
    JobRegistry,
    RegistrySettings,
)
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import Message
from feedkv.changefeed.thread_job import ThreadJob
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
FAST = "min_checkpoint_frequency='100ms', resolved='100ms'"
# CockroachDB words a running changefeed's status so: an HLC timestamp as it prints one
RESOLVED = re.compile(r"running: resolved=\d+\.\d{9},\d+")


def create(db: DB, out: Path) -> int:
    job_id: int = db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH {FAST}").rows[0][0]
    return job_id


def row_of(db: DB, statement: str, job_id: int) -> dict[str, Any]:
    result = db.sql(statement)
    [row] = [r for r in result.rows if r[0] == job_id]
    return dict(zip(result.columns, row, strict=True))


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    return db


def test_show_changefeed_jobs_has_cockroachdbs_columns_and_times(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    assert db.sql("SHOW CHANGEFEED JOBS").columns == SHOW_COLUMNS
    assert SHOW_COLUMNS[5:9] == ("created", "started", "finished", "modified")

    def resolved() -> dict[str, Any] | None:
        shown = row_of(db, "SHOW CHANGEFEED JOBS", job_id)
        return shown if RESOLVED.fullmatch(shown["running_status"]) else None

    running = wait_until(resolved, timeout_s=DEADLINE, what="the job to report its progress")
    assert running["created"] <= running["started"] <= running["modified"]
    assert running["finished"] is None
    seconds, rest = running["running_status"].removeprefix("running: resolved=").split(".")
    nanos = int(seconds) * 10**9 + int(rest.split(",")[0])
    assert nanos <= int(running["high_water_timestamp"])  # the record's mark moves on
    db.sql(f"CANCEL JOB {job_id}")
    canceled = row_of(db, "SHOW CHANGEFEED JOBS", job_id)
    assert canceled["status"] == "canceled"
    assert isinstance(canceled["finished"], datetime.datetime)
    assert running["modified"] <= canceled["finished"] <= canceled["modified"]


def test_show_jobs_has_the_job_type_and_cockroachdbs_columns(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    result = db.sql("SHOW JOBS")
    assert result.columns == JOBS_COLUMNS
    shown = row_of(db, "SHOW JOBS", job_id)
    assert shown["job_type"] == "CHANGEFEED"
    assert shown["user_name"] == "root"
    assert shown["description"].startswith("CREATE CHANGEFEED FOR TABLE t")
    assert row_of(db, f"SHOW JOB {job_id}", job_id)["job_id"] == job_id
    wait_until(
        lambda: row_of(db, "SHOW JOBS", job_id)["coordinator_id"] is not None,
        timeout_s=DEADLINE,
        what="a runner to take the job",
    )
    # CockroachDB's coordinator_id is the node's number (an INT8); a store of its own is n1
    assert row_of(db, "SHOW JOBS", job_id)["coordinator_id"] == 1
    # a changefeed's progress is its high-water mark: no fraction once no scan runs
    wait_until(
        lambda: RESOLVED.fullmatch(row_of(db, "SHOW JOBS", job_id)["running_status"]),
        timeout_s=DEADLINE,
        what="the scan to end",
    )
    assert row_of(db, "SHOW JOBS", job_id)["fraction_completed"] is None


def test_job_shows_read_as_tables(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    other = create(db, tmp_path / "other")
    db.sql(f"PAUSE JOB {other}")
    result = db.sql("SELECT job_id, status FROM [SHOW CHANGEFEED JOBS] WHERE status = 'paused'")
    assert result.columns == ("job_id", "status") and result.rows == [(other, "paused")]
    jobs = db.sql(
        "SELECT j.job_id FROM [SHOW JOBS] AS j WHERE j.job_type = 'CHANGEFEED' ORDER BY j.job_id"
    )
    assert jobs.rows == sorted([(job_id,), (other,)])
    internal = db.sql("SELECT * FROM crdb_internal.jobs")
    assert internal.columns == CRDB_INTERNAL_JOBS_COLUMNS
    count = db.sql("SELECT count(*) FROM crdb_internal.jobs WHERE job_type = 'CHANGEFEED'")
    assert count.rows == [(2,)]
    one = db.sql(f"SELECT status FROM [SHOW CHANGEFEED JOB {job_id}]")
    assert one.rows == [("running",)]
    joined = db.sql(
        "SELECT c.job_id, j.job_type FROM [SHOW CHANGEFEED JOBS] AS c "
        "JOIN crdb_internal.jobs AS j ON c.job_id = j.job_id WHERE c.status = 'paused'"
    )
    assert joined.rows == [(other, "CHANGEFEED")]


def test_a_users_job_table_holds_only_their_own_jobs(table: DB, tmp_path: Path) -> None:
    db = table
    create(db, tmp_path / "out")
    db.sql("CREATE USER bob")
    bob = db.session(user="bob")
    assert bob.execute("SELECT * FROM [SHOW JOBS]").rows == []
    assert bob.execute("SELECT count(*) FROM crdb_internal.jobs").rows == [(0,)]


@pytest.mark.parametrize(
    ("statement", "code", "words"),
    [
        ("SELECT * FROM crdb_internal.nodes", "42P01", "crdb_internal.nodes"),
        ("SELECT * FROM [SHOW intervalstyle]", "0A000", "[SHOW intervalstyle]"),
        ("SELECT * FROM [SHOW CHANGEFEED JOB 12345]", "42704", "12345"),
    ],
)
def test_what_cannot_be_read_as_a_job_table_is_refused_saying_why(
    table: DB, statement: str, code: str, words: str
) -> None:
    with pytest.raises(SQLError) as raised:
        table.sql(statement)
    assert raised.value.code == code
    assert words in raised.value.message


class GateSink:
    """A sink that holds every row of ``topic`` (whose key is ``from_key`` or more) in
    emit_row until :attr:`open` is set (so an initial scan stops part way), and keeps the
    rows it took."""

    def __init__(self, topic: str, from_key: int = 0) -> None:
        self.topic = topic
        self.from_key = from_key
        self.open = threading.Event()
        self.rows: list[Message] = []

    def emit_row(self, message: Message) -> None:
        held = message.topic == self.topic and json.loads(message.key)[0] >= self.from_key
        if held and not self.open.wait(DEADLINE):
            raise TimeoutError("the gate was never opened")
        self.rows.append(message)

    def flush(self) -> None:
        pass

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        pass

    def close(self) -> None:
        self.open.set()

    def reset(self) -> None:
        pass


def run_scan(db: DB, tables: tuple[str, ...], sink: GateSink) -> tuple[JobRegistry, int]:
    """A job scanning ``tables`` into ``sink``, run by a registry of its own."""
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    ids = [catalog.table_by_name(snapshot, database, name).id for name in tables]
    now = db.now()
    options = parse_options((("min_checkpoint_frequency", "100ms"),), now=now)
    topics = dict(zip(ids, tables, strict=True))
    spec = ChangefeedSpec(tuple(Target(i) for i in ids), topics, options, now, "null://")
    record = JobRecord(4242, spec, created=now)
    db.run_transaction(lambda txn: put_job(txn, record, watching=True))

    def make(record: JobRecord) -> ThreadJob:
        return ThreadJob(Changefeed(db, record.resume_spec(), sink), sink)

    registry = JobRegistry(db, "n-test", make, RegistrySettings(renew_s=0.05, interval_s=0.05))
    registry.adopt(record.id)
    return registry, record.id


def test_fraction_completed_follows_an_initial_scan_table_by_table(table: DB) -> None:
    db = table
    db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    db.sql("INSERT INTO u VALUES (1), (2)")
    sink = GateSink("u")  # t scans, u's first row waits
    registry, job_id = run_scan(db, ("t", "u"), sink)
    try:
        wait_until(
            lambda: row_of(db, "SHOW JOBS", job_id)["fraction_completed"] == 0.5,
            timeout_s=DEADLINE,
            what="SHOW JOBS to show the scan half done",
        )
        assert row_of(db, "SHOW JOBS", job_id)["running_status"] == "running: initial scan"
        sink.open.set()
        done = wait_until(
            lambda: (
                (shown := row_of(db, "SHOW JOBS", job_id))["fraction_completed"] is None
                and RESOLVED.fullmatch(shown["running_status"])
            ),
            timeout_s=DEADLINE,
            what="the scan to end and the feed to resolve",
        )
        assert done
        assert len(sink.rows) == 4
    finally:
        registry.close()


def test_fraction_completed_moves_range_by_range_within_a_table(db: DB) -> None:
    db.sql("CREATE TABLE big (k INT PRIMARY KEY)")
    for lo in range(0, 7500, 500):
        db.sql("INSERT INTO big VALUES " + ", ".join(f"({k})" for k in range(lo, lo + 500)))
    db.sql("ALTER TABLE big SPLIT AT VALUES (2500), (5000)")
    sink = GateSink("big", from_key=5000)  # the scan waits in the last of three ranges
    registry, job_id = run_scan(db, ("big",), sink)
    try:
        part = wait_until(
            lambda: row_of(db, "SHOW JOBS", job_id)["fraction_completed"],
            timeout_s=DEADLINE,
            what="SHOW JOBS to show the scan part done",
        )
        assert 0 < part < 1
        sink.open.set()
        wait_until(
            lambda: RESOLVED.fullmatch(row_of(db, "SHOW JOBS", job_id)["running_status"]),
            timeout_s=DEADLINE,
            what="the scan to end",
        )
        assert row_of(db, "SHOW JOBS", job_id)["fraction_completed"] is None
        assert len(sink.rows) == 7500
    finally:
        registry.close()


def test_show_in_brackets_inside_a_string_or_a_comment_stays_as_written(table: DB) -> None:
    assert table.sql("SELECT '[SHOW JOBS]' -- [SHOW JOBS]\n").rows == [("[SHOW JOBS]",)]


class StartingJob:
    """A job that runs until closed and says what its test sets: whether it is
    starting (as a Spark job's query does) and its high-water mark."""

    def __init__(self, record: JobRecord) -> None:
        self.spec = record.spec
        self.high_water = record.spec.start
        self.starting_status: str | None = "running: starting its query"
        self.retrying = None
        self._closed = threading.Event()

    def run(self) -> None:
        self._closed.wait(DEADLINE)

    def close(self) -> None:
        self._closed.set()


def test_running_status_says_a_job_starts_then_waits_for_its_first_resolved_timestamp(
    db: DB,
) -> None:
    """A job that scans nothing never says ``initial scan``: while it says it is
    starting, that; then that it waits for its first resolved timestamp; then its
    high-water mark."""
    now = db.now()
    options = parse_options((("initial_scan", "no"),), now=now)
    spec = ChangefeedSpec((Target(1),), {1: "t"}, options, now, "null://")
    record = JobRecord(4243, spec, created=now)
    db.run_transaction(lambda txn: put_job(txn, record))
    jobs: list[StartingJob] = []

    def make(record: JobRecord) -> StartingJob:
        jobs.append(StartingJob(record))
        return jobs[-1]

    registry = JobRegistry(db, "n-test", make, RegistrySettings(renew_s=0.05, interval_s=0.05))
    registry.adopt(record.id)  # or the registry's own adoption loop, started by this, claims it

    def shows(status: str) -> bool:
        return bool(row_of(db, "SHOW CHANGEFEED JOBS", record.id)["running_status"] == status)

    try:
        wait_until(lambda: len(jobs) == 1, timeout_s=DEADLINE)
        [job] = jobs
        wait_until(lambda: shows("running: starting its query"), timeout_s=DEADLINE)
        job.starting_status = None
        wait_until(lambda: shows(FIRST_RESOLVED_STATUS), timeout_s=DEADLINE)
        job.high_water = Timestamp(now.wall + 1_500_000_000, 2)
        wait_until(lambda: shows(running_status(job.high_water)), timeout_s=DEADLINE)
    finally:
        registry.close()


def test_a_claimed_job_says_it_is_starting_until_its_first_progress_update(db: DB) -> None:
    """Between a node's claim and the runner's first progress update (a second by
    default), the job says it is starting rather than nothing."""
    now = db.now()
    options = parse_options((("initial_scan", "no"),), now=now)
    spec = ChangefeedSpec((Target(1),), {1: "t"}, options, now, "null://")
    record = JobRecord(4244, spec, created=now)
    db.run_transaction(lambda txn: put_job(txn, record))
    registry = JobRegistry(
        db, "n-test", StartingJob, RegistrySettings(renew_s=3600, interval_s=3600)
    )
    try:
        registry.adopt(record.id)
        shown = row_of(db, "SHOW CHANGEFEED JOBS", record.id)
        assert (shown["status"], shown["running_status"]) == ("running", CLAIMED_STATUS)
    finally:
        registry.close()
