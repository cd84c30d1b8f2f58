"""A node's membership of its cluster: active, decommissioning or decommissioned.

``feedkv node decommission N`` (as ``cockroach node decommission``) marks node N
``decommissioning``: the lease holders of its ranges replace its replicas on other nodes
(:func:`~feedkv.kv.placement.choose_replica_change` counts it as gone), and once it
holds none the command marks it ``decommissioned``: every node refuses its heartbeats
and Raft messages, and the node itself refuses to serve. ``feedkv node recommission N``
takes back a decommissioning node (not a decommissioned one: its replicas are gone).

The records are cluster keys (one per node that left ``active``), written in
transactions through any node and read by every node each time it looks at its ranges'
replication. Pure: keys and codec only.
"""

from __future__ import annotations

import enum

from feedkv.errors import InvalidArgumentError
from feedkv.util.keys import Span

__all__ = [
    "Membership",
    "membership_key",
    "membership_span",
    "node_of_key",
]

_PREFIX = b"\x00\x00cluster/membership/"


class Membership(enum.Enum):
    ACTIVE = "active"
    DECOMMISSIONING = "decommissioning"
    DECOMMISSIONED = "decommissioned"

    @classmethod
    def parse(cls, raw: bytes | str) -> Membership:
        text = raw.decode() if isinstance(raw, bytes) else raw
        try:
            return cls(text)
        except ValueError:
            raise InvalidArgumentError(
                f"unknown membership {text!r}; expected active, decommissioning or decommissioned"
            ) from None


def membership_key(node_id: int) -> bytes:
    """The key of node ``node_id``'s membership record (its value: the state's name)."""
    return _PREFIX + b"%010d" % node_id


def membership_span() -> Span:
    """Every node's membership record."""
    return Span(_PREFIX, _PREFIX[:-1] + b"0")


def node_of_key(key: bytes) -> int:
    """The node a membership record's key names."""
    return int(key[len(_PREFIX) :])
