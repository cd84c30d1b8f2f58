"""`feedkv bench sql`: single-row INSERT and primary-key UPDATE through `db.sql`.

32 concurrent sessions, embedded and over gRPC (client processes against a `feedkv
start --insecure` subprocess, as `feedkv bench kv`'s ``grpc`` row: plaintext, so these
figures compare with those measured before nodes were secure by default; TLS's cost is
`feedkv bench kv`'s ``grpc_tls`` row), each commit durable. Every mode also runs
the kv0 put workload in the same run, so the ratio SQL / KV compares like with like.
Target: SQL reaches at least half of KV's commits/s in each mode. Embedded, it also
times ALTER TABLE ADD COLUMN (rewriting the 10k rows) and DROP COLUMN while the 32
sessions keep updating them.

Prints one JSON object.

``--per-statement`` measures instead what a machine shared with other work disturbs far
less than commits/s: one embedded session runs the INSERTs and UPDATEs (and kv0's puts)
one after another, without fsync, and each gets its CPU microseconds per statement (the
session's thread, and the process: the commit thread's share too; the least of
``--rounds``) and its Python calls per statement on the session's thread (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import feedkv
from feedkv.kv.store import StoreConfig
from feedkv.testing.benches import bench_module
from feedkv.testing.node_process import NodeProcess

kv = bench_module("kv")

TARGET_RATIO = 0.5
ROWS = 10_000  # rows the UPDATE workload picks from
CREATE = "CREATE TABLE IF NOT EXISTS bench (k INT PRIMARY KEY, v STRING)"
INSERT = "INSERT INTO bench (k, v) VALUES ($1, $2)"
UPDATE = "UPDATE bench SET v = $2 WHERE k = $1"
VALUE = "v" * 100
_bases = itertools.count(1)


def workload(db: feedkv.DB, op: str) -> Callable[[], Callable[[int], None]]:
    """A per-client factory for ``kv.drive``: each client gets its own session."""

    def make() -> Callable[[int], None]:
        if op == "kv":
            return lambda i: db.put(kv.key_of(i), kv.VALUE)
        session = db.session()
        keys = itertools.count(next(_bases) * 1_000_000_000 + os.getpid() % 1000 * 1_000_000)

        def insert(i: int) -> None:
            session.execute(INSERT, next(keys), VALUE)

        def update(i: int) -> None:
            session.execute(UPDATE, i % ROWS, VALUE)

        return insert if op == "insert" else update

    return make


def prepare(db: feedkv.DB) -> None:
    db.sql(CREATE)
    session = db.session()
    for start in range(0, ROWS, 500):
        values = ", ".join(f"({k}, 'seed')" for k in range(start, min(start + 500, ROWS)))
        session.execute(f"UPSERT INTO bench (k, v) VALUES {values}")


def run_embedded(clients: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-sql-") as tmp:
        db = feedkv.connect(Path(tmp) / "store", config=StoreConfig(sync=True))
        try:
            prepare(db)
            for op in ("kv", "insert", "update"):
                commits, latencies = kv.drive(clients, seconds, workload(db, op))
                out[op] = kv.summarize(commits, latencies, seconds)
            out["schema_change_under_writers"] = schema_changes(db, clients, seconds)
        finally:
            db.close()
    return out


def schema_changes(db: feedkv.DB, clients: int, seconds: float) -> dict[str, Any]:
    """How long ALTER TABLE ADD COLUMN (a backfill of every row) and DROP COLUMN take
    while ``clients`` sessions UPDATE the table at full speed."""
    took: dict[str, float] = {}

    def change() -> None:
        time.sleep(seconds / 3)  # the writers are at full speed by then
        for name, statement in (
            ("add_column_s", "ALTER TABLE bench ADD COLUMN extra INT NOT NULL DEFAULT 0"),
            ("drop_column_s", "ALTER TABLE bench DROP COLUMN extra"),
        ):
            began = time.perf_counter()
            db.sql(statement)
            took[name] = round(time.perf_counter() - began, 3)

    changer = threading.Thread(target=change)
    changer.start()
    commits, _latencies = kv.drive(clients, seconds, workload(db, "update"))
    changer.join()
    return {"rows": ROWS, **took, "update_commits_per_s": round(commits / seconds)}


def per_statement(statements: int, rounds: int) -> dict[str, Any]:
    """Each workload's CPU and Python calls per statement in one embedded session (see
    the module docstring), and SQL's ratio to kv0 by process CPU."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-sql-") as tmp:
        # NB: no fsync: it costs every workload's commit the same, and what it costs
        # depends on the disk's other users
        db = feedkv.connect(Path(tmp) / "store", config=StoreConfig(sync=False))
        try:
            prepare(db)
            runs = {op: workload(db, op)() for op in ("kv", "insert", "update")}
            best: dict[str, tuple[float, float]] = {}
            for _ in range(rounds):
                for op, run in runs.items():
                    thread, process = time.thread_time(), time.process_time()
                    for i in range(statements):
                        run(i)
                    took = (time.thread_time() - thread, time.process_time() - process)
                    best[op] = min(best.get(op, took), took, key=lambda t: t[1])
            for op, run in runs.items():
                profile = cProfile.Profile()
                profile.enable()
                for i in range(statements):
                    run(i)
                profile.disable()
                out[op] = {
                    "session_thread_cpu_us": round(best[op][0] / statements * 1e6, 1),
                    "process_cpu_us": round(best[op][1] / statements * 1e6, 1),
                    "python_calls": round(pstats.Stats(profile).total_calls / statements, 1),
                }
        finally:
            db.close()
    kv_cpu = out["kv"]["process_cpu_us"]
    out["cpu_ratio_vs_kv"] = {
        op: round(kv_cpu / out[op]["process_cpu_us"], 2) for op in ("insert", "update")
    }
    return out


def client_main(url: str, op: str, clients: int, seconds: float, seed: int) -> None:
    """Runs in a client process: prints its figures as JSON."""
    db = feedkv.connect(url)
    try:
        kv.print_client_figures(clients, seconds, workload(db, op), seed)
    finally:
        db.close()


def run_grpc(clients: int, seconds: float, processes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-sql-") as tmp:
        node = NodeProcess(Path(tmp) / "store", "--insecure")
        try:
            with feedkv.connect(node.url) as db:
                prepare(db)
            for op in ("kv", "insert", "update"):
                out[op] = kv.client_processes(
                    __file__, [node.url] * processes, clients, seconds, "--op", op
                )
        finally:
            node.terminate()
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench sql", description=__doc__)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument(
        "--per-statement",
        type=int,
        metavar="N",
        help="measure CPU and Python calls per statement over N statements instead",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --per-statement")
    parser.add_argument("--client-of", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--op", default="insert", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client_of:
        client_main(args.client_of, args.op, args.clients, args.seconds, args.seed)
        return 0
    if args.per_statement:
        measured = per_statement(args.per_statement, args.rounds)
        print(json.dumps({"benchmark": "sql per statement", **measured}, indent=2))
        return 0
    result: dict[str, Any] = {
        "benchmark": "sql",
        "workload": "single-row INSERT of new keys, and UPDATE by primary key of 10k rows, "
        "through db.sql with placeholders; kv = the kv0 put workload, same run",
        "clients": args.clients,
        "seconds": args.seconds,
        "cores": os.cpu_count(),
        "embedded": run_embedded(args.clients, args.seconds),
        "grpc": run_grpc(args.clients, args.seconds, args.client_processes),
    }
    ratios = {}
    for mode in ("embedded", "grpc"):
        base = result[mode]["kv"]["commits_per_s"]
        for op in ("insert", "update"):
            ratios[f"{mode}_{op}"] = round(result[mode][op]["commits_per_s"] / max(base, 1), 2)
    result["ratio_vs_kv"] = ratios
    result["target_ratio"] = TARGET_RATIO
    result["targets_met"] = {name: ratio >= TARGET_RATIO for name, ratio in ratios.items()}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
