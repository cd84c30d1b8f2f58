"""The CDC design's changefeed statements over the SQL port, from psycopg with both query
protocols: named changefeeds, SHOW CREATE CHANGEFEED, SHOW PARTITIONS, FOR DATABASE."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from feedkv import DB


@pytest.mark.parametrize("prepare", [False, True])  # simple, extended protocol
def test_named_changefeed_statements_over_the_wire(
    db: DB, pg_url: str, tmp_path: Path, prepare: bool
) -> None:
    out = tmp_path / "out"
    with psycopg.connect(pg_url, autocommit=True) as conn:

        def run(statement: str) -> list[tuple[object, ...]]:
            cursor = conn.execute(statement, prepare=prepare)
            return cursor.fetchall() if cursor.description else []

        run("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        ((job_id,),) = run(f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{out}'")
        run("PAUSE CHANGEFEED feed_t")
        ((name, statement),) = run("SHOW CREATE CHANGEFEED feed_t")
        assert (name, statement) == (
            "feed_t",
            f"CREATE CHANGEFEED feed_t FOR TABLE defaultdb.public.t INTO 'file://{out}'",
        )
        cursor = conn.execute("SHOW CHANGEFEED JOB feed_t", prepare=prepare)
        assert cursor.description is not None
        row = dict(zip([c.name for c in cursor.description], cursor.fetchone() or (), strict=True))
        assert (row["job_id"], row["name"], row["status"]) == (job_id, "feed_t", "paused")
        with pytest.raises(errors.DuplicateObject):
            run(f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{out}'")
        run("DROP CHANGEFEED feed_t")
        with pytest.raises(errors.UndefinedObject):
            run("SHOW CREATE CHANGEFEED feed_t")


@pytest.mark.parametrize("prepare", [False, True])  # simple, extended protocol
def test_alter_changefeeds_rows_and_notices_reach_psycopg(
    db: DB, pg_url: str, tmp_path: Path, prepare: bool
) -> None:
    """As CockroachDB: ALTER CHANGEFEED returns the job's id and new description (the
    extended protocol describes those columns), and its notices."""
    notices: list[str] = []
    out = tmp_path / "out"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY)")
        [(job_id,)] = conn.execute(
            f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{out}'"
        ).fetchall()
        conn.execute("PAUSE CHANGEFEED feed_t")
        assert notices == []
        cursor = conn.execute("ALTER CHANGEFEED feed_t SET resolved = '10s'", prepare=prepare)
        assert [(c.name, c.type_code) for c in cursor.description or ()] == [
            ("job_id", 20),
            ("job_description", 25),
        ]
        assert cursor.fetchall() == [
            (
                job_id,
                f"CREATE CHANGEFEED feed_t FOR TABLE defaultdb.public.t INTO 'file://{out}' "
                "WITH OPTIONS (resolved = '10s')",
            )
        ]
        assert cursor.statusmessage == "ALTER CHANGEFEED"
    assert notices == [
        "resolved (10s) messages will not be emitted more frequently than the default "
        "min_checkpoint_frequency (30s), but may be emitted less frequently"
    ]


def test_partitions_over_the_wire(db: DB, pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE e (day INT, seq INT, PRIMARY KEY (day, seq)) PARTITION BY RANGE (day) "
            "(PARTITION old VALUES FROM (MINVALUE) TO (100), "
            "PARTITION recent VALUES FROM (100) TO (MAXVALUE))"
        )
        rows = conn.execute("SHOW PARTITIONS FROM TABLE e", prepare=True).fetchall()
    assert rows == [
        ("defaultdb", "e", "old", "day", "VALUES FROM (MINVALUE) TO (100)"),
        ("defaultdb", "e", "recent", "day", "VALUES FROM (100) TO (MAXVALUE)"),
    ]
