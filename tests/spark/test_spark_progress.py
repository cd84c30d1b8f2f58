"""A Spark job's progress as the admin page shows it (:mod:`feedkv.spark.progress`):
pure, from Spark's progress reports and range descriptors."""

from __future__ import annotations

from feedkv.kv.db import RangeInfo
from feedkv.spark.progress import BatchProgress, SparkProgress, read_ranges
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span


def report(batch_id: int, rows: int) -> dict[str, object]:
    """A ``StreamingQuery.lastProgress`` as PySpark gives it (the fields read)."""
    return {
        "batchId": batch_id,
        "numInputRows": rows,
        "inputRowsPerSecond": 12.5,
        "processedRowsPerSecond": 40.0,
        "durationMs": {"triggerExecution": 1500, "addBatch": 1200},
        "sources": [],
    }


def test_each_batch_is_counted_once_however_often_its_report_is_seen() -> None:
    progress = SparkProgress()
    assert progress.observe(None) is None and progress.observe({}) is None
    first = progress.observe(report(0, 100))
    assert first == BatchProgress(0, 100, 12.5, 40.0, 1.5)
    assert progress.observe(report(0, 100)) is None  # the same batch, polled again
    progress.observe(report(1, 20))
    assert progress.observe(report(0, 100)) is None  # an older report does not count
    assert (progress.rows, progress.batches) == (120, 2)
    assert progress.last is not None and progress.last.batch_id == 1


def test_a_report_without_rates_has_none() -> None:
    batch = BatchProgress.from_report({"batchId": 3, "numInputRows": 0})
    assert batch == BatchProgress(3, 0, None, None, None)
    assert batch.to_json()["duration_s"] is None


def test_the_ranges_read_are_the_targets_cut_at_range_bounds_up_to_the_offset() -> None:
    ts = Timestamp(5, 0)
    zero = Timestamp(0, 0)
    ranges = [
        RangeInfo(2, Span(b"m", b"z"), 1, zero, False, (3, 1)),
        RangeInfo(1, Span(b"", b"m"), 1, zero, False, (1,)),
        RangeInfo(3, Span(b"z", b"\xff"), 1, zero, False, ()),
    ]
    found = read_ranges([Span(b"k", b"p")], ranges, ts)
    assert [(r.range_id, r.span, r.resolved, r.node_id) for r in found] == [
        (1, Span(b"k", b"m"), ts, 1),
        (2, Span(b"m", b"p"), ts, 3),
    ]
    assert read_ranges([Span(b"a", b"b")], [], ts) == []
