"""`feedkv bench cluster`: one node against three, in one run, on loopback.

- ``kv0``: `feedkv bench kv`'s workload (single-row upserts of 100-byte values over 100k
  keys, each durable) over gRPC against one `feedkv start` node, then against a
  three-node cluster whose kv0 keyspace is split into nine ranges, three on each node;
  the client processes are spread over the nodes (each client sends each write to the
  node holding its range). Reports commits/s, p50/p99, the ratio, the CPU seconds
  each node process and the clients used, and the CPU per commit (the GIL holds a node
  to at most about one core; this machine has ``cores``, which the clients share).
  ``--rounds N`` (3 by default) runs N rounds of the two, in alternating order: each row
  is its median run, the ratio the median of the rounds' ratios (:func:`kv.alternate`).

  The ceiling on two cores (2026-12-01, ``--seconds 8``, three rounds): one node ran
  9.3k-12.4k commits/s on 67-91 us of node CPU and 57-83 us of client CPU a commit;
  three nodes ran 7.0k-10.1k on 118-174 us summed over the nodes and 67-94 us of
  client (ratio 0.75, the median of the rounds' 1.02, 0.68 and 0.75). A node is not
  bound to one core by the GIL here: one node and its clients already fill the
  machine, so three nodes could pass one only by costing less CPU a commit than one
  node does; at the same cost they would only match it, short of the 1.3x target.
  Three nodes cost more a commit because the same 32 clients' writes are spread over
  three times as many client-to-node connections (each client process keeps one to
  each node): each node's group commit takes fewer writes (its commit thread: 66-87 us
  a commit summed, against 40-47 on one node), and each message fewer calls (the
  connections' threads: 48-80 us against 27-43). A linger before sending
  (0.5-2 ms) or before a group commit (1 ms) did not lower that on this machine
  (measured when a stream was gRPC's).
- ``relocation``: a range of ``--relocate-mib`` MiB moved between two nodes while a
  writer keeps writing into it: the move's duration and the writer's p99 latency during
  it (its writes wait while the range is frozen).
- ``rangefeed_lag``: the time from a write's commit to its value arriving on a rangefeed
  that spans three nodes, against one node: p50/p99.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

import feedkv
from feedkv.rangefeed.event import Value
from feedkv.testing.benches import bench_module
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_process import NodeProcess
from feedkv.util.keys import Span

kv = bench_module("kv")
TARGETS = {"kv0_ratio_3_over_1": 1.3}
SPLITS = [kv.key_of(kv.KEYS * i // 9) for i in range(1, 9)]


def clients_over(urls: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """kv0 client processes, one per URL, sharing ``clients`` threads
    (:func:`kv.client_processes`)."""
    return kv.client_processes(kv.__file__, urls, clients, seconds)


def kv0_over(
    nodes: list[NodeProcess], urls: list[str], clients: int, seconds: float
) -> dict[str, Any]:
    """:func:`clients_over` ``urls``, with the CPU ``nodes`` spent: each node's seconds
    (``node_cpu_s``), the microseconds a commit cost the nodes together and the clients
    (steadier than commits/s on a machine other work shares), and the nodes' together
    thread by thread (``node_thread_cpu_us_per_commit``, from their
    ``sys_thread_cpu_ns``)."""
    before = [kv.cpu_seconds(node.process.pid) for node in nodes]
    threads_before = [threads_cpu_ns(node) for node in nodes]
    row = clients_over(urls, clients, seconds)
    row["node_cpu_s"] = [
        round(kv.cpu_seconds(node.process.pid) - b, 1)
        for node, b in zip(nodes, before, strict=True)
    ]
    commits = max(row["commits"], 1)
    row["node_cpu_us_per_commit"] = round(1e6 * sum(row["node_cpu_s"]) / commits)
    row["client_cpu_us_per_commit"] = round(1e6 * row["client_cpu_s"] / commits)
    spent: dict[str, float] = {}
    for node, earlier in zip(nodes, threads_before, strict=True):
        for name, ns in threads_cpu_ns(node).items():
            spent[name] = spent.get(name, 0.0) + ns - earlier.get(name, 0.0)
    row["node_thread_cpu_us_per_commit"] = {
        name: round(ns / 1e3 / commits, 1)
        for name, ns in sorted(spent.items(), key=lambda item: -item[1])
        if ns / 1e3 / commits >= 0.5
    }
    return row


def threads_cpu_ns(node: NodeProcess) -> dict[str, float]:
    """A node's ``sys_thread_cpu_ns``, by thread name (its metrics over HTTP)."""
    text = httpx.get(node.http_url + "/_status/vars", timeout=30).text
    return {
        sample.labels["thread"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "sys_thread_cpu_ns"
        for sample in family.samples
    }


def kv0_one_node(clients: int, seconds: float, tmp: Path) -> dict[str, Any]:
    node = NodeProcess(tmp / "one", "--changefeed-runner", "thread", "--insecure")
    try:
        with feedkv.connect(node.url) as db:
            for key in SPLITS:
                db.split(key)
        return kv0_over([node], [node.url] * 3, clients, seconds)
    finally:
        node.terminate()


def kv0_three_nodes(clients: int, seconds: float, tmp: Path) -> dict[str, Any]:
    with LocalCluster(tmp / "three", 3, rebalance_interval="0s", insecure=True) as cluster:
        with cluster.connect(0) as db:
            for key in SPLITS:
                db.split(key)
            for i, key in enumerate([kv.key_of(0), *SPLITS]):
                db.relocate(key, i % 3 + 1)
        nodes = [p for p in cluster.processes if p is not None]
        return kv0_over(nodes, [cluster.url(i) for i in range(3)], clients, seconds)


def fresh(base: Path) -> Path:
    """A new directory in ``base``, for one run's stores."""
    return Path(tempfile.mkdtemp(dir=base))


def ratio_of_rounds(runs: dict[str, list[dict[str, Any]]], top: str, bottom: str) -> dict[str, Any]:
    """kv0's two kinds of run over :func:`kv.alternate` rounds: each kind's median run,
    the median of the rounds' ratios of ``top`` to ``bottom``, and each round's
    commits/s."""
    return {
        bottom: kv.median_row(runs[bottom]),
        top: kv.median_row(runs[top]),
        "ratio_3_over_1": kv.median_ratio(runs[top], runs[bottom]),
        "rounds": [
            {bottom: b["commits_per_s"], top: t["commits_per_s"]}
            for b, t in zip(runs[bottom], runs[top], strict=True)
        ],
    }


def relocation(mib: int, tmp: Path) -> dict[str, Any]:
    """Move a ``mib`` MiB range between two nodes while a writer writes into it."""
    with LocalCluster(tmp / "move", 2, rebalance_interval="0s", insecure=True) as cluster:
        db = cluster.connect(0)
        db.split(b"big/")
        db.split(b"big0")
        value = b"x" * 1000
        rows = mib * 1024
        load_start = time.perf_counter()
        for batch in range(0, rows, 1000):

            def load(txn: Any, batch: int = batch) -> None:
                for i in range(batch, min(rows, batch + 1000)):
                    txn.put(b"big/%08d" % i, value)

            db.run_transaction(load)
        load_s = time.perf_counter() - load_start
        stop = threading.Event()
        writes: list[tuple[float, float]] = []  # (start, end) of each write

        def writer() -> None:
            client = cluster.connect(1)
            i = 0
            while not stop.is_set():
                start = time.perf_counter()
                client.put(b"big/%08d" % (i % rows), b"w")
                writes.append((start, time.perf_counter()))
                i += 1
            client.close()

        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(1.0)  # wait-ok: the writer's latency before the move, for comparison
        start = time.perf_counter()
        db.relocate(b"big/", 2)
        end = time.perf_counter()
        time.sleep(0.5)  # wait-ok: the writes the move held up finish
        stop.set()
        thread.join()
        count = len(db.scan(b"big/", b"big0"))
        db.close()
    move_s = end - start
    # the writes that overlapped the move (those it held up among them), and the others
    during = sorted(e - s for s, e in writes if s < end and e > start)
    before = sorted(e - s for s, e in writes if e <= start)
    return {
        "range_mib": mib,
        "rows": rows,
        "load_s": round(load_s, 1),
        "move_s": round(move_s, 2),
        "writes_during_move": len(during),
        "write_max_ms_during_move": round(during[-1] * 1000, 1) if during else None,
        "write_p99_ms_before_move": round(before[int(len(before) * 0.99)] * 1000, 1)
        if before
        else None,
        "rows_after_move": count,
    }


def feed_lags(cluster: LocalCluster, writes: int, *, relocate: bool) -> list[float]:
    """Commit-to-delivery latencies (sorted, seconds) of ``writes`` values written into
    three ranges (``relocate``: one on each node, round robin) and read by a rangefeed
    of a client of the last node."""
    nodes = len(cluster.processes)
    db = cluster.connect(0)
    splits = [b"lag/%d" % i for i in range(3)]
    for i, key in enumerate(splits):
        db.split(key)
        if relocate:
            db.relocate(key, i % nodes + 1)
    db.split(b"lag0")
    lags: list[float] = []
    sent: dict[bytes, float] = {}
    done = threading.Event()
    with cluster.connect(nodes - 1).rangefeed([Span(b"lag/", b"lag0")], db.now()) as feed:

        def read() -> None:
            for event in feed:
                if isinstance(event, Value) and event.key in sent:
                    lags.append(time.perf_counter() - sent.pop(event.key))
                    if len(lags) >= writes:
                        done.set()
                        return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for i in range(writes):
            key = b"lag/%d/%05d" % (i % 3, i)
            sent[key] = time.perf_counter()
            db.put(key, b"v")
            time.sleep(0.005)  # wait-ok: an open-loop write rate of about 200/s
        done.wait(60)
    db.close()
    return sorted(lags)


def rangefeed_lag(nodes: int, writes: int, tmp: Path) -> dict[str, Any]:
    """Commit-to-delivery latency of values on a feed whose ranges span ``nodes``."""
    with LocalCluster(
        tmp / f"lag{nodes}", nodes, rebalance_interval="0s", insecure=True
    ) as cluster:
        lags = feed_lags(cluster, writes, relocate=True)
    return {
        "nodes": nodes,
        "values": len(lags),
        "p50_ms": round(lags[len(lags) // 2] * 1000, 1),
        "p99_ms": round(lags[int(len(lags) * 0.99)] * 1000, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench cluster", description=__doc__)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--relocate-mib", type=int, default=64)
    parser.add_argument("--lag-writes", type=int, default=1000)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating rounds of kv0's two runs (medians)"
    )
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "cluster",
        "workload": "kv0 over gRPC (bench kv's), 1 node vs 3 nodes; a range move; feed lag",
        "clients": args.clients,
        "seconds": args.seconds,
        "cores": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="feedkv-bench-cluster-") as tmp:
        base = Path(tmp)
        runs = kv.alternate(
            {
                "one_node": lambda: kv0_one_node(args.clients, args.seconds, fresh(base)),
                "three_nodes": lambda: kv0_three_nodes(args.clients, args.seconds, fresh(base)),
            },
            args.rounds,
        )
        result["kv0"] = ratio_of_rounds(runs, "three_nodes", "one_node")
        result["relocation"] = relocation(args.relocate_mib, base)
        result["rangefeed_lag"] = {
            "one_node": rangefeed_lag(1, args.lag_writes, base),
            "three_nodes": rangefeed_lag(3, args.lag_writes, base),
        }
    result["targets"] = TARGETS
    result["targets_met"] = {
        "kv0_ratio_3_over_1": result["kv0"]["ratio_3_over_1"] >= TARGETS["kv0_ratio_3_over_1"]
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
