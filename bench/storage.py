"""`feedkv bench storage`: the storage engine's figures on 1M MVCC versions.

100k keys x 10 versions of 100-byte values, loaded by concurrent writers through group
commit (durable, then again with sync=False), then: point reads at random timestamps,
forward scans, and an incremental export of a 1% time window against a brute-force scan
of the same keyspace. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from feedkv.storage import export, mvcc
from feedkv.storage.engine import ReadWriter
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.mvcc_key import decode_version_key, key_versions_start
from feedkv.storage.schema import MVCC_DATABASES, VERSIONS
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

VALUE = b"v" * 100
BASE_WALL = 1_700_000_000_000_000_000
END_OF_TIME = Timestamp(2**62, 0)


def key_of(i: int) -> bytes:
    return b"user/%08d" % i


def ts_of(version: int, i: int, keys: int) -> Timestamp:
    """Version ``version`` of key ``i``: timestamps rise with (version, key)."""
    return Timestamp(BASE_WALL + version * keys + i, 0)


def load(engine: LMDBEngine, keys: int, versions: int, writers: int, batch: int) -> float:
    """Write every version through group commit; returns versions/s."""

    def writer(w: int) -> None:
        mine = list(range(w, keys, writers))
        for version in range(versions):
            futures = [
                engine.submit(_put_job(mine[lo : lo + batch], version, keys))
                for lo in range(0, len(mine), batch)
            ]
            # NB: a key's next version must not overtake the previous one, so each writer
            # waits for its round to land before starting the next.
            for future in futures:
                future.result()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return keys * versions / (time.perf_counter() - start)


def _put_job(chunk: list[int], version: int, keys: int) -> Callable[[ReadWriter], None]:
    def job(rw: ReadWriter) -> None:
        for i in chunk:
            mvcc.put(rw, key_of(i), ts_of(version, i, keys), VALUE)

    return job


def _single_put(n: int) -> Callable[[ReadWriter], object]:
    return lambda rw: mvcc.put(rw, b"single/%08d" % n, Timestamp(BASE_WALL * 2 + n, 0), VALUE)


def single_put_rate(engine: LMDBEngine, clients: int, seconds: float) -> dict[str, float]:
    """Clients each writing one version per commit, as fast as they can."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))
    lock = threading.Lock()

    def client() -> None:
        local: list[float] = []
        while time.perf_counter() < stop:
            with lock:
                n = next(counter)
            t0 = time.perf_counter()
            engine.write(_single_put(n))
            local.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "commits_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(latencies[len(latencies) // 2] * 1e3, 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1e3, 3),
    }


def point_reads(engine: LMDBEngine, keys: int, versions: int, n: int) -> dict[str, float]:
    rng = random.Random(7)
    samples = []
    for _ in range(n):
        i = rng.randrange(keys)
        ts = ts_of(rng.randrange(versions), rng.randrange(keys), keys)
        key = key_of(i)
        t0 = time.perf_counter()
        with engine.snapshot() as snap:
            mvcc.get(snap, key, ts)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return {
        "p50_us": round(samples[len(samples) // 2] * 1e6, 2),
        "p99_us": round(samples[int(len(samples) * 0.99)] * 1e6, 2),
        "mean_us": round(statistics.fmean(samples) * 1e6, 2),
    }


def scans(engine: LMDBEngine, total_versions: int) -> dict[str, float]:
    everything = Span.for_prefix(b"user/")
    with engine.snapshot() as snap:
        t0 = time.perf_counter()
        rows = mvcc.scan(snap, everything, END_OF_TIME).rows
        latest = time.perf_counter() - t0
        t0 = time.perf_counter()
        history = sum(1 for _ in export.iter_export(snap, everything, Timestamp(0, 0), END_OF_TIME))
        full = time.perf_counter() - t0
    return {
        "mvcc_scan_rows": len(rows),
        "mvcc_scan_rows_per_s": round(len(rows) / latest),
        "mvcc_scan_versions_covered_per_s": round(total_versions / latest),
        "history_scan_versions_per_s": round(history / full),
    }


def export_vs_scan(engine: LMDBEngine, keys: int, versions: int) -> dict[str, float]:
    """A 1% time window: the time index against scanning every version in the keyspace."""
    total = keys * versions
    lo = ts_of(versions // 2, 0, keys).prev()
    hi = Timestamp(lo.wall + total // 100, 0)
    everything = Span.for_prefix(b"user/")
    with engine.snapshot() as snap:
        t0 = time.perf_counter()
        exported = sum(1 for _ in export.iter_export(snap, everything, lo, hi))
        export_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        brute = 0
        for raw_key, _ in snap.scan(
            VERSIONS, key_versions_start(everything.start), key_versions_start(everything.end)
        ):
            ts = decode_version_key(raw_key)[1]
            if lo < ts <= hi:
                brute += 1
        scan_s = time.perf_counter() - t0
    if exported != brute:
        raise SystemExit(f"export found {exported} versions, the full scan {brute}")
    return {
        "window_versions": exported,
        "export_ms": round(export_s * 1e3, 2),
        "full_scan_ms": round(scan_s * 1e3, 2),
        "speedup": round(scan_s / export_s, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench storage")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100, help="versions per commit job")
    parser.add_argument("--reads", type=int, default=20_000)
    args = parser.parse_args(argv)
    total = args.keys * args.versions
    result: dict[str, Any] = {"benchmark": "storage", "keys": args.keys, "versions": total}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-") as tmp:
        with LMDBEngine(os.path.join(tmp, "nosync"), databases=MVCC_DATABASES, sync=False) as e:
            result["put_nosync_versions_per_s"] = round(
                load(e, args.keys, args.versions, args.writers, args.batch)
            )
        with LMDBEngine(os.path.join(tmp, "sync"), databases=MVCC_DATABASES) as engine:
            result["put_durable_versions_per_s"] = round(
                load(engine, args.keys, args.versions, args.writers, args.batch)
            )
            result["group_commit"] = {
                "groups": engine.stats.groups,
                "jobs_per_group": round(engine.stats.jobs / max(engine.stats.groups, 1), 1),
            }
            result["single_put_durable_32_clients"] = single_put_rate(engine, 32, 3.0)
            result["point_read"] = point_reads(engine, args.keys, args.versions, args.reads)
            result["scan"] = scans(engine, total)
            result["incremental_export_1pct"] = export_vs_scan(engine, args.keys, args.versions)
    result["targets_met"] = {
        "durable_puts_50k": result["put_durable_versions_per_s"] >= 50_000,
        "nosync_puts_100k": result["put_nosync_versions_per_s"] >= 100_000,
        "point_read_p50_15us": result["point_read"]["p50_us"] <= 15,
        "scan_1m_versions": result["scan"]["mvcc_scan_versions_covered_per_s"] >= 1_000_000,
        "export_20x": result["incremental_export_1pct"]["speedup"] >= 20,
    }
    print(json.dumps(result, indent=2))
    return 0
