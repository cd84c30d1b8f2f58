"""NodeInfo, what the ``Nodes`` call carries: its map round-trips, a map from a node that
sends fewer fields (no start, heartbeat or expiration) still decodes, and a node of its
own is live (and available), in its first epoch, holding every range, running this
build."""

from __future__ import annotations

from dataclasses import replace

from feedkv.kv.node_status import NodeInfo, node_of_its_own
from feedkv.util.build import BUILD_TAG


def test_a_nodes_map_round_trips() -> None:
    info = NodeInfo(3, "127.0.0.1:5", 7, False, 4, -120, 10, 20, 30, 2)
    assert NodeInfo.decode(info.encode()) == info
    told = replace(info, build="v9.9.9", available=True, draining=True)
    assert NodeInfo.decode(told.encode()) == told


def test_a_map_without_the_times_decodes_with_none() -> None:
    raw = {"id": 2, "address": "h:1", "epoch": 1, "live": True, "ranges": 0, "offset_ns": None}
    assert NodeInfo.decode(raw) == NodeInfo(2, "h:1", 1, True, 0, None, None, None, None)


def test_a_node_of_its_own_is_live_and_holds_every_range() -> None:
    info = node_of_its_own(1, 5, 1_000, "127.0.0.1:26258")
    assert (info.node_id, info.epoch, info.live, info.ranges) == (1, 1, True, 5)
    assert info.updated_at_ns == 1_000 and info.offset_ns == 0
    assert (info.build, info.available) == (BUILD_TAG, True)
