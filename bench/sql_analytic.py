"""`feedkv bench sql_analytic`: a GROUP BY and a join over ``--rows`` rows (default 1M),
feedkv and PostgreSQL side by side (issue 46's analytic target: within 3x).

Tables (``INT``/``STRING`` in feedkv, ``BIGINT``/``TEXT`` in PostgreSQL)::

    customers (id INT PRIMARY KEY, region STRING)               --customers rows (10k)
    orders    (id INT PRIMARY KEY, customer_id INT, amount INT)  --rows rows

loaded from the same CSV files (feedkv: ``IMPORT INTO``; PostgreSQL: server-side
``COPY``, then ``ANALYZE``). The queries, each over the SQL wire with psycopg, run
``--repeat`` times, the median kept:

- ``group_by``: ``SELECT customer_id, count(*), sum(amount) FROM orders GROUP BY
  customer_id`` (one group per customer);
- ``join``: ``SELECT c.region, count(*), sum(o.amount) FROM orders o JOIN customers c
  ON o.customer_id = c.id GROUP BY c.region`` (every order joined, then grouped).

Each query's first run is reported apart (``cold``), and the median of the ``--repeat``
runs after it (``warm``); then ``--write-rows`` orders are updated and the query runs
once more (``after_write``: feedkv brings its copy up to date with the changes).
``--vectorize off`` runs feedkv's row-at-a-time engine alone (the reference).

``cold`` is the first query after the load: feedkv's ``IMPORT INTO`` hands the node's
columnar cache (:mod:`feedkv.sql.columnar`) the copy of the rows it wrote, made from the
values it parsed (or, when it cannot, has the node copy the table in the background, a
query arriving before that copy is made waiting for it); feedkv's first ``cold`` figure
counts from the end of the load (any wait, the connection and everything). The second
query's ``cold`` is its own first run, its tables copied by then.
PostgreSQL's ``cold`` figures are each query's first run. On a shared machine wall time
varies with the load, so feedkv's first cold query is also given as the CPU seconds the
node used from the end of the load to its end (``group_by_cold_cpu_s``, from /proc): any
background copy, the wait and the query.

Both servers' answers must be the same rows (sorted), else the run fails: a fast wrong
answer is no result. feedkv is a ``feedkv start`` subprocess on loopback; PostgreSQL is
started by ``bench/kv.py``'s ``postgresql``. Progress goes to stderr; prints one JSON
object with the seconds per query, the ratio feedkv / PostgreSQL and whether each is
within the target.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from feedkv.testing.benches import bench_module
from feedkv.testing.node_process import NodeProcess

TARGET_RATIO = 3.0
REGIONS = 20
QUERIES = {
    "group_by": "SELECT customer_id, count(*), sum(amount) FROM orders GROUP BY customer_id",
    "join": "SELECT c.region, count(*), sum(o.amount) FROM orders o "
    "JOIN customers c ON o.customer_id = c.id GROUP BY c.region",
}
SCHEMA = {
    "feedkv": (
        "CREATE TABLE customers (id INT PRIMARY KEY, region STRING)",
        "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, amount INT)",
    ),
    "postgresql": (
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, region TEXT)",
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id BIGINT, amount BIGINT)",
    ),
}


# Each query's figures in the JSON: its name + suffix -> the key in run_queries' answer
_REPORTED = (
    ("s", "seconds"),
    ("cold_s", "cold_s"),
    ("cold_cpu_s", "cold_cpu_s"),
    ("after_write_s", "after_write_s"),
)


def say(message: str) -> None:
    print(f"[bench sql_analytic] {message}", file=sys.stderr, flush=True)


def write_csvs(files: Path, rows: int, customers: int) -> dict[str, Path]:
    """The two tables' rows as CSV files (deterministic: the same on every run)."""
    paths = {"customers": files / "customers.csv", "orders": files / "orders.csv"}
    with paths["customers"].open("w") as f:
        for i in range(customers):
            f.write(f"{i},region-{i % REGIONS:02d}\n")
    with paths["orders"].open("w") as f:
        for i in range(rows):
            f.write(f"{i},{(i * 7919) % customers},{i % 1000}\n")
    for path in paths.values():
        path.chmod(0o644)
    return paths


def load(name: str, url: str, csvs: dict[str, Path]) -> tuple[float, float]:
    """Create and fill the tables; the seconds it took, and when it ended
    (``time.perf_counter()``)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in SCHEMA[name]:
            conn.execute(statement)
        began = time.perf_counter()
        for table, path in csvs.items():
            if name == "feedkv":
                conn.execute(f"IMPORT INTO {table} CSV DATA ('file://{path}')")
            else:
                conn.execute(f"COPY {table} FROM '{path}' WITH (FORMAT csv)")
        if name == "postgresql":
            conn.execute("ANALYZE")
        ended = time.perf_counter()
        return ended - began, ended


def normalized(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows in one form for both servers (sum of INT is NUMERIC in both, but a driver
    may hand back int or Decimal), sorted."""
    return sorted(tuple(int(v) if isinstance(v, Decimal) else v for v in row) for row in rows)


def run_queries(
    url: str,
    repeat: int,
    write_rows: int,
    setup: tuple[str, ...] = (),
    loaded_at: float | None = None,
    cpu: tuple[Callable[[], float], float] | None = None,
) -> dict[str, Any]:
    """Per query: the first run (cold), the median of ``repeat`` more (warm), and one
    run after updating ``write_rows`` orders (after_write), with the rows it gave.
    ``loaded_at``: when the load ended (``time.perf_counter()``), where the first
    query's cold time starts (``None``: where the query starts); ``cpu``: the server's
    CPU seconds (a function) and what they were when the load ended, for the first
    query's ``cold_cpu_s``."""
    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in setup:
            conn.execute(statement)
        for name, sql in QUERIES.items():
            began = time.perf_counter() if loaded_at is None else loaded_at
            loaded_at = None
            rows = conn.execute(sql).fetchall()
            cold = time.perf_counter() - began
            cold_cpu = None if cpu is None else round(cpu[0]() - cpu[1], 3)
            cpu = None
            times = []
            for _ in range(repeat):
                began = time.perf_counter()
                rows = conn.execute(sql).fetchall()
                times.append(time.perf_counter() - began)
            conn.execute("UPDATE orders SET amount = amount + 1 WHERE id < %s", (write_rows,))
            began = time.perf_counter()
            after = conn.execute(sql).fetchall()
            after_write = time.perf_counter() - began
            out[name] = {
                **({} if cold_cpu is None else {"cold_cpu_s": cold_cpu}),
                "seconds": round(statistics.median(times), 3),
                "cold_s": round(cold, 3),
                "after_write_s": round(after_write, 3),
                "rows": normalized(rows),
                "rows_after_write": normalized(after),
            }
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench sql_analytic", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-rows", type=int, default=1000)
    parser.add_argument("--vectorize", choices=("on", "off"), default="on")
    parser.add_argument("--skip-postgresql", action="store_true")
    args = parser.parse_args(argv)
    kv = bench_module("kv")
    pg_bin = None if args.skip_postgresql else kv._find_pg_bin()
    result: dict[str, Any] = {
        "benchmark": "sql_analytic",
        "rows": args.rows,
        "customers": args.customers,
        "repeat": args.repeat,
        "write_rows": args.write_rows,
        "vectorize": args.vectorize,
        "cores": os.cpu_count(),
        "queries": QUERIES,
    }
    answers: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-analytic-") as name:
        tmp = Path(name)
        tmp.chmod(0o755)  # PostgreSQL (as nobody) reaches the CSV files
        files = tmp / "files"
        files.mkdir()
        files.chmod(0o755)
        csvs = write_csvs(files, args.rows, args.customers)
        node = NodeProcess(tmp / "store", "--external-io-dir", str(files))
        try:
            seconds, loaded_at = load("feedkv", node.sql_url, csvs)
            node_cpu = functools.partial(bench_module("kv").cpu_seconds, node.process.pid)
            cpu_at_load = node_cpu()
            say(f"feedkv loaded {args.rows:,} orders in {seconds:.1f} s")
            result["feedkv_load_s"] = round(seconds, 1)
            answers["feedkv"] = run_queries(
                node.sql_url,
                args.repeat,
                args.write_rows,
                (f"SET vectorize = {args.vectorize}",),
                loaded_at,
                (node_cpu, cpu_at_load),
            )
            say(f"feedkv: { ({q: a['seconds'] for q, a in answers['feedkv'].items()}) }")
        finally:
            node.process.terminate()
            node.process.wait(timeout=60)
        pg_dir = tmp / "pg"
        pg_dir.mkdir()
        with kv.postgresql(pg_bin, pg_dir) if pg_bin else contextlib.nullcontext() as pg_url:
            if pg_url:
                seconds, _loaded_at = load("postgresql", pg_url, csvs)
                result["postgresql_load_s"] = round(seconds, 1)
                answers["postgresql"] = run_queries(pg_url, args.repeat, args.write_rows)
                say(
                    f"postgresql: { ({q: a['seconds'] for q, a in answers['postgresql'].items()}) }"
                )
    for server, found in answers.items():
        result[server] = {
            f"{q}_{kind}": a[key] for q, a in found.items() for kind, key in _REPORTED if key in a
        }
    if "postgresql" not in answers:
        result["postgresql"] = {"skipped": "--skip-postgresql or PostgreSQL not installed"}
    else:
        ours, theirs = answers["feedkv"], answers["postgresql"]
        wrong = [
            q
            for q in QUERIES
            if ours[q]["rows"] != theirs[q]["rows"]
            or ours[q]["rows_after_write"] != theirs[q]["rows_after_write"]
        ]
        if wrong:
            raise RuntimeError(f"feedkv and PostgreSQL answered differently: {wrong}")
        ratios = {
            q: round(ours[q]["seconds"] / max(theirs[q]["seconds"], 1e-6), 1) for q in QUERIES
        }
        result["same_answers"] = True
        result["ratio_vs_postgresql"] = ratios  # warm
        result["ratio_vs_postgresql_cold"] = {
            q: round(ours[q]["cold_s"] / max(theirs[q]["cold_s"], 1e-6), 1) for q in QUERIES
        }
        result["ratio_vs_postgresql_after_write"] = {
            q: round(ours[q]["after_write_s"] / max(theirs[q]["after_write_s"], 1e-6), 1)
            for q in QUERIES
        }
        result["target_ratio"] = TARGET_RATIO
        result["targets_met"] = {q: r <= TARGET_RATIO for q, r in ratios.items()}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
