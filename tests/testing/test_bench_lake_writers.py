"""``feedkv bench lake``'s lag runs end to end at a tiny size (the figures themselves
belong to the benchmark): writer processes of their own, each with its own client
connection to a ``feedkv start`` node, write the rows asked between them, and every
acknowledged statement becomes visible in the Delta mirror."""

from __future__ import annotations

import json

import pytest

from feedkv.testing.benches import bench_module


@pytest.mark.slow(30)
def test_writer_processes_share_the_rate_and_every_statement_reaches_the_lake(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--skip", "throughput", "--rates", "400", "--seconds", "1", "--writers", "2"]
    args += ["--statement-rows", "20", "--lag-sinks", "delta-mirror", "--checkpoint", "200ms"]
    assert bench_module("lake").main(args) == 0
    (run,) = json.loads(capsys.readouterr().out)["lag"]["runs"]["delta-mirror"]
    assert run["writers"] == 2
    # 400 rows/s for a second in statements of 20: 20 statements, 10 by each writer
    assert run["statements"] == 20 and run["not_visible_in_60s"] == 0
    assert 0 < run["lag_p50_s"] <= run["lag_p99_s"] <= run["lag_max_s"]
    assert run["node_cpu_per_s"] > 0 and run["writers_cpu_per_s"] > 0
