"""Who may call what on a secure node's gRPC API.

The nodes and root (:data:`ADMIN_USERS`) may call everything: the raw KV API, the
rangefeeds, the cluster's own methods. Any other user who proves to be one (a client
certificate of the cluster's CA, or a password: :mod:`feedkv.security.call_auth`) may
call only :data:`USER_METHODS`, and through them only read: a batch of plain reads
(:func:`reads_of`) or a rangefeed registration, each span of which a :class:`ReadAccess`
must allow. That is what a client of a table needs (the Spark data source reading as its
user, as a CockroachDB sinkless changefeed does); the KV layer does not know what a
table is, so the rule comes from above (the SQL layer's
:class:`~feedkv.sql.read_access.TableReadAccess`), wired in by the node.

Range lookups (which range holds a key, and where) and ``Now`` need no grant: a client
must route its reads, and range boundaries and the clock are no one's data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from feedkv.errors import PermissionDeniedError
from feedkv.kv.api import BatchRequest, Export, Get, IncrementalScan, RangeLookup, Scan
from feedkv.security.certs import NODE_USER
from feedkv.util.keys import Span, key_next

__all__ = ["ADMIN_USERS", "USER_METHODS", "Read", "ReadAccess", "reads_of"]

# Who may call a secure node's every gRPC method: the nodes, and root (the admin, as
# CockroachDB's).
ADMIN_USERS = frozenset({NODE_USER, "root"})
# What another user may call, each call then checked by a ReadAccess (``HoldHistory``:
# by the grants, see feedkv.changefeed.hold_calls). ``Nodes`` tells a client where the
# other nodes listen, which routing its reads needs. ``CancelCall`` gives up on a batch
# whose secret token only its sender knows. ``BatchPort`` names the batch port
# (feedkv.kv.batch_socket), whose streams such a user may open too: its batches are
# checked as ``Batch``'s, its rangefeed registrations each by the ReadAccess.
USER_METHODS = frozenset({"Batch", "BatchPort", "CancelCall", "Now", "Nodes", "HoldHistory"})


@dataclass(frozen=True, slots=True)
class Read:
    """A span a call reads: a point read (``Get``) reads ``span.start`` only."""

    span: Span
    point: bool = False


class ReadAccess(Protocol):
    """Decides whether a user who is not in :data:`ADMIN_USERS` may read spans."""

    def check(self, user: str, reads: Sequence[Read]) -> None:
        """Returns when ``user`` may make every read of ``reads``; else raises
        :class:`PermissionDeniedError` saying which read and why. May block on
        reads of its own (the grants); safe to call from many threads."""
        ...


def reads_of(batch: BatchRequest) -> list[Read]:
    """What ``batch`` reads, for a user who may only read: every request must be a plain
    read (``Get``, ``Scan``, ``Export``) or a range lookup, outside any transaction.
    :class:`PermissionDeniedError` names the first request that is not."""
    if batch.header.txn is not None:
        raise PermissionDeniedError(
            "transactions over the raw KV API are only for nodes and root; "
            "use SQL (the SQL port) to write"
        )
    reads: list[Read] = []
    for request in batch.requests:
        if isinstance(request, Get):
            reads.append(Read(Span(request.key, key_next(request.key)), point=True))
        elif isinstance(request, Scan | Export | IncrementalScan):
            reads.append(Read(request.span))
        elif not isinstance(request, RangeLookup):
            raise PermissionDeniedError(
                f"{type(request).__name__} over the raw KV API is only for nodes and root; "
                "another user may only read tables it holds SELECT on (or use SQL)"
            )
    return reads
