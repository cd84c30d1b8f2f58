"""`feedkv bench spark`: changefeed jobs run as Spark Structured Streaming queries
(``--master``, default ``local[2]``) writing files on the local disk.

- initial scan: a table of ``--rows`` rows (default 1M) written into Parquet files by
  ``CREATE CHANGEFEED ... INTO 'file://...' WITH format=parquet, initial_scan='only'``,
  from the statement until the job has ended; rows/s. The files' rows are then counted
  and their keys checked against the table. A one-row job runs first so the scan does
  not pay for starting Spark (that is ``spark_start_s``). Target: >= 108k rows/s (issue
  47: twice the 54k measured when it was filed).
- steady state: ``--writers`` client processes (a session each, over gRPC, as an
  application's would be) UPDATE ``--batch`` rows a statement at an offered ``--rate``
  rows/s (default 20k) for ``--seconds`` while a JSON job (``WITH updated,
  resolved='1s', min_checkpoint_frequency=<--checkpoint-frequency>``) follows the
  table. Committed and delivered rows/s, and the lag from commit to file: from a row's
  ``updated`` timestamp (its commit's wall time) to the moment a poll of the sink
  directory found the file holding it, p50/p99. Target (issue 47): 20k rows/s sustained
  (committed, every row delivered, the lag not growing over the run) with p50 lag
  <= 1.5 s.

  The file sink is exactly-once: a batch publishes the window up to a resolved
  timestamp, so a row waits for its range's closed timestamp (the table's
  ``closed_timestamp_target`` behind now), then for the next trigger
  (``min_checkpoint_frequency``), then for its batch to be written. With the node's
  defaults (1 s and 1 s) the p50 lag is 2.3-2.8 s on two cores, most of it those two
  waits; the bench runs the low-latency configuration a user would choose for such a
  feed, ``--closed-ts-target 300ms`` (``ALTER TABLE ... CONFIGURE ZONE USING
  closed_timestamp_target``) and ``--checkpoint-frequency 300ms``. Pass ``1s`` to both
  for the defaults.

Loading the table is timed apart (``load_seconds``). Progress goes to stderr; prints
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

import feedkv

TARGET_SCAN_ROWS_PER_S = 108_000
TARGET_STEADY_ROWS_PER_S = 20_000
TARGET_P50_LAG_S = 1.5
# The offered rate counts as reached at 95% of it: pacing and the last partial second
# lose a little.
REACHED = 0.95
LOAD_BATCH = 1000
STAGING = ".feedkv"  # the file sink's staging files and manifests, not output
WRITER_START_S = 3.0  # for the writer processes to start before the first UPDATE

# NB: one statement text with placeholders for every batch: the SQL layer caches parses
# by text, and parsing a literal 1000-row VALUES list costs as much as running it.
INSERT = "INSERT INTO bench VALUES " + ", ".join(
    f"(${3 * j + 1}, ${3 * j + 2}, ${3 * j + 3})" for j in range(LOAD_BATCH)
)
UPDATE = "UPDATE bench SET n = n + 1 WHERE k >= $1 AND k < $2"


def say(message: str) -> None:
    print(f"[bench spark] {message}", file=sys.stderr, flush=True)


def run_threads(work: Callable[[int], None], count: int, what: str) -> None:
    """Run ``work(0)`` .. ``work(count - 1)`` in threads; raise the first failure."""
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            work(n)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{what} failed: {errors[0]!r}") from errors[0]


def load(db: feedkv.DB, rows: int, loaders: int) -> float:
    """Insert ``rows`` rows from ``loaders`` threads (a session each); the seconds taken."""
    if rows % LOAD_BATCH:
        raise ValueError(f"--rows {rows} must be a multiple of {LOAD_BATCH}")
    db.sql("CREATE TABLE bench (k INT PRIMARY KEY, v STRING, n INT)")
    loaded = [0] * loaders
    t0 = time.perf_counter()

    def insert(n: int) -> None:
        session = db.session()
        try:
            for lo in range(n * LOAD_BATCH, rows, loaders * LOAD_BATCH):
                params: list[Any] = []
                for k in range(lo, lo + LOAD_BATCH):
                    params += (k, f"value-{k}", k % 97)
                session.execute(INSERT, *params)
                loaded[n] += LOAD_BATCH
                if n == 0 and (lo // LOAD_BATCH) % 100 == 0:
                    elapsed = time.perf_counter() - t0
                    say(f"loaded {sum(loaded):,} rows in {elapsed:.0f} s")
        finally:
            session.close()

    run_threads(insert, loaders, "loading")
    return time.perf_counter() - t0


def run_job(db: feedkv.DB, statement: str, timeout: float) -> float:
    """Run a job that ends by itself; the seconds from the statement to its end."""
    t0 = time.perf_counter()
    (job_id,) = db.sql(statement).rows[0]
    if not db.changefeeds.wait(job_id, timeout):
        raise RuntimeError(f"changefeed job {job_id} did not end within {timeout:.0f} s")
    seconds = time.perf_counter() - t0
    error = db.changefeeds.error(job_id)
    if error is not None:
        raise RuntimeError(f"changefeed job {job_id} failed: {error}")
    return seconds


def output_files(root: Path, suffix: str) -> list[Path]:
    """Published files under ``root`` whose names end with ``suffix``, in name order."""
    found = []
    for directory, subdirs, names in os.walk(root):
        if STAGING in subdirs:
            subdirs.remove(STAGING)
        found += [Path(directory, name) for name in names if name.endswith(suffix)]
    return sorted(found)


def start_spark(db: feedkv.DB, tmp: Path, timeout: float) -> float:
    """A one-row ``initial_scan='only'`` job: starts Spark and its Python workers."""
    db.sql("CREATE TABLE warmup (k INT PRIMARY KEY)")
    db.sql("INSERT INTO warmup VALUES (1)")
    return run_job(
        db,
        f"CREATE CHANGEFEED FOR TABLE warmup INTO '{(tmp / 'warmup').as_uri()}' "
        "WITH format=parquet, initial_scan='only'",
        timeout,
    )


def initial_scan(db: feedkv.DB, tmp: Path, rows: int, timeout: float) -> dict[str, Any]:
    sink = tmp / "scan"
    seconds = run_job(
        db,
        f"CREATE CHANGEFEED FOR TABLE bench INTO '{sink.as_uri()}' "
        "WITH format=parquet, initial_scan='only'",
        timeout,
    )
    files = output_files(sink, ".parquet")
    keys = ds.dataset([str(f) for f in files], format="parquet").to_table(columns=["k"])["k"]
    got, distinct = len(keys), pc.count_distinct(keys).as_py()
    if got != rows or distinct != rows:
        raise RuntimeError(
            f"the scan wrote {got} rows ({distinct} distinct keys) in {len(files)} Parquet "
            f"files under {sink}; the table has {rows}"
        )
    if rows and (pc.min(keys).as_py(), pc.max(keys).as_py()) != (0, rows - 1):
        raise RuntimeError(f"the scan's keys are not the table's 0..{rows - 1}")
    rate = rows / seconds
    return {
        "rows": rows,
        "files": len(files),
        "seconds": round(seconds, 2),
        "rows_per_s": round(rate),
        "target_rows_per_s": TARGET_SCAN_ROWS_PER_S,
        "met": rate >= TARGET_SCAN_ROWS_PER_S,
    }


class Watcher:
    """Reads a file sink's directory, each new file once: for each row version (key,
    ``updated``) the wall-clock time the poll found it at, and the highest resolved
    timestamp seen."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.found: dict[tuple[Any, str], int] = {}  # (key, updated) -> found at, ns
        self.duplicates = 0
        self.files = 0
        self.resolved_files = 0
        self.resolved_wall = 0
        self._seen: set[Path] = set()

    def poll(self) -> bool:
        """Read the files that appeared since the last poll; whether there were any."""
        listed = output_files(self.root, "") if self.root.exists() else []
        found_at = time.time_ns()
        new = [p for p in listed if p not in self._seen and not p.name.endswith(".tmp")]
        for path in new:
            self._seen.add(path)
            if path.name.endswith(".RESOLVED"):
                resolved = json.loads(path.read_bytes())["resolved"]
                self.resolved_wall = max(self.resolved_wall, int(resolved.split(".")[0]))
                self.resolved_files += 1
                continue
            self.files += 1
            for line in path.read_bytes().splitlines():
                message = json.loads(line)
                version = (message["after"]["k"], message["updated"])
                if version in self.found:
                    self.duplicates += 1
                else:
                    self.found[version] = found_at
        return bool(new)

    def counts(self) -> dict[str, int]:
        return {
            "found": len(self.found),
            "duplicates": self.duplicates,
            "files": self.files,
            "resolved_files": self.resolved_files,
            "resolved_wall": self.resolved_wall,
        }


class WatcherProcess:
    """A :class:`Watcher` polling every ``interval`` seconds in a process of its own
    (``spark.py --watch DIR``), so reading the files takes no time from the node, which
    runs in this process: it reports its counts after each poll that found files, and
    what it found once stopped."""

    def __init__(self, root: Path, interval: float) -> None:
        self.counts: dict[str, int] = {"found": 0, "resolved_files": 0}
        self.found: dict[tuple[Any, str], int] = {}  # filled by stop()
        self.cpu_s = 0.0
        self.changed = threading.Condition()
        self._error: str | None = None
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--watch", str(root), "--poll", str(interval)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, name="bench-watcher", daemon=True)
        self._reader.start()

    def stop(self) -> None:
        """Have the process poll once more and hand over what it found."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._reader.join()
        self._proc.wait()
        self._raise()

    def wait_for(self, done: Callable[[dict[str, int]], bool], timeout: float) -> bool:
        """Wait until ``done(counts)`` holds (checked after each poll that found files)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not done(self.counts):
                self._raise()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    def _raise(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the watcher process failed: {self._error}")

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            report = json.loads(line)
            with self.changed:
                if "found" in report and isinstance(report["found"], list):
                    self.found = {(k, updated): at for k, updated, at in report["found"]}
                    self.cpu_s = report["cpu_s"]
                    report["found"] = len(self.found)
                self.counts = report
                self.changed.notify_all()
        code = self._proc.wait()
        with self.changed:
            if code != 0 or "final" not in self.counts:
                self._error = self._error or f"it ended with exit code {code}"
            self.changed.notify_all()


def watch_main(argv: list[str]) -> int:
    """``spark.py --watch DIR --poll S``: a :class:`Watcher` that prints its counts as a
    JSON line after each poll that found files, until its stdin closes; then it polls
    once more and prints everything it found."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--watch", type=Path, required=True)
    parser.add_argument("--poll", type=float, required=True)
    args = parser.parse_args(argv)
    watcher = Watcher(args.watch)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.wait(args.poll):
        if watcher.poll():
            print(json.dumps(watcher.counts()), flush=True)
    watcher.poll()
    found = [[k, updated, at] for (k, updated), at in watcher.found.items()]
    final = {**watcher.counts(), "final": 1, "found": found, "cpu_s": time.process_time()}
    print(json.dumps(final), flush=True)
    return 0


def write_paced(
    url: str, base: int, slice_rows: int, batch: int, interval: float, start: float, stop: float
) -> int:
    """Runs in a writer process: one session UPDATEs ``batch`` rows of its slice of the
    table every ``interval`` seconds of wall-clock time from ``start`` to ``stop`` (a
    writer running behind stops at ``stop`` too); the rows committed."""
    db = feedkv.connect(url)
    session = db.session()
    pause = threading.Event()
    committed = 0
    i = 0
    try:
        while True:
            due = start + i * interval
            if due >= stop or time.time() >= stop:
                return committed
            if due > time.time():
                pause.wait(due - time.time())
            lo = base + (i * batch) % slice_rows
            committed += int(session.execute(UPDATE, lo, lo + batch).tag.split()[-1])
            i += 1
    finally:
        session.close()
        db.close()


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def percentile(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def steady(
    db: feedkv.DB,
    tmp: Path,
    rows: int,
    *,
    writers: int,
    rate: float,
    batch: int,
    seconds: float,
    poll: float,
    drain: float,
    checkpoint_frequency: str,
    closed_ts_target: str,
) -> dict[str, Any]:
    if rows < writers * batch:
        raise ValueError(f"--rows {rows} is too few for {writers} writers of {batch} rows")
    sink = tmp / "steady"
    watcher = WatcherProcess(sink, poll)
    db.sql(
        "ALTER TABLE bench CONFIGURE ZONE USING closed_timestamp_target = "
        + sql_string(closed_ts_target)
    )
    t0 = time.perf_counter()
    (job_id,) = db.sql(
        f"CREATE CHANGEFEED FOR TABLE bench INTO '{sink.as_uri()}' "
        "WITH updated, resolved='1s', initial_scan='no', min_checkpoint_frequency="
        + sql_string(checkpoint_frequency)
    ).rows[0]
    # Writing starts once the job has written a resolved file: it is running by then.
    if not watcher.wait_for(lambda counts: counts["resolved_files"] > 0, 300):
        error = db.changefeeds.error(job_id)
        raise RuntimeError(f"changefeed job {job_id} wrote no resolved file in 300 s: {error}")
    job_start_s = time.perf_counter() - t0
    say(f"steady-state job {job_id} running after {job_start_s:.1f} s; writing")

    slice_rows = rows // writers // batch * batch
    start = time.time() + WRITER_START_S  # the writer processes start meanwhile
    start_ns = int(start * 1e9)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--writer-of",
                db.serving_url(),
                "--slice",
                f"{w * slice_rows}:{slice_rows}",
                "--batch",
                str(batch),
                "--interval",
                str(batch * writers / rate),
                "--window",
                f"{start}:{start + seconds}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    outputs = [proc.communicate(timeout=seconds + 300)[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"a writer process failed (exit codes {[p.returncode for p in procs]})")
    total = sum(json.loads(out)["committed"] for out in outputs)
    end_ns = time.time_ns()
    write_s = end_ns / 1e9 - start
    delivered_by_end = watcher.counts["found"]
    say(f"committed {total:,} rows in {write_s:.1f} s; {delivered_by_end:,} in files so far")
    caught_up = watcher.wait_for(lambda counts: counts["found"] >= total, drain)
    watcher.stop()
    error = db.changefeeds.error(job_id)
    if error is not None:
        raise RuntimeError(f"changefeed job {job_id} failed: {error}")

    found = watcher.found
    lags = sorted((at - int(updated.split(".")[0])) / 1e9 for (_k, updated), at in found.items())
    thirds: list[list[float]] = [[], [], []]
    span_ns = max(1, end_ns - start_ns)
    for (_k, updated), at in found.items():
        wall = int(updated.split(".")[0])
        thirds[min(2, max(0, 3 * (wall - start_ns) // span_ns))].append((at - wall) / 1e9)
    p50_by_third = [round(statistics.median(t), 3) if t else None for t in thirds]
    last_found = max(found.values(), default=start_ns)
    # Delivered rows/s: from the first write until the last row was found in a file.
    deliver_s = max(1e-9, (last_found - start_ns) / 1e9)
    first, last = p50_by_third[0], p50_by_third[2]
    # Falling behind shows as a lag that grows over the run; one closed-timestamp target
    # (1 s) of growth is allowed for noise.
    growing = first is not None and last is not None and last > first + 1.0
    kept_up = caught_up and len(found) == total and not growing
    commit_rate = total / write_s
    p50 = statistics.median(lags) if lags else float("inf")
    return {
        "writers": writers,
        "batch_rows": batch,
        "closed_ts_target": closed_ts_target,
        "checkpoint_frequency": checkpoint_frequency,
        "seconds": round(write_s, 2),
        "offered_rows_per_s": round(rate),
        "committed_rows": total,
        "committed_rows_per_s": round(commit_rate),
        "rows_delivered": len(found),
        "rows_delivered_during_writes": delivered_by_end,
        "rows_delivered_per_s": round(len(found) / deliver_s),
        "duplicates": watcher.counts["duplicates"],
        "files": watcher.counts["files"],
        "caught_up_after_s": round((last_found - end_ns) / 1e9, 2) if caught_up else None,
        "lag_p50_s": round(p50, 3),
        "lag_p99_s": round(percentile(lags, 0.99), 3) if lags else None,
        "lag_max_s": round(lags[-1], 3) if lags else None,
        "lag_p50_s_by_third": p50_by_third,
        "kept_up": kept_up,
        "job_start_s": round(job_start_s, 2),
        "watcher_cpu_s": round(watcher.cpu_s, 2),
        "target_rows_per_s": TARGET_STEADY_ROWS_PER_S,
        "target_p50_lag_s": TARGET_P50_LAG_S,
        "met": {
            "sustained": kept_up and commit_rate >= REACHED * TARGET_STEADY_ROWS_PER_S,
            "p50_lag": p50 <= TARGET_P50_LAG_S,
        },
    }


def writer_main(argv: list[str]) -> int:
    """``spark.py --writer-of URL ...``: one steady-state writer process."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--writer-of", required=True)
    parser.add_argument("--slice", required=True, help="BASE:ROWS")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--window", required=True, help="START:STOP, wall-clock seconds")
    args = parser.parse_args(argv)
    base, slice_rows = map(int, args.slice.split(":"))
    start, stop = map(float, args.window.split(":"))
    committed = write_paced(
        args.writer_of, base, slice_rows, args.batch, args.interval, start, stop
    )
    print(json.dumps({"committed": committed}))
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "--writer-of":
        return writer_main(argv)
    if argv and argv[0] == "--watch":
        return watch_main(argv)
    parser = argparse.ArgumentParser(prog="feedkv bench spark", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]", help="Spark master for the jobs")
    parser.add_argument("--loaders", type=int, default=2, help="threads loading the table")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=20_000, help="offered UPDATE rows/s")
    parser.add_argument("--batch", type=int, default=1000, help="rows an UPDATE changes")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--poll", type=float, default=0.05, help="sink directory poll, s")
    parser.add_argument(
        "--checkpoint-frequency",
        default="300ms",
        help="the steady job's min_checkpoint_frequency (default 300ms)",
    )
    parser.add_argument(
        "--closed-ts-target",
        default="300ms",
        help="the table's closed_timestamp_target (default 300ms; the node's default is 1s)",
    )
    parser.add_argument("--drain", type=float, default=120.0, help="wait for the last rows, s")
    parser.add_argument("--timeout", type=float, default=1800.0, help="wait for a scan job, s")
    parser.add_argument("--store", type=Path, help="work directory, kept (default: temporary)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    # NB: read when the first job starts Spark, so it must be set before that.
    os.environ["FEEDKV_SPARK_MASTER"] = args.master
    tmp = args.store.resolve() if args.store else Path(tempfile.mkdtemp(prefix="feedkv-spark-"))
    say(f"working in {tmp}")
    db = feedkv.connect(tmp / "store")
    try:
        load_s = load(db, args.rows, args.loaders)
        say(f"loaded {args.rows:,} rows in {load_s:.0f} s; starting Spark ({args.master})")
        spark_start_s = start_spark(db, tmp, args.timeout)
        say(f"Spark started in {spark_start_s:.1f} s; initial scan")
        scan = initial_scan(db, tmp, args.rows, args.timeout)
        say(f"initial scan: {scan['rows_per_s']:,} rows/s; steady state")
        record = {
            "benchmark": "spark",
            "master": args.master,
            "cores": os.cpu_count(),
            "rows": args.rows,
            "load_seconds": round(load_s, 1),
            "load_rows_per_s": round(args.rows / load_s),
            "spark_start_s": round(spark_start_s, 2),
            "initial_scan": scan,
            "steady_state": steady(
                db,
                tmp,
                args.rows,
                writers=args.writers,
                rate=args.rate,
                batch=args.batch,
                seconds=args.seconds,
                poll=args.poll,
                drain=args.drain,
                checkpoint_frequency=args.checkpoint_frequency,
                closed_ts_target=args.closed_ts_target,
            ),
        }
    finally:
        db.close()
        if not (args.store or args.keep):
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
