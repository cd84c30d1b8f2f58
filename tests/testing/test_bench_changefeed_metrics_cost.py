"""``feedkv bench changefeed``'s metrics-cost rounds run end to end at a tiny size (the
figures themselves belong to the benchmark): a concurrent round (the default; two
worker processes started phase by phase, a scraper process) gives a run of each mode,
every row arrives, and the report carries the ratios, their interval and the load.
``--pairing alternate`` runs the same runs in one process; it is left to the benchmark,
to keep the suite short."""

from __future__ import annotations

import json

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
    # the verdict in words, on the figure that judges it
    target = report["target"]
    assert target["figure"] == "cpu_us_per_message" and target["shown"] == report["target_shown"]
    assert target["upper_end_pct"] == pytest.approx((cpu["ratio_range"][1] - 1) * 100, abs=0.01)
    assert target["verdict"].startswith("shown: " if target["shown"] else "not shown: ")
    # one round: no fit of the full-speed ratio against the commit rate (needs two)
    assert report["cpu_us_per_commit_full_speed"]["ratio_at_equal_commit_rate"] is None
