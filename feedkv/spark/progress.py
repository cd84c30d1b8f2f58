"""What a changefeed job on Spark shows while it runs: its throughput and its ranges.

A Spark job's rangefeeds do not live in the node: its micro-batches read
``(previous offset, next offset]`` in pieces cut at range boundaries
(:func:`~feedkv.spark.offsets.plan_pieces`), in Spark's executors. What the node can know
comes from the query's progress reports (``StreamingQuery.lastProgress``, one per
micro-batch) and from its offsets:

- :class:`SparkProgress` counts the rows of each batch once (a report is seen many times
  while no new batch finishes) and keeps the last batch's figures: its id, rows, Spark's
  input and processing rates and its duration. The rows feed the admin page's throughput
  chart as a thread job's emitted rows do.
- :func:`read_ranges` lists the ranges a job's next batch reads, with the resolved
  timestamp each has been read up to: the offset the last batch ended at, the same for
  every range (a batch reads every range of the targets to one timestamp).

Pure: no Spark, no I/O; a report is the JSON dict Spark gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from feedkv.kv.db import RangeInfo
from feedkv.rangefeed.client import FeedRange
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["BatchProgress", "SparkProgress", "read_ranges"]


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """One finished micro-batch, as Spark reported it (rates and duration ``None`` when
    the report has none)."""

    batch_id: int
    rows: int
    input_rows_per_s: float | None
    processed_rows_per_s: float | None
    duration_s: float | None

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> BatchProgress | None:
        """The batch of a ``lastProgress`` report (``None``: not one of a batch)."""
        batch_id = report.get("batchId")
        if not isinstance(batch_id, int):
            return None
        durations = report.get("durationMs") or {}
        total_ms = (
            _float(durations.get("triggerExecution")) if isinstance(durations, dict) else None
        )
        return cls(
            batch_id=batch_id,
            rows=_int(report.get("numInputRows")),
            input_rows_per_s=_float(report.get("inputRowsPerSecond")),
            processed_rows_per_s=_float(report.get("processedRowsPerSecond")),
            duration_s=total_ms / 1000 if total_ms is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "rows": self.rows,
            "input_rows_per_s": self.input_rows_per_s,
            "processed_rows_per_s": self.processed_rows_per_s,
            "duration_s": self.duration_s,
        }


class SparkProgress:
    """The rows a job's batches read so far, and its last batch (one driver thread
    observes; readers on other threads see whole values)."""

    def __init__(self) -> None:
        self.rows = 0
        self.batches = 0
        self.last: BatchProgress | None = None

    def observe(self, report: Mapping[str, Any] | None) -> BatchProgress | None:
        """Take a ``lastProgress`` report; returns its batch if it is a new one."""
        batch = BatchProgress.from_report(report) if report else None
        if batch is None or (self.last is not None and batch.batch_id <= self.last.batch_id):
            return None
        self.rows += batch.rows
        self.batches += 1
        self.last = batch
        return batch


def read_ranges(
    spans: Iterable[Span], ranges: Iterable[RangeInfo], resolved: Timestamp
) -> list[FeedRange]:
    """The pieces a batch over ``spans`` reads, one per range that overlaps them (cut
    at its bounds), in key order, each read up to ``resolved``; its node is the range's
    first replica (the lease holder's, as descriptors list it)."""
    infos = sorted(ranges, key=lambda r: r.span.start)
    out = []
    for span in sorted(spans, key=lambda s: s.start):
        for info in infos:
            start, end = max(span.start, info.span.start), min(span.end, info.span.end)
            if start < end:
                node = info.replicas[0] if info.replicas else None
                out.append(FeedRange(info.range_id, Span(start, end), resolved, node))
    return out


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
