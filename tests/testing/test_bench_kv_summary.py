"""``bench/kv.py``'s summary of a window's commits, which ``feedkv bench sql`` and
``feedkv bench cluster`` share."""

from __future__ import annotations

from feedkv.testing.benches import bench_module


def test_a_window_without_commits_has_no_latencies() -> None:
    # NB: on a loaded machine the clients of a short window may commit nothing; the
    # summary said so by failing with IndexError, losing the whole run's figures
    row = bench_module("kv").summarize(0, [], 5.0)
    assert row == {"commits": 0, "commits_per_s": 0, "p50_ms": None, "p99_ms": None}


def test_percentiles_are_in_milliseconds() -> None:
    latencies = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    row = bench_module("kv").summarize(100, latencies, 2.0)
    assert row["commits_per_s"] == 50
    assert row["p50_ms"] == 51.0 and row["p99_ms"] == 100.0
