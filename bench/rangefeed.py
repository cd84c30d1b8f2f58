"""`feedkv bench rangefeed`: how rangefeeds keep up, how fast they deliver, what they cost.

Every row runs against a node this benchmark starts (embedded unless it says gRPC: a
remote client, whose batches and feeds travel on the node's batch port, its other calls
on gRPC; the rows keep that name), with default settings and durable commits:

- ``keep_up``: 32 writers at full speed and one feed over the whole keyspace; the share
  of committed writes the feed received during the run, and how long the rest took after;
- ``watch_latency``: a single-key watch under light load, from the put's acknowledgement
  to the event's receipt (embedded, and over gRPC to a `feedkv start --insecure`
  subprocess: a node of its own, as etcd's beside it, plaintext as etcd's; an
  in-process node shares the client's GIL, which put its p50/p99 at 0.10-0.12/0.38-0.39
  ms against 0.086-0.088/0.30-0.36 ms in a process of its own, load 6);
- ``write_ratio``: write throughput with 1 and with 100 active feeds over the written
  keys, as a ratio to none (the writers start once every feed has had its first
  checkpoint, so the figures are of live feeds, not of catch-up scans); each count is
  run ``--rounds`` times (default 3), in turn, and the ratios are of the median rates
  (one run of each varied by +-4%);
- ``catch_up``: values/s a feed's catch-up scan delivers from history, against a raw
  engine scan of the same versions; embedded (in one range, then cut into 16), and over
  gRPC from a node subprocess. The one-range rows run in turn, the best of three each,
  in wall-clock time and (``cpu``) in the process's CPU time, which other work on a
  shared machine disturbs less. Beside the embedded one-range feed,
  its scan alone (``scan_only``: the pages read and dropped on one thread; the gap
  between the two ratios is what delivering the values costs), and ``floor``: a Value
  made from each index entry as read and counted, on one thread, with nothing else; what
  CPython allows any catch-up, so a bound on the ratio; and ``columns``: the one-range
  feed read by a consumer that takes columns (:meth:`RangeFeed.batches`), each batch
  made into an Arrow record batch of keys, values and timestamps, with no Value made per
  change, which the floor does not bound (``*_over_floor``: each feed's rate over the
  floor's);
- ``idle_registration``: Python memory per idle single-key registration, 10,000 of them;
- ``resolved_lag``: now minus the feed's checkpoint, sampled at each checkpoint.

Side by side, when Debian's ``etcd-server`` is installed (else the row says it is
missing): etcd on loopback, the same watch latency and the same fan-out workload (writers
with 0, 1 and 100 watchers), and feedkv's gRPC figures as ratios to etcd's
(``bench/_etcd.py``). Prints one JSON object with the figures, targets and ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

import pyarrow as pa

import feedkv
import feedkv.changefeed.jobs  # imported for idle_registrations
from feedkv.rangefeed.catchup import catch_up as catch_up_scan
from feedkv.rangefeed.event import Checkpoint, Value, ValueColumns, new_value
from feedkv.storage.engine import Snapshot
from feedkv.storage.mvcc_key import encode_ts
from feedkv.storage.schema import CHANGES, VERSIONS
from feedkv.testing.benches import bench_module
from feedkv.testing.node_process import NodeProcess
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
KV0 = Span(b"kv0/", b"kv0/\xff")  # the keys the kv0 writers write
ZERO = Timestamp(0, 0)
CATCH_UP_RANGES = 16  # the catch-up's history is also read cut into this many ranges
TARGETS = {
    "keep_up_ratio": 0.95,
    "watch_p50_ms": 2.0,
    "watch_p99_ms": 10.0,
    "write_ratio_1_feed": 0.95,
    "write_ratio_100_feeds": 0.85,
    "catch_up_ratio": 0.5,
    "idle_registration_bytes": 2048,
    "resolved_lag_p99_ms": 1300.0,
}


kv = bench_module("kv")
etcd = bench_module("_etcd")


def pct(samples: list[float], p: float) -> float | None:
    """The ``p`` quantile of ``samples`` (seconds) in milliseconds; ``None`` for none."""
    if not samples:
        return None
    samples = sorted(samples)
    return round(samples[min(len(samples) - 1, int(p * len(samples)))] * 1000, 3)


class Consumer:
    """Reads a feed on its own thread, counting values and noting checkpoints."""

    def __init__(self, feed: Any, on_checkpoint: Any = None) -> None:
        self.feed = feed
        self.values = 0
        self.caught_up = threading.Event()  # the first checkpoint came: catch-up is over
        self.error: str | None = None
        self.on_checkpoint = on_checkpoint
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.feed:
                if isinstance(event, Value):
                    self.values += 1
                elif isinstance(event, Checkpoint):
                    self.caught_up.set()
                    if self.on_checkpoint is not None:
                        self.on_checkpoint(event)
        except Exception as exc:  # reported with the figures
            self.error = repr(exc)
        finally:
            self.caught_up.set()  # nobody waits for a feed that ended

    def stop(self) -> None:
        self.feed.close()
        self.thread.join()


def live_consumers(db: feedkv.DB, span: Span, feeds: int) -> list[Consumer]:
    """``feeds`` consumers of ``span`` from now, returned once each has had its first
    checkpoint: the write figures are of live feeds, not of catch-up scans queued behind
    each other (which the writes would lengthen)."""
    consumers = [Consumer(db.rangefeed(span, db.now())) for _ in range(feeds)]
    for consumer in consumers:
        if not consumer.caught_up.wait(60):
            raise RuntimeError("a feed did not finish its catch-up scan within 60 s")
    return consumers


def keep_up(tmp: Path, seconds: float, clients: int) -> dict[str, Any]:
    with feedkv.connect(tmp / "keep-up") as db:
        (consumer,) = live_consumers(db, EVERYTHING, 1)
        commits, _lat = kv.drive(clients, seconds, lambda: lambda i: kv._put(db, i))
        received = consumer.values
        started = time.monotonic()
        while consumer.values < commits and time.monotonic() - started < 60:
            threading.Event().wait(0.01)  # wait-ok: measuring how long the tail takes
        drained = time.monotonic() - started
        consumer.stop()
    return {
        "commits_per_s": round(commits / seconds),
        "received_during_run_ratio": round(received / commits, 4),
        "all_received": consumer.values >= commits,
        "tail_drain_ms": round(drained * 1000, 1),
    }


def watch_latency(db: feedkv.DB, samples: int) -> dict[str, Any]:
    got = threading.Event()
    with db.watch(b"watched", since=db.now()) as watch:
        receipt: list[float] = []

        def read() -> None:
            for _event in watch:
                receipt.append(time.perf_counter())
                got.set()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        latencies = []
        for i in range(samples):
            got.clear()
            db.put(b"watched", b"%d" % i)
            acked = time.perf_counter()
            if not got.wait(10):
                raise RuntimeError("the watch stopped delivering")
            # NB: the event is queued before the writer is woken, so it often arrives
            # first; those samples count as 0.
            latencies.append(max(0.0, receipt[-1] - acked))
    thread.join(10)
    early = sum(1 for x in latencies if x == 0.0)
    return {
        "samples": samples,
        "p50_ms": pct(latencies, 0.5),
        "p99_ms": pct(latencies, 0.99),
        "arrived_before_ack": early,
    }


FEED_COUNTS = (0, 1, 100)


def _ratios(measure: Callable[[int, int], float], rounds: int) -> dict[str, Any]:
    """Write rates with each feed count of :data:`FEED_COUNTS`, measured ``rounds``
    times in turn (0, 1, 100, 0, 1, 100, ...) so that a drift of the machine falls on
    every count alike; the ratios are of the median rates. ``measure(feeds, round)``
    returns commits/s."""
    runs: dict[int, list[float]] = {feeds: [] for feeds in FEED_COUNTS}
    for round_ in range(rounds):
        for feeds in FEED_COUNTS:
            runs[feeds].append(measure(feeds, round_))
    rates = {feeds: statistics.median(measured) for feeds, measured in runs.items()}
    return {
        "commits_per_s": {str(k): round(v) for k, v in rates.items()},
        "rounds": {str(k): [round(r) for r in v] for k, v in runs.items()},
        "ratio_1_feed": round(rates[1] / rates[0], 3),
        "ratio_100_feeds": round(rates[100] / rates[0], 3),
    }


def write_ratio(tmp: Path, seconds: float, clients: int, rounds: int) -> dict[str, Any]:
    def measure(feeds: int, round_: int) -> float:
        with feedkv.connect(tmp / f"write-{feeds}-{round_}") as db:
            consumers = live_consumers(db, KV0, feeds)
            commits, _lat = kv.drive(clients, seconds, lambda: lambda i: kv._put(db, i))
            for consumer in consumers:
                consumer.stop()
        return commits / seconds

    return _ratios(measure, rounds)


def write_ratio_grpc(tmp: Path, seconds: float, clients: int, rounds: int) -> dict[str, Any]:
    """The deployed shape: a node subprocess, the writers in one client process and the
    feeds in another, both over gRPC, so the node pays for the feeds (fan-out, encoding,
    sending) and the consumers' own work is theirs."""
    received: dict[str, Any] = {}  # what the feeds of the last round got

    def measure(feeds: int, round_: int) -> float:
        node = NodeProcess(tmp / f"write-grpc-{feeds}-{round_}")
        try:
            reader = None
            if feeds:
                reader = subprocess.Popen(
                    [sys.executable, __file__, "--feeds-of", node.url, "--feeds", str(feeds)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert reader.stdout is not None
                if reader.stdout.readline().strip() != "ready":
                    raise RuntimeError("the feed process did not start")
            row = kv.client_processes(kv.__file__, [node.url], clients, seconds)
            if reader is not None:
                out, _ = reader.communicate(timeout=300)  # closing stdin ends the feeds
                received[str(feeds)] = json.loads(out)
        finally:
            node.terminate()
        return float(row["commits_per_s"])

    return {**_ratios(measure, rounds), "feeds": received}


def feeds_main(url: str, feeds: int) -> None:
    """Runs in the feed process of :func:`write_ratio_grpc`: ``feeds`` feeds over the
    written keys until stdin closes; prints what they received and any errors."""
    with feedkv.connect(url) as db:
        consumers = live_consumers(db, KV0, feeds)
        print("ready", flush=True)
        sys.stdin.read()
        values = sum(c.values for c in consumers)
        for consumer in consumers:
            consumer.stop()
    errors = sorted({c.error for c in consumers if c.error is not None})
    print(json.dumps({"values_received": values, "errors": errors}))


def catch_up(tmp: Path, keys: int) -> dict[str, Any]:
    """Embedded, against a raw scan of the store, and the feed's scan alone against the
    same; then the same history cut into ``CATCH_UP_RANGES`` ranges, each range's scan
    reading its own part; then over gRPC to a node subprocess (the node scans and sends
    while the client decodes, on the two cores), against the same raw-scan rate.

    The one-range rows (the feed, its columns, its scan alone, the floor and the raw scan)
    are run in turn ``_RUNS`` times, each rate the best of its runs, in wall-clock time
    and in the process's CPU time (``*_cpu``): on a machine shared with other work the
    CPU rates, of runs alternating, are the ones to compare."""
    with feedkv.connect(tmp / "catch-up", config=kv.StoreConfig(sync=False)) as db:
        start = _write_history(db, keys)
        assert db.node is not None
        wall, cpu = _alternating(
            {
                "feed": lambda: _catch_up_count(db, start, keys),
                "columns": lambda: _catch_up_columns_count(db, start, keys),
                "scan_only": lambda: _scan_only_count(db, start),
                "floor": lambda: _floor_count(db),
                "raw_scan": lambda: _raw_scan_count(db),
            }
        )
        for i in range(1, CATCH_UP_RANGES):
            db.split(kv.key_of(i * keys // CATCH_UP_RANGES))
        ranges_rate = _rate(lambda: _catch_up_count(db, start, keys))
    node = NodeProcess(tmp / "catch-up-grpc")
    try:
        with feedkv.connect(node.url) as db:
            grpc_start = _write_history(db, keys)
            grpc_rate = _rate(lambda: _catch_up_count(db, grpc_start, keys))
    finally:
        node.terminate()
    scan_rate, floor_rate = wall["raw_scan"], wall["floor"]
    return {
        "values": keys,
        "feed_values_per_s": round(wall["feed"]),
        "raw_scan_versions_per_s": round(scan_rate),
        "ratio": round(wall["feed"] / scan_rate, 3),
        "scan_only_values_per_s": round(wall["scan_only"]),
        "scan_only_ratio": round(wall["scan_only"] / scan_rate, 3),
        "floor_values_per_s": round(floor_rate),
        "floor_ratio": round(floor_rate / scan_rate, 3),
        "feed_over_floor": round(wall["feed"] / floor_rate, 3),
        "columns_values_per_s": round(wall["columns"]),
        "columns_ratio": round(wall["columns"] / scan_rate, 3),
        "columns_over_floor": round(wall["columns"] / floor_rate, 3),
        "cpu": {
            "feed_values_per_s": round(cpu["feed"]),
            "columns_values_per_s": round(cpu["columns"]),
            "scan_only_values_per_s": round(cpu["scan_only"]),
            "floor_values_per_s": round(cpu["floor"]),
            "raw_scan_versions_per_s": round(cpu["raw_scan"]),
            "feed_over_floor": round(cpu["feed"] / cpu["floor"], 3),
            "columns_over_floor": round(cpu["columns"] / cpu["floor"], 3),
            "scan_only_over_floor": round(cpu["scan_only"] / cpu["floor"], 3),
        },
        "ranges": CATCH_UP_RANGES,
        "ranges_feed_values_per_s": round(ranges_rate),
        "ranges_ratio": round(ranges_rate / scan_rate, 3),
        "grpc_feed_values_per_s": round(grpc_rate),
        "grpc_ratio": round(grpc_rate / scan_rate, 3),
    }


def _write_history(db: feedkv.DB, keys: int) -> Timestamp:
    """Writes ``keys`` keys in transactions of 1,000; returns a time before them."""
    start = db.now()
    batch = 1000
    for base in range(0, keys, batch):
        with db.transaction() as txn:
            for i in range(base, min(keys, base + batch)):
                txn.put(kv.key_of(i), kv.VALUE)
    return start


_RUNS = 3


def _alternating(
    counts: dict[str, Callable[[], int]],
) -> tuple[dict[str, float], dict[str, float]]:
    """Each of ``counts`` (a run returning what it counted) once to warm up, then
    ``_RUNS`` times in turn; the best rate of each (per s), in wall-clock time and in
    the process's CPU time (all its threads: a feed's scan, consumer and node alike).
    The first read of a table maps its pages into the process, which ran at half the
    rate of the reads after it."""
    for count in counts.values():
        count()
    wall = dict.fromkeys(counts, 0.0)
    cpu = dict.fromkeys(counts, 0.0)
    for _ in range(_RUNS):
        for name, count in counts.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            counted = count()
            spent, spent_cpu = time.perf_counter() - began, time.process_time() - began_cpu
            wall[name] = max(wall[name], counted / spent)
            cpu[name] = max(cpu[name], counted / max(spent_cpu, 1e-9))
    return wall, cpu


def _rate(count: Callable[[], int]) -> float:
    """One run of ``count`` (per s of wall-clock time)."""
    began = time.perf_counter()
    counted = count()
    return counted / (time.perf_counter() - began)


def _catch_up_count(db: feedkv.DB, start: Timestamp, keys: int) -> int:
    """A feed's catch-up scan of the ``keys`` values written after ``start``: the values
    it delivered."""
    delivered = 0
    with db.rangefeed(EVERYTHING, start) as feed:
        for event in feed:
            # NB: counted to the last value, not to the checkpoint after it: that waits
            # for the closed timestamp to pass the feed's start, a second after it.
            if isinstance(event, Value):
                delivered += 1
                if delivered >= keys:
                    break
    return delivered


def _catch_up_columns_count(db: feedkv.DB, start: Timestamp, keys: int) -> int:
    """:func:`_catch_up_count` for a consumer that takes columns: the feed read a batch
    at a time, each made into an Arrow record batch of keys, values and timestamps (what
    the Spark source yields), no Value made per change."""
    delivered = 0
    with db.rangefeed(EVERYTHING, start) as feed:
        for batch in feed.batches():
            if isinstance(batch, ValueColumns):
                columns = (batch.keys, batch.values, batch.timestamps)
            else:
                values = [event for event in batch if isinstance(event, Value)]
                columns = (
                    [v.key for v in values],
                    [v.value for v in values],
                    [v.ts for v in values],
                )
            if not columns[0]:
                continue
            pa.record_batch(
                [
                    pa.array(columns[0], pa.binary()),
                    pa.array(columns[1], pa.binary()),
                    pa.array(list(map(_WALL, columns[2])), pa.uint64()),
                    pa.array(list(map(_LOGICAL, columns[2])), pa.uint32()),
                ],
                names=["key", "value", "wall", "logical"],
            )
            delivered += len(columns[0])
            if delivered >= keys:
                break
    return delivered


_WALL, _LOGICAL = attrgetter("wall"), attrgetter("logical")


def _raw_scan_count(db: feedkv.DB) -> int:
    """The engine's scan of every version: the entries read."""
    with _snapshot(db) as snap:
        return sum(1 for _ in snap.scan(VERSIONS, b""))


def _floor_count(db: feedkv.DB) -> int:
    """What CPython itself allows a catch-up: the time index read on this thread with
    a :class:`Value` made from each entry's key and value as read (no timestamps
    decoded, no page, stream, thread or client) and counted by the loop
    :func:`_catch_up_count` runs. No catch-up can beat this, so its ratio to the raw
    scan bounds the feed's."""
    ts = db.now()
    count = 0
    with _snapshot(db) as snap:
        for key, value in snap.scan(CHANGES, b""):
            event = new_value((key[_TS_BYTES:], value[1:], ts, None))
            if isinstance(event, Value):
                count += 1
    return count


def _snapshot(db: feedkv.DB) -> Snapshot:
    assert db.node is not None
    return db.node.store.engine.snapshot()


_TS_BYTES = len(encode_ts(ZERO))  # a time index key's timestamp, before its key


def _scan_only_count(db: feedkv.DB, start: Timestamp) -> int:
    """A catch-up's scan alone: its pages read on this thread and dropped, with no
    stream, consumer or values made (the values read). The difference from the feed's
    rate is what delivering the values costs."""
    with _snapshot(db) as snap:
        return sum(
            len(page.values) for page, _size in catch_up_scan(snap, EVERYTHING, start, False)
        )


def idle_registrations(tmp: Path, count: int) -> dict[str, Any]:
    with feedkv.connect(tmp / "idle") as db:
        assert db.node is not None
        feeds = db.node.feeds
        stream = feeds.new_stream()
        since = db.now()
        # NB: a node's GC loop imports the changefeed modules on its first round; they
        # are imported above, so a round inside this window does not count them.
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        regs = [
            feeds.register(i, Span.for_key(b"idle/%06d" % i), since, False, stream)
            for i in range(count)
        ]
        deadline = time.monotonic() + 60
        while any(r.catching_up for r in regs) and time.monotonic() < deadline:
            stream.take(0.05)
        stream.take(0)
        gc.collect()  # NB: what the registrations hold, not garbage not yet collected
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        for reg in regs:
            feeds.unregister(reg)
    return {"registrations": count, "bytes_each": round((after - before) / count)}


def resolved_lag(tmp: Path, seconds: float) -> dict[str, Any]:
    lags: list[float] = []
    with feedkv.connect(tmp / "lag") as db:
        clock = db.node.store.clock if db.node is not None else None
        assert clock is not None

        def sample(checkpoint: Checkpoint) -> None:
            lags.append((clock.physical_now() - checkpoint.ts.wall) / 1e9)

        consumer = Consumer(db.rangefeed(EVERYTHING, db.now()), sample)
        kv.drive(4, seconds, lambda: lambda i: kv._put(db, i))
        consumer.stop()
    return {"samples": len(lags), "p50_ms": pct(lags, 0.5), "p99_ms": pct(lags, 0.99)}


def side_by_side_with_etcd(tmp: Path, args: argparse.Namespace, ours: dict[str, Any]) -> Any:
    """The watch latency and the fan-out workload against etcd, and feedkv's figures over
    gRPC as ratios to etcd's (latency: below 1 is faster; fan-out: above 1 keeps more)."""
    with etcd.etcd(tmp / "etcd-watch") as server:
        if server is None:
            return "etcd-server is not installed here (apt: etcd-server); no side-by-side row"
        latencies = etcd.etcd_watch_latency(server, args.samples)["latencies"]
    watch = {"p50_ms": pct(latencies, 0.5), "p99_ms": pct(latencies, 0.99)}
    fan_out = etcd.etcd_write_ratio(tmp, args.seconds, args.clients, kv.drive, kv.key_of, kv.VALUE)
    grpc_watch, grpc_writes = ours["watch_latency_grpc"], ours["write_ratio_grpc"]

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    return {
        "watch_latency": watch,
        "write_ratio": fan_out,
        "feedkv_grpc_over_etcd": {
            "watch_p50": ratio(grpc_watch["p50_ms"], watch["p50_ms"]),
            "watch_p99": ratio(grpc_watch["p99_ms"], watch["p99_ms"]),
            "commits_per_s_0_feeds": ratio(
                grpc_writes["commits_per_s"]["0"], fan_out["commits_per_s"]["0"]
            ),
            "commits_per_s_100_feeds": ratio(
                grpc_writes["commits_per_s"]["100"], fan_out["commits_per_s"]["100"]
            ),
            "write_ratio_100_feeds": ratio(
                grpc_writes["ratio_100_feeds"], fan_out["ratio_100_feeds"]
            ),
        },
    }


# The rows, in the order they run (``write_ratio`` is embedded and over gRPC, ``etcd`` the
# side-by-side, which compares with the watch latency and write ratio rows).
ROWS = (
    "keep_up",
    "watch_latency",
    "write_ratio",
    "catch_up",
    "idle_registration",
    "resolved_lag",
    "etcd",
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench rangefeed")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument(
        "--rounds", type=int, default=3, help="write-ratio runs per feed count (median)"
    )
    parser.add_argument("--catch-up-keys", type=int, default=100_000)
    parser.add_argument("--registrations", type=int, default=10_000)
    parser.add_argument(
        "--only", choices=ROWS, action="append", help="run only these rows (repeatable)"
    )
    parser.add_argument("--feeds-of", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--feeds", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds needs at least one run per feed count, not {args.rounds}")
    if args.feeds_of:
        feeds_main(args.feeds_of, args.feeds)
        return 0
    rows = set(args.only or ROWS)
    if "etcd" in rows and not {"watch_latency", "write_ratio"} <= rows:
        parser.error("--only etcd compares with feedkv's rows: add watch_latency and write_ratio")
    result: dict[str, Any] = {"benchmark": "rangefeed", "targets": TARGETS}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-rangefeed-") as name:
        tmp = Path(name)
        if "keep_up" in rows:
            result["keep_up"] = keep_up(tmp, args.seconds, args.clients)
        if "watch_latency" in rows:
            with feedkv.connect(tmp / "watch") as db:
                result["watch_latency_embedded"] = watch_latency(db, args.samples)
            node = NodeProcess(tmp / "watch-grpc", "--insecure")
            try:
                with feedkv.connect(node.url) as db:
                    result["watch_latency_grpc"] = watch_latency(db, args.samples)
            finally:
                node.terminate()
        if "write_ratio" in rows:
            result["write_ratio"] = write_ratio(tmp, args.seconds, args.clients, args.rounds)
            result["write_ratio_grpc"] = write_ratio_grpc(
                tmp, args.seconds, args.clients, args.rounds
            )
        if "catch_up" in rows:
            result["catch_up"] = catch_up(tmp, args.catch_up_keys)
        if "idle_registration" in rows:
            result["idle_registration"] = idle_registrations(tmp, args.registrations)
        if "resolved_lag" in rows:
            result["resolved_lag"] = resolved_lag(tmp, args.seconds)
        if "etcd" in rows:
            result["etcd"] = side_by_side_with_etcd(tmp, args, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
