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
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

from feedkv.testing.benches import bench_module
from feedkv.testing.node_process import NodeProcess

KEYS = 100_000
VALUE = "v" * 100
SCRIPT = (
    f"\\set k random(1, {KEYS})\n"
    f"INSERT INTO kv (k, v) VALUES (:k, '{VALUE}') ON CONFLICT (k) DO UPDATE SET v = excluded.v;\n"
)
TARGETS = {"tps_ratio_vs_postgresql": 0.6, "p99_ratio_vs_postgresql": 2.0}


class Workload(NamedTuple):
    """A pgbench script and what it needs: ``prepare(url, server)`` creates the schema
    (``server``: "feedkv" or "postgresql") before the run; ``after(url)``, if given, adds
    what it reads back to the run's row. (A NamedTuple: a dataclass needs its module in
    ``sys.modules``, and benchmarks are loaded as files.)"""

    name: str
    script: str
    prepare: Callable[[str, str], None]
    after: Callable[[str], dict[str, Any]] | None = None


def _kv_table(url: str, server: str) -> None:
    statement = {
        "feedkv": "CREATE TABLE kv (k INT PRIMARY KEY, v STRING)",
        "postgresql": "CREATE TABLE kv (k BIGINT PRIMARY KEY, v TEXT)",
    }[server]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


KV0 = Workload("kv0", SCRIPT, _kv_table)


def pgbench(
    url: str, script_text: str, clients: int, seconds: float, workdir: Path
) -> dict[str, Any]:
    """One pgbench run of ``script_text`` against ``url``: TPS and latency percentiles."""
    script = workdir / "script.sql"
    script.write_text(script_text)
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


def _run(
    workload: Workload, url: str, server: str, clients: int, seconds: float, workdir: Path
) -> dict[str, Any]:
    workload.prepare(url, server)
    row = pgbench(url, workload.script, clients, seconds, workdir)
    if workload.after is not None:
        row.update(workload.after(url))
    return row


def run_feedkv(workload: Workload, clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"feedkv-bench-{workload.name}-") as tmp:
        node = NodeProcess(Path(tmp) / "store")
        try:
            row = _run(workload, node.sql_url, "feedkv", clients, seconds, Path(tmp))
        finally:
            node.process.terminate()
            node.process.wait(timeout=60)
    row["server"] = "feedkv start (durable commits), SQL port on loopback TCP"
    return row


def run_postgresql(workload: Workload, clients: int, seconds: float) -> dict[str, Any]:
    pg_bin = bench_module("kv")._find_pg_bin()
    if pg_bin is None:
        return {"skipped": "PostgreSQL is not installed (apt-get install postgresql)"}
    with tempfile.TemporaryDirectory(prefix=f"feedkv-bench-{workload.name}-pg-") as name:
        tmp = Path(name)
        with bench_module("kv").postgresql(pg_bin, tmp) as url:
            work = tmp / "work"
            work.mkdir()
            row = _run(workload, url, "postgresql", clients, seconds, work)
    row["server"] = f"PostgreSQL from {pg_bin}, synchronous_commit=on, loopback TCP"
    return row


def side_by_side(
    result: dict[str, Any], workload: Workload, clients: int, seconds: float, *, skip_pg: bool
) -> dict[str, Any] | None:
    """Run ``workload`` on feedkv and (unless ``skip_pg``) on PostgreSQL into ``result``;
    returns the ratios, or ``None`` when there are none (``result`` then says why when
    pgbench is missing)."""
    if shutil.which("pgbench") is None:
        result["skipped"] = "pgbench is not installed (apt-get install postgresql-contrib)"
        return None
    result["feedkv"] = run_feedkv(workload, clients, seconds)
    result["postgresql"] = (
        {"skipped": "--skip-postgresql"} if skip_pg else run_postgresql(workload, clients, seconds)
    )
    ours, theirs = result["feedkv"], result["postgresql"]
    if not (ours.get("tps") and theirs.get("tps")):
        return None
    ratio: dict[str, Any] = {
        "tps": round(ours["tps"] / theirs["tps"], 3),
        "p99": round(ours["p99_ms"] / theirs["p99_ms"], 2) if theirs["p99_ms"] else None,
    }
    result["ratio_vs_postgresql"] = ratio
    return ratio


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
    ratio = side_by_side(result, KV0, args.clients, args.seconds, skip_pg=args.skip_postgresql)
    if ratio is not None:
        result["targets"] = TARGETS
        result["targets_met"] = {
            "tps_ratio_vs_postgresql": ratio["tps"] >= TARGETS["tps_ratio_vs_postgresql"],
            "p99_ratio_vs_postgresql": ratio["p99"] is not None
            and ratio["p99"] <= TARGETS["p99_ratio_vs_postgresql"],
        }
    print(json.dumps(result, indent=2))
    return 0
