"""Where every range of a cluster lives, as its nodes report it: the cluster's addressing.

Each node is the authority on the ranges its store holds: it reports their descriptors
(with a sequence number that grows with each change) in its heartbeats, which also pass
on the reports it holds of other nodes (:mod:`feedkv.server.cluster`), so a report
reaches every node even from a node that died before telling them all. A
:class:`RangeDirectory` keeps the latest report of each node and answers range lookups
from their union. Where two reports
overlap (a range moved, and the node it left has not reported since), the descriptor
of the higher generation wins: a move, split, merge or change of members always bumps
it (so a lease holder that died before telling the others of the replicas it added
loses to the survivors' own reports of the range, which name them all). A replicated
range is in the report of every node holding a replica; its lease holder reports it with
itself first and the Raft term it leads in, and of one generation the claim of the
highest term wins (a dead lease holder's last report claims an older term than its
successor's).

This takes the place of CockroachDB's meta ranges. The answers may be stale for a
heartbeat; that is safe, because a node refuses a request for a range it does not hold
with a routing error (carrying the range's new descriptor when it moved the range away,
or when this directory holds one newer than the request's), and the client follows it
or looks again. A dead node's last report stays, so its ranges are addressed
to it and fail with an error naming it until it comes back.

Pure: no I/O, no clock; the caller feeds reports in.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from feedkv.kv.range_descriptor import RangeDescriptor

__all__ = ["RangeDirectory"]


Report = tuple[int, tuple[RangeDescriptor, ...], dict[int, int]]
"""A node's report: its sequence number, its ranges, and the terms of its leases."""


class RangeDirectory:
    def __init__(self) -> None:
        self._reports: dict[int, Report] = {}
        self._index: tuple[list[bytes], list[RangeDescriptor]] = ([], [])

    def report(
        self,
        node_id: int,
        seq: int,
        descs: Iterable[RangeDescriptor],
        leases: dict[int, int] | None = None,
    ) -> bool:
        """Take node ``node_id``'s report of its ranges (``leases``: range id -> the Raft
        term of each replicated range whose lease it holds); an older ``seq`` than the
        one held is ignored. Returns whether the directory changed."""
        held = self._reports.get(node_id)
        if held is not None and held[0] >= seq:
            return False
        self._reports[node_id] = (seq, tuple(descs), dict(leases or {}))
        self._rebuild()
        return True

    def seq(self, node_id: int) -> int:
        """The sequence number of the node's report held (-1: none)."""
        held = self._reports.get(node_id)
        return held[0] if held is not None else -1

    def reports(self) -> dict[int, Report]:
        """Every node's report held: ``node id -> (seq, descriptors, leases)`` (to pass
        on)."""
        return dict(self._reports)

    def lookup(self, key: bytes, prefetch: int = 0) -> tuple[RangeDescriptor, ...]:
        """The range holding ``key`` and up to ``prefetch`` ranges after it; empty when no
        node has reported the range yet."""
        starts, descs = self._index  # NB: one read: a report may replace it meanwhile
        index = bisect.bisect_right(starts, key) - 1
        if index < 0 or not descs[index].contains_key(key):
            return ()
        return tuple(descs[index : index + 1 + max(prefetch, 0)])

    def descriptors(self) -> list[RangeDescriptor]:
        """Every range known, in key order."""
        return list(self._index[1])

    def ranges_of(self, node_id: int) -> int:
        """How many ranges ``node_id`` holds, as known here."""
        return sum(1 for d in self._index[1] if node_id in d.replicas)

    def leases_of(self, node_id: int) -> int:
        """How many ranges ``node_id`` holds the lease of (is first replica of), as known
        here."""
        return sum(1 for d in self._index[1] if d.lease_holder == node_id)

    def lease_claims(self) -> dict[int, RangeDescriptor]:
        """``range id -> descriptor`` as reported by the node claiming its lease in the
        highest Raft term (replicated ranges whose lease some report claims)."""
        best: dict[int, tuple[int, RangeDescriptor]] = {}
        for _seq, descs, leases in self._reports.values():
            for d in descs:
                term = leases.get(d.range_id, 0)
                if term and (d.range_id not in best or best[d.range_id][0] < term):
                    best[d.range_id] = (term, d)
        return {range_id: desc for range_id, (_, desc) in best.items()}

    def _rebuild(self) -> None:
        candidates = sorted(
            (
                (d.generation, leases.get(d.range_id, 0), d)
                for _seq, descs, leases in self._reports.values()
                for d in descs
            ),
            key=lambda c: c[:2],
            reverse=True,
        )
        chosen: list[RangeDescriptor] = []
        starts: list[bytes] = []
        for _, _, desc in candidates:
            at = bisect.bisect_left(starts, desc.start)
            before = chosen[at - 1] if at > 0 else None
            after = chosen[at] if at < len(chosen) else None
            if (before is not None and before.end > desc.start) or (
                after is not None and after.start < desc.end
            ):
                continue  # a newer generation covers part of it
            chosen.insert(at, desc)
            starts.insert(at, desc.start)
        self._index = (starts, chosen)
