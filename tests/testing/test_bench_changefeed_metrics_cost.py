"""``feedkv bench changefeed``'s metrics-cost rounds run end to end at a tiny size (the
figures themselves belong to the benchmark): a concurrent round (the default; two
worker processes started phase by phase, a scraper process) gives a run of each mode,
every row arrives, and the report carries the ratios, their interval and the load.
``--pairing alternate`` runs the same runs in one process; it is left to the benchmark,
to keep the suite short."""

from __future__ import annotations

import json
from typing import Any

import pytest

from feedkv.testing.benches import bench_module

TINY = [
    "--steady-only",
    "--rows=200",
    "--rounds=1",
    "--seconds=0.5",
    "--rate=40",
    "--scrape-interval=0.2",
    "--warm-up=0",
]


@pytest.mark.slow(35)
def test_a_concurrent_round_reports_paired_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_module("changefeed").main(TINY) == 0
    report = json.loads(capsys.readouterr().out)["steady_state"]
    assert report["pairing"] == "concurrent" and report["rounds"] == 1
    assert report["kept_up"], report["runs"]
    for mode in ("on", "off"):
        (run,) = report["runs"][mode]
        assert run["paced"]["messages"] == 20  # 40/s for half a second
        assert run["steady"]["rows_received"] > 0
    assert report["runs"]["on"][0]["scrapes"] >= 1  # each answered (a failure raises)
    cpu = report["cpu_us_per_message"]
    on, off = report["runs"]["on"][0]["paced"], report["runs"]["off"][0]["paced"]
    assert cpu["ratios"] == [
        pytest.approx(on["cpu_us_per_message"] / off["cpu_us_per_message"], rel=1e-3)
    ]
    assert len(report["load_average_1m"]) == 2
    # one round: no fit of the full-speed ratio against the commit rate (needs two)
    assert report["cpu_us_per_commit_full_speed"]["ratio_at_equal_commit_rate"] is None
    # one round cannot judge the target, and the report says so
    target = report["target"]
    assert target["figure"] == "cpu_us_per_message" and target["rounds_judged"] == 0
    assert not target["shown"] and not report["target_shown"]
    assert target["verdict"].startswith("not judged: fewer than 5 of the 1 rounds")


def paced_run(cpu_us_per_message: float, *, held_rate: bool = True) -> dict[str, Any]:
    return {
        "paced": {
            "cpu_us_per_message": cpu_us_per_message,
            "held_rate": held_rate,
            "kept_up": True,
        }
    }


def test_the_target_is_judged_on_the_rounds_whose_paced_runs_held_their_rate() -> None:
    bench = bench_module("changefeed")
    off = [paced_run(1000.0) for _ in range(7)]
    on = [paced_run(1000.0 + 5 * i) for i in range(6)] + [paced_run(1500.0, held_rate=False)]
    target = bench._target(bench._judged(on, off), 7)
    # the round whose run fell behind (1.5) is left out: 1.000-1.025 over the other six
    assert target["rounds_judged"] == 6 and target["shown"]
    assert target["upper_end_pct"] == pytest.approx(2.5)
    assert target["verdict"].startswith("shown: the metrics cost at most 3% (")
    assert "6 of 7 rounds" in target["verdict"]
    costly = [paced_run(1000.0 + 10 * i) for i in range(7)]  # up to 1.06
    worse = bench._target(bench._judged(costly, off), 7)
    assert not worse["shown"] and worse["verdict"].startswith("not shown: ")
