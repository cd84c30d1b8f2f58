"""Builders for lake sink tests: the Parquet rows a changefeed hands a lake sink."""

from __future__ import annotations

import json

import pyarrow as pa

from feedkv.changefeed.file_formats import PARQUET_META, ROWS_KEY, ROWS_VERSION
from feedkv.util.hlc import Timestamp

__all__ = ["Change", "lake_rows"]

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
