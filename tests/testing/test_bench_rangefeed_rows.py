"""``feedkv bench rangefeed --only``: a row runs alone, and the side-by-side with etcd,
which compares with feedkv's own rows, is refused without them."""

from __future__ import annotations

import json

import pytest

from feedkv.testing.benches import bench_module


def test_the_etcd_row_alone_is_refused_naming_the_rows_it_needs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench_module("rangefeed").main(["--only", "etcd"])
    assert exited.value.code == 2
    assert "add watch_latency and write_ratio" in capsys.readouterr().err


@pytest.mark.slow(30)
def test_only_the_row_asked_for_runs(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--only", "idle_registration", "--registrations", "50"]
    assert bench_module("rangefeed").main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"benchmark", "targets", "idle_registration"}
    assert result["idle_registration"]["registrations"] == 50
