"""bench/sql_in_lists.py's measurement on a small table: each statement finds the rows
it lists (and NOT IN the others)."""

from __future__ import annotations

from feedkv.testing.benches import bench_module


def test_the_in_list_benchmark_finds_every_listed_row() -> None:
    row = bench_module("sql_in_lists").run(300, listed=100)
    assert (row["rows"], row["listed"]) == (300, 100)
    for name in ("id_in", "id_any", "v_in", "v_any"):
        assert row[name]["count"] == 100, name
    assert row["id_not_in"]["count"] == 200
