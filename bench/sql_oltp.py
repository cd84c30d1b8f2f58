"""`feedkv bench sql_oltp`: a small OLTP mix through pgbench, against feedkv's SQL port
and against PostgreSQL, side by side in one run.

Schema: ``customers`` (10k rows: a primary key, a UNIQUE ``code``, a CHECK on
``visits``) and ``orders`` (a generated key, a FOREIGN KEY to ``customers``, an index
on ``customer_id``). Each transaction (``BEGIN ... COMMIT``, ``-M prepared``):

1. a point read by primary key,
2. a point read through the unique secondary index (``WHERE code = ...``),
3. an UPDATE of that customer (the CHECK is evaluated),
4. an INSERT into ``orders`` (the foreign key is checked, the index entry written),
5. a read of the customer's orders through the ``customer_id`` index.

Both servers commit durably: feedkv is a ``feedkv start`` subprocess, PostgreSQL runs
with synchronous_commit on, as ``feedkv bench pgwire`` starts them. Without PostgreSQL
or pgbench, the row says why.

Prints one JSON object: TPS and latency p50/p99 per server, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import psycopg

from feedkv.testing.benches import bench_module

CUSTOMERS = 10_000
SCRIPT = (
    f"\\set c random(1, {CUSTOMERS})\n"
    "\\set amount random(1, 1000)\n"
    "BEGIN;\n"
    "SELECT name, visits FROM customers WHERE id = :c;\n"
    "SELECT id FROM customers WHERE code = :c * 7;\n"
    "UPDATE customers SET visits = visits + 1 WHERE id = :c;\n"
    "INSERT INTO orders (customer_id, amount) VALUES (:c, :amount);\n"
    "SELECT amount FROM orders WHERE customer_id = :c;\n"
    "END;\n"
)
SCHEMA = {
    "feedkv": [
        "CREATE TABLE customers (id INT PRIMARY KEY, code INT NOT NULL UNIQUE, name STRING, "
        "visits INT NOT NULL CHECK (visits >= 0))",
        "CREATE TABLE orders (id SERIAL PRIMARY KEY, customer_id INT NOT NULL "
        "REFERENCES customers (id), amount INT, INDEX orders_customer (customer_id))",
    ],
    "postgresql": [
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, code BIGINT NOT NULL UNIQUE, "
        "name TEXT, visits BIGINT NOT NULL CHECK (visits >= 0))",
        "CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, customer_id BIGINT NOT NULL "
        "REFERENCES customers (id), amount BIGINT)",
        "CREATE INDEX orders_customer ON orders (customer_id)",
    ],
}


def load(url: str, server: str) -> None:
    """The schema and the customers, in batches of 500 rows."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in SCHEMA[server]:
            conn.execute(statement)
        for start in range(1, CUSTOMERS + 1, 500):
            ids = range(start, min(start + 500, CUSTOMERS + 1))
            values = ", ".join(f"({i}, {i * 7}, 'customer {i}', 0)" for i in ids)
            conn.execute(f"INSERT INTO customers (id, code, name, visits) VALUES {values}")


def orders_written(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT count(*) FROM orders").fetchone()
    return {"orders_written": found[0] if found else None}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench sql_oltp", description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-postgresql", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "sql_oltp",
        "workload": "pgbench -n -M prepared; per transaction: a primary key read, a unique "
        "index read, an UPDATE under a CHECK, an INSERT under a foreign key and an index, "
        f"an index range read; {CUSTOMERS} customers",
        "clients": args.clients,
        "seconds": args.seconds,
        "cores": os.cpu_count(),
    }
    pgwire = bench_module("pgwire")
    workload = pgwire.Workload("oltp", SCRIPT, load, orders_written)
    pgwire.side_by_side(result, workload, args.clients, args.seconds, skip_pg=args.skip_postgresql)
    print(json.dumps(result, indent=2))
    return 0
