"""The job statements CockroachDB 26.1 has beside ``PAUSE | RESUME | CANCEL JOB <id>``:
``PAUSE | RESUME | CANCEL JOBS (<query>)`` and ``... ALL CHANGEFEED JOBS`` (its "PAUSE
JOB" page: "Pause multiple jobs", "Pause all jobs by type"), ``PAUSE JOB ... WITH REASON``,
``SHOW JOB WHEN COMPLETE <id>`` and ``SHOW JOBS [WHEN COMPLETE] (<query>)`` (its "SHOW
JOBS" page: "Block SHOW JOB until the provided job ID reaches a terminal state"), and what
TRUNCATE of a watched table does to a changefeed job (its "Create and Configure
Changefeeds" page: TRUNCATE causes errors on the changefeeds watching the table).

Jobs run on the thread runner into ``file://`` directories."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.sinks.cloud_storage import file_topic
from feedkv.errors import SQLError
from feedkv.testing.waiting import wait_until

DEADLINE = 30.0
FAST = "min_checkpoint_frequency='100ms', resolved='100ms'"


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    return db


def create(db: DB, out: Path, options: str = FAST) -> int:
    (job_id,) = db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH {options}").rows[0]
    assert isinstance(job_id, int)
    return job_id


def wait_past_scan(db: DB, job_id: int) -> None:
    def past() -> bool:
        query = f"SELECT high_water_timestamp FROM [SHOW CHANGEFEED JOB {job_id}]"
        return db.sql(query).rows[0][0] is not None

    wait_until(past, timeout_s=DEADLINE, what=f"job {job_id} past its initial scan")


def statuses(db: DB) -> dict[int, str]:
    return dict(db.sql("SELECT job_id, status FROM [SHOW JOBS]").rows)


def refused(db: Any, statement: str, code: str, message: str) -> None:
    before = statuses(db) if isinstance(db, DB) else None
    with pytest.raises(SQLError) as raised:
        db.sql(statement) if isinstance(db, DB) else db.execute(statement)
    assert raised.value.code == code, raised.value.message
    assert message in raised.value.message
    if before is not None:
        assert statuses(db) == before


# PAUSE | RESUME | CANCEL JOBS (<query>) and ... ALL CHANGEFEED JOBS.


def test_jobs_picked_by_a_query_are_paused_resumed_and_canceled(table: DB, tmp_path: Path) -> None:
    db = table
    first, second, third = (create(db, tmp_path / name) for name in ("a", "b", "c"))
    picked = f"SELECT job_id FROM [SHOW JOBS] WHERE job_id IN ({first}, {second})"

    assert db.sql(f"PAUSE JOBS ({picked})").tag == "PAUSE JOBS 2"
    assert statuses(db) == {first: "paused", second: "paused", third: "running"}
    assert db.sql(f"PAUSE JOBS ({picked})").tag == "PAUSE JOBS 2"  # again: nothing changes
    assert db.sql(f"RESUME JOBS {picked}").tag == "RESUME JOBS 2"  # parentheses optional
    assert set(statuses(db).values()) == {"running"}
    assert db.sql(f"CANCEL JOBS ({picked} AND job_id = {second})").tag == "CANCEL JOBS 1"
    assert statuses(db) == {first: "running", second: "canceled", third: "running"}
    # A query that picks nothing controls nothing; NULL ids are skipped.
    assert db.sql("PAUSE JOBS (SELECT job_id FROM [SHOW JOBS] WHERE false)").tag == "PAUSE JOBS 0"
    assert db.sql("PAUSE JOBS (SELECT NULL::INT8)").tag == "PAUSE JOBS 0"


def test_one_job_that_cannot_move_refuses_them_all(table: DB, tmp_path: Path) -> None:
    db = table
    running, canceled = create(db, tmp_path / "a"), create(db, tmp_path / "b")
    db.sql(f"CANCEL JOB {canceled}")
    both = f"SELECT job_id FROM [SHOW JOBS] WHERE job_id IN ({running}, {canceled})"
    refused(db, f"RESUME JOBS ({both})", "55000", f"job {canceled} is canceled")
    db.sql(f"PAUSE JOB {running}")
    refused(db, f"RESUME JOBS ({both})", "55000", f"job {canceled} is canceled")
    assert statuses(db)[running] == "paused"  # not resumed by the refused statement


def test_all_changefeed_jobs_are_the_ones_the_action_moves(table: DB, tmp_path: Path) -> None:
    db = table
    first, second, done = (create(db, tmp_path / name) for name in ("a", "b", "c"))
    db.sql(f"CANCEL JOB {done}")
    assert db.sql("PAUSE ALL CHANGEFEED JOBS").tag == "PAUSE JOBS 2"
    assert statuses(db) == {first: "paused", second: "paused", done: "canceled"}
    assert db.sql("PAUSE ALL CHANGEFEED JOBS").tag == "PAUSE JOBS 0"
    assert db.sql("RESUME ALL CHANGEFEED JOBS").tag == "RESUME JOBS 2"
    assert db.sql("CANCEL ALL CHANGEFEED JOBS").tag == "CANCEL JOBS 2"
    assert set(statuses(db).values()) == {"canceled"}


def test_a_paused_job_canceled_no_longer_says_it_is_paused(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "a")
    db.sql(f"PAUSE JOB {job_id}")
    query = f"SELECT status, running_status FROM [SHOW CHANGEFEED JOB {job_id}]"
    assert db.sql(query).rows == [("paused", "paused")]
    db.sql(f"CANCEL JOB {job_id}")
    assert db.sql(query).rows == [("canceled", "")]


def test_pause_takes_a_reason(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "a")
    assert db.sql(f"PAUSE JOB {job_id} WITH REASON = 'maintenance'").tag == "PAUSE JOB"
    assert statuses(db)[job_id] == "paused"


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("PAUSE JOBS", "42601", "expected a query (SELECT ...) that gives job ids"),
        ("PAUSE JOBS (SELEC 1)", "42601", "expected a query"),
        ("PAUSE JOBS (SELECT 1", "42601", "this parenthesis is never closed"),
        ("RESUME JOBS (SELECT 1, 2)", "42601", "RESUME JOBS expects a single column source"),
        ("CANCEL JOBS (SELECT 'x')", "42804", "CANCEL JOBS expects job ids (INT8)"),
        ("PAUSE JOBS (SELECT 12345)", "42704", "job with ID 12345 does not exist"),
        ("PAUSE ALL JOBS", "42601", "syntax error"),
        ("DROP CHANGEFEED JOBS (SELECT 1)", "42601", "syntax error"),
        ("PAUSE JOB 1 WITH REASON = 7", "42601", "expected the reason as a string"),
        ("SHOW JOB WHEN COMPLETE", "42601", "expected a job id"),
        ("SHOW JOBS WHEN COMPLETE", "42601", "expected a query"),
    ],
)
def test_bad_job_statements_are_refused(
    table: DB, tmp_path: Path, statement: str, code: str, message: str
) -> None:
    create(table, tmp_path / "a")
    refused(table, statement, code, message)


def test_a_user_controls_only_their_own_jobs_by_query(table: DB, tmp_path: Path) -> None:
    db = table
    db.sql("CREATE USER carol")
    db.sql("GRANT CHANGEFEED ON t TO carol")
    carol = db.session(user="carol")
    (mine,) = carol.execute("CREATE CHANGEFEED FOR t INTO 'null://'").rows[0]
    roots = create(db, tmp_path / "root")
    # Carol sees her own jobs only, so ALL and a query over SHOW JOBS reach hers alone.
    assert carol.execute("PAUSE ALL CHANGEFEED JOBS").tag == "PAUSE JOBS 1"
    assert statuses(db) == {mine: "paused", roots: "running"}
    assert carol.execute("RESUME JOBS (SELECT job_id FROM [SHOW JOBS])").tag == "RESUME JOBS 1"
    refused(carol, f"PAUSE JOBS (SELECT {roots})", "42501", "another user's changefeed jobs")
    refused(carol, f"SHOW JOBS (SELECT {roots})", "42501", "another user's changefeed jobs")
    assert statuses(db) == {mine: "running", roots: "running"}


# SHOW JOB WHEN COMPLETE and SHOW JOBS (<query>).


def test_show_job_when_complete_waits_for_the_job_to_finish(table: DB, tmp_path: Path) -> None:
    db = table
    running = create(db, tmp_path / "a")
    shown: list[Any] = []
    session = db.session()

    def show() -> None:
        shown.append(session.execute(f"SHOW JOB WHEN COMPLETE {running}"))

    waiter = threading.Thread(target=show)
    waiter.start()
    db.sql(f"PAUSE JOB {running}")  # a paused job is not complete: still waiting
    assert waiter.is_alive() and not shown
    db.sql(f"CANCEL JOB {running}")
    waiter.join(DEADLINE)
    assert not waiter.is_alive()
    (result,) = shown
    row = dict(zip(result.columns, result.rows[0], strict=True))
    assert (row["job_id"], row["job_type"], row["status"]) == (running, "CHANGEFEED", "canceled")
    assert row["finished"] is not None


def test_show_jobs_when_complete_returns_once_each_job_finished(table: DB, tmp_path: Path) -> None:
    db = table
    scan = create(db, tmp_path / "a", "initial_scan='only'")
    other = create(db, tmp_path / "b")
    result = db.sql(f"SHOW JOBS WHEN COMPLETE (SELECT {scan})")
    assert [(r[0], r[result.columns.index("status")]) for r in result.rows] == [(scan, "succeeded")]
    picked = db.sql(f"SHOW JOBS (SELECT job_id FROM [SHOW JOBS] WHERE job_id = {other})")
    assert [r[0] for r in picked.rows] == [other]
    assert picked.columns == db.sql("SHOW JOBS").columns


def test_a_cancel_request_ends_the_wait_with_57014(table: DB, tmp_path: Path) -> None:
    db = table
    running = create(db, tmp_path / "a")
    session = db.session()
    errors: list[BaseException] = []

    def show() -> None:
        try:
            session.execute(f"SHOW JOB WHEN COMPLETE {running}")
        except BaseException as exc:
            errors.append(exc)

    def cancelled() -> bool:
        # What the server does on a client's CancelRequest; again until it lands, as a
        # request that comes before the statement starts is spent by its start.
        session.interrupt.cancel()
        return not waiter.is_alive()

    waiter = threading.Thread(target=show)
    waiter.start()
    wait_until(cancelled, timeout_s=DEADLINE, what="the cancel to end the wait")
    (error,) = errors
    assert isinstance(error, SQLError) and error.code == "57014"
    assert statuses(db)[running] == "running"


# TRUNCATE of a watched table.


def test_truncate_of_a_watched_table_fails_the_job(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "a")
    wait_past_scan(db, job_id)
    db.sql("TRUNCATE t")
    assert db.sql("SELECT * FROM t").rows == []
    result = db.sql(f"SHOW JOB WHEN COMPLETE {job_id}")
    row = dict(zip(result.columns, result.rows[0], strict=True))
    assert row["status"] == "failed"
    assert '"t" was truncated at' in row["error"]


def test_truncate_pauses_a_job_with_on_error_pause(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create(db, tmp_path / "a", f"on_error='pause', {FAST}")
    wait_past_scan(db, job_id)
    db.sql("TRUNCATE t")

    def paused() -> str | None:
        status, error = db.sql(f"SELECT status, error FROM [SHOW JOB {job_id}]").rows[0]
        return error if status == "paused" else None

    error = wait_until(paused, timeout_s=DEADLINE, what="the job to pause")
    assert '"t" was truncated at' in error


# ALTER CHANGEFEED ... ADD ... WITH initial_scan.


def messages(out: Path) -> list[tuple[str, int, str | None]]:
    """``(topic, key, v)`` of every row message in ``out``'s files, in file order."""
    found = []
    for path in sorted(out.rglob("*.ndjson")):
        topic = file_topic(path.name)
        for line in path.read_text().splitlines():
            message = json.loads(line)
            after = message["after"]
            found.append((topic, message["key"][0], after["v"] if after else None))
    return found


def test_a_table_added_with_initial_scan_is_scanned_at_the_high_water_mark(
    table: DB, tmp_path: Path
) -> None:
    """CockroachDB's ALTER CHANGEFEED page: ``ADD <table> WITH initial_scan`` performs an
    initial scan of the added table when the changefeed resumes; without it an added
    table's changes are followed from the high-water mark, its existing rows left out."""
    db = table
    out = tmp_path / "out"
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE w (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO u VALUES (1, 'x'), (2, 'y')")
    db.sql("INSERT INTO w VALUES (1, 'old')")
    job_id = create(db, out)
    wait_past_scan(db, job_id)
    db.sql(f"PAUSE JOB {job_id}")
    result = db.sql(f"ALTER CHANGEFEED {job_id} ADD u WITH initial_scan ADD w")
    assert result.tag == "ALTER CHANGEFEED"
    db.sql(f"RESUME JOB {job_id}")
    db.sql("INSERT INTO u VALUES (3, 'z')")
    db.sql("INSERT INTO w VALUES (2, 'new')")

    def arrived() -> list[tuple[str, int, str | None]]:
        found = messages(out)
        return found if ("u", 3, "z") in found and ("w", 2, "new") in found else []

    found = wait_until(arrived, timeout_s=DEADLINE, what="the added tables' rows")
    assert [m for m in found if m[0] == "u"] == [("u", 1, "x"), ("u", 2, "y"), ("u", 3, "z")]
    assert [m for m in found if m[0] == "w"] == [("w", 2, "new")]  # not scanned
    assert [m for m in found if m[0] == "t"] == [("t", 1, "a"), ("t", 2, "b")]  # not again

    # Once the mark moved past the scan, a restart does not scan u again.
    def past_the_scan() -> bool:
        record = db.changefeeds.record(job_id)
        assert record is not None and record.added_scan_at is not None
        return record.high_water is not None and record.high_water > record.added_scan_at

    wait_until(past_the_scan, timeout_s=DEADLINE, what="the high-water mark past the scan")
    db.sql(f"PAUSE JOB {job_id}")
    db.sql(f"RESUME JOB {job_id}")
    db.sql("INSERT INTO u VALUES (4, 'q')")
    wait_until(lambda: ("u", 4, "q") in messages(out), timeout_s=DEADLINE, what="u's next row")
    assert [m[1] for m in messages(out) if m[0] == "u"] == [1, 2, 3, 4]


def test_a_scan_not_yet_run_follows_the_job_through_another_alter(
    table: DB, tmp_path: Path
) -> None:
    db = table
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    job_id = create(db, tmp_path / "out")
    wait_past_scan(db, job_id)
    db.sql(f"PAUSE JOB {job_id}")
    db.sql(f"ALTER CHANGEFEED {job_id} ADD u WITH initial_scan = 'yes'")
    db.sql(f"ALTER CHANGEFEED {job_id} SET updated")  # the scan is still due
    record = db.changefeeds.record(job_id)
    assert record is not None
    assert record.pending_scans() == {record.spec.targets[-1].table_id}  # u's, added last
    assert record.added_scan_at == record.high_water
    db.sql(f"ALTER CHANGEFEED {job_id} DROP u")  # no longer watched: no scan
    record = db.changefeeds.record(job_id)
    assert record is not None and record.pending_scans() == frozenset()
    assert record.added_scan_at is None


def test_a_job_id_may_be_a_placeholder(table: DB, tmp_path: Path) -> None:
    """Drivers pass the id as a parameter (CockroachDB's own tests run ``SHOW JOB WHEN
    COMPLETE $1``)."""
    db = table
    job_id = create(db, tmp_path / "a")
    session = db.session()
    assert session.execute("PAUSE JOB $1", job_id).tag == "PAUSE JOB"
    assert statuses(db)[job_id] == "paused"
    assert session.execute("RESUME JOB $1", str(job_id)).tag == "RESUME JOB"  # text too
    assert session.execute("PAUSE JOB $1 WITH REASON = 'x'", job_id).tag == "PAUSE JOB"
    assert session.execute("SHOW JOB $1", job_id).rows[0][0] == job_id
    session.execute("CANCEL JOB $1", job_id)
    result = session.execute("SHOW JOB WHEN COMPLETE $1", job_id)
    assert result.rows[0][result.columns.index("status")] == "canceled"
    with pytest.raises(SQLError) as raised:
        session.execute("PAUSE JOB $1", "soon")
    assert raised.value.code == "22P02"
    with pytest.raises(SQLError) as raised:
        session.execute("PAUSE JOB $1")
    assert raised.value.code == "42P02"  # no value provided for placeholder: $1


# The Spark runner's staging beside a file sink.


def test_a_spark_file_sink_must_leave_room_for_its_staging_inside_the_external_io_dir(
    tmp_path: Path,
) -> None:
    """The Spark runner stages a file sink's files beside its directory, so the sink
    cannot be the external I/O directory itself (nothing of it may land outside); a
    directory below it can. Refused at CREATE, before any Spark job starts."""
    import feedkv

    extern = tmp_path / "extern"
    db = feedkv.connect(tmp_path / "store", changefeed_runner="spark", external_io_dir=extern)
    try:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
        with pytest.raises(SQLError) as raised:
            db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{extern}'")
        assert raised.value.code == "22023"
        assert "stages a file sink's files beside its directory" in raised.value.message
        assert db.sql("SHOW JOBS").rows == []
    finally:
        db.close()
