"""bench/pgwire_codec.py's measurement on a short run: the protocol layer's and the
session's CPU per statement, both counted."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_the_codec_benchmark_splits_a_statements_cpu_between_protocol_and_session() -> None:
    bench = Path(__file__).resolve().parents[2] / "bench" / "pgwire_codec.py"
    spec = importlib.util.spec_from_file_location("bench_pgwire_codec", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = module.run(300)
    assert row["statements"] == 300
    assert row["protocol_us_per_statement"] > 0 and row["session_us_per_statement"] > 0
    assert 0 < row["protocol_share"] < 1
