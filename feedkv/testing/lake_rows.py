"""Helpers for lake sink tests: the Parquet rows a changefeed hands a lake sink, and
waiting for a job's lake to pass a time."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pyarrow as pa

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.file_formats import PARQUET_META, ROWS_KEY, ROWS_VERSION
from feedkv.changefeed.sink import SinkError
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.lake_tables import LakeTables, TableChange
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

__all__ = [
    "Change",
    "CrashingTables",
    "crash_mid_window",
    "lake_rows",
    "logical_now",
    "wait_lake_past",
]

Change = tuple[int, str | None, str, Timestamp]  # (k, v, event type c/u/d, updated)


def lake_rows(*changes: Change, version: int = 1) -> pa.RecordBatch:
    """Parquet rows (:class:`~feedkv.changefeed.file_formats.ParquetRows`' batches) of a
    table ``(k INT PRIMARY KEY, v STRING)`` at descriptor ``version``: one per change,
    its MVCC timestamp equal to ``updated``."""
    schema = pa.schema(
        [("k", pa.int64()), ("v", pa.string()), *((m, pa.string()) for m in PARQUET_META)],
        metadata={ROWS_KEY: json.dumps(["k"]), ROWS_VERSION: str(version)},
    )
    records = [(k, v, kind, str(t), str(t)) for k, v, kind, t in changes]
    columns: list[list[object]] = [[record[i] for record in records] for i in range(len(schema))]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )


def logical_now(db: DB) -> Decimal:
    """The cluster's logical time now, as ``cluster_logical_timestamp()`` gives it."""
    value = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    assert isinstance(value, Decimal)
    return value


def wait_lake_past(
    db: DB, job_id: int, uri: str, end: Decimal, *, timeout_s: float = 240
) -> feedkv.lake.Marker:
    """The lake's consistent marker once it is at or past ``end``; a failed job fails
    the wait. NB: a deadline, not a speed check: on a busy machine a Spark job takes a
    minute or more to start and commit its first batches."""

    def reached() -> feedkv.lake.Marker | None:
        error = db.changefeeds.error(job_id)
        if error is not None:
            raise AssertionError(f"the job failed: {error}")
        marker = feedkv.lake.read_consistent(uri)
        return marker if marker is not None and Decimal(str(marker.resolved)) >= end else None

    # NB: each look reads the lake's log and asks the node for the job's error; every
    # 10 ms, they took 45 s of an 82 s wait for a Spark job to start (2,420 looks),
    # work beside the JVM it waited for
    marker = wait_until(
        reached, timeout_s=timeout_s, poll_s=0.2, what=f"{uri} past the last change"
    )
    assert marker is not None
    return marker


class CrashingTables:
    """Lake tables whose commit into ``table`` fails, as a node dying between two
    tables' commits of one window."""

    def __init__(self, tables: LakeTables, table: str) -> None:
        self.tables = tables
        self.table = table

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tables, name)

    def commit(self, change: TableChange) -> None:
        if change.table == self.table:
            raise SinkError("the node died here")
        self.tables.commit(change)


def crash_mid_window(
    tables: LakeTables, window: list[tuple[str, pa.RecordBatch]], at: Timestamp, table: str
) -> None:
    """A mirror sink's commit of ``window`` (ending at ``at``) into ``tables`` that dies
    at ``table``'s commit, after the tables before it committed theirs."""
    crashing = lake.LakeSink(CrashingTables(tables, table), "mirror")
    crashing.emit_batches(window)
    try:
        crashing.commit_window(at, sorted({name for name, _ in window}))
    except SinkError as exc:
        assert "died" in str(exc), exc
    else:
        raise AssertionError(f"the commit into {table} did not fail")
    finally:
        crashing.close()
