"""Where ranges should live: the rebalancer's decision, pure.

Each node decides for itself, from the range directory and liveness (so no two nodes
move one range): when it holds at least two ranges more than the live node holding the
fewest, it moves one of its ranges there (the smallest, so moves are cheap). Moving one
range at a time per node, and only while the gap is two or more, makes the counts
converge without a range bouncing back and forth. Ranges of dead nodes count for them
(their data is there) but no range moves to a dead node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.util.keys import Span

__all__ = [
    "AddVoter",
    "NodeStates",
    "RangeCounts",
    "RemoveVoter",
    "ReplicationZones",
    "ReplicaChange",
    "choose_lease_target",
    "choose_move",
    "choose_replica_change",
    "quorum",
    "range_counts",
]

# entries more than another's a lease's target may lack and keep it (choose_lease_target)
CAUGHT_UP_SLACK = 16


def choose_move(
    me: int,
    mine: Sequence[RangeDescriptor],
    counts: dict[int, int],
    live: Iterable[int],
    size: Callable[[RangeDescriptor], int] = lambda desc: 0,
) -> tuple[RangeDescriptor, int] | None:
    """The range of this node (``me``, holding ``mine``) to move and the node to move it
    to, or ``None``. ``counts``: ranges per node as the directory knows them."""
    targets = [n for n in live if n != me]
    if not mine or not targets:
        return None
    target = min(targets, key=lambda n: (counts.get(n, 0), n))
    if len(mine) - counts.get(target, 0) < 2:
        return None
    return min(mine, key=lambda d: (size(d), d.range_id)), target


@dataclass(frozen=True, slots=True)
class AddVoter:
    """Add a replica of the range on ``node_id`` (a learner first, then a voter)."""

    node_id: int


@dataclass(frozen=True, slots=True)
class RemoveVoter:
    """Remove the range's replica on ``node_id``."""

    node_id: int


ReplicaChange = AddVoter | RemoveVoter


@dataclass(frozen=True, slots=True)
class NodeStates:
    """How the allocator sees the cluster's nodes at one moment.

    ``live``: heard from within the liveness bound (they count towards a quorum);
    ``gone``: dead longer than ``server.time_until_store_dead``, or decommissioning or
    decommissioned (their replicas are to be replaced); ``load``: replicas per node, as
    the directory knows them (the fewest take new replicas first); ``draining``:
    stopping (they keep their replicas, and vote, but take no new replica or lease)."""

    live: frozenset[int]
    gone: frozenset[int]
    load: Mapping[int, int]
    draining: frozenset[int] = frozenset()

    def takes_new(self, node_id: int) -> bool:
        """Whether a new replica or a lease may go to ``node_id``."""
        return node_id in self.live and node_id not in self.gone and node_id not in self.draining


def quorum(voters: int) -> int:
    """The votes a group of ``voters`` needs to commit anything."""
    return voters // 2 + 1


def choose_replica_change(
    voters: Sequence[int], want: int, me: int, nodes: NodeStates
) -> ReplicaChange | None:
    """The one membership change the lease holder ``me`` should make to a range whose
    voters are ``voters`` and whose zone wants ``want`` replicas, or ``None``.

    Replicas are added before any is removed (a replica on a gone node is replaced by a
    new one on a live node, then removed), one change at a time, so a range never has
    fewer copies than before while it is being repaired. The factor is capped at the
    nodes that could hold a replica (live, or a voter merely dead, not gone). A removal
    must leave a quorum of live voters, so it never loses the range's availability; the
    lease holder removes others before itself (when it is to go, its caller hands the
    lease on first: :func:`choose_lease_target`). Removal order: gone nodes, then dead
    ones, then the most loaded."""
    usable = sorted(n for n in nodes.live if n not in nodes.gone)
    takers = [n for n in usable if nodes.takes_new(n)]
    # NB: a voter that is dead but not gone (down for less than time_until_store_dead:
    # a restart, a crash) still holds its replica: it counts as a place for one, or a
    # node down for 9 s would lose every replica it held, as CockroachDB's would not
    holders = set(usable) | {n for n in voters if n not in nodes.gone}
    target = max(1, min(want, max(len(holders), 1)))
    healthy = [n for n in voters if n not in nodes.gone]
    if len(healthy) < target:
        candidates = [n for n in takers if n not in voters]
        if candidates:
            return AddVoter(min(candidates, key=lambda n: (nodes.load.get(n, 0), n)))
    if len(voters) <= target and len(healthy) == len(voters):
        return None
    if len(voters) <= target and len(healthy) < target:
        return None  # nothing to replace a gone replica with yet: keep it

    def order(n: int) -> tuple[int, int, int, int]:
        return (
            n not in nodes.gone,
            n in nodes.live,
            n == me,
            -nodes.load.get(n, 0),
        )

    for victim in sorted(voters, key=order):
        left = [n for n in voters if n != victim]
        if sum(1 for n in left if n in nodes.live) >= quorum(len(left)):
            return RemoveVoter(victim)
    return None


@dataclass(frozen=True, slots=True)
class ReplicationZones:
    """How many replicas each range wants, from the zone configurations:
    ``ALTER RANGE default CONFIGURE ZONE USING num_replicas = N`` (``default``; the
    nodes' ``--replicas`` until it is set) and each table's own (``tables``: its span
    and factor)."""

    default: int
    tables: tuple[tuple[Span, int], ...] = ()

    def replicas_for(self, desc: RangeDescriptor) -> int:
        """The factor of the zone holding the range; a range that straddles zones (not
        yet split at a table's boundary) keeps the most replicas any of them asks."""
        wanted = [n for span, n in self.tables if span.overlaps(desc.span)]
        if any(span.contains(desc.span) for span, _ in self.tables):
            return max(wanted)
        return max([self.default, *wanted])


def choose_lease_target(
    voters: Sequence[int],
    me: int,
    nodes: NodeStates,
    behind: Mapping[int, int | None] | None = None,
    *,
    prefer: int | None = None,
) -> int | None:
    """Where the lease holder ``me`` should hand its lease before its own replica is
    removed, or as it drains: a live, staying voter that is not draining (``None``: there
    is none; then it removes itself, or stops, and the others elect a leader after a
    timeout).

    ``behind``: how many entries of ``me``'s log each voter's replica lacks, as the Raft
    leader knows it (``None``: it waits for a snapshot; a voter not named: not known).
    Raft hands leadership over only once the target holds the whole log (etcd's raft
    sends ``TimeoutNow`` when its match reaches the last index), so a voter waiting for a
    snapshot takes no lease (its transfer would wait for the snapshot, or run out), and
    the most caught-up goes first, then the fewest replicas; but ``prefer`` (the voter
    asked before: asking another would start a second campaign) stays while it lacks at
    most :data:`CAUGHT_UP_SLACK` entries more than that one (writes in flight keep
    voters a few entries behind, and change which is the most caught up)."""
    lag = behind or {}
    candidates = [
        n for n in voters if n != me and nodes.takes_new(n) and (n not in lag or lag[n] is not None)
    ]
    if not candidates:
        return None

    def lacks(n: int) -> int:
        return lag.get(n) or 0

    best = min(candidates, key=lambda n: (lacks(n), nodes.load.get(n, 0), n))
    if prefer in candidates and lacks(prefer) <= lacks(best) + CAUGHT_UP_SLACK:
        return prefer
    return best


@dataclass(frozen=True, slots=True)
class RangeCounts:
    """A node's replicas as CockroachDB's store metrics count them: ``replicas`` it
    holds, ``leaseholders`` among them, and the ranges it accounts for (``ranges``;
    each range is counted by one node: its lease holder, or, while no live node is
    known to hold its lease, its first live replica), of which ``unavailable`` have
    fewer live replicas than a quorum and ``underreplicated`` fewer than their zone
    wants."""

    replicas: int = 0
    leaseholders: int = 0
    ranges: int = 0
    unavailable: int = 0
    underreplicated: int = 0


def range_counts(
    descs: Iterable[RangeDescriptor],
    me: int,
    holds_lease: Callable[[RangeDescriptor], bool],
    claimed_by: Mapping[int, int],
    live: frozenset[int],
    want: Callable[[RangeDescriptor], int],
) -> RangeCounts:
    """:class:`RangeCounts` of node ``me`` holding ``descs``: ``holds_lease`` tells the
    ranges whose lease it holds, ``claimed_by`` the node claiming each range's lease
    (range id -> node id, as reported), ``live`` the live nodes, ``want`` each range's
    replication factor."""
    replicas = leaseholders = ranges = unavailable = underreplicated = 0
    for desc in descs:
        replicas += 1
        leaseholder = holds_lease(desc)
        leaseholders += leaseholder
        if not leaseholder:
            claimant = claimed_by.get(desc.range_id)
            if claimant is not None and claimant in live:
                continue
            first_live = next((n for n in desc.replicas if n in live), None)
            if first_live != me:
                continue
        ranges += 1
        live_replicas = sum(n in live for n in desc.replicas)
        unavailable += live_replicas < quorum(len(desc.replicas))
        underreplicated += live_replicas < want(desc)
    return RangeCounts(replicas, leaseholders, ranges, unavailable, underreplicated)
