"""``feedkv demo``: the main job, end to end, on an embedded store and local Spark.

A MovR-like scenario:

1. An embedded store with ``vehicles`` and ``rides`` tables and a fleet loaded.
2. ``CREATE CHANGEFEED FOR TABLE vehicles, rides INTO 'file://...'``: a job running as a
   Spark Structured Streaming query, writing JSON files and resolved markers.
3. A workload of inserts (rides start), updates (rides end, vehicles move) and deletes
   (rides cancelled) while a progress display shows rows written, the high-water mark
   and the lag.
4. The data-warehouse job on the same Spark, running beside the workload: it waits for
   the changefeed's resolved markers, and once they pass the end of a minute it writes
   that minute's changes as a Parquet bucket (a bucket is written only when every
   partition is resolved past it, so it is complete and never rewritten).
5. A second changefeed lands the rides in a Delta Lake table (``delta://``, a mirror
   of the table committed once per resolved window), on a cluster too.
6. Verification: the newest version of each row in the changefeed files at the final
   resolved timestamp equals ``SELECT ... AS OF SYSTEM TIME`` that timestamp, column by
   column, and the buckets hold every change they cover, once. DuckDB, with its Delta
   extension, reads the Delta table at the lake's last resolved timestamp: its rows,
   and a query of revenue by city, equal the store's as of that timestamp.
"""

from __future__ import annotations

import datetime
import decimal
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
import feedkv.lake
from feedkv import DB
from feedkv.changefeed.encoder import json_any
from feedkv.errors import AmbiguousResultError
from feedkv.util.hlc import Timestamp

__all__ = ["run_demo"]

CITIES = ["amsterdam", "boston", "los angeles", "new york", "paris", "rome", "seattle"]
TYPES = ["bike", "scooter", "skateboard"]
FLEET = 300
TABLES = ("vehicles", "rides")
BUCKET_S = 60
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
        self.ambiguous = 0  # statements in flight at a node that died: applied or not
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
            try:
                self.step()
            except AmbiguousResultError:
                # NB: as a CockroachDB client sees 40003 when its node dies mid-commit;
                # the check compares the changefeed with the tables, whatever happened
                self.ambiguous += 1


def _changefeed_messages(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every message of the changefeed files, by table (numbers as written: a DECIMAL
    keeps its digits)."""
    found: dict[str, list[dict[str, Any]]] = {table: [] for table in TABLES}
    for path in sorted(glob.glob(str(out / "*" / "*.ndjson"))):
        table = "rides" if "-rides-" in Path(path).name else "vehicles"
        with open(path) as f:
            found[table].extend(
                json.loads(line, parse_float=decimal.Decimal) for line in f if line.strip()
            )
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
    if workload.ambiguous:
        table.add_row("ambiguous (a node died)", f"{workload.ambiguous:,}")
    table.add_row("changefeed rows written", f"{messages():,}")
    table.add_row("high-water mark", str(high) if high is not None else "-")
    table.add_row("lag (now - high water)", f"{lag:.1f} s" if lag is not None else "-")
    table.add_row("elapsed", f"{time.monotonic() - started:.0f} s")
    return table


def _verify(db: DB, out: Path, resolved: Timestamp) -> dict[str, tuple[int, int]]:
    """Rows per table from the changefeed files at ``resolved`` vs the store as of then,
    column by column; raises if they differ. Returns (messages, rows) per table."""
    results = {}
    for table, messages in _changefeed_messages(out).items():
        newest: dict[Any, tuple[Timestamp, dict[str, Any] | None]] = {}
        for message in messages:
            ts = Timestamp.parse(message["updated"])
            key = tuple(message["key"])
            if ts <= resolved and (key not in newest or newest[key][0] <= ts):
                newest[key] = (ts, message["after"])
        from_feed = {k: v for k, (_ts, v) in newest.items() if v is not None}
        result = db.sql(f"SELECT * FROM {table} AS OF SYSTEM TIME '{resolved}'")
        from_store = {}
        for row in result.rows:
            # As the changefeed's JSON writes each value, read back the same way.
            record = {
                name: json.loads(json_any(value), parse_float=decimal.Decimal)
                for name, value in zip(result.columns, row, strict=True)
            }
            from_store[(record["id"],)] = record
        missing = sorted(set(from_store) - set(from_feed))
        extra = sorted(set(from_feed) - set(from_store))
        differ = sorted(
            k for k in set(from_feed) & set(from_store) if from_feed[k] != from_store[k]
        )
        if missing or extra or differ:
            first = differ[0] if differ else None
            raise RuntimeError(
                f"{table}: the changefeed disagrees with the store at {resolved}: "
                f"{len(missing)} rows missing, {len(extra)} rows that should not exist, "
                f"{len(differ)} rows with other values"
                + (f" (id {first[0]}: {from_feed[first]} vs {from_store[first]})" if first else "")
            )
        results[table] = (len(messages), len(from_store))
    return results


class _Warehouse:
    """The data-warehouse job: once the changefeed's resolved markers pass the end of a
    bucket (a minute), a Spark batch job appends that bucket's changes to Parquet (one
    directory per table, partitioned by bucket). A marker means every partition is
    resolved past it, so a bucket written is complete and is never written again."""

    def __init__(self, spark: Any, out: Path, root: Path, bucket_s: int) -> None:
        self.spark = spark
        self.out = out
        self.root = root
        self.bucket_ns = bucket_s * 1_000_000_000
        self.written_before = 0  # wall ns: every bucket ending by then is written
        self.rows = dict.fromkeys(TABLES, 0)
        self.error: BaseException | None = None

    def run(self, stop: threading.Event) -> None:
        """Write buckets as the markers pass them until ``stop`` is set."""
        try:
            while not stop.wait(0.5):
                self.step()
        except BaseException as exc:  # reported by run_demo
            self.error = exc

    def step(self) -> None:
        """Write every bucket the newest marker has passed and not written yet."""
        from pyspark.sql import functions as F

        resolved = _resolved(self.out)
        if resolved is None:
            return
        before = (resolved.wall // self.bucket_ns) * self.bucket_ns
        if before <= self.written_before:
            return
        for table in TABLES:
            files = glob.glob(str(self.out / "*" / f"*-{table}-*.ndjson"))
            if not files:
                continue
            wall = F.col("updated").substr(1, 19).cast("long")
            bucket = (wall / self.bucket_ns).cast("long") * (self.bucket_ns // 1_000_000_000)
            rows = (
                self.spark.read.json(files)
                .where((wall >= F.lit(self.written_before)) & (wall < F.lit(before)))
                .withColumn("bucket", F.from_unixtime(bucket, "yyyy-MM-dd'T'HH-mm-ss"))
                .select("bucket", "updated", "key", "after.*")
            )
            rows = rows.cache()
            written = rows.count()
            if written:
                # NB: a bucket written again (a step that failed halfway) replaces itself.
                (
                    rows.write.mode("overwrite")
                    .option("partitionOverwriteMode", "dynamic")
                    .partitionBy("bucket")
                    .parquet(str(self.root / table))
                )
            rows.unpersist()
            self.rows[table] += written
        self.written_before = before

    @property
    def buckets(self) -> int:
        return len({p.name for table in TABLES for p in (self.root / table).glob("bucket=*")})


def _verify_buckets(out: Path, warehouse: _Warehouse) -> None:
    """Every change the buckets cover is in them once; raises otherwise."""
    import pyarrow.parquet as pq

    for table, messages in _changefeed_messages(out).items():
        expected = sorted(
            (tuple(m["key"]), m["updated"])
            for m in messages
            if Timestamp.parse(m["updated"]).wall < warehouse.written_before
        )
        found = sorted(
            (tuple(key), updated)
            for path in glob.glob(str(warehouse.root / table / "*" / "*.parquet"))
            for key, updated in zip(
                *pq.read_table(path, columns=["key", "updated"]).to_pydict().values(),
                strict=True,
            )
        )
        if found != expected:
            raise RuntimeError(
                f"{table}: the Parquet buckets hold {len(found)} changes, the changefeed "
                f"files {len(expected)} before {warehouse.written_before}"
            )


_CITY_REVENUE = (
    "SELECT city, count(*) AS rides, count(end_time) AS ended, "
    "sum(CAST(revenue AS DECIMAL(10,2))) AS revenue FROM {source} GROUP BY city ORDER BY city"
)


def _by_city(rides: Any) -> list[tuple[Any, ...]]:
    """What :data:`_CITY_REVENUE` gives for ``rides`` (rows as dicts)."""
    totals: dict[str, list[Any]] = {}
    for ride in rides:
        total = totals.setdefault(ride["city"], [0, 0, decimal.Decimal(0)])
        total[0] += 1
        total[1] += ride["end_time"] is not None
        total[2] += ride["revenue"] or 0
    return [(city, *totals[city]) for city in sorted(totals)]


def _caught_up(out: Path, lake: str, end: Timestamp) -> bool:
    """Whether the changefeed files and the lake are resolved up to ``end``."""
    files = _resolved(out)
    if files is None or files < end:
        return False
    marker = feedkv.lake.read_consistent(lake)
    return marker is not None and marker.resolved >= end


def _show_lake(
    console: Console, lake: str, at: Timestamp, rides: int, by_city: list[tuple[Any, ...]]
) -> None:
    console.print(f"Delta table:      {lake.removeprefix('delta://')}/rides")
    cities = Table(
        title=f"DuckDB over the Delta table of rides at {at} ({rides:,} rides)", show_header=True
    )
    for name in ("city", "rides", "ended", "revenue"):
        cities.add_column(name, justify="left" if name == "city" else "right")
    for city, count, ended, revenue in by_city:
        cities.add_row(str(city), f"{count:,}", f"{ended:,}", f"{revenue:,.2f}")
    console.print(cities)
    console.print(
        "[green]verified[/]: the Delta table's rows and this query equal the store's "
        f"(SELECT ... AS OF SYSTEM TIME '{at}')"
    )


def _verify_lake(db: DB, lake: str) -> tuple[Timestamp, int, list[tuple[Any, ...]]]:
    """The Delta table of rides, read by DuckDB at the lake's last resolved timestamp,
    against the store as of then: every row, and revenue by city. Raises if they
    differ; returns the timestamp, the rows and the query's result."""
    marker = feedkv.lake.read_consistent(lake)
    if marker is None or "rides" not in marker.versions:
        raise RuntimeError(f"the Delta table of rides in {lake} has no resolved window")
    con = feedkv.lake.duckdb_connect()
    try:
        scan = feedkv.lake.duckdb_scan(lake, "rides", marker.versions["rides"])
        rows = con.execute(f"SELECT * FROM {scan}").arrow().read_all().to_pylist()
        by_city = con.execute(_CITY_REVENUE.format(source=scan)).fetchall()
    finally:
        con.close()
    from_lake = {
        r["id"]: {**r, "revenue": None if r["revenue"] is None else decimal.Decimal(r["revenue"])}
        for r in rows
    }
    at = f"'{marker.resolved}'"
    result = db.sql(f"SELECT * FROM rides AS OF SYSTEM TIME {at}")
    from_store = {
        record["id"]: record
        for record in (dict(zip(result.columns, row, strict=True)) for row in result.rows)
    }
    if from_lake != from_store:
        differ = sorted(
            k for k in from_lake.keys() | from_store.keys() if from_lake.get(k) != from_store.get(k)
        )
        first = differ[0]
        raise RuntimeError(
            f"rides: the Delta table disagrees with the store at {marker.resolved} on "
            f"{len(differ)} rows (id {first}: {from_lake.get(first)} vs {from_store.get(first)})"
        )
    # NB: the store's side summed here from its rows as of then (the same rows the lake's
    # are checked against above): feedkv's SQL refuses GROUP BY after AS OF SYSTEM TIME
    store_by_city = _by_city(from_store.values())
    if [tuple(row) for row in by_city] != store_by_city:
        raise RuntimeError(
            f"revenue by city: DuckDB over the Delta table gives {by_city}, the store "
            f"{store_by_city} at {marker.resolved}"
        )
    return marker.resolved, len(from_lake), by_city


class _Mover:
    """On a cluster, moves a random range to another node every ``every_s`` while the
    workload runs (the changefeed's rangefeeds follow each range to its new node)."""

    def __init__(self, db: DB, nodes: int, every_s: float = 2.0, seed: int = 11) -> None:
        self.db = db
        self.nodes = nodes
        self.every_s = every_s
        self.random = random.Random(seed)
        self.moves = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-mover", daemon=True)

    def start(self) -> None:
        if self.nodes > 1:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            ranges = self.db.ranges()
            info = self.random.choice(ranges)
            target = self.random.choice(
                [n for n in range(1, self.nodes + 1) if n != info.lease_holder]
            )
            try:
                self.db.relocate(info.span.start or b"\x00", target)
                self.moves += 1
            except feedkv.FeedKVError as exc:  # the range split or moved meanwhile
                print(f"demo: moving {info.span} to n{target}: {exc}")


class _Killer:
    """On a cluster of three or more nodes (every range replicated on three), SIGKILLs one
    node other than the demo's own (node 1) a third of the way through the workload, and
    starts it again ``down_s`` later: the changefeed carries on (its job is adopted if
    the node ran it) and the verification at the end shows nothing was lost."""

    def __init__(self, cluster: Any, seconds: float, down_s: float = 10.0, seed: int = 13) -> None:
        self.cluster = cluster
        self.at_s = seconds / 3
        self.down_s = down_s
        self.victim = random.Random(seed).randrange(1, len(cluster.processes)) + 1
        self.events: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-killer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        if self._stop.wait(self.at_s):
            return
        self.cluster.kill(self.victim - 1)
        self.events.append(f"killed node n{self.victim} (SIGKILL)")
        self._stop.wait(self.down_s)
        self.cluster.restart(self.victim - 1)
        self.events.append(f"restarted node n{self.victim}")


def run_demo(store: Path, *, seconds: float, bucket_s: int = BUCKET_S, nodes: int = 1) -> int:
    """The demo on an embedded store, or (``nodes`` > 1) on a local cluster of that many
    ``feedkv start`` processes: on two, ranges are moved between the nodes while the
    changefeed job runs; on three or more, every range has three replicas and a node is
    killed and restarted while it runs."""
    console = Console()
    store = store.resolve()  # NB: the sink URI needs an absolute path (file:///dir)
    shutil.rmtree(store, ignore_errors=True)
    out = store / "output" / "changefeed"
    warehouse_dir = store / "output" / "warehouse"
    # NB: on a cluster both jobs are created through node 1, which adopts them at once and
    # is never the node killed, so they share its one Spark (two would not fit two cores)
    lake = f"delta://{store / 'output' / 'lake'}"
    now = time.time()
    to_boundary = bucket_s - now % bucket_s
    # At least one whole bucket ends (its minute, by default) while the workload runs.
    seconds = max(seconds, min(MIN_SECONDS, 2 * bucket_s), to_boundary + 2)
    where = f"a cluster of {nodes} nodes under {store}" if nodes > 1 else f"store {store}"
    console.print(f"[bold]feedkv demo[/]: {where}, workload for {seconds:.0f} s")
    cluster = None
    if nodes > 1:
        from feedkv.testing.cluster import LocalCluster

        replicas = 3 if nodes >= 3 else 1
        console.print(f"starting {nodes} nodes, {replicas} replica(s) per range ...")
        cluster = LocalCluster(
            store / "nodes",
            nodes,
            "--changefeed-runner",
            "spark",
            "--replicas",
            str(replicas),
            # NB: the sinks write below the store, wherever it is (not only under /tmp)
            "--external-io-dir",
            str(store / "output"),
        )
        db = cluster.connect(0)
        if replicas > 1:
            while not all(len(r.replicas) == replicas for r in db.ranges()):
                time.sleep(0.2)  # wait-ok: the nodes replicate the first ranges
    else:
        db = feedkv.connect(store / "data")
    mover = _Mover(db, nodes if nodes == 2 else 1)
    killer = _Killer(cluster, seconds) if cluster is not None and nodes >= 3 else None
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
        lake_job = db.sql(
            f"CREATE CHANGEFEED FOR TABLE rides INTO '{lake}' WITH min_checkpoint_frequency = '1s'"
        ).rows[0][0]
        jobs = [job_id, lake_job]
        count = _MessageCount(out)
        from feedkv.spark.session import spark_session

        warehouse = _Warehouse(spark_session(), out, warehouse_dir, bucket_s)
        stop = threading.Event()
        buckets = threading.Thread(target=warehouse.run, args=(stop,), daemon=True)
        buckets.start()
        writer = threading.Thread(target=workload.run, args=(seconds,), daemon=True)
        writer.start()
        mover.start()
        if killer is not None:
            killer.start()
        with Live(console=console, refresh_per_second=2) as live:
            while writer.is_alive():
                writer.join(0.5)
                live.update(_progress(workload, count, job, started, "workload running"))
            mover.stop()
            end = db.now()
            deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
            while (
                not _caught_up(out, lake, end)
                and time.monotonic() < deadline
                and all(db.changefeeds.error(j) is None for j in jobs)
            ):
                time.sleep(0.5)  # wait-ok: the display refreshes while the job catches up
                live.update(_progress(workload, count, job, started, "catching up"))
        stop.set()
        buckets.join()
        failure = next((e for j in jobs if (e := db.changefeeds.error(j)) is not None), None)
        if warehouse.error is not None:
            console.print(f"[red]the data-warehouse job failed:[/] {warehouse.error}")
            return 1
        if failure is not None:
            console.print(f"[red]the changefeed job failed:[/] {failure}")
            return 1
        resolved = _resolved(out)
        if resolved is None or not _caught_up(out, lake, end):
            console.print("[red]the changefeed did not resolve past the workload in time[/]")
            return 1
        for j in jobs:
            db.changefeeds.cancel(j)
        warehouse.step()  # the buckets the last marker completed
        checked = _verify(db, out, resolved)
        _verify_buckets(out, warehouse)
        in_lake = _verify_lake(db, lake)
    finally:
        mover.stop()
        if killer is not None:
            killer.stop()
        db.close()
        if cluster is not None:
            cluster.close()
    for event in killer.events if killer is not None else ():
        console.print(f"while the changefeed ran: {event}")
    if mover.moves:
        console.print(f"moved ranges between the nodes {mover.moves} times while the job ran")
    summary = Table(title="feedkv demo: done", show_header=True)
    summary.add_column("table")
    summary.add_column("changefeed messages", justify="right")
    summary.add_column("rows at resolved ts (verified)", justify="right")
    summary.add_column("changes in Parquet buckets (verified)", justify="right")
    for table, (messages, rows) in checked.items():
        summary.add_row(table, f"{messages:,}", f"{rows:,}", f"{warehouse.rows[table]:,}")
    console.print(summary)
    when = datetime.datetime.fromtimestamp(resolved.wall / 1e9, datetime.UTC)
    console.print(
        f"resolved up to {resolved} ({when:%H:%M:%S} UTC); {workload.statements:,} "
        f"statements in {seconds:.0f} s"
    )
    console.print(f"changefeed files: {out}")
    console.print(f"Parquet buckets:  {warehouse_dir} ({warehouse.buckets} of {bucket_s} s each)")
    _show_lake(console, lake, *in_lake)
    verified = "[green]verified[/]: the changefeed's rows equal SELECT ... AS OF SYSTEM TIME"
    if warehouse.buckets:
        console.print(f"{verified}, and the buckets hold every change they cover once")
    else:
        # NB: say so rather than claim a check that had nothing to check
        console.print(
            f"{verified}; no Parquet bucket ended before the changefeed's last resolved "
            "marker, so none was checked (run longer: --seconds)"
        )
    return 0
