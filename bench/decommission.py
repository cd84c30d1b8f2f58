"""`feedkv bench decommission`: what moving replicas off a node costs the clients.

Four ``feedkv start --replicas 3`` processes, ``--tables`` SQL tables (each its own
range, three replicas each), a writer upserting a row of each table in turn through
node n2 (SQL over the node's client):

- ``decommission``: ``feedkv node decommission 1`` (n1 started the cluster, so it holds
  a replica of every range and many leases) while the writer runs: the command's time,
  the longest gap between two acknowledged writes after it started, and whether every
  range ended with three replicas, none on n1;
- ``dead_node``: with ``server.time_until_store_dead`` at 1s (so the 9 s liveness bound
  rules), a SIGKILLed node holding replicas: the time from the kill until every range
  has three replicas again, none on the dead node.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from feedkv.cli.node import run_node_decommission
from feedkv.db import DB
from feedkv.errors import AmbiguousResultError
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

DEADLINE_S = 600.0


def _three_replicas(db: DB, without: int = 0) -> bool:
    return all(len(r.replicas) == 3 and without not in r.replicas for r in db.ranges())


def _cluster(base: Path, tables: int) -> tuple[LocalCluster, DB]:
    cluster = LocalCluster(base, 4, "--replicas", "3", rebalance_interval="0s")
    db = cluster.connect(1)
    for i in range(tables):
        db.sql(f"CREATE TABLE t{i} (k INT PRIMARY KEY, v STRING)")
        db.sql(f"INSERT INTO t{i} VALUES (1, 'x')")
    wait_until(lambda: _three_replicas(db), timeout_s=DEADLINE_S, what="three replicas")
    return cluster, db


def decommission(base: Path, tables: int) -> dict[str, Any]:
    cluster, db = _cluster(base, tables)
    try:
        ranges = db.ranges()
        acked: list[float] = []
        failures: list[str] = []
        stop = threading.Event()

        def writer() -> None:
            i = 0
            while not stop.is_set():
                try:
                    with contextlib.suppress(AmbiguousResultError):
                        db.sql(f"UPSERT INTO t{i % tables} VALUES (2, 'w{i}')")
                        acked.append(time.monotonic())
                except Exception as exc:  # a failure is a result here: count it
                    failures.append(f"{type(exc).__name__}: {exc}")
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        wait_until(lambda: len(acked) > 20, timeout_s=DEADLINE_S, what="writes")
        started = time.monotonic()
        code = run_node_decommission(cluster.url(1), [1], stdout=io.StringIO(), timeout_s=600)
        took = time.monotonic() - started
        settled = len(acked)
        wait_until(lambda: len(acked) > settled + 20, timeout_s=DEADLINE_S, what="writes")
        stop.set()
        thread.join()
        during = [b - a for a, b in itertools.pairwise(acked) if b >= started]
        return {
            "ranges": len(ranges),
            "replicas_on_n1": sum(1 for r in ranges if 1 in r.replicas),
            "leases_on_n1": sum(1 for r in ranges if r.lease_holder == 1),
            "exit_code": code,
            "decommission_s": round(took, 2),
            "max_write_gap_s": round(max(during), 3),
            "writes_after_start": len(during),
            "write_failures": failures[:5],
            "three_replicas_none_on_n1": _three_replicas(db, without=1),
        }
    finally:
        db.close()
        cluster.close()


def dead_node(base: Path, tables: int) -> dict[str, Any]:
    cluster, db = _cluster(base, tables)
    try:
        db.sql("SET CLUSTER SETTING server.time_until_store_dead = '1s'")
        killed = time.monotonic()
        cluster.kill(2)  # n3
        wait_until(
            lambda: _three_replicas(db, without=3), timeout_s=DEADLINE_S, what="re-replication"
        )
        return {"ranges": len(db.ranges()), "rereplicated_s": round(time.monotonic() - killed, 2)}
    finally:
        db.close()
        cluster.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench decommission", description=__doc__)
    parser.add_argument("--tables", type=int, default=20)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "decommission",
        "workload": "4 nodes, --replicas 3, SQL upserts through n2",
        "tables": args.tables,
        "cores": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-decommission-") as tmp:
        base = Path(tmp)
        result["decommission"] = decommission(base / "decommission", args.tables)
        result["dead_node"] = dead_node(base / "dead", args.tables)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
