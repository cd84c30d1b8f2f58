"""A lake sink's window past its memory budget: rows spill to Parquet files on disk and
come back in order, whole, at the window's commit."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import feedkv.lake
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import parse_sink_uri, sink_defaults
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.lake_spill import SpilledRows
from feedkv.testing.lake_rows import lake_rows
from feedkv.util.hlc import Timestamp

T0 = Timestamp(1_700_000_000_000_000_000, 0)


def ts(n: int) -> Timestamp:
    return Timestamp(T0.wall + n * 1_000_000, 0)


def batch(first: int, count: int, version: int = 1) -> pa.RecordBatch:
    return lake_rows(
        *((k, f"v{k}", "c", ts(k)) for k in range(first, first + count)), version=version
    )


def test_rows_past_the_limit_go_to_disk_and_come_back_in_order() -> None:
    rows = SpilledRows(memory_limit=1)
    held = [batch(0, 3), batch(3, 2, version=2), batch(5, 4)]
    for b in held:
        rows.add("a", b)
    rows.add("b", batch(100, 1))
    assert rows.in_memory == 0
    assert rows.spilled_files == 4  # past the limit, each batch goes to disk as it comes
    folder = rows._dir
    assert folder is not None and len(os.listdir(folder)) == 4

    taken = rows.take()

    assert [b.to_pylist() for b in taken["a"]] == [b.to_pylist() for b in held]
    assert [b.schema.metadata for b in taken["a"]] == [b.schema.metadata for b in held]
    assert taken["b"][0].to_pylist() == batch(100, 1).to_pylist()
    assert not rows and os.listdir(folder) == []
    rows.close()
    assert not os.path.exists(folder)


def test_rows_under_the_limit_stay_in_memory() -> None:
    rows = SpilledRows(memory_limit=1 << 30)
    rows.add("a", batch(0, 10))
    assert rows.spilled_files == 0 and rows.in_memory > 0
    assert [len(b) for b in rows.take()["a"]] == [10]
    rows.close()


@pytest.mark.parametrize("mode", ["mirror", "changelog"])
def test_a_window_bigger_than_the_budget_commits_whole(tmp_path: Path, mode: str) -> None:
    uri = f"delta://{tmp_path}/lake"
    options = parse_options((("lake_mode", mode),), now=T0)
    parsed = parse_sink_uri(uri, sink_defaults(uri, options))
    sink = lake.LakeSink(lake.lake_tables(parsed), mode, memory_limit=4096)
    for first in range(0, 2000, 100):  # 2000 rows, far past 4 KiB, and one above the window
        sink.emit_batches([("a", batch(first, 100))])
    sink.emit_batches([("a", lake_rows((5000, "later", "c", ts(5000))))])
    assert sink._pending.spilled_files > 0
    sink.commit_window(ts(2999), ["a"])
    first = feedkv.lake.read_tables(uri)["a"]
    sink.commit_window(ts(6000), ["a"])  # the row above the first window, spilled with it
    sink.close()

    assert sorted(first.column("k").to_pylist()) == list(range(2000))
    everything = feedkv.lake.read_tables(uri)["a"]
    assert sorted(everything.column("k").to_pylist()) == [*range(2000), 5000]
