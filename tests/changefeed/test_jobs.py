"""Changefeed jobs end to end with the thread runner: the job record, SHOW CHANGEFEED
JOBS, PAUSE / RESUME / CANCEL JOB, ALTER CHANGEFEED, how jobs end, and jobs surviving a
clean restart and a SIGKILL of their node.

The sink is a ``file://`` directory: every line of a ``.ndjson`` file is one message.
The thread runner is at-least-once, so the tests check that every row version arrives
and that per key no older unseen version follows a newer one, never exactly-once."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.jobs import SHOW_COLUMNS, JobRecord
from feedkv.changefeed.registry import RegistrySettings
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig
from feedkv.sql import catalog
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import LateClock

DEADLINE = 30.0
FAST = "min_checkpoint_frequency='100ms', resolved='100ms'"

# Columns of SHOW CHANGEFEED JOBS that move while a job runs.
MOVING = ("running_status", "high_water_timestamp")


# Statements and the job record.


def create(db: DB, out: Path, *, targets: str = "t", options: str = FAST) -> int:
    """``CREATE CHANGEFEED FOR targets INTO 'file://out' WITH options``: its job id."""
    result = db.sql(f"CREATE CHANGEFEED FOR {targets} INTO 'file://{out}' WITH {options}")
    assert result.columns == ("job_id",)
    (job_id,) = result.rows[0]
    assert isinstance(job_id, int)
    return job_id


def show(db: DB, job_id: int) -> dict[str, Any]:
    """``SHOW CHANGEFEED JOB job_id`` as a dict of its columns."""
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    (row,) = result.rows
    return dict(zip(result.columns, row, strict=True))


def stable(db: DB, job_id: int) -> dict[str, Any]:
    """The job's SHOW row without the columns a running job moves."""
    return {k: v for k, v in show(db, job_id).items() if k not in MOVING}


def wait_status(db: DB, job_id: int, status: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        row = show(db, job_id)
        return row if row["status"] == status else None

    row = wait_until(reached, timeout_s=DEADLINE, what=f"job {job_id} {status}")
    assert row is not None
    return row


def now(db: DB) -> Decimal:
    ts = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    assert isinstance(ts, Decimal)
    return ts


def wait_high_water_past(db: DB, job_id: int, ts: Decimal) -> Decimal:
    """Wait until SHOW shows the job's high-water mark at or past ``ts``."""

    def past() -> Decimal | None:
        high_water = show(db, job_id)["high_water_timestamp"]
        return high_water if high_water is not None and high_water >= ts else None

    high_water = wait_until(past, timeout_s=DEADLINE, what=f"job {job_id}'s high water past {ts}")
    assert high_water is not None
    return high_water


def wait_past_scan(db: DB, job_id: int) -> None:
    """Wait until this process runs the job and it flushed past its start (so a PAUSE
    records a high-water mark), without waiting for the registry's next renewal."""

    def past() -> bool:
        job = db.changefeeds.get(job_id)
        return job is not None and job.high_water > job.spec.start

    wait_until(past, timeout_s=DEADLINE, what=f"job {job_id} past its initial scan")


def refused(db: DB, statement: str, code: str, message: str, job_id: int) -> SQLError:
    """Run ``statement``, which must fail with ``code`` and ``message``, and leave job
    ``job_id``'s record as it was."""
    before = stable(db, job_id)
    jobs_before = len(db.sql("SHOW CHANGEFEED JOBS").rows)
    with pytest.raises(SQLError) as raised:
        db.sql(statement)
    assert raised.value.code == code, raised.value.message
    assert message in raised.value.message
    assert stable(db, job_id) == before
    assert len(db.sql("SHOW CHANGEFEED JOBS").rows) == jobs_before
    return raised.value


def watchers(db: DB, table: str) -> list[int]:
    """The jobs recorded as watching ``table`` (what ALTER PRIMARY KEY refuses on)."""
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return catalog.changefeed_watchers(
        snapshot, catalog.table_by_name(snapshot, database, table).id
    )


# The file sink.


def messages(out: Path) -> list[dict[str, Any]]:
    """Every row message in ``out``, files in name order (their names start with a
    timestamp that never decreases), lines in order."""
    if not out.exists():
        return []
    paths = [
        p
        for p in out.rglob("*")
        if p.is_file()
        and not p.name.endswith(".tmp")
        and "RESOLVED" not in p.name
        and ".feedkv" not in p.relative_to(out).parts
    ]
    found: list[dict[str, Any]] = []
    for path in sorted(paths, key=lambda p: p.name):
        found.extend(json.loads(line) for line in path.read_text().splitlines())
    return found


def resolved(out: Path) -> Decimal | None:
    """The highest resolved marker written into ``out``."""
    if not out.exists():
        return None
    markers = [
        Decimal(json.loads(p.read_text())["resolved"])
        for p in out.rglob("*.RESOLVED")
        if ".feedkv" not in p.relative_to(out).parts
    ]
    return max(markers, default=None)


def wait_resolved_past(out: Path, ts: Decimal) -> None:
    """Wait for a resolved marker at or past ``ts``: every row at or below it is in."""

    def past() -> bool:
        marker = resolved(out)
        return marker is not None and marker >= ts

    wait_until(past, timeout_s=DEADLINE, what=f"a resolved marker in {out} past {ts}")


def versions(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Per key (column ``k``), the distinct versions (``after``) in the order they first
    arrived, deduplicated by ``updated``; checks that no older, previously unseen
    version of a row follows a newer one."""
    seen: set[tuple[int, Decimal]] = set()
    latest: dict[int, Decimal] = {}
    found: dict[int, list[dict[str, Any]]] = {}
    for message in messages(out):
        after = message["after"]
        key, updated = after["k"], Decimal(message["updated"])
        if (key, updated) in seen:
            continue  # at-least-once: a version seen before
        assert updated > latest.get(key, Decimal(0)), f"key {key}: {updated} after a newer one"
        seen.add((key, updated))
        latest[key] = updated
        found.setdefault(key, []).append(after)
    return found


def wait_versions(out: Path, expected: dict[int, list[dict[str, Any]]]) -> None:
    """Wait until ``out`` holds ``expected`` (per key, every version in order) and
    nothing else."""

    def complete() -> bool:
        return versions(out) == expected

    try:
        wait_until(complete, timeout_s=DEADLINE, what=f"{expected} in {out}")
    except TimeoutError:
        assert versions(out) == expected  # shows the difference
        raise


def rows(*values: tuple[int, str]) -> dict[int, list[dict[str, Any]]]:
    """The versions a table ``(k, v)`` goes through when ``values`` are upserted in turn."""
    found: dict[int, list[dict[str, Any]]] = {}
    for k, v in values:
        found.setdefault(k, []).append({"k": k, "v": v})
    return found


def upsert(db: DB, *values: tuple[int, str], table: str = "t") -> None:
    for k, v in values:
        db.sql(f"UPSERT INTO {table} VALUES ($1, $2)", k, v)


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    upsert(db, (1, "a"), (2, "b"))
    return db


# SHOW CHANGEFEED JOBS.


def test_show_lists_a_new_job_running_with_every_column(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    before = datetime.datetime.now(datetime.UTC)
    statement = f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH updated, {FAST}"
    (job_id,) = db.sql(statement).rows[0]
    result = db.sql("SHOW CHANGEFEED JOBS")
    assert result.columns == SHOW_COLUMNS
    (row,) = result.rows
    job = dict(zip(result.columns, row, strict=True))
    assert job["job_id"] == job_id
    # NB: as CockroachDB describes it: TABLE before each target as written, the options
    # sorted in WITH OPTIONS (...), which CREATE CHANGEFEED takes again
    assert job["description"] == (
        f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{out}' "
        "WITH OPTIONS (min_checkpoint_frequency = '100ms', resolved = '100ms', updated)"
    )
    assert job["user_name"] == "root"
    assert job["status"] == "running"
    assert job["error"] == ""
    assert job["sink_uri"] == f"file://{out}"
    assert job["full_table_names"].values == ("defaultdb.public.t",)
    assert job["topics"] is None  # a file sink has no topics (CockroachDB's NULL)
    assert job["format"] == "json"
    created = job["created"]
    assert isinstance(created, datetime.datetime)
    second = datetime.timedelta(seconds=1)  # created is rounded to microseconds
    assert before - second <= created <= datetime.datetime.now(datetime.UTC) + second

    first = wait_high_water_past(db, job_id, Decimal(0))
    shown = show(db, job_id)
    assert shown["running_status"].startswith("running: resolved=")
    readable = shown["readable_high_water_timestamptz"]
    assert isinstance(readable, datetime.datetime)
    high_water_ns = int(shown["high_water_timestamp"])
    assert readable == datetime.datetime.fromtimestamp(high_water_ns / 1e9, tz=datetime.UTC)
    upsert(db, (3, "c"))
    later = now(db)
    assert wait_high_water_past(db, job_id, later) > first
    wait_versions(out, rows((1, "a"), (2, "b"), (3, "c")))

    other = create(db, tmp_path / "other", options="format=json, " + FAST)
    assert [r[0] for r in db.sql("SHOW CHANGEFEED JOBS").rows] == [other, job_id]  # newest first
    assert show(db, other)["full_table_names"].values == ("defaultdb.public.t",)


S3_SECRET = "hunter2"


@pytest.fixture
def s3_uri(s3_endpoint: str) -> str:
    """An S3 sink URI with secrets, on a moto server (CREATE CHANGEFEED writes to it),
    under a prefix of this file's own."""
    return (
        f"s3://feeds/jobs?AWS_ACCESS_KEY_ID=id&AWS_SECRET_ACCESS_KEY={S3_SECRET}"
        f"&AWS_ENDPOINT={s3_endpoint}"
    )


def test_show_redacts_secrets_in_the_sink_uri(table: DB, s3_uri: str) -> None:
    db = table
    (job_id,) = db.sql(f"CREATE CHANGEFEED FOR t INTO '{s3_uri}'").rows[0]
    db.sql(f"PAUSE JOB {job_id}")
    endpoint = s3_uri.rpartition("=")[2]
    assert show(db, job_id)["sink_uri"] == (
        "s3://feeds/jobs?AWS_ACCESS_KEY_ID=redacted&AWS_SECRET_ACCESS_KEY=redacted"
        f"&AWS_ENDPOINT={endpoint}"
    )
    db.sql(f"ALTER CHANGEFEED {job_id} SET updated")
    assert S3_SECRET not in str(show(db, job_id))  # an altered job's description too


def test_show_never_prints_a_sink_secret_in_the_description(table: DB, s3_uri: str) -> None:
    db = table
    (job_id,) = db.sql(f"CREATE CHANGEFEED FOR t INTO '{s3_uri}'").rows[0]
    db.sql(f"PAUSE JOB {job_id}")
    assert S3_SECRET not in show(db, job_id)["description"]


# PAUSE, RESUME and CANCEL JOB.


def test_rows_written_while_paused_arrive_after_resume(table: DB, tmp_path: Path) -> None:
    db = table
    out, witness = tmp_path / "out", tmp_path / "witness"
    job_id = create(db, out, options=f"updated, {FAST}")
    witness_id = create(db, witness, options=f"updated, {FAST}")
    upsert(db, (3, "c"))
    wait_versions(out, rows((1, "a"), (2, "b"), (3, "c")))

    result = db.sql(f"PAUSE JOB {job_id}")
    assert result.tag == "PAUSE JOB"
    paused = show(db, job_id)  # PAUSE JOB returns once the runner stopped
    assert (paused["status"], paused["running_status"]) == ("paused", "paused")
    wait_until(lambda: db.changefeeds.get(job_id) is None, timeout_s=DEADLINE)
    assert db.sql(f"PAUSE JOB {job_id}").tag == "PAUSE JOB"  # again: nothing changes
    assert stable(db, job_id) == {k: v for k, v in paused.items() if k not in MOVING}
    delivered = messages(out)
    history = [(1, "a"), (2, "b"), (3, "c"), (1, "a2"), (4, "d"), (1, "a3"), (5, "e")]
    upsert(db, *history[3:])
    # The witness, still running, got every row: a running job would have had them too.
    wait_versions(witness, rows(*history))
    assert messages(out) == delivered
    assert show(db, job_id)["status"] == "paused"

    assert db.sql(f"RESUME JOB {job_id}").tag == "RESUME JOB"
    resumed = show(db, job_id)
    assert resumed["status"] == "running" and resumed["error"] == ""
    wait_versions(out, rows(*history))
    upsert(db, (2, "b2"))
    wait_versions(out, rows(*history, (2, "b2")))
    assert show(db, witness_id)["status"] == "running"


def test_cancel_ends_the_job_for_good(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    assert watchers(db, "t") == [job_id]

    assert db.sql(f"CANCEL JOB {job_id}").tag == "CANCEL JOB"
    job = show(db, job_id)  # CANCEL JOB returns once the runner stopped
    assert job["status"] == "canceled"
    wait_until(lambda: db.changefeeds.get(job_id) is None, timeout_s=DEADLINE)
    assert watchers(db, "t") == []
    refused(db, f"RESUME JOB {job_id}", "55000", f"job {job_id} is canceled", job_id)
    refused(db, f"PAUSE JOB {job_id}", "55000", "cannot be paused", job_id)
    refused(db, f"CANCEL JOB {job_id}", "55000", f"job {job_id} is canceled", job_id)
    assert show(db, job_id)["status"] == "canceled"


def test_cancel_of_a_canceled_job_says_it_cannot_be_canceled(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    db.sql(f"CANCEL JOB {job_id}")
    refused(db, f"CANCEL JOB {job_id}", "55000", "it cannot be canceled", job_id)


def test_a_job_paused_right_after_create_can_be_canceled(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    db.sql(f"PAUSE JOB {job_id}")
    assert show(db, job_id)["status"] == "paused"
    db.sql(f"CANCEL JOB {job_id}")
    assert show(db, job_id)["status"] == "canceled"
    assert watchers(db, "t") == []


# Errors.


def test_statements_on_a_running_job_that_are_refused_or_do_nothing(
    table: DB, tmp_path: Path
) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    missing = job_id + 1_000_000
    for statement in (
        f"SHOW CHANGEFEED JOB {missing}",
        f"PAUSE JOB {missing}",
        f"RESUME JOB {missing}",
        f"CANCEL JOB {missing}",
        f"ALTER CHANGEFEED {missing} SET updated",
    ):
        refused(db, statement, "42704", f"job with ID {missing} does not exist", job_id)
    refused(
        db,
        f"ALTER CHANGEFEED {job_id} SET updated",
        "55000",
        f"job {job_id} is running: ALTER CHANGEFEED changes paused jobs only "
        f"(PAUSE JOB {job_id} first)",
        job_id,
    )
    # RESUME of a running job is a no-op, as in CockroachDB.
    before = stable(db, job_id)
    assert db.sql(f"RESUME JOB {job_id}").tag == "RESUME JOB"
    assert stable(db, job_id) == before
    assert show(db, job_id)["status"] == "running"
    session = db.session()
    session.execute("BEGIN")
    assert session.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][0] == job_id
    with pytest.raises(SQLError) as raised:
        session.execute(f"PAUSE JOB {job_id}")
    assert raised.value.code == "25001" and "inside a transaction" in raised.value.message
    session.execute("ROLLBACK")
    assert show(db, job_id)["status"] == "running"


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("PAUSE JOB abc", "42601", "expected a job id"),
        ("PAUSE {id}", "42601", "expected PAUSE JOB <job id>"),
        ("RESUME JOB {id} now", "42601", "unexpected input after the job id"),
        ("CANCEL JOB -{id}", "42601", "expected a job id"),
        ("ALTER CHANGEFEED {id}", "42601", "expected ADD, DROP, SET or UNSET"),
        ("ALTER CHANGEFEED {id} RENAME u", "42601", "expected ADD, DROP, SET or UNSET"),
        ("ALTER CHANGEFEED x SET updated", "42704", "changefeed 'x' does not exist"),
        ("ALTER CHANGEFEED {id} SET", "42601", "expected an option name"),
        ("SHOW CHANGEFEED JOB", "42601", "expected a job id"),
        ("SHOW CHANGEFEED JOB {id} {id}", "42601", "unexpected input after the job id"),
        ("ALTER CHANGEFEED {id} ADD u WITH diff", "22023", "ADD takes initial_scan"),
        ("ALTER CHANGEFEED {id} ADD u WITH initial_scan = 'only'", "22023", "initial_scan"),
        ("ALTER CHANGEFEED {id} DROP t WITH initial_scan", "42601", "DROP takes no options"),
    ],
)
def test_malformed_job_statements_are_refused(
    table: DB, tmp_path: Path, statement: str, code: str, message: str
) -> None:
    db = table
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    job_id = create(db, tmp_path / "out")
    db.sql(f"PAUSE JOB {job_id}")
    refused(db, statement.format(id=job_id), code, message, job_id)


@pytest.fixture
def paused_job(table: DB, tmp_path: Path) -> int:
    """A job on ``t`` (with ``u`` beside it) paused past its initial scan."""
    db = table
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    job_id = create(db, tmp_path / "out")
    wait_past_scan(db, job_id)
    db.sql(f"PAUSE JOB {job_id}")
    job = show(db, job_id)
    assert job["status"] == "paused" and job["high_water_timestamp"] is not None
    return job_id


@pytest.mark.parametrize(
    ("alteration", "code", "message"),
    [
        ("SET envelop = 'bare'", "22023", "unknown option 'envelop'; did you mean 'envelope'?"),
        ("SET envelope = 'wrappd'", "22023", "did you mean 'wrapped'"),
        ("SET resolved = 'soon'", "22023", "not a duration"),
        ("SET updated = 'yes'", "22023", "takes no value"),
        ("UNSET cursor", "22023", "option cursor says where the changefeed started"),
        ("UNSET resolvd", "22023", "unknown option 'resolvd'; did you mean 'resolved'?"),
        ("SET initial_scan = 'no'", "22023", "option initial_scan says where"),
        ("UNSET initial_scan", "22023", "option initial_scan says where"),
        ("SET initial_scan_only", "22023", "option initial_scan_only says where"),
        # CockroachDB's AlterChangefeedUnsupportedOptions, in its words
        ("SET end_time = '4102444800000000000'", "22023", 'cannot alter option "end_time"'),
        ("UNSET end_time", "22023", 'cannot alter option "end_time"'),
        ("SET compression = 'snappy'", "22023", "compression"),
        ("DROP t", "22023", "would watch no table; CANCEL JOB"),
        ("DROP u", "22023", "table u is not a target of job"),
        ("DROP nope", "42P01", "nope"),
        ("ADD nope", "42P01", "nope"),
        ("ADD t", "22023", "table t is already a target of job"),
        ("ADD u, u", "22023", "table u is already a target of job"),
        ("ADD u FAMILY nope", "42704", "nope"),
        ("ADD u SET envelop = 'bare'", "22023", "did you mean 'envelope'"),  # all or nothing
    ],
)
def test_bad_alterations_are_refused_and_change_nothing(
    table: DB, paused_job: int, alteration: str, code: str, message: str
) -> None:
    refused(table, f"ALTER CHANGEFEED {paused_job} {alteration}", code, message, paused_job)
    assert watchers(table, "u") == []  # no ADD took effect


def test_tables_cannot_be_added_before_the_initial_scan_ends(table: DB, tmp_path: Path) -> None:
    db = table
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    # No flush before an hour: the job never gets past its start.
    job_id = create(db, tmp_path / "out", options="min_checkpoint_frequency='3600s'")
    db.sql(f"PAUSE JOB {job_id}")
    assert show(db, job_id)["high_water_timestamp"] is None
    for alteration in ("ADD u", "DROP t"):
        refused(
            db,
            f"ALTER CHANGEFEED {job_id} {alteration}",
            "55000",
            "has not finished its initial scan",
            job_id,
        )
    db.sql(f"ALTER CHANGEFEED {job_id} SET updated")  # options can change
    assert show(db, job_id)["description"].endswith(
        "WITH OPTIONS (min_checkpoint_frequency = '3600s', updated)"
    )


def test_job_statements_on_another_users_job_need_an_admin(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    db.sql("CREATE USER bob")
    bob = db.session(user="bob")
    assert bob.execute("SHOW CHANGEFEED JOBS").rows == []  # root's job is not bob's
    for statement in (
        f"SHOW CHANGEFEED JOB {job_id}",
        f"PAUSE JOB {job_id}",
        f"RESUME JOB {job_id}",
        f"CANCEL JOB {job_id}",
        f"ALTER CHANGEFEED {job_id} SET updated",
        f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'bob'}'",
    ):
        before = stable(db, job_id)
        with pytest.raises(SQLError) as raised:
            bob.execute(statement)
        assert raised.value.code == "42501"
        assert (
            "user bob does not have the admin role" in raised.value.message
            or "user bob requires the CHANGEFEED privilege on table t" in raised.value.message
        )
        assert stable(db, job_id) == before
    assert [r[0] for r in db.sql("SHOW CHANGEFEED JOBS").rows] == [job_id]


def test_a_user_controls_their_own_jobs_with_the_changefeed_privilege(
    table: DB, tmp_path: Path
) -> None:
    db = table
    db.sql("CREATE USER carol")
    db.sql("GRANT CHANGEFEED ON t TO carol")
    carol = db.session(user="carol")
    # NB: a sink of her own credentials: a file sink writes with the node's, for admins
    (job_id,) = carol.execute(f"CREATE CHANGEFEED FOR t INTO 'null://' WITH {FAST}").rows[0]
    root_job = create(db, tmp_path / "root")
    assert [r[0] for r in carol.execute("SHOW CHANGEFEED JOBS").rows] == [job_id]
    assert carol.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][2] == "carol"
    wait_until(
        lambda: show(db, job_id)["high_water_timestamp"] is not None,
        timeout_s=DEADLINE,
        what="the initial scan to end",
    )
    carol.execute(f"PAUSE JOB {job_id}")
    assert show(db, job_id)["status"] == "paused"
    db.sql("CREATE TABLE other (id INT PRIMARY KEY)")
    with pytest.raises(SQLError, match="requires the CHANGEFEED privilege on table other"):
        carol.execute(f"ALTER CHANGEFEED {job_id} ADD other")
    carol.execute(f"RESUME JOB {job_id}")
    carol.execute(f"CANCEL JOB {job_id}")
    with pytest.raises(SQLError, match="another user's changefeed jobs") as raised:
        carol.execute(f"PAUSE JOB {root_job}")
    assert raised.value.code == "42501"
    with pytest.raises(SQLError, match="admin role") as raised:
        carol.execute("SET CLUSTER SETTING changefeed.frontier_checkpoint_frequency = '1s'")
    assert raised.value.code == "42501"


# ALTER CHANGEFEED.


def test_altered_job_follows_its_new_tables_with_its_new_options(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    upsert(db, (100, "before"), table="u")  # before the job: never emitted
    job_id = create(db, out, options=f"diff, {FAST}")
    wait_past_scan(db, job_id)
    db.sql(f"PAUSE JOB {job_id}")
    high_water = show(db, job_id)["high_water_timestamp"]
    assert high_water is not None
    assert {m["after"]["k"] for m in messages(out)} == {1, 2}
    assert all("updated" not in m and "before" in m for m in messages(out))

    result = db.sql(
        f"ALTER CHANGEFEED {job_id} ADD u DROP t SET updated, resolved = '200ms' UNSET diff"
    )
    assert result.tag == "ALTER CHANGEFEED"
    job = show(db, job_id)
    # As CockroachDB: the job's id and its new description
    assert result.columns == ("job_id", "job_description")
    assert result.rows == [(job_id, job["description"])]
    assert job["status"] == "paused"
    assert job["full_table_names"].values == ("defaultdb.public.u",)
    assert job["description"] == (
        f"CREATE CHANGEFEED FOR TABLE defaultdb.public.u INTO 'file://{out}' "
        "WITH OPTIONS (min_checkpoint_frequency = '100ms', resolved = '200ms', updated)"
    )
    assert job["high_water_timestamp"] == high_water
    # t is no longer watched, u is.
    assert (watchers(db, "u"), watchers(db, "t")) == ([job_id], [])
    upsert(db, (100, "paused"), table="u")  # after the high-water mark: emitted

    db.sql(f"RESUME JOB {job_id}")
    upsert(db, (101, "new"), table="u")
    upsert(db, (1, "t-after"), (3, "t-after"))
    written = now(db)
    wait_resolved_past(out, written)
    fresh = [m for m in messages(out) if "updated" in m]
    assert {(m["after"]["k"], m["after"]["v"]) for m in fresh} == {(100, "paused"), (101, "new")}
    assert all(Decimal(m["updated"]) > high_water and "before" not in m for m in fresh)
    assert all(m["after"]["k"] in (1, 2) for m in messages(out) if "updated" not in m)

    db.sql(f"PAUSE JOB {job_id}")
    db.sql(f"ALTER CHANGEFEED {job_id} ADD t UNSET updated")
    job = show(db, job_id)
    assert job["full_table_names"].values == ("defaultdb.public.u", "defaultdb.public.t")
    assert job["description"] == (
        "CREATE CHANGEFEED FOR TABLE defaultdb.public.u, TABLE defaultdb.public.t "
        f"INTO 'file://{out}' "
        "WITH OPTIONS (min_checkpoint_frequency = '100ms', resolved = '200ms')"
    )


# How jobs end.


def test_on_error_pause_pauses_a_stopped_job_with_its_error(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    job_id = create(db, out, options=f"schema_change_policy='stop', on_error='pause', {FAST}")
    wait_past_scan(db, job_id)
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    job = wait_status(db, job_id, "paused")
    assert "schema change occurred at" in job["error"]
    assert "added column(s) n" in job["error"]
    assert job["running_status"] == "paused on error: " + job["error"]
    assert db.changefeeds.error(job_id) == job["error"]
    # A paused job still watches its table.
    assert watchers(db, "t") == [job_id]

    # Resumed as it is, it stops at the same change; with another policy it goes past.
    db.sql(f"RESUME JOB {job_id}")
    assert show(db, job_id)["error"] == ""
    assert wait_status(db, job_id, "paused")["error"] == job["error"]
    db.sql(f"ALTER CHANGEFEED {job_id} SET schema_change_policy = 'backfill'")
    db.sql(f"RESUME JOB {job_id}")
    db.sql("INSERT INTO t VALUES (3, 'c', 8)")

    def backfilled() -> bool:
        found = {(m["after"]["k"], m["after"].get("n")) for m in messages(out)}
        return {(1, 7), (2, 7), (3, 8)} <= found

    wait_until(backfilled, timeout_s=DEADLINE, what="the rows after the schema change")
    job = show(db, job_id)
    assert (job["status"], job["error"]) == ("running", "")


def test_without_on_error_a_stopped_job_fails_with_its_error(table: DB, tmp_path: Path) -> None:
    db = table
    stopped = create(db, tmp_path / "stopped", options=f"schema_change_policy='stop', {FAST}")
    wait_past_scan(db, stopped)
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    job = wait_status(db, stopped, "failed")
    assert "schema change occurred at" in job["error"] and "added column(s) n" in job["error"]
    assert job["running_status"] == ""
    refused(db, f"RESUME JOB {stopped}", "55000", f"job {stopped} is failed", stopped)
    assert watchers(db, "t") == []  # a failed job no longer watches it

    dropped = create(db, tmp_path / "dropped")
    wait_past_scan(db, dropped)
    db.sql("DROP TABLE t")
    job = wait_status(db, dropped, "failed")
    assert '"t" was dropped' in job["error"]


def test_show_names_a_dropped_table_by_its_id(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "out")
    record = db.changefeeds.record(job_id)
    assert record is not None
    table_id = record.spec.targets[0].table_id
    wait_past_scan(db, job_id)
    db.sql("DROP TABLE t")
    wait_status(db, job_id, "failed")
    assert show(db, job_id)["full_table_names"].values == (f"[{table_id}]",)


def test_a_cursor_over_five_hours_old_gets_a_notice(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    # NB: the table must be older than the cursor: its store's clock runs 8 h late
    # while it is created, then catches up
    clock = LateClock(8 * 3600 * 10**9)
    store = tmp_path / "store"
    with feedkv.connect(store, config=store_config, changefeed_runner="thread", clock=clock) as db:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        clock.catch_up()
        created = db.sql(
            f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'out'}' WITH cursor='-7h'"
        )
    assert created.notices == (
        "the provided cursor is 7 hours old; older cursors can result in increased "
        "changefeed latency",
    )


def test_a_cursor_from_before_a_table_was_created_is_refused(table: DB, tmp_path: Path) -> None:
    """As CockroachDB's: the targets are resolved as of the cursor. From a cursor before
    the table, the feed sent its whole history as news, or, with
    ``initial_scan='only'``, nothing, and its job said it succeeded."""
    with pytest.raises(SQLError) as raised:
        table.sql(
            f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'out'}' "
            "WITH cursor='-1h', initial_scan='only'"
        )
    assert raised.value.code == "42P01"
    assert raised.value.message == (
        'failed to resolve targets in the CHANGEFEED stmt: table "t" does not exist'
    )
    assert raised.value.detail is not None and "cursor time" in raised.value.detail
    assert table.sql("SELECT count(*) FROM [SHOW CHANGEFEED JOBS]").rows == [(0,)]


def test_alter_changefeed_tells_what_create_changefeed_tells(table: DB, tmp_path: Path) -> None:
    """CockroachDB plans ALTER CHANGEFEED as a CREATE CHANGEFEED of the altered job: its
    notices come with it (here: a ``resolved`` more frequent than checkpoints)."""
    db = table
    job_id = create(db, tmp_path / "out", options="min_checkpoint_frequency='100ms'")
    db.sql(f"PAUSE JOB {job_id}")
    altered = db.sql(f"ALTER CHANGEFEED {job_id} SET resolved = '50ms'")
    assert altered.tag == "ALTER CHANGEFEED"
    assert altered.notices == (
        "resolved (50ms) messages will not be emitted more frequently than the configured "
        "min_checkpoint_frequency (100ms), but may be emitted less frequently",
    )
    unset = db.sql(f"ALTER CHANGEFEED {job_id} UNSET min_checkpoint_frequency")
    assert unset.notices == (
        "resolved (50ms) messages will not be emitted more frequently than the default "
        "min_checkpoint_frequency (30s), but may be emitted less frequently",
    )
    assert db.sql(f"ALTER CHANGEFEED {job_id} SET resolved = '1m'").notices == ()


def test_alter_refuses_a_job_whose_table_was_dropped(table: DB, tmp_path: Path) -> None:
    db = table
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    job_id = create(db, tmp_path / "out", targets="t, u", options=f"on_error='pause', {FAST}")
    wait_past_scan(db, job_id)
    db.sql("DROP TABLE t")
    assert "was dropped" in wait_status(db, job_id, "paused")["error"]
    refused(db, f"ALTER CHANGEFEED {job_id} SET updated", "22023", "was dropped", job_id)


def test_initial_scan_only_job_succeeds_after_the_scan(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    job_id = create(db, out, options="initial_scan='only'")
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    job = show(db, job_id)
    assert (job["status"], job["error"], job["running_status"]) == ("succeeded", "", "")
    assert {m["after"]["k"] for m in messages(out)} == {1, 2}
    refused(db, f"RESUME JOB {job_id}", "55000", "cannot be resumed", job_id)
    assert watchers(db, "t") == []


def test_end_time_job_succeeds_at_its_end_time(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    cursor = now(db)
    upsert(db, (3, "c"))
    end = now(db)
    upsert(db, (4, "d"))
    job_id = create(db, out, options=f"cursor='{cursor}', end_time='{end}', updated, {FAST}")
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    job = show(db, job_id)
    assert (job["status"], job["error"]) == ("succeeded", "")
    assert job["high_water_timestamp"] == end
    assert versions(out) == rows((3, "c"))
    assert resolved(out) == end


# Restarts and crashes.


def test_a_restart_resumes_running_jobs_and_keeps_paused_ones_paused(
    tmp_path: Path, store_config: StoreConfig
) -> None:
    store = tmp_path / "restarted"
    running_out, paused_out = tmp_path / "running", tmp_path / "paused"
    db = feedkv.connect(store, config=store_config, changefeed_runner="thread")
    try:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        upsert(db, (1, "a"), (2, "b"))
        running = create(db, running_out, options=f"updated, {FAST}")
        paused = create(db, paused_out, options=f"updated, {FAST}")
        wait_versions(running_out, rows((1, "a"), (2, "b")))
        wait_versions(paused_out, rows((1, "a"), (2, "b")))
        wait_high_water_past(db, running, Decimal(0))
        db.sql(f"PAUSE JOB {paused}")
        high_water = show(db, running)["high_water_timestamp"]
        upsert(db, (1, "a2"), (3, "c"))  # maybe not delivered before the close
    finally:
        db.close()
    paused_rows = messages(paused_out)

    with feedkv.connect(store, config=store_config, changefeed_runner="thread") as db:
        wait_until(lambda: db.changefeeds.get(running), timeout_s=DEADLINE, what="the resumption")
        assert show(db, running)["status"] == "running"
        upsert(db, (2, "b2"))
        wait_versions(running_out, rows((1, "a"), (2, "b"), (1, "a2"), (3, "c"), (2, "b2")))
        assert wait_high_water_past(db, running, now(db)) >= high_water
        job = show(db, paused)
        assert (job["status"], job["running_status"]) == ("paused", "paused")
        assert db.changefeeds.get(paused) is None
        assert messages(paused_out) == paused_rows
        db.sql(f"RESUME JOB {paused}")
        wait_versions(paused_out, rows((1, "a"), (2, "b"), (1, "a2"), (3, "c"), (2, "b2")))


@pytest.fixture
def nodes() -> Iterator[list[NodeProcess]]:
    """Nodes started in turn on one store; those still running are stopped at the end."""
    nodes: list[NodeProcess] = []
    yield nodes
    for started in nodes:
        if started.process.poll() is None:
            started.terminate()


NODE_ARGS = ("--changefeed-runner", "thread", "--closed-ts-target", "100ms")


def test_a_job_resumes_at_once_when_its_killed_node_restarts(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    store, out = tmp_path / "store", tmp_path / "out"
    nodes.append(NodeProcess(store, *NODE_ARGS))
    history = [(1, "a"), (2, "b"), (3, "c")]
    with feedkv.connect(nodes[0].url) as db:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        upsert(db, *history)
        job_id = create(db, out, options=f"updated, {FAST}")  # the node adopts it
        wait_versions(out, rows(*history))
        wait_high_water_past(db, job_id, Decimal(0))
        more = [(1, "a2"), (4, "d"), (2, "b2")]
        upsert(db, *more)  # acknowledged, maybe not delivered before the kill
        history += more
        before: JobRecord | None = db.changefeeds.record(job_id)
        assert before is not None and before.lease is not None
        dead = before.lease
    nodes[0].kill()

    nodes.append(NodeProcess(store, *NODE_ARGS))
    with feedkv.connect(nodes[1].url) as db:

        def adopted() -> JobRecord | None:
            record = db.changefeeds.record(job_id)
            owner = record.lease.owner if record is not None and record.lease else dead.owner
            return record if owner != dead.owner else None

        record = wait_until(adopted, timeout_s=DEADLINE, what="the new node to adopt the job")
        assert record is not None and record.lease is not None
        assert record.status == "running"
        assert record.lease.node_id == dead.node_id
        # Claimed while the dead instance's lease had not run out: a lease of this node
        # held by another instance is dead at once. A lease is written (and renewed)
        # lease_s ahead, so the claim came at or before the new expiry - lease_s.
        # NB: the dead lease, renewed every renew_s, had about lease_s - renew_s = 29 s
        # left at the kill; this would only fail if the new node took longer to start.
        lease_ns = int(RegistrySettings().lease_s * 1e9)
        assert record.lease.expires_ns - lease_ns < dead.expires_ns
        assert show(db, job_id)["status"] == "running"
        more = [(5, "e"), (3, "c2")]
        upsert(db, *more)
        history += more
        wait_versions(out, rows(*history))
        assert show(db, job_id)["error"] == ""
