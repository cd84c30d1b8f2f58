"""`feedkv bench dead_node`: what a SIGKILLed node costs its clients and the cluster.

Three ``feedkv start`` processes on loopback (secure, as started by default):

- ``dial_dead_s``: a client that never dialled node n3 dials it after n3's SIGKILL;
- ``connect_dead_first_s``: ``feedkv.connect`` with a URL that names the dead n3 first;
- ``move_past_dead_s``: a client connected through n1 with the URL ``n1,n3,n2``: after
  n1's SIGKILL too, its next call (the clock), which moves its gateway past the dead n3
  to n2;
- ``stop_s`` (a cluster of its own, ``--replicas 3``): SIGTERM to a node serving a
  client's rangefeed and a peer's streams, until it exits;
- ``rolling`` (a cluster of its own, ``--replicas 3``, its ranges' leases spread over the
  nodes): a rolling restart (each node in turn SIGTERMed, then started again) under a
  steady kv0 writer (one client writing random keys, one at a time); for each
  ``--lease-transfer-wait`` (``0s``: the stopping node hands no lease over, as before
  the lease drain; ``5s``: the default), over the windows from each SIGTERM until the
  node serves again: ``max_gap_s`` (the longest time without a successful write),
  ``p99_ms`` (of the writes begun in them), ``errors`` (writes that failed; of them
  ``ambiguous``: whose outcome the client could not tell, SQL's 40003) and
  ``stop_s`` (the slowest of the three stops);
- ``split_counter_unavailable_s`` (three in-process nodes, ``replicas=3``): the range
  holding the range-id counter split off, its lease on n2, then n2 and n3 stopped (no
  quorum); n1 takes range ids as its splits would until one fails (``ids_first`` were
  the ids it held): the time the failing one held its caller, the split queue.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import feedkv
from feedkv.errors import AmbiguousResultError, FeedKVError
from feedkv.kv.dialer import ClusterDialer
from feedkv.kv.range_id_alloc import BLOCK_SIZE, RANGE_IDS_KEY
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_cluster import await_replicas, node_cluster
from feedkv.util.keys import Span


def _timed(fn: Callable[[], object]) -> tuple[float, str]:
    """Seconds ``fn()`` took, and what it raised (``""``: nothing)."""
    started = time.monotonic()
    outcome = ""
    try:
        fn()
    except FeedKVError as exc:
        outcome = f"{type(exc).__name__}: {str(exc)[:160]}"
    return time.monotonic() - started, outcome


def _url(cluster: LocalCluster, addresses: list[str]) -> str:
    return f"feedkv://{','.join(addresses)}?certs_dir={cluster.certs_dir}"


def dead_dials(base: Path) -> dict[str, Any]:
    with LocalCluster(base, 3, rebalance_interval="0s") as cluster:
        n1, n2, n3 = (cluster.address(i) for i in range(3))
        client = cluster.connect(0)
        cluster.kill(2)
        dialer = client.transport
        assert isinstance(dialer, ClusterDialer)
        dial_s, dial_error = _timed(lambda: dialer.dial(3))
        connect_s, _ = _timed(lambda: feedkv.connect(_url(cluster, [n3, n1, n2])).close())
        mover = feedkv.connect(_url(cluster, [n1, n3, n2]))
        cluster.kill(0)
        move_s, move_error = _timed(mover.now)
        mover.close()
        client.close()
    return {
        "dial_dead_s": round(dial_s, 3),
        "dial_dead_error": dial_error,
        "connect_dead_first_s": round(connect_s, 3),
        "move_past_dead_s": round(move_s, 3),
        "move_error": move_error,
    }


def stop(base: Path) -> dict[str, Any]:
    with (
        LocalCluster(base, 3, "--replicas", "3", rebalance_interval="0s") as cluster,
        cluster.connect(1) as db,
    ):
        db.put(b"stop/a", b"1")
        with db.rangefeed([Span(b"stop/", b"stop0")], db.now()):
            node = cluster.processes[1]
            assert node is not None
            started = time.monotonic()
            code = node.terminate(timeout_s=120)
            took = time.monotonic() - started
            cluster.processes[1] = None
    return {"stop_s": round(took, 3), "stop_exit_code": code}


ROLLING_RANGES = 6
ROLLING_SETTLE_S = 3.0  # how long a restarted node serves before the next node stops


class _Writer:
    """A kv0 writer: puts random keys one at a time until :meth:`stop`, noting when
    each write began and ended, and when each failed."""

    def __init__(self, db: feedkv.DB) -> None:
        self.db = db
        self.writes: list[tuple[float, float]] = []  # (began, ended), monotonic
        self.errors: list[tuple[float, bool]] = []  # (when, whether ambiguous)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rng = random.Random(1)
        while not self._stop.is_set():
            key = b"kv/%d/%016d" % (rng.randrange(ROLLING_RANGES), rng.randrange(10**16))
            began = time.monotonic()
            try:
                self.db.put(key, b"x" * 16)
            except FeedKVError as exc:
                self.errors.append((time.monotonic(), isinstance(exc, AmbiguousResultError)))
                continue
            self.writes.append((began, time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)


def _window_figures(writer: _Writer, start: float, end: float) -> dict[str, float]:
    """The writes' figures over ``[start, end]``: the longest gap between successful
    writes (from the last one before ``start``), the p99 latency of those begun in it."""
    ends = [e for _, e in writer.writes]
    before = [e for e in ends if e < start]
    inside = sorted(e for e in ends if start <= e <= end)
    marks = [before[-1] if before else start, *inside, end]
    gap = max(b - a for a, b in itertools.pairwise(marks))
    latencies = sorted(e - b for b, e in writer.writes if start <= b <= end)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0
    return {
        "max_gap_s": round(gap, 3),
        "p99_ms": round(p99 * 1000, 1),
        "writes": len(latencies),
        "errors": sum(1 for t, _ in writer.errors if start <= t <= end),
        "ambiguous": sum(1 for t, ambiguous in writer.errors if ambiguous and start <= t <= end),
    }


def rolling_restart(base: Path, wait: str) -> dict[str, Any]:
    with LocalCluster(
        base, 3, "--replicas", "3", "--lease-transfer-wait", wait, rebalance_interval="0s"
    ) as cluster:
        with cluster.connect(0) as setup:
            await_replicas(setup, 3, timeout_s=120)
            for part in range(1, ROLLING_RANGES):
                setup.split(b"kv/%d" % part)
            await_replicas(setup, 3, timeout_s=120)
            for part in range(ROLLING_RANGES):  # each node leads two of them
                setup.relocate(b"kv/%d" % part, part % 3 + 1)
        addresses = [cluster.address(i) for i in range(3)]
        db = feedkv.connect(_url(cluster, addresses))
        writer = _Writer(db)
        windows = []
        stops = []
        try:
            time.sleep(ROLLING_SETTLE_S)  # wait-ok: the writer's steady state before
            for index in range(3):
                node = cluster.processes[index]
                assert node is not None
                start = time.monotonic()
                node.terminate(timeout_s=120)
                stops.append(time.monotonic() - start)
                cluster.processes[index] = None
                cluster.restart(index)
                time.sleep(ROLLING_SETTLE_S)  # wait-ok: the figures' window after it
                windows.append(_window_figures(writer, start, time.monotonic()))
        finally:
            writer.stop()
            db.close()
    return {
        "max_gap_s": max(w["max_gap_s"] for w in windows),
        "p99_ms": max(w["p99_ms"] for w in windows),
        "errors": sum(w["errors"] for w in windows),
        "ambiguous": sum(w["ambiguous"] for w in windows),
        "writes": sum(w["writes"] for w in windows),
        "stop_s": round(max(stops), 3),
        "per_node": windows,
    }


def rolling(base: Path) -> dict[str, Any]:
    return {
        "rolling": {
            f"lease_transfer_wait_{wait}": rolling_restart(base / wait, wait)
            for wait in ("0s", "5s")
        }
    }


def split_counter_unavailable(base: Path) -> dict[str, Any]:
    with node_cluster(base) as nodes:
        first = nodes[0]
        with feedkv.connect(first.url) as db:
            await_replicas(db, 3, timeout_s=120)
            db.split(RANGE_IDS_KEY)
            db.split(RANGE_IDS_KEY + b"\x00")
            db.relocate(RANGE_IDS_KEY, 2)  # its lease to n2
        for node in nodes[1:]:
            node.stop(grace_s=0)  # the counter's range loses its quorum and its lease
        member = first.cluster
        assert member is not None
        held = 0
        while True:  # until the ids n1 holds run out
            took, error = _timed(member.range_ids.allocate)
            if error or held > 2 * BLOCK_SIZE:
                break
            held += 1
    return {"split_counter_unavailable_s": round(took, 3), "ids_first": held, "split_error": error}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench dead_node", description=__doc__)
    parser.add_argument(
        "--only",
        choices=["dials", "stop", "rolling", "split"],
        help="one part (default: all)",
    )
    args = parser.parse_args(argv)
    parts = {
        "dials": dead_dials,
        "stop": stop,
        "rolling": rolling,
        "split": split_counter_unavailable,
    }
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-dead-") as tmp:
        for name, part in parts.items():
            if args.only in (None, name):
                result.update(part(Path(tmp) / name))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
