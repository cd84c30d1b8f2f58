"""`feedkv bench pgwire`: pgbench against feedkv's SQL port and against PostgreSQL, side by
side in one run.

The workload is kv0 as a pgbench custom script: single-row upserts of a 100-byte value
at a random key of 100k (`INSERT ... ON CONFLICT (k) DO UPDATE`), `-n`, 32 clients,
`-M prepared`, for `--seconds` each. Both servers commit durably: feedkv is a
`feedkv start` subprocess (fsync on commit), PostgreSQL runs with synchronous_commit on,
started on loopback as an unprivileged user (`runuser -u nobody` when run as root,
since PostgreSQL refuses root); without PostgreSQL or pgbench the row says why.

Prints one JSON object: TPS, latency p50/p99 per server (from pgbench's per-transaction
log), the ratios and the issue's targets (feedkv >= 0.6x PostgreSQL's TPS, p99 <= 2x).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from feedkv.testing.node_process import NodeProcess

KEYS = 100_000
VALUE = "v" * 100
SCRIPT = (
    f"\\set k random(1, {KEYS})\n"
    f"INSERT INTO kv (k, v) VALUES (:k, '{VALUE}') ON CONFLICT (k) DO UPDATE SET v = excluded.v;\n"
)
TARGETS = {"tps_ratio_vs_postgresql": 0.6, "p99_ratio_vs_postgresql": 2.0}


def _kv_bench() -> Any:
    """bench/kv.py, for its PostgreSQL lookup (benchmarks are files, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "feedkv_bench_kv", Path(__file__).with_name("kv.py")
    )
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot load bench/kv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pgbench(url: str, clients: int, seconds: float, workdir: Path) -> dict[str, Any]:
    """One pgbench run of the kv0 script against ``url``: TPS and latency percentiles."""
    script = workdir / "kv0.sql"
    script.write_text(SCRIPT)
    prefix = workdir / "txlog"
    done = subprocess.run(
        [
            "pgbench", "-n", "-f", str(script), "-c", str(clients), "-j", "2",
            "-T", str(max(1, round(seconds))), "-M", "prepared", "-l",
            "--log-prefix", str(prefix), url,
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    tps = re.search(r"tps = ([\d.]+)", done.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
    latencies = sorted(
        int(line.split()[2]) / 1000.0
        for log in workdir.glob("txlog.*")
        for line in log.read_text().splitlines()
        if len(line.split()) > 2
    )

    def pct(p: float) -> float:
        if not latencies:
            return float("nan")
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2)

    return {
        "tps": float(tps.group(1)) if tps else None,
        "transactions": len(latencies),
        "failed": int(failed.group(1)) if failed else None,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
    }


def run_feedkv(clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-pgwire-") as tmp:
        node = NodeProcess(Path(tmp) / "store")
        try:
            with psycopg.connect(node.sql_url, autocommit=True) as conn:
                conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
            row = pgbench(node.sql_url, clients, seconds, Path(tmp))
        finally:
            node.process.terminate()
            node.process.wait(timeout=60)
    row["server"] = "feedkv start (durable commits), SQL port on loopback TCP"
    return row


def run_postgresql(clients: int, seconds: float) -> dict[str, Any]:
    pg_bin = _kv_bench()._find_pg_bin()
    if pg_bin is None:
        return {"skipped": "PostgreSQL is not installed (apt-get install postgresql)"}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-pgwire-pg-") as name:
        tmp = Path(name)
        with _kv_bench().postgresql(pg_bin, tmp) as url:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v TEXT)")
            work = tmp / "work"
            work.mkdir()
            row = pgbench(url, clients, seconds, work)
    row["server"] = f"PostgreSQL from {pg_bin}, synchronous_commit=on, loopback TCP"
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench pgwire", description=__doc__)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-postgresql", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "pgwire",
        "workload": f"pgbench -n -M prepared, kv0 upserts of {len(VALUE)}-byte values "
        f"over {KEYS} keys",
        "clients": args.clients,
        "seconds": args.seconds,
        "cores": os.cpu_count(),
    }
    if shutil.which("pgbench") is None:
        result["skipped"] = "pgbench is not installed (apt-get install postgresql-contrib)"
        print(json.dumps(result, indent=2))
        return 0
    result["feedkv"] = run_feedkv(args.clients, args.seconds)
    result["postgresql"] = (
        {"skipped": "--skip-postgresql"}
        if args.skip_postgresql
        else run_postgresql(args.clients, args.seconds)
    )
    ours, theirs = result["feedkv"], result["postgresql"]
    if ours.get("tps") and theirs.get("tps"):
        result["ratio_vs_postgresql"] = {
            "tps": round(ours["tps"] / theirs["tps"], 3),
            "p99": round(ours["p99_ms"] / theirs["p99_ms"], 2) if theirs["p99_ms"] else None,
        }
        ratio = result["ratio_vs_postgresql"]
        result["targets"] = TARGETS
        result["targets_met"] = {
            "tps_ratio_vs_postgresql": ratio["tps"] >= TARGETS["tps_ratio_vs_postgresql"],
            "p99_ratio_vs_postgresql": ratio["p99"] is not None
            and ratio["p99"] <= TARGETS["p99_ratio_vs_postgresql"],
        }
    print(json.dumps(result, indent=2))
    return 0
