"""Zone configurations applied to a node: each table's ``closed_timestamp_target``
(``ALTER TABLE t CONFIGURE ZONE USING closed_timestamp_target = '200ms'``) becomes the
target its ranges close their timestamps at (:attr:`feedkv.kv.store.Store.closed_targets`);
the default zone's and each table's ``gc.ttlseconds`` how much history the store's GC
keeps of their ranges (:attr:`feedkv.kv.store.Store.gc_ttls`);
the default zone's and each table's ``num_replicas`` and the cluster setting
``server.time_until_store_dead`` drive the replication of a cluster's ranges
(:attr:`feedkv.server.cluster.Cluster.zone_settings`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from feedkv.changefeed.cluster_settings import time_until_store_dead_ns
from feedkv.errors import SQLError
from feedkv.server.cluster import ZoneSettings
from feedkv.sql import catalog
from feedkv.util.keys import Span

if TYPE_CHECKING:
    from feedkv.kv.txn import Txn
    from feedkv.rangefeed.feed_client import KV
    from feedkv.server.node import Node

__all__ = ["apply_zone_configs", "read_zone_settings", "write_default_zone"]


def apply_zone_configs(node: Node, client: KV) -> None:
    """Have ``node``'s store and cluster read the zone configurations through ``client``."""

    def closed_targets() -> list[tuple[Span, int]]:
        return catalog.zone_spans(catalog.Snapshot(client, client.now()))

    def gc_ttls() -> tuple[int | None, list[tuple[Span, int]]]:
        return catalog.zone_gc_ttls(catalog.Snapshot(client, client.now()))

    node.store.closed_targets = closed_targets
    node.store.gc_ttls = gc_ttls
    cluster = node.cluster
    if cluster is not None:
        cluster.zone_settings = lambda: read_zone_settings(client)
        if node.bootstrapped_cluster:
            write_default_zone(client, cluster.config.replicas)


def write_default_zone(client: KV, replicas: int) -> None:
    """Create the default zone of a cluster that starts now, with ``num_replicas`` from
    its first node's ``--replicas`` (CockroachDB creates it at bootstrap with 3); a zone
    already there stays. From then on ``ALTER RANGE default`` changes it, on any node."""
    key = catalog.default_zone_key()

    def create(txn: Txn) -> None:
        if txn.get(key) is None:
            txn.put(key, json.dumps({"num_replicas": replicas}).encode())

    client.run_transaction(create)


def read_zone_settings(client: KV) -> ZoneSettings:
    """What the zones and cluster settings say about replication, as of now."""
    snapshot = catalog.Snapshot(client, client.now())
    default, tables = catalog.zone_replicas(snapshot)
    raw = catalog.get_setting(snapshot, "server.time_until_store_dead")
    try:
        until_dead = time_until_store_dead_ns(raw) if raw is not None else None
    except SQLError:
        until_dead = None  # NB: refused when set; an older value that no longer parses
    return ZoneSettings(default, tuple(tables), until_dead)
