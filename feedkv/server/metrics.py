"""A node's metrics: its registry (:class:`~feedkv.util.metrics.Registry`), the metric
structs of the layers it wires (changefeeds, SQL, transactions), and what it samples
from its parts at each scrape:

- ``kv_rangefeed_processors``, ``kv_rangefeed_registrations``, ``kv_rangefeed_mem_shared``
  (the bytes of the rangefeed budget in use: gauges) and
  ``kv_rangefeed_catchup_scan_nanos`` (counter), from the node's rangefeeds;
- ``storage_wal_fsync_latency``: each group commit's time, its fsync included
  (nanoseconds, a histogram);
- ``liveness_livenodes``: the live members of its cluster (1, itself, for a node of its
  own);
- ``capacity``, ``capacity_available``: the size of the file system the store is on and
  what it has free; ``capacity_used`` and ``storage_lmdb_map_used_bytes``: the bytes of
  the LMDB map in use; ``storage_lmdb_map_size_bytes``: the map's size now (it doubles
  when full);
- ``sql_conns``: open connections to its SQL port;
- ``replicas``, ``replicas_leaseholders``, ``ranges``, ``ranges_unavailable``,
  ``ranges_underreplicated``: its replicas, as CockroachDB's store metrics count them
  (:func:`feedkv.kv.placement.range_counts`; a node of its own holds each of its ranges
  alone, and none is unavailable or under-replicated). These and the ``capacity``
  metrics are a store's: labelled ``store`` (its id, the node's), as CockroachDB's;
- ``sys_uptime``: seconds since the node's metrics were made (its start);
- ``sys_cpu_user_ns`` and ``sys_cpu_sys_ns``: the process's user and system CPU time;
- ``sys_thread_cpu_ns``, feedkv's own (CockroachDB's Go runtime has no threads to name):
  the CPU time of each of the process's running threads, by name
  (:func:`feedkv.util.cpu.threads_cpu_ns`): the commit thread, the replica loop, each
  connection's reader and writer. Where a node's CPU goes, when the GIL lets one thread
  run at a time.

The HTTP port serves them (:mod:`feedkv.server.http`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol

from feedkv.changefeed.metrics import ChangefeedMetrics
from feedkv.kv.metrics import TxnMetrics
from feedkv.kv.placement import RangeCounts
from feedkv.kv.store import Store
from feedkv.pgwire.server import PGServer
from feedkv.rangefeed.store_feeds import StoreFeeds
from feedkv.server.cluster import Cluster
from feedkv.sql.metrics import SQLMetrics
from feedkv.util.cpu import process_cpu_ns, threads_cpu_ns
from feedkv.util.metrics import Registry

__all__ = ["NodeMetrics", "NodeParts"]


class NodeParts(Protocol):
    """What the metrics sample of a node (:class:`feedkv.server.node.Node`), read at
    each scrape: a part may not exist yet, or no more."""

    store: Store
    feeds: StoreFeeds
    cluster: Cluster | None
    sql_server: PGServer | None


class NodeMetrics:
    def __init__(self, node: NodeParts, *, enabled: bool = True) -> None:
        """``enabled=False``: metrics that record nothing (see :mod:`feedkv.util.metrics`)."""
        self.registry = r = Registry(enabled=enabled)
        self.changefeeds = ChangefeedMetrics(r, gc_ttl_ns=node.store.config.gc_ttl_ns)
        self.sql = SQLMetrics(r)
        self.txn = TxnMetrics(r)
        feeds = r.per_scrape(lambda: node.feeds.counts())
        r.sampled(
            "kv_rangefeed_processors",
            "Number of active RangeFeed processors",
            lambda: feeds()[0],
        )
        r.sampled(
            "kv_rangefeed_registrations",
            "Number of active RangeFeed registrations",
            lambda: feeds()[1],
        )
        r.sampled(
            "kv_rangefeed_catchup_scan_nanos",
            "Time spent in RangeFeed catchup scan",
            lambda: node.feeds.catchup_scan_ns,
            kind="counter",
        )
        r.sampled(
            "liveness_livenodes",
            "Number of live nodes in the cluster (will be 0 if this node is not itself live)",
            lambda: _live_nodes(node),
        )
        # NB: CockroachDB's store metrics carry the store's id (here one store a node,
        # of the node's id), which its alert rules sum away (sum without(store) ...)
        disk = r.per_scrape(lambda: os.statvfs(node.store.engine.path))
        r.sampled(
            "capacity",
            "Total storage capacity (of the file system the store is on)",
            _of_store(node, lambda: disk().f_blocks * disk().f_frsize),
            labelnames=("store",),
        )
        r.sampled(
            "capacity_available",
            "Available storage capacity (what the file system the store is on has free)",
            _of_store(node, lambda: disk().f_bavail * disk().f_frsize),
            labelnames=("store",),
        )
        r.sampled(
            "capacity_used",
            "Used storage capacity (the bytes of the LMDB map in use)",
            _of_store(node, lambda: node.store.engine.used_bytes),
            labelnames=("store",),
        )
        r.sampled(
            "storage_lmdb_map_used_bytes",
            "Bytes of the LMDB memory map in use",
            lambda: node.store.engine.used_bytes,
        )
        r.sampled(
            "storage_lmdb_map_size_bytes",
            "Size of the LMDB memory map (it doubles when full)",
            lambda: node.store.engine.map_size,
        )
        r.sampled(
            "kv_rangefeed_mem_shared",
            "Memory usage by rangefeeds: bytes of the node's rangefeed budget held by "
            "queued events",
            lambda: float(node.feeds.budget.used),
        )
        # NB: observed on the engine's commit thread, which every write waits for: one
        # writer, so no lock (and no lambda: the engine tells seconds, scaled here)
        fsync = r.lean_histogram(
            "storage_wal_fsync_latency",
            "The commit latency of a group of writes, its fsync included (LMDB has no "
            "separate write-ahead log: the commit is its fsync)",
            scale=1e9,
            single_writer=True,
        )
        if r.enabled:
            node.store.engine.on_commit = fsync.observe
        # NB: the five range metrics share one walk of the store's ranges a scrape
        counts = r.per_scrape(lambda: _range_counts(node))
        for name, help_text, field in _RANGE_METRICS:
            r.sampled(
                name, help_text, _of_store(node, _range_count(counts, field)), labelnames=("store",)
            )
        started = time.monotonic()
        r.sampled(
            "sys_uptime",
            "Process uptime",
            lambda: time.monotonic() - started,
            kind="counter",
        )
        process_cpu = r.per_scrape(process_cpu_ns)
        r.sampled("sys_cpu_user_ns", "Total user cpu time", lambda: process_cpu()[0])
        r.sampled("sys_cpu_sys_ns", "Total system cpu time", lambda: process_cpu()[1])
        r.sampled(
            "sys_thread_cpu_ns",
            "CPU time (user and system) of the process's running threads, by thread name",
            lambda: {(name,): ns for name, ns in threads_cpu_ns().items()},
            labelnames=("thread",),
        )
        r.sampled(
            "sql_conns",
            "Number of open SQL connections",
            lambda: node.sql_server.connections if node.sql_server is not None else 0,
        )


# CockroachDB's name, its help text, the RangeCounts field
_RANGE_METRICS = (
    ("replicas", "Number of replicas", "replicas"),
    ("replicas_leaseholders", "Number of lease holders", "leaseholders"),
    ("ranges", "Number of ranges", "ranges"),
    (
        "ranges_unavailable",
        "Number of ranges with fewer live replicas than needed for quorum",
        "unavailable",
    ),
    (
        "ranges_underreplicated",
        "Number of ranges with fewer live replicas than the replication target",
        "underreplicated",
    ),
)


def _of_store(
    node: NodeParts, read: Callable[[], float]
) -> Callable[[], dict[tuple[str, ...], float]]:
    """A store metric's sample: ``read()``, labelled with the store's id."""
    return lambda: {(str(node.store.node_id),): float(read())}


def _range_count(counts: Callable[[], RangeCounts], field: str) -> Callable[[], float]:
    return lambda: float(getattr(counts(), field))


def _range_counts(node: NodeParts) -> RangeCounts:
    if node.cluster is not None:
        return node.cluster.range_counts()
    held = len(node.store.descriptors())
    return RangeCounts(replicas=held, leaseholders=held, ranges=held)


def _live_nodes(node: NodeParts) -> float:
    if node.cluster is None:
        return 1.0
    now = time.monotonic_ns()
    return float(sum(status.live for status in node.cluster.liveness.status(now)))
