"""``feedkv bench sql --per-statement`` at a tiny size (the figures themselves belong to
the benchmark): every workload runs, and its CPU and Python calls per statement are
counted over the statements asked."""

from __future__ import annotations

import json

import pytest

from feedkv.testing.benches import bench_module


@pytest.mark.slow(15)
def test_per_statement_measures_each_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_module("sql").main(["--per-statement", "30", "--rounds", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    for op in ("kv", "insert", "update"):
        figures = out[op]
        assert 0 < figures["session_thread_cpu_us"] <= figures["process_cpu_us"], op
        assert figures["python_calls"] >= 10, op  # a statement is many calls, not a few
    # an SQL statement does what a put does and more: parsing aside, a plan, a row
    assert out["insert"]["python_calls"] > out["kv"]["python_calls"]
    assert set(out["cpu_ratio_vs_kv"]) == {"insert", "update"}
