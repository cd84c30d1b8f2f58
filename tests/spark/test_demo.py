"""`feedkv demo` end to end, with short buckets: the changefeed job and the data-warehouse
job on local Spark, verified against the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from feedkv.cli.demo import run_demo


@pytest.mark.slow(50)
def test_the_demo_verifies_its_files_and_buckets(
    spark: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "demo"
    assert run_demo(Path("demo"), seconds=4, bucket_s=2) == 0  # relative, as `make demo` runs it
    printed = capsys.readouterr().out
    assert "verified" in printed
    buckets = sorted((store / "output" / "warehouse" / "rides").glob("bucket=*"))
    assert buckets  # at least one whole bucket ended during the workload
    rows = [r for b in buckets for p in b.glob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert rows and {"key", "updated", "vehicle_id", "revenue"} <= set(rows[0])
