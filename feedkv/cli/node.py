"""``feedkv node status``: the nodes of a cluster as the node at ``--url`` sees them."""

from __future__ import annotations

import sys
from typing import TextIO

import feedkv
from feedkv.cli.sql import write_result
from feedkv.sql.crdb_internal import wall_time
from feedkv.sql.session import Result

__all__ = ["run_node_status"]

COLUMNS = (
    "id",
    "address",
    "epoch",
    "started_at",
    "updated_at",
    "is_live",
    "ranges",
    "clock_offset_ms",
)


def run_node_status(url: str, output: str = "table", stdout: TextIO | None = None) -> int:
    """Print each node: id, address, epoch, start, last heartbeat, liveness, ranges held
    and clock offset, as ``crdb_internal.gossip_nodes`` and ``gossip_liveness`` show them
    (the same source: :meth:`feedkv.kv.db.KVClient.nodes`)."""
    with feedkv.connect(url) as db:
        rows = [
            (
                node.node_id,
                node.address,
                node.epoch,
                wall_time(node.started_at_ns),
                wall_time(node.updated_at_ns),
                node.live,
                node.ranges,
                round(node.offset_ns / 1e6, 1) if node.offset_ns is not None else None,
            )
            for node in db.nodes()
        ]
    write_result(Result(COLUMNS, rows, f"SELECT {len(rows)}"), output, stdout or sys.stdout)
    return 0
