"""``bench/kv.py``'s summary of a window's commits, which ``feedkv bench sql`` and
``feedkv bench cluster`` share."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

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


def test_a_client_process_reports_the_cpu_of_its_window_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # NB: the client processes' CPU a commit was once read from the children's rusage,
    # which counts each process's start (importing feedkv, about a second): a short run
    # of few commits then showed clients costing twice what they do
    spin_s = 0.05

    def make_put() -> Callable[[int], None]:
        def put(_: int) -> None:
            end = time.thread_time() + spin_s
            while time.thread_time() < end:
                pass

        return put

    busy = time.process_time()
    while time.process_time() - busy < 0.3:  # CPU spent before the window: not counted
        pass
    bench_module("kv").print_client_figures(1, 0.2, make_put, 0)
    figures = json.loads(capsys.readouterr().out)
    assert figures["commits"] >= 1
    assert figures["cpu_s"] >= figures["commits"] * spin_s * 0.9
    assert figures["cpu_s"] < (figures["commits"] + 1) * spin_s + 0.1


def test_rounds_alternate_their_order_and_ratios_are_taken_within_a_round() -> None:
    kv = bench_module("kv")
    order: list[str] = []
    rates = iter([100, 50, 80, 160, 90, 60])  # a: 100, 160, 90; b: 50, 80, 60

    def run(kind: str) -> Callable[[], dict[str, Any]]:
        def one() -> dict[str, Any]:
            order.append(kind)
            return {"commits_per_s": next(rates)}

        return one

    runs = kv.alternate({"a": run("a"), "b": run("b")}, 3)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert [r["commits_per_s"] for r in runs["a"]] == [100, 160, 90]
    assert [r["commits_per_s"] for r in runs["b"]] == [50, 80, 60]
    # NB: the rounds' own ratios (2.0, 2.0, 1.5), not the medians' (100 / 60)
    assert kv.median_ratio(runs["a"], runs["b"]) == 2.0
    assert kv.median_row(runs["b"])["commits_per_s"] == 60
