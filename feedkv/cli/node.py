"""``feedkv node status``: the nodes of a cluster as the node at ``--url`` sees them."""

from __future__ import annotations

import sys
from typing import TextIO

import feedkv
from feedkv.cli.sql import write_result
from feedkv.kv.dialer import nodes
from feedkv.sql.session import Result

__all__ = ["run_node_status"]

COLUMNS = ("id", "address", "epoch", "is_live", "ranges", "clock_offset_ms")


def run_node_status(url: str, output: str = "table", stdout: TextIO | None = None) -> int:
    """Print each node: id, address, epoch, liveness, ranges held and clock offset."""
    with feedkv.connect(url) as db:
        rows = [
            (
                node["id"],
                node["address"],
                node["epoch"],
                node["live"],
                node["ranges"],
                round(node["offset_ns"] / 1e6, 1) if node["offset_ns"] is not None else None,
            )
            for node in nodes(db)
        ]
    write_result(Result(COLUMNS, rows, f"SELECT {len(rows)}"), output, stdout or sys.stdout)
    return 0
