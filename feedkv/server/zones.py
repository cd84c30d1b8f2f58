"""Zone configurations applied to a node's store: each table's ``closed_timestamp_target``
(``ALTER TABLE t CONFIGURE ZONE USING closed_timestamp_target = '200ms'``) becomes the
target its ranges close their timestamps at (:attr:`feedkv.kv.store.Store.closed_targets`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feedkv.sql import catalog
from feedkv.util.keys import Span

if TYPE_CHECKING:
    from feedkv.rangefeed.feed_client import KV
    from feedkv.server.node import Node

__all__ = ["apply_zone_configs"]


def apply_zone_configs(node: Node, client: KV) -> None:
    """Have ``node``'s store read the tables' zone configurations through ``client``."""

    def closed_targets() -> list[tuple[Span, int]]:
        return catalog.zone_spans(catalog.Snapshot(client, client.now()))

    node.store.closed_targets = closed_targets
