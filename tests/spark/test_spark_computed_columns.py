"""Computed columns in changefeed jobs on Spark: the same rows as the thread runner's
(``tests/changefeed/test_computed_columns_changefeed.py``): STORED columns emitted,
VIRTUAL ones left out by default, NULL with ``virtual_columns='null'``, computed by a
CDC query."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from feedkv import DB


@pytest.fixture
def table(db: DB) -> DB:
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a INT, s STRING, "
        "b INT AS (a * 2) STORED, c STRING AS (lower(s)) VIRTUAL)"
    )
    db.sql("INSERT INTO t (k, a, s) VALUES (1, 10, 'ABC')")
    return db


def export(db: DB, out: Path, options: str, query: str = "") -> None:
    """An ``initial_scan = 'only'`` job of ``t`` (or of the CDC ``query``) to its end."""
    target = "" if query else "FOR TABLE t "
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED {target}INTO 'file://{out}' "
        f"WITH initial_scan = 'only', {options}{' AS ' + query if query else ''}"
    ).rows
    assert db.changefeeds.wait(job_id, 120)
    assert db.changefeeds.error(job_id) is None


def json_rows(out: Path) -> list[Any]:
    return [
        json.loads(line) for path in sorted(glob.glob(f"{out}/*/*.ndjson")) for line in open(path)
    ]


def test_spark_jobs_leave_virtual_columns_out_or_null_and_queries_compute_them(
    table: DB, tmp_path: Path
) -> None:
    export(table, tmp_path / "omitted", "format = json")
    assert [r["after"] for r in json_rows(tmp_path / "omitted")] == [
        {"k": 1, "a": 10, "s": "ABC", "b": 20}
    ]
    export(table, tmp_path / "null", "virtual_columns = 'null'")
    assert [r["after"] for r in json_rows(tmp_path / "null")] == [
        {"k": 1, "a": 10, "s": "ABC", "b": 20, "c": None}
    ]
    export(table, tmp_path / "query", "format = json", "SELECT k, c FROM t")
    # NB: a CDC query's envelope is bare by default, as CockroachDB's, and its projection
    # is the whole message (no key added to a file's values for a query)
    assert json_rows(tmp_path / "query") == [{"c": "abc", "k": 1}]
    export(table, tmp_path / "parquet", "format = parquet")
    [path] = glob.glob(f"{tmp_path / 'parquet'}/*/*.parquet")
    assert pq.read_table(path).to_pylist() == [
        {"k": 1, "a": 10, "s": "ABC", "b": 20, "__crdb__event_type": "c"}
    ]


def test_a_spark_batch_read_has_the_stored_columns_and_not_the_virtual_ones(
    spark: Any, table: DB
) -> None:
    """The ``feedkv`` data source reads what is stored, as a changefeed's default
    does: ``b`` with its value, no ``c``."""
    frame = spark.read.format("feedkv").option("url", table.serving_url()).option("table", "t")
    rows = frame.load().collect()
    assert [(r.k, r.a, r.s, r.b) for r in rows] == [(1, 10, "ABC", 20)]
    assert "c" not in rows[0].asDict()
