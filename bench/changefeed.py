"""`feedkv bench changefeed`: changefeed throughput and latency on an embedded store.

- initial scan: a table of ``--rows`` rows (default 1M) emitted by a sinkless
  changefeed (``initial_scan='only'``, rows read by the client) and by a ``null://``
  changefeed job; rows/s. Target: >= 100k rows/s.
- steady state: ``--writers`` sessions UPDATE rows for ``--seconds`` while a sinkless
  changefeed follows; the feed's rows/s against the commits/s, and whether every
  committed change arrived (it must keep up with the write rate). Run with the node's
  metrics on (and a scraper reading ``/_status/vars`` every ``--scrape-interval``
  seconds, as Prometheus would) and with them off (``feedkv.connect(metrics=False)``),
  alternately, ``--rounds`` times each on the same store: the cost of the metrics is
  how much lower the median commits/s is with them on, and how much more CPU time the
  process spends per commit (which other work on the machine disturbs less than the
  rate). Target: within 3%.
- latency: one writer at a light, fixed rate; from a commit's acknowledgement to its
  row reaching the sinkless client, p50/p99. Target: p50 <= 50 ms.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import feedkv
from feedkv.changefeed.sinkless import FeedResult
from feedkv.changefeed.thread_job import ThreadJob
from feedkv.kv.store import StoreConfig

TARGET_SCAN = 100_000
TARGET_P50_MS = 50.0
TARGET_METRICS_COST_PCT = 3.0
BATCH = 1000


def load(db: feedkv.DB, rows: int) -> float:
    db.sql("CREATE TABLE bench (k INT PRIMARY KEY, v STRING, n INT)")
    t0 = time.perf_counter()
    for lo in range(0, rows, BATCH):
        hi = min(rows, lo + BATCH)
        values = ", ".join(f"({i}, 'value-{i}', {i % 97})" for i in range(lo, hi))
        db.sql(f"INSERT INTO bench VALUES {values}")
        if hi % 50_000 == 0:
            print(f"loaded {hi:,} rows in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return time.perf_counter() - t0


def scan_sinkless(db: feedkv.DB, rows: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    result = db.sql("EXPERIMENTAL CHANGEFEED FOR bench WITH initial_scan='only'")
    assert isinstance(result, FeedResult)
    got = sum(1 for _ in result)
    seconds = time.perf_counter() - t0
    assert got == rows, f"the scan emitted {got} rows, expected {rows}"
    return {"rows": got, "seconds": round(seconds, 2), "rows_per_s": round(got / seconds)}


def scan_null(db: feedkv.DB, rows: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    (job_id,) = db.sql("CREATE CHANGEFEED FOR bench INTO 'null://' WITH initial_scan='only'").rows[
        0
    ]
    job = db.changefeeds.get(job_id)
    assert isinstance(job, ThreadJob), f"the benchmark runs jobs on threads, not {job!r}"
    db.changefeeds.wait(job_id)
    seconds = time.perf_counter() - t0
    got = job.changefeed.rows_emitted
    assert got == rows, f"the scan emitted {got} rows, expected {rows}"
    return {"rows": got, "seconds": round(seconds, 2), "rows_per_s": round(got / seconds)}


def steady(db: feedkv.DB, rows: int, writers: int, seconds: float) -> dict[str, Any]:
    cursor = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    result = db.sql(
        f"EXPERIMENTAL CHANGEFEED FOR bench WITH cursor='{cursor}', "
        "resolved='0s', min_checkpoint_frequency='0s'"
    )
    assert isinstance(result, FeedResult)
    received = 0
    done_writing = threading.Event()
    last_write: list[Any] = [None]

    def consume() -> None:
        nonlocal received
        for table, _key, _value in result:
            if table is not None:
                received += 1
            elif done_writing.is_set() and last_write[0] is not None:
                resolved = json.loads(_value)["resolved"]
                if resolved >= last_write[0]:
                    return

    consumer = threading.Thread(target=consume)
    consumer.start()
    commits = [0] * writers
    stop = time.monotonic() + seconds

    def write(w: int) -> None:
        session = db.session()
        i = w
        while time.monotonic() < stop:
            session.execute("UPDATE bench SET n = n + 1 WHERE k = $1", i % rows)
            commits[w] += 1
            i += writers

    t0 = time.perf_counter()
    cpu0 = time.process_time()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write_s = time.perf_counter() - t0
    last_write[0] = str(db.now())
    done_writing.set()
    received_during = received
    consumer.join(timeout=60)
    caught_up_s = time.perf_counter() - t0 - write_s
    cpu_s = time.process_time() - cpu0  # the node's whole process: writes, feed, scrapes
    result.close()
    total = sum(commits)
    return {
        "writers": writers,
        "commits_per_s": round(total / write_s),
        "cpu_us_per_commit": round(cpu_s / max(total, 1) * 1e6, 1),
        "rows_received": received,
        "received_during_run": round(received_during / max(total, 1), 3),
        "caught_up_after_s": round(caught_up_s, 2),
        "kept_up": received >= total,
    }


class Scraper:
    """Reads a node's ``/_status/vars`` every ``interval`` seconds, as Prometheus does."""

    def __init__(self, url: str, interval: float) -> None:
        self.scrapes = 0
        self._url = url + "/_status/vars"
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.wait(self._interval):
                client.get(self._url).raise_for_status()
                self.scrapes += 1

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.scrapes


def open_node(path: Path, *, metrics: bool = True) -> feedkv.DB:
    # NB: the changefeed core alone; `feedkv bench spark` measures jobs on Spark.
    return feedkv.connect(
        path,
        config=StoreConfig(),
        changefeed_runner="thread",
        metrics=metrics,
        http_addr="127.0.0.1:0" if metrics else None,
    )


def metrics_cost(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Steady state with the node's metrics on and off, alternately (see the module's
    docstring), each run on the store at ``path`` reopened."""
    runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    # NB: a first run after the load is slower whatever the mode (caches, the store's
    # first compactions): one is run, and not counted, so it skews neither side
    db = open_node(path)
    try:
        steady(db, args.rows, args.writers, min(args.seconds, 2.0))
    finally:
        db.close()
    for round_ in range(args.rounds):
        order = (True, False) if round_ % 2 == 0 else (False, True)
        for metrics in order:
            db = open_node(path, metrics=metrics)
            try:
                scraper = None
                if metrics and db.node is not None:
                    scraper = Scraper(db.node.http_url, args.scrape_interval)
                run = steady(db, args.rows, args.writers, args.seconds)
                if scraper is not None:
                    run["scrapes"] = scraper.stop()
            finally:
                db.close()
            runs["on" if metrics else "off"].append(run)
            print(f"steady state, metrics {'on' if metrics else 'off'}: {run}", file=sys.stderr)

    def summary(mode: str) -> dict[str, Any]:
        rates = [r["commits_per_s"] for r in runs[mode]]
        cpu = [r["cpu_us_per_commit"] for r in runs[mode]]
        return {
            "commits_per_s": round(statistics.median(rates)),
            "commits_per_s_range": [min(rates), max(rates)],
            "cpu_us_per_commit": round(statistics.median(cpu), 1),
            "cpu_us_per_commit_range": [min(cpu), max(cpu)],
            "kept_up": all(r["kept_up"] for r in runs[mode]),
        }

    on, off = summary("on"), summary("off")
    on["scrape_interval_s"] = args.scrape_interval
    return {
        "metrics_on": on,
        "metrics_off": off,
        "metrics_cost_pct": {
            "commits_per_s": _pct(off["commits_per_s"] - on["commits_per_s"], off["commits_per_s"]),
            "cpu_per_commit": _pct(
                on["cpu_us_per_commit"] - off["cpu_us_per_commit"], off["cpu_us_per_commit"]
            ),
        },
        "target_metrics_cost_pct": TARGET_METRICS_COST_PCT,
        "runs": runs,
    }


def _pct(part: float, whole: float) -> float | None:
    return round(part / whole * 100, 2) if whole else None


def latency(db: feedkv.DB, samples: int, interval: float) -> dict[str, Any]:
    cursor = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR bench WITH cursor='{cursor}'")
    assert isinstance(result, FeedResult)
    acked: dict[str, float] = {}
    lags: list[float] = []

    def consume() -> None:
        for table, key, _value in result:
            if table is None:
                continue
            at = time.perf_counter()
            while key not in acked:  # the row can arrive before execute() returns
                time.sleep(0.0001)  # wait-ok: the writer records its ack right after
            lags.append(max(0.0, at - acked[key]) * 1e3)
            if len(lags) == samples:
                return

    consumer = threading.Thread(target=consume)
    consumer.start()
    session = db.session()
    pause = threading.Event()
    for i in range(samples):
        session.execute("UPDATE bench SET n = n + 1 WHERE k = $1", i)
        acked[f"[{i}]"] = time.perf_counter()
        pause.wait(interval)
    consumer.join(timeout=60)
    result.close()
    lags.sort()
    return {
        "samples": len(lags),
        "p50_ms": round(statistics.median(lags), 2),
        "p99_ms": round(lags[min(len(lags) - 1, int(len(lags) * 0.99))], 2),
        "target_p50_ms": TARGET_P50_MS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench changefeed")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="steady runs per metrics mode")
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument(
        "--steady-only", action="store_true", help="skip the scans and the latency runs"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.scrape_interval <= 0:
        parser.error("--rounds must be at least 1 and --scrape-interval more than 0")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        db = open_node(path)
        try:
            load_s = load(db, args.rows)
            record: dict[str, Any] = {
                "benchmark": "changefeed",
                "rows": args.rows,
                "load_seconds": round(load_s, 1),
            }
            if not args.steady_only:
                record["initial_scan_sinkless"] = scan_sinkless(db, args.rows)
                record["initial_scan_null_sink"] = scan_null(db, args.rows)
                record["target_scan_rows_per_s"] = TARGET_SCAN
        finally:
            db.close()
        record["steady_state"] = metrics_cost(path, args)
        if not args.steady_only:
            db = open_node(path)
            try:
                record["latency"] = latency(db, args.samples, 0.01)
            finally:
                db.close()
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
