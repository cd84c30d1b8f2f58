"""Schema changes reach a lake table through a changefeed job on a real local Spark,
without restarting anything: ADD COLUMN and DROP COLUMN change the Delta table's schema
at the window where they happen (a dropped column leaves the table), and each earlier
window still reads as it was (read ``at=`` a time before the change)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.sinks.lake_tables import RESOLVED_KEY
from feedkv.testing.lake_rows import logical_now, wait_lake_past


def as_of(db: DB, at: Any) -> list[dict[str, Any]]:
    result = db.sql(f"SELECT * FROM a AS OF SYSTEM TIME {at} ORDER BY k")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def lake_rows(uri: str, at: Decimal) -> tuple[Any, list[dict[str, Any]]]:
    marker = feedkv.lake.read_consistent(uri, at=at)
    assert marker is not None
    rows = feedkv.lake.read_tables(uri, marker)["a"].to_pylist()
    return marker.resolved, sorted(rows, key=lambda r: r["k"])


@pytest.mark.slow(40)
@pytest.mark.timeout(600)
def test_add_and_drop_column_reach_a_delta_mirror_through_a_spark_job(
    db: DB, tmp_path: Path
) -> None:
    uri = f"delta://{tmp_path}/lake"
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT, gone STRING)")
    db.sql("INSERT INTO a VALUES (1, 10, 'x')")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' WITH min_checkpoint_frequency = '200ms'"
    ).rows
    before = wait_lake_past(db, job_id, uri, logical_now(db))
    db.sql("ALTER TABLE a ADD COLUMN w INT DEFAULT 7")
    db.sql("INSERT INTO a VALUES (2, 20, 'y', 8)")
    added = wait_lake_past(db, job_id, uri, logical_now(db))
    db.sql("ALTER TABLE a DROP COLUMN gone")
    db.sql("INSERT INTO a VALUES (3, 30, 9)")
    dropped = wait_lake_past(db, job_id, uri, logical_now(db))
    db.sql(f"CANCEL JOB {job_id}")

    # each marker read again after both changes, through the retained history
    at, rows = lake_rows(uri, Decimal(str(before.resolved)))
    assert at == before.resolved
    assert rows == [{"k": 1, "v": 10, "gone": "x"}] == as_of(db, at)
    at, rows = lake_rows(uri, Decimal(str(added.resolved)))
    assert at == added.resolved
    assert rows == as_of(db, at)
    assert rows[-1] == {"k": 2, "v": 20, "gone": "y", "w": 8}
    at, rows = lake_rows(uri, Decimal(str(dropped.resolved)))
    assert rows == as_of(db, at)
    assert rows[-1] == {"k": 3, "v": 30, "w": 9}  # the column is gone from the table
    assert [f.name for f in DeltaTable(f"{tmp_path}/lake/a").schema().fields] == ["k", "v", "w"]
    # and every commit, the drop's rewrite too, is a batch's: its window and transaction
    history = DeltaTable(f"{tmp_path}/lake/a").history()
    assert all(RESOLVED_KEY in commit for commit in history)
