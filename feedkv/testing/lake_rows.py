"""Helpers for lake sink tests: the Parquet rows a changefeed hands a lake sink, and
waiting for a job's lake to pass a time."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.file_formats import PARQUET_META, ROWS_KEY, ROWS_VERSION
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

__all__ = ["Change", "lake_rows", "logical_now", "wait_lake_past"]

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

    marker = wait_until(reached, timeout_s=timeout_s, what=f"{uri} past the last change")
    assert marker is not None
    return marker
