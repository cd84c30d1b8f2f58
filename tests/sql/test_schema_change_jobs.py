"""DROP TABLE and TRUNCATE leave CockroachDB's jobs in SHOW JOBS and
crdb_internal.jobs: a ``SCHEMA CHANGE`` that succeeded and a ``SCHEMA CHANGE GC`` that
runs until the GC TTL has passed; a statement that rolled back leaves none."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError

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


def test_a_drop_that_rolled_back_leaves_no_job(db: DB) -> None:
    db.sql("CREATE TABLE a (id INT PRIMARY KEY)")
    with pytest.raises(SQLError):
        db.sql("BEGIN; DROP TABLE a; SELECT 1/0; COMMIT")
    db.sql("ROLLBACK")
    assert db.sql(JOBS).rows == []
    assert db.sql("SELECT count(*) FROM a").rows == [(0,)]
