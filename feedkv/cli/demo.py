"""``feedkv demo``: the main job, end to end, on an embedded store and local Spark.

A MovR-like scenario:

1. An embedded store with ``vehicles`` and ``rides`` tables and a fleet loaded.
2. ``CREATE CHANGEFEED FOR TABLE vehicles, rides INTO 'file://...'``: a job running as a
   Spark Structured Streaming query, writing JSON files and resolved markers.
3. A workload of inserts (rides start), updates (rides end, vehicles move) and deletes
   (rides cancelled) while a progress display shows rows written, the high-water mark
   and the lag.
4. The data-warehouse job on the same Spark: once the changefeed's resolved markers
   pass the end of a minute, that minute's changes are written as a Parquet bucket (a
   bucket is written only when every partition is resolved past it).
5. Verification: the newest version of each row in the changefeed files at the final
   resolved timestamp equals ``SELECT ... AS OF SYSTEM TIME`` that timestamp, and the
   buckets hold every change they cover.
"""

from __future__ import annotations

import datetime
import glob
import json
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

import feedkv
from feedkv import DB
from feedkv.util.hlc import Timestamp

__all__ = ["run_demo"]

CITIES = ["amsterdam", "boston", "los angeles", "new york", "paris", "rome", "seattle"]
TYPES = ["bike", "scooter", "skateboard"]
FLEET = 300
BUCKET_NS = 60 * 1_000_000_000
MIN_SECONDS = 20.0
CATCH_UP_TIMEOUT_S = 120.0


class _Workload:
    """Rides starting, ending and being cancelled; vehicles moving and charging."""

    def __init__(self, db: DB, seed: int = 7) -> None:
        self.db = db
        self.random = random.Random(seed)
        self.next_ride = 1
        self.open_rides: list[int] = []
        self.statements = 0
        self.stopped = threading.Event()

    def load(self) -> None:
        for start in range(0, FLEET, 50):
            values = ", ".join(
                f"({i}, '{self.random.choice(CITIES)}', '{self.random.choice(TYPES)}', "
                f"'available', {self.random.randint(20, 100)})"
                for i in range(start, min(start + 50, FLEET))
            )
            self.db.sql(f"INSERT INTO vehicles VALUES {values}")

    def step(self) -> None:
        r = self.random
        choice = r.random()
        if choice < 0.45 or not self.open_rides:
            ride, vehicle = self.next_ride, r.randrange(FLEET)
            self.next_ride += 1
            self.db.sql(
                "INSERT INTO rides (id, vehicle_id, city, start_time, revenue) "
                "VALUES ($1, $2, $3, now(), 0)",
                ride,
                vehicle,
                r.choice(CITIES),
            )
            self.db.sql("UPDATE vehicles SET status = 'in_use' WHERE id = $1", vehicle)
            self.open_rides.append(ride)
        elif choice < 0.9:
            ride = self.open_rides.pop(r.randrange(len(self.open_rides)))
            revenue = f"{r.uniform(2, 40):.2f}"
            self.db.sql(
                "UPDATE rides SET end_time = now(), revenue = $2 WHERE id = $1", ride, revenue
            )
            self.db.sql(
                "UPDATE vehicles SET status = 'available', battery = $2 WHERE id = $1",
                r.randrange(FLEET),
                r.randint(5, 100),
            )
        else:
            ride = self.open_rides.pop(r.randrange(len(self.open_rides)))
            self.db.sql("DELETE FROM rides WHERE id = $1", ride)
        self.statements += 1

    def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.stopped.is_set():
            self.step()


def _changefeed_messages(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every message of the changefeed files, by table."""
    found: dict[str, list[dict[str, Any]]] = {"vehicles": [], "rides": []}
    for path in sorted(glob.glob(str(out / "*" / "*.ndjson"))):
        table = "rides" if "-rides-" in Path(path).name else "vehicles"
        with open(path) as f:
            found[table].extend(json.loads(line) for line in f if line.strip())
    return found


class _MessageCount:
    """Counts the changefeed's messages for the display: published files never change,
    so each is read once."""

    def __init__(self, out: Path) -> None:
        self._out = out
        self._lines: dict[str, int] = {}

    def __call__(self) -> int:
        for path in glob.glob(str(self._out / "*" / "*.ndjson")):
            if path not in self._lines:
                with open(path, "rb") as f:
                    self._lines[path] = sum(1 for _ in f)
        return sum(self._lines.values())


def _resolved(out: Path) -> Timestamp | None:
    markers = glob.glob(str(out / "*" / "*.RESOLVED"))
    if not markers:
        return None
    newest = max(markers, key=lambda p: Path(p).name)  # names sort by timestamp
    return Timestamp.parse(json.loads(Path(newest).read_text())["resolved"])


def _progress(
    workload: _Workload, messages: _MessageCount, job: Any, started: float, phase: str
) -> Table:
    table = Table(title=f"feedkv demo: {phase}", show_header=False)
    high = job.high_water if job is not None else None
    lag = (time.time_ns() - high.wall) / 1e9 if high is not None and high.wall else None
    table.add_row("statements run", f"{workload.statements:,}")
    table.add_row("changefeed rows written", f"{messages():,}")
    table.add_row("high-water mark", str(high) if high is not None else "-")
    table.add_row("lag (now - high water)", f"{lag:.1f} s" if lag is not None else "-")
    table.add_row("elapsed", f"{time.monotonic() - started:.0f} s")
    return table


def _verify(db: DB, out: Path, resolved: Timestamp) -> dict[str, tuple[int, int]]:
    """Rows per table from the changefeed files at ``resolved`` vs the store as of then;
    raises if they differ."""
    results = {}
    messages = _changefeed_messages(out)
    for table, rows in messages.items():
        newest: dict[Any, tuple[Timestamp, dict[str, Any] | None]] = {}
        for message in rows:
            ts = Timestamp.parse(message["updated"])
            if ts > resolved:
                continue
            key = tuple(message["key"])
            if key not in newest or newest[key][0] <= ts:
                newest[key] = (ts, message["after"])
        from_feed = {k: v for k, (_ts, v) in newest.items() if v is not None}
        result = db.sql(f"SELECT * FROM {table} AS OF SYSTEM TIME '{resolved}'")
        from_store = {}
        for row in result.rows:
            record = dict(zip(result.columns, row, strict=True))
            from_store[(record["id"],)] = record
        if set(from_feed) != set(from_store):
            missing = len(set(from_store) - set(from_feed))
            extra = len(set(from_feed) - set(from_store))
            raise RuntimeError(
                f"{table}: the changefeed disagrees with the store at {resolved}: "
                f"{missing} rows missing, {extra} rows that should not exist"
            )
        results[table] = (len(rows), len(from_store))
    return results


def _warehouse(spark: Any, out: Path, warehouse: Path, resolved: Timestamp) -> dict[str, int]:
    """Writes each minute bucket whose end every partition is resolved past as Parquet
    (one directory per table, partitioned by minute); returns rows written per table."""
    from pyspark.sql import functions as F

    complete_before = (resolved.wall // BUCKET_NS) * BUCKET_NS  # buckets ending by then
    written = {}
    for table in ("vehicles", "rides"):
        files = glob.glob(str(out / "*" / f"*-{table}-*.ndjson"))
        if not files:
            written[table] = 0
            continue
        df = spark.read.json(files)
        wall = F.col("updated").substr(1, 19).cast("long")
        bucketed = (
            df.where(wall < F.lit(complete_before))
            .withColumn("minute", F.from_unixtime((wall / BUCKET_NS).cast("long") * 60))
            .select("minute", "updated", "key", "after.*")
            .dropDuplicates(["key", "updated"])
        )
        written[table] = bucketed.count()
        if written[table]:
            bucketed.write.mode("overwrite").partitionBy("minute").parquet(str(warehouse / table))
    return written


def run_demo(store: Path, *, seconds: float) -> int:
    console = Console()
    shutil.rmtree(store, ignore_errors=True)
    out = store / "output" / "changefeed"
    warehouse = store / "output" / "warehouse"
    now = time.time()
    to_boundary = BUCKET_NS / 1e9 - (now % (BUCKET_NS / 1e9))
    seconds = max(seconds, MIN_SECONDS, to_boundary + 2)  # at least one whole minute ends
    console.print(f"[bold]feedkv demo[/]: store {store}, workload for {seconds:.0f} s")
    db = feedkv.connect(store / "data")
    try:
        db.sql(
            "CREATE TABLE vehicles (id INT PRIMARY KEY, city STRING, type STRING, "
            "status STRING, battery INT)"
        )
        db.sql(
            "CREATE TABLE rides (id INT PRIMARY KEY, vehicle_id INT, city STRING, "
            "start_time TIMESTAMPTZ, end_time TIMESTAMPTZ, revenue DECIMAL(10,2))"
        )
        workload = _Workload(db)
        workload.load()
        started = time.monotonic()
        console.print("starting the changefeed job on local Spark ...")
        job_id = db.sql(
            f"CREATE CHANGEFEED FOR TABLE vehicles, rides INTO 'file://{out}' "
            "WITH updated, key_in_value, resolved = '1s', min_checkpoint_frequency = '1s'"
        ).rows[0][0]
        job = db.changefeeds.get(job_id)
        count = _MessageCount(out)
        writer = threading.Thread(target=workload.run, args=(seconds,), daemon=True)
        writer.start()
        with Live(console=console, refresh_per_second=2) as live:
            while writer.is_alive():
                writer.join(0.5)
                live.update(_progress(workload, count, job, started, "workload running"))
            end = db.now()
            deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
            while (
                (_resolved(out) or Timestamp(0, 0)) < end
                and time.monotonic() < deadline
                and db.changefeeds.error(job_id) is None
            ):
                time.sleep(0.5)  # wait-ok: the display refreshes while the job catches up
                live.update(_progress(workload, count, job, started, "catching up"))
        failure = db.changefeeds.error(job_id)
        if failure is not None:
            console.print(f"[red]the changefeed job failed:[/] {failure}")
            return 1
        resolved = _resolved(out)
        if resolved is None or resolved < end:
            console.print("[red]the changefeed did not resolve past the workload in time[/]")
            return 1
        db.changefeeds.cancel(job_id)
        from feedkv.spark.session import spark_session

        buckets = _warehouse(spark_session(), out, warehouse, resolved)
        checked = _verify(db, out, resolved)
    finally:
        db.close()
    summary = Table(title="feedkv demo: done", show_header=True)
    summary.add_column("table")
    summary.add_column("changefeed messages", justify="right")
    summary.add_column("rows at resolved ts (verified)", justify="right")
    summary.add_column("rows in Parquet buckets", justify="right")
    for table, (messages, rows) in checked.items():
        summary.add_row(table, f"{messages:,}", f"{rows:,}", f"{buckets[table]:,}")
    console.print(summary)
    when = datetime.datetime.fromtimestamp(resolved.wall / 1e9, datetime.UTC)
    console.print(
        f"resolved up to {resolved} ({when:%H:%M:%S} UTC); {workload.statements:,} "
        f"statements in {seconds:.0f} s"
    )
    console.print(f"changefeed files: {out}")
    console.print(f"Parquet buckets:  {warehouse}")
    console.print("[green]verified[/]: the changefeed's rows equal SELECT ... AS OF SYSTEM TIME")
    return 0
