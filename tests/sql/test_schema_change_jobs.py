"""DROP TABLE and TRUNCATE leave CockroachDB's jobs in SHOW JOBS and
crdb_internal.jobs: a ``SCHEMA CHANGE`` that succeeded and a ``SCHEMA CHANGE GC`` that
runs until the GC TTL has passed; a statement that rolled back leaves none."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import BatchTimestampBeforeGCError, SQLError
from feedkv.testing.waiting import wait_until

JOBS = (
    "SELECT job_type, description, status, running_status FROM [SHOW JOBS] "
    "WHERE job_type LIKE 'SCHEMA CHANGE%'"
)


def test_drop_table_shows_a_finished_schema_change_and_a_running_gc_job(db: DB) -> None:
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    db.sql("INSERT INTO a VALUES (3), (7)")
    db.sql("DROP TABLE a")
    # running jobs first, as CockroachDB orders SHOW JOBS
    assert db.sql(JOBS).rows == [
        (
            "SCHEMA CHANGE GC",
            "GC for DROP TABLE defaultdb.public.a",
            "running",
            "waiting for MVCC GC",
        ),
        ("SCHEMA CHANGE", "DROP TABLE defaultdb.public.a", "succeeded", None),
    ]


def test_truncate_shows_its_jobs_in_crdb_internal_jobs_too(db: DB) -> None:
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO kv VALUES (1, 2)")
    db.sql("TRUNCATE kv")
    rows = db.sql(
        "SELECT job_type, status, statement, user_name, fraction_completed "
        "FROM crdb_internal.jobs WHERE description LIKE '%TRUNCATE TABLE defaultdb.public.kv' "
        "ORDER BY job_type"
    ).rows
    assert rows == [
        ("SCHEMA CHANGE", "succeeded", "TRUNCATE kv", "root", 1.0),
        ("SCHEMA CHANGE GC", "running", "TRUNCATE kv", "root", 0.0),
    ]
    [(job_id,)] = db.sql("SELECT job_id FROM [SHOW JOBS] WHERE job_type = 'SCHEMA CHANGE GC'").rows
    assert db.sql(f"SHOW JOB {job_id}").rows[0][1:3] == (
        "SCHEMA CHANGE GC",
        "GC for TRUNCATE TABLE defaultdb.public.kv",
    )


@pytest.mark.parametrize(
    "statement",
    [
        "PAUSE JOB {}",
        "RESUME JOB {}",
        "CANCEL JOB {}",
        "SHOW CHANGEFEED JOB {}",
        "ALTER CHANGEFEED {} SET diff",
    ],
)
def test_a_changefeed_statement_on_a_gc_job_says_what_the_job_is(db: DB, statement: str) -> None:
    """Not "job with ID ... does not exist" for a job SHOW JOBS lists."""
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    db.sql("DROP TABLE a")
    [(job_id,)] = db.sql("SELECT job_id FROM [SHOW JOBS] WHERE job_type = 'SCHEMA CHANGE GC'").rows
    with pytest.raises(SQLError) as raised:
        db.sql(statement.format(job_id))
    assert raised.value.code == "0A000"
    assert raised.value.message == (
        f"job {job_id} is a SCHEMA CHANGE GC job: this statement applies to changefeed jobs only"
    )


def test_a_drop_that_rolled_back_leaves_no_job(db: DB) -> None:
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    with pytest.raises(SQLError):
        db.sql("BEGIN; DROP TABLE a; SELECT 1/0; COMMIT")
    db.sql("ROLLBACK")
    assert db.sql(JOBS).rows == []
    assert db.sql("SELECT count(*) FROM a").rows == [(0,)]


DEADLINE_S = 30.0
SECOND_NS = 1_000_000_000


def _gc_job(db: DB, table: str) -> tuple[str, int]:
    """The status of ``table``'s GC job and how long it waits (ns, finished - created)."""
    [(status, created, finished)] = db.sql(
        "SELECT status, created, finished FROM crdb_internal.jobs "
        f"WHERE description = 'GC for DROP TABLE defaultdb.public.{table}'"
    ).rows
    if finished is None:
        return status, -1
    waited = finished - created
    return status, (waited.days * 86400 + waited.seconds) * SECOND_NS + waited.microseconds * 1000


def test_a_gc_job_waits_for_its_tables_gc_ttl(db: DB) -> None:
    db.sql("CREATE TABLE brief (id INT PRIMARY KEY)")
    db.sql("CREATE TABLE kept (id INT PRIMARY KEY)")
    db.sql("ALTER TABLE brief CONFIGURE ZONE USING gc.ttlseconds = 1")
    db.sql("DROP TABLE brief")
    db.sql("DROP TABLE kept")
    wait_until(
        lambda: _gc_job(db, "brief")[0] == "succeeded",
        timeout_s=DEADLINE_S,
        what="the GC job of a table with a 1 s GC TTL",
    )
    assert _gc_job(db, "brief") == ("succeeded", SECOND_NS)
    assert _gc_job(db, "kept") == ("running", -1)  # the default zone's 4 hours


def test_the_default_zones_gc_ttl_applies_to_a_table_without_its_own(db: DB) -> None:
    db.sql("ALTER RANGE default CONFIGURE ZONE USING gc.ttlseconds = 1")
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    db.sql("DROP TABLE a")
    wait_until(lambda: _gc_job(db, "a")[0] == "succeeded", timeout_s=DEADLINE_S, what="a's GC job")
    assert _gc_job(db, "a") == ("succeeded", SECOND_NS)


@pytest.mark.parametrize(
    ("value", "message"), [("0", "below the least allowed"), ("'x'", "not a whole number")]
)
def test_a_gc_ttl_below_a_second_is_refused(db: DB, value: str, message: str) -> None:
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    with pytest.raises(SQLError, match=message) as caught:
        db.sql(f"ALTER TABLE a CONFIGURE ZONE USING gc.ttlseconds = {value}")
    assert caught.value.code == "22023"


def test_the_stores_gc_keeps_a_tables_history_for_its_gc_ttl_only(db: DB) -> None:
    assert db.node is not None
    store = db.node.store
    db.sql("CREATE TABLE brief (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE kept (k INT PRIMARY KEY, v INT)")
    db.sql("ALTER TABLE brief CONFIGURE ZONE USING gc.ttlseconds = 1")
    db.sql("INSERT INTO brief VALUES (1, 1)")
    db.sql("INSERT INTO kept VALUES (1, 1)")
    [(before,)] = db.sql("SELECT cluster_logical_timestamp()").rows
    db.sql("UPDATE brief SET v = 2")
    db.sql("UPDATE kept SET v = 2")

    def old_version_collected() -> bool:
        store.collect_garbage()
        try:
            db.sql(f"SELECT v FROM brief AS OF SYSTEM TIME {before}")
        except BatchTimestampBeforeGCError:
            return True
        return False

    wait_until(old_version_collected, timeout_s=DEADLINE_S, what="brief's old version GC'd")
    assert db.sql(f"SELECT v FROM kept AS OF SYSTEM TIME {before}").rows == [(1,)]


def test_finished_job_records_are_deleted_after_the_retention_time(db: DB) -> None:
    db.sql("SET CLUSTER SETTING jobs.retention_time = '1ms'")
    assert db.sql("SHOW CLUSTER SETTING jobs.retention_time").rows == [("1ms",)]
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    db.sql("ALTER TABLE a CONFIGURE ZONE USING gc.ttlseconds = 1")
    db.sql("DROP TABLE a")
    wait_until(lambda: _gc_job(db, "a")[0] == "succeeded", timeout_s=DEADLINE_S, what="a's GC job")
    [(finished,)] = db.sql(
        "SELECT max(finished) FROM crdb_internal.jobs WHERE description LIKE '%public.a'"
    ).rows
    finished_ns = int(finished.timestamp() * SECOND_NS)
    wait_until(
        lambda: db.now().wall > finished_ns + 1_000_000, timeout_s=DEADLINE_S, what="1ms more"
    )
    db.sql("CREATE TABLE b (id INT PRIMARY KEY)")
    db.sql("DROP TABLE b")
    rows = db.sql(
        "SELECT description FROM crdb_internal.jobs WHERE job_type LIKE 'SCHEMA CHANGE%' "
        "ORDER BY description"
    ).rows
    assert rows == [("DROP TABLE defaultdb.public.b",), ("GC for DROP TABLE defaultdb.public.b",)]


def test_the_retention_time_is_cockroachdbs_14_days_and_must_be_a_duration(db: DB) -> None:
    assert db.sql("SHOW CLUSTER SETTING jobs.retention_time").rows == [("336h0m0s",)]
    with pytest.raises(SQLError) as caught:
        db.sql("SET CLUSTER SETTING jobs.retention_time = 'soon'")
    assert caught.value.code == "22023"
