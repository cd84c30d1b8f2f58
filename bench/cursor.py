"""`feedkv bench cursor`: what a SQL cursor over a large table holds, against a SELECT
of the same rows.

An embedded node (no fsync) gets a table of ``--rows`` rows of 100-byte strings; one
transaction then declares ``DECLARE c CURSOR FOR SELECT * FROM big``, fetches its first
100 rows, runs ``SELECT * FROM big`` (every row at once) and fetches the cursor's rest.
For each step: the Python memory it leaves held and its peak (``tracemalloc``: the
rows, the pages read, the plan; not LMDB's map), and its wall time, which tracemalloc
slows several times over (so the times compare steps, nothing else).

Prints one JSON object. A lazy cursor holds next to nothing after DECLARE and about a
scan page (1,024 rows) after its first FETCH, whatever the table's size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import feedkv
from feedkv.kv.store import StoreConfig

_MIB = 1 << 20


def _measured(step: Callable[[], Any]) -> tuple[dict[str, float], Any]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        kept = step()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - started
    return {
        "held_mib": round(held / _MIB, 3),
        "peak_mib": round(peak / _MIB, 3),
        "ms": round(seconds * 1000, 1),
    }, kept


def run(rows: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = feedkv.connect(Path(tmp) / "store", config=StoreConfig(sync=False))
        try:
            db.sql("CREATE TABLE big (id INT PRIMARY KEY, payload STRING)")
            for low in range(1, rows + 1, 10_000):
                high = min(low + 9_999, rows)
                db.sql(
                    "INSERT INTO big SELECT i, repeat('x', 100) "
                    f"FROM generate_series({low}, {high}) AS g(i)"
                )
            # An analytic query waits for the copy the inserts started building in the
            # background (feedkv.sql.columnar), which would otherwise allocate while a
            # step below is measured
            db.sql("SELECT count(*) FROM big")
            session = db.session()
            session.execute("BEGIN")
            declare, _ = _measured(
                lambda: session.execute("DECLARE c CURSOR FOR SELECT * FROM big")
            )
            first, page = _measured(lambda: session.execute("FETCH 100 FROM c"))
            select, everything = _measured(lambda: session.execute("SELECT * FROM big"))
            del everything
            rest, fetched = _measured(lambda: session.execute("FETCH ALL FROM c"))
            session.execute("COMMIT")
        finally:
            db.close()
    if len(page.rows) + len(fetched.rows) != rows:
        raise RuntimeError(f"the cursor gave {len(page.rows) + len(fetched.rows)} of {rows} rows")
    return {
        "benchmark": "cursor",
        "rows": rows,
        "declare": declare,
        "first_fetch_100": first,
        "select_all": select,
        "fetch_rest": rest,
        "note": (
            "held/peak: Python memory (tracemalloc) the step left held and at most used; "
            "a lazy cursor holds nothing after DECLARE and a scan page after its first "
            "FETCH, the SELECT every row. ms: wall time under tracemalloc."
        ),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench cursor", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.rows), indent=2))
    return 0
