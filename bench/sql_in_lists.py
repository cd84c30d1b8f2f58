"""`feedkv bench sql_in_lists`: what ORMs write for a batch of lookups, on an embedded
store: ``WHERE id IN (1,000 ids)`` (SQLAlchemy's ``in_()``, Django's ``__in``),
``WHERE id = ANY ($1)`` with a 1,000-element array (asyncpg), ``NOT IN`` the same ids,
and the same lists on an indexed column ``v``, over a table of ``--rows`` rows.

Each statement runs once to plan it, then once timed. Prints one JSON object: per
statement its seconds and the count it found (every listed id is a row).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import feedkv

__all__ = ["main", "run"]


def run(rows: int, listed: int = 1000) -> dict[str, Any]:
    """Times the statements over a table of ``rows`` rows, listing ``listed`` ids (every
    other one from 0: ``rows`` must be at least ``2 * listed``)."""
    if rows < 2 * listed:
        raise ValueError(f"--rows {rows} holds fewer than the {listed} listed ids")
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-in-") as directory:
        db = feedkv.connect(directory)
        try:
            db.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT, INDEX (v))")
            for start in range(0, rows, 1000):
                values = ", ".join(f"({i}, {i})" for i in range(start, min(rows, start + 1000)))
                db.sql(f"INSERT INTO t VALUES {values}")
            ids = list(range(0, 2 * listed, 2))
            in_list = ", ".join(map(str, ids))
            array = "{" + ",".join(map(str, ids)) + "}"
            statements: dict[str, tuple[str, tuple[Any, ...]]] = {
                "id_in": (f"SELECT count(*) FROM t WHERE id IN ({in_list})", ()),
                "id_any": ("SELECT count(*) FROM t WHERE id = ANY ($1)", (array,)),
                "id_not_in": (f"SELECT count(*) FROM t WHERE id NOT IN ({in_list})", ()),
                "v_in": (f"SELECT count(*) FROM t WHERE v IN ({in_list})", ()),
                "v_any": ("SELECT count(*) FROM t WHERE v = ANY ($1)", (array,)),
            }
            out: dict[str, Any] = {"rows": rows, "listed": listed}
            for name, (statement, params) in statements.items():
                db.sql(statement, *params)
                started = time.perf_counter()
                ((count,),) = db.sql(statement, *params).rows
                out[name] = {"s": round(time.perf_counter() - started, 4), "count": count}
            return out
        finally:
            db.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench sql_in_lists", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--listed", type=int, default=1000)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.rows, args.listed), indent=2))
    return 0
