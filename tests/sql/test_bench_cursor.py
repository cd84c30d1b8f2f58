"""bench/cursor.py's measurement on a small table: a cursor holds a page where the
SELECT holds every row."""

from __future__ import annotations

from feedkv.testing.benches import bench_module


def test_the_cursor_benchmark_measures_a_lazy_cursor_against_a_select() -> None:
    row = bench_module("cursor").run(5000)
    assert row["rows"] == 5000
    assert row["declare"]["held_mib"] * 20 < row["select_all"]["held_mib"]
    assert row["first_fetch_100"]["held_mib"] < row["select_all"]["held_mib"]
    assert row["fetch_rest"]["peak_mib"] > 0
