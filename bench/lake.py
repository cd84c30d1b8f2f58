"""`feedkv bench lake`: changefeeds into Delta Lake tables, beside the Parquet file sink.

- throughput: the same stream of row changes (``--rows`` in windows of
  ``--window-rows``: new keys, updates of earlier keys and deletes, with the rows
  before them as ``diff`` gives them) is handed to each sink as a changefeed hands it:
  ``emit_row`` per change, then per window of the resolved frontier ``flush`` and a
  resolved marker (``file://`` with ``format=parquet``), or one ``commit_window``
  (``delta://`` in ``mirror`` and ``changelog`` modes: a MERGE or an append per
  window). Rows/s per sink, and each Delta mode's ratio to the Parquet sink's.
  Targets: mirror >= 0.5x, changelog >= 0.8x.
- lag: a node (``feedkv start``, the thread runner) with a changefeed into each sink,
  and ``--writers`` writer processes, each with its own client connection to the node,
  that UPSERT rows at a fixed rate between them (``--rates``, rows/s, in statements of
  ``--statement-rows``); from a statement's acknowledgement to the first moment a
  reader sees it: the Delta directory's marker (:func:`feedkv.lake.read_consistent`)
  or the Parquet sink's newest ``.RESOLVED`` file at or past the statement's commit.
  p50/p99 per sink and rate, and the rate the writers reached (the machine may not
  reach the one asked for: the record says so, with where the rate went: the writers'
  busy fraction, the CPU per second of the node and of the writers, the node's CPU per
  1000 rows, and the machine's load average). Target: p50 <= 3 s.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import feedkv
import feedkv.lake
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import (
    Message,
    Sink,
    WindowSink,
    make_sink,
    message_options,
    parse_sink_uri,
    sink_defaults,
)
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.testing.benches import bench_module
from feedkv.testing.node_process import NodeProcess
from feedkv.util.hlc import Timestamp

kv = bench_module("kv")
TARGET_MIRROR = 0.5
TARGET_CHANGELOG = 0.8
TARGET_LAG_P50_S = 3.0
START = Timestamp(1_700_000_000_000_000_000, 0)
TOPIC = "bench"
SINKS = ("parquet", "delta-mirror", "delta-changelog")


def sink_uri(
    kind: str, root: Path, resolved: str = "1s"
) -> tuple[str, tuple[tuple[str, str | None], ...]]:
    """The sink URI and ``WITH`` options of ``kind`` (one of :data:`SINKS`) under
    ``root``; the Parquet sink writes a resolved marker every ``resolved`` (a lake sink
    records one with every window)."""
    if kind == "parquet":
        options = (("format", "parquet"), ("diff", None), ("resolved", resolved))
        return f"file://{root}/parquet", options
    mode = kind.removeprefix("delta-")
    return f"delta://{root}/{kind}", (("lake_mode", mode),)


# Throughput: the sinks alone.


def table_descriptor(root: Path) -> TableDescriptor:
    """The descriptor of ``bench (k INT PRIMARY KEY, v STRING, n INT)``, made by a store."""
    with feedkv.connect(root / "schema") as db:
        db.sql("CREATE TABLE bench (k INT PRIMARY KEY, v STRING, n INT)")
        snapshot = catalog.Snapshot(db, db.now())
        database = catalog.database_by_name(snapshot, "defaultdb")
        return catalog.table_by_name(snapshot, database, "bench")


def windows(
    desc: TableDescriptor, rows: int, window_rows: int, seed: int = 7
) -> list[list[RowEvent]]:
    """The change stream: windows of ``window_rows`` changes, timestamps ascending;
    about half insert new keys, two fifths update earlier keys, a tenth delete them."""
    rng = random.Random(seed)
    live: dict[int, dict[str, Any]] = {}
    keys: list[int] = []
    next_key = 0
    tick = 0
    out: list[list[RowEvent]] = []
    for lo in range(0, rows, window_rows):
        window = []
        for _ in range(min(window_rows, rows - lo)):
            tick += 1
            ts = Timestamp(START.wall + tick * 1000, 0)
            choice = rng.random()
            if choice < 0.5 or len(keys) < 100:
                k, before = next_key, None
                next_key += 1
                keys.append(k)
            else:
                k = keys[rng.randrange(len(keys))]
                before = live.get(k)
            if choice >= 0.9 and before is not None:
                del live[k]
                window.append(RowEvent(desc, None, (k,), None, before, ts, ts, True))
                continue
            after = {"k": k, "v": f"value-{k}-{tick}", "n": tick % 97}
            live[k] = after
            had = before is not None
            window.append(RowEvent(desc, None, (k,), after, before, ts, ts, had))
        out.append(window)
    return out


def run_sink(kind: str, root: Path, stream: list[list[RowEvent]]) -> dict[str, Any]:
    uri, given = sink_uri(kind, root)
    options = sink_defaults(uri, parse_options(given, now=START))
    sink: Sink = make_sink(parse_sink_uri(uri, options), message_options(options, uri), start=START)
    rows = 0
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    try:
        for window in stream:
            for event in window:
                sink.emit_row(Message(TOPIC, b"", None, event.mvcc_ts, event.updated, 1, event))
            rows += len(window)
            end = window[-1].mvcc_ts
            if isinstance(sink, WindowSink):
                sink.commit_window(end, [TOPIC])
            else:
                sink.flush()
                sink.emit_resolved(end, [TOPIC])
    finally:
        sink.close()
    seconds = time.perf_counter() - t0
    return {
        "rows": rows,
        "windows": len(stream),
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
        "cpu_s": round(time.process_time() - cpu0, 2),
    }


def check_mirror(root: Path, stream: list[list[RowEvent]]) -> None:
    """The mirror's last version equals the stream's rows: raises otherwise (a fast
    sink that lost rows would be no result)."""
    live: dict[int, dict[str, Any]] = {}
    for window in stream:
        for event in window:
            if event.after is None:
                live.pop(event.key[0], None)
            else:
                live[event.key[0]] = event.after
    tables = feedkv.lake.read_tables(f"delta://{root}/delta-mirror")
    got = {r["k"]: r for r in tables[TOPIC].to_pylist()}
    if got != live:
        raise RuntimeError(f"the Delta mirror holds {len(got)} rows, the stream {len(live)}")


def throughput(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    desc = table_descriptor(root)
    stream = windows(desc, args.rows, args.window_rows)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in SINKS}
    for round_ in range(args.rounds):
        for kind in SINKS:  # NB: interleaved, so the machine's other load hits all alike
            where = root / f"round{round_}"
            run = run_sink(kind, where, stream)
            if kind == "delta-mirror":
                check_mirror(where, stream)
            runs[kind].append(run)
            print(f"throughput {kind}: {run}", file=sys.stderr)
    rates = {kind: statistics.median(r["rows_per_s"] for r in runs[kind]) for kind in SINKS}
    # NB: rows per CPU-second of the process too: on a shared machine the wall-clock
    # rate says as much about the other processes as about the sink
    per_cpu = {
        kind: statistics.median(r["rows"] / max(r["cpu_s"], 1e-3) for r in runs[kind])
        for kind in SINKS
    }
    parquet = rates["parquet"]
    return {
        "rows": args.rows,
        "window_rows": args.window_rows,
        "rows_per_s": {kind: round(rate) for kind, rate in rates.items()},
        "ratio_to_parquet": {
            "delta-mirror": round(rates["delta-mirror"] / parquet, 2),
            "delta-changelog": round(rates["delta-changelog"] / parquet, 2),
        },
        "rows_per_cpu_s": {kind: round(rate) for kind, rate in per_cpu.items()},
        "cpu_ratio_to_parquet": {
            "delta-mirror": round(per_cpu["delta-mirror"] / per_cpu["parquet"], 2),
            "delta-changelog": round(per_cpu["delta-changelog"] / per_cpu["parquet"], 2),
        },
        "targets": {"delta-mirror": TARGET_MIRROR, "delta-changelog": TARGET_CHANGELOG},
        "met": {
            "delta-mirror": rates["delta-mirror"] / parquet >= TARGET_MIRROR,
            "delta-changelog": rates["delta-changelog"] / parquet >= TARGET_CHANGELOG,
        },
        "runs": runs,
    }


# Lag: a changefeed following writers at a fixed rate.


def parquet_resolved(root: str) -> Timestamp | None:
    markers = glob.glob(os.path.join(root, "**", "*.RESOLVED"), recursive=True)
    if not markers:
        return None
    newest = max(markers, key=os.path.basename)  # names sort by timestamp
    with open(newest) as f:
        return Timestamp.parse(json.load(f)["resolved"])


def lake_resolved(uri: str) -> Timestamp | None:
    marker = feedkv.lake.read_consistent(uri)
    return None if marker is None else marker.resolved


class Watcher:
    """Polls what a reader of the sink sees every ``interval`` s and records, for each
    acknowledged statement, when the sink's resolved timestamp first reached it."""

    def __init__(self, visible: Callable[[], Timestamp | None], interval: float) -> None:
        self._visible = visible
        self._interval = interval
        self._lock = threading.Lock()
        self._waiting: list[tuple[Timestamp, float]] = []  # (commit ts bound, acked at)
        self.lags: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lake-watcher", daemon=True)
        self._thread.start()

    def acked(self, ts: Timestamp, at: float) -> None:
        with self._lock:
            self._waiting.append((ts, at))

    def pending(self) -> int:
        with self._lock:
            return len(self._waiting)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            resolved = self._visible()
            now = time.monotonic()
            if resolved is None:
                continue
            with self._lock:
                still = []
                for ts, at in self._waiting:
                    if ts <= resolved:
                        self.lags.append(now - at)
                    else:
                        still.append((ts, at))
                self._waiting = still

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Writers:
    """``count`` writer processes (this file run with ``--writer-of``), each with its
    own client connection to the node at ``url``, sharing ``rate`` rows/s between them
    in statements of ``per`` rows. Each writes its own part of the keyspace (no two
    writers' statements conflict) and reports every acknowledged statement on its
    stdout, which a thread per writer hands to the watcher.

    NB: processes, not threads of this one: a client runs SQL itself (parsing,
    planning, encoding the rows) and sends key-value batches to the node, and one
    interpreter doing that for 20k rows/s was the limit (12.5-14.4k rows/s). Eight by
    default: each waits for its statement's answer, and four, busy all the time on a
    loaded machine, reached 12.8k rows/s of 20k where eight reached 19.5k."""

    def __init__(
        self, url: str, count: int, rate: int, per: int, seconds: float, watcher: Watcher
    ) -> None:
        self._watcher = watcher
        keyspace = max(rate * 2 // count, per)
        self.procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--writer-of",
                    url,
                    "--rate",
                    str(rate / count),
                    "--statement-rows",
                    str(per),
                    "--seconds",
                    str(seconds),
                    "--keys",
                    f"{i * keyspace}:{keyspace}",
                    "--offset",
                    str(i * per / rate),  # NB: the writers' statements interleave evenly
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(count)
        ]
        self.results: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        for proc in self.procs:  # each connects and plans its statement first
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                self.stop()
                raise RuntimeError(f"a writer did not start: {line!r}")
        self._readers = [
            threading.Thread(target=self._read, args=(proc,), daemon=True) for proc in self.procs
        ]
        for reader in self._readers:
            reader.start()

    def go(self) -> None:
        """Start every writer now (their pacing counts from one moment)."""
        at = time.monotonic()
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{at}\n")
            proc.stdin.flush()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                with self._lock:
                    self.results.append(json.loads(line))
                continue
            ts, acked = line.split()
            self._watcher.acked(Timestamp.parse(ts), float(acked))

    def wait(self, timeout_s: float) -> list[dict[str, Any]]:
        for proc, reader in zip(self.procs, self._readers, strict=True):
            proc.wait(timeout=timeout_s)
            reader.join()
        if any(proc.returncode for proc in self.procs) or len(self.results) != len(self.procs):
            raise RuntimeError(f"a writer failed: exit codes {[p.returncode for p in self.procs]}")
        return self.results

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def writer_main(args: argparse.Namespace) -> int:
    """One writer process (see :class:`Writers`): connects, prints ``ready``, waits for
    the start time on stdin, then UPSERTs ``--rate`` rows/s for ``--seconds``, printing
    ``<node time after the ack> <monotonic ack time>`` per statement and a JSON summary
    last. NB: the node's time read after the acknowledgement is at or above the
    statement's commit timestamp; ``time.monotonic`` is one clock for every process."""
    per = args.statement_rows
    first, keyspace = (int(x) for x in args.keys.split(":"))
    rng = random.Random(first)
    # NB: placeholders: the statement's text repeats, so it is parsed and planned once
    statement = "UPSERT INTO bench VALUES " + ", ".join(
        f"(${3 * i + 1}, ${3 * i + 2}, ${3 * i + 3})" for i in range(per)
    )

    def params(n: int) -> list[Any]:
        base = rng.randrange(keyspace)
        out: list[Any] = []
        for i in range(per):
            out += [first + (base + i) % keyspace, f"v{n + i}", i]
        return out

    with feedkv.connect(args.writer_of) as db:
        db.sql(statement, *params(0))  # NB: before the start: planning, connections
        print("ready", flush=True)
        t0 = float(sys.stdin.readline()) + args.offset
        interval = per / args.rate
        written = 0
        busy = 0.0
        cpu0 = time.process_time()
        deadline = t0 + args.seconds
        # NB: no statement due at or past the deadline (one more than the rate asked),
        # each due time counted from t0, not summed: ten sums of 0.1 fall short of 1.0
        due = math.ceil(args.seconds / interval - 1e-9)
        for n in range(due):
            next_at = t0 + n * interval
            if (now := time.monotonic()) >= deadline:
                break
            if now < next_at:
                time.sleep(next_at - now)  # wait-ok: pacing the writer to its rate
            began = time.monotonic()
            db.sql(statement, *params(written))
            acked = time.monotonic()
            print(f"{db.now()} {acked}", flush=True)
            busy += time.monotonic() - began
            written += per
        elapsed = time.monotonic() - t0
        summary = {
            "written": written,
            "seconds": elapsed,
            "busy": busy,
            "cpu_s": time.process_time() - cpu0,
        }
    print(json.dumps(summary), flush=True)
    return 0


def lag_run(root: Path, kind: str, rate: int, args: argparse.Namespace) -> dict[str, Any]:
    uri, given = sink_uri(kind, root, args.checkpoint)
    options = ", ".join(k if v is None else f"{k} = '{v}'" for k, v in given)
    # NB: a node of its own (feedkv start) and writers of their own: the changefeed runs
    # in the node's process, as on a server
    root.mkdir(parents=True, exist_ok=True)
    node = NodeProcess(root / "store", "--insecure", "--changefeed-runner", "thread")
    writers: Writers | None = None
    watcher: Watcher | None = None
    try:
        with feedkv.connect(node.url) as db:
            db.sql("CREATE TABLE bench (k INT PRIMARY KEY, v STRING, n INT)")
            db.sql(
                f"CREATE CHANGEFEED FOR TABLE bench INTO '{uri}' WITH {options}, "
                f"initial_scan = 'no', min_checkpoint_frequency = '{args.checkpoint}'"
            )
        if kind == "parquet":
            visible: Callable[[], Timestamp | None] = lambda: parquet_resolved(uri[7:])  # noqa: E731
        else:
            visible = lambda: lake_resolved(uri)  # noqa: E731
        watcher = Watcher(visible, 0.02)
        writers = Writers(node.url, args.writers, rate, args.statement_rows, args.seconds, watcher)
        load_before = os.getloadavg()[0]
        node_cpu0 = kv.cpu_seconds(node.process.pid)
        t0 = time.monotonic()
        writers.go()
        results = writers.wait(args.seconds + 120)
        elapsed = max(r["seconds"] for r in results)
        node_cpu = kv.cpu_seconds(node.process.pid) - node_cpu0
        load_after = os.getloadavg()[0]
        drain = time.monotonic() + 60
        while watcher.pending() and time.monotonic() < drain:
            time.sleep(0.05)  # wait-ok: the watcher records the last statements
        watcher.stop()
        lags = sorted(watcher.lags)
        if not lags:
            raise RuntimeError(f"{kind}: nothing became visible")
        written = sum(r["written"] for r in results)
        writer_cpu = sum(r["cpu_s"] for r in results)
        return {
            "rate_asked": rate,
            "rate_reached": round(written / elapsed),
            "writers": len(results),
            # where a rate short of the one asked is lost: writers busy ~1.0 never
            # waited (one statement at a time each is the limit); CPU per wall second
            # of the node (one interpreter: ~1.0 at most with the GIL) and of the
            # writers together; the machine's load average (1 min) before and after
            "writer_busy": round(statistics.mean(r["busy"] / r["seconds"] for r in results), 2),
            "writers_cpu_per_s": round(writer_cpu / elapsed, 2),
            "node_cpu_per_s": round(node_cpu / elapsed, 2),
            "node_cpu_ms_per_1k_rows": round(1e6 * node_cpu / max(written, 1), 1),
            "load_1m": [round(load_before, 2), round(load_after, 2)],
            "statements": len(lags),
            "not_visible_in_60s": watcher.pending(),
            "lag_p50_s": round(lags[len(lags) // 2], 3),
            "lag_p99_s": round(lags[min(len(lags) - 1, int(len(lags) * 0.99))], 3),
            "lag_max_s": round(lags[-1], 3),
            "wall_s": round(time.monotonic() - t0, 1),
        }
    finally:
        if writers is not None:
            writers.stop()
        if watcher is not None:
            watcher.stop()
        node.terminate()


def lag(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in args.lag_sinks}
    for rate in args.rates:
        for kind in args.lag_sinks:
            run = lag_run(root / f"lag-{rate}-{kind}", kind, rate, args)
            results[kind].append(run)
            print(f"lag {kind} at {rate} rows/s: {run}", file=sys.stderr)
    return {
        "seconds": args.seconds,
        "statement_rows": args.statement_rows,
        "min_checkpoint_frequency": args.checkpoint,
        "target_lag_p50_s": TARGET_LAG_P50_S,
        "runs": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench lake")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--window-rows", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rates", type=int, nargs="*", default=[5_000, 20_000])
    parser.add_argument("--seconds", type=float, default=10.0, help="each lag run's writes")
    parser.add_argument("--statement-rows", type=int, default=100)
    parser.add_argument("--checkpoint", default="1s", help="min_checkpoint_frequency")
    parser.add_argument("--skip", choices=["throughput", "lag"], action="append", default=[])
    parser.add_argument("--dir", type=Path, default=None, help="where to write (a temp dir)")
    parser.add_argument("--writers", type=int, default=8, help="writer processes per lag run")
    parser.add_argument(
        "--lag-sinks", nargs="+", choices=SINKS, default=list(SINKS), help="the lag runs' sinks"
    )
    # a writer process's own arguments (see Writers)
    parser.add_argument("--writer-of", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--keys", default="0:1", help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer_of is not None:
        return writer_main(args)
    record: dict[str, Any] = {"benchmark": "lake", "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-lake-", dir=args.dir) as tmp:
        root = Path(tmp)
        if "throughput" not in args.skip:
            record["throughput"] = throughput(root / "throughput", args)
        if "lag" not in args.skip:
            record["lag"] = lag(root / "lag", args)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
