"""Which nodes make up the cluster and which of them are alive.

Every node heartbeats every other node (:mod:`feedkv.server.cluster`); each heartbeat
carries the sender's :class:`NodeDescriptor` (id, address, epoch, locality) and the nodes it
knows, so a node that joins through one member learns them all. A node not heard from
for ``dead_after_ns`` (9 s by default, as CockroachDB's liveness) is dead to this node.
The epoch grows each time a node starts, so a restarted node is told apart from its
previous life.

Heartbeats also measure clock offsets: the sender's clock reading against the middle of
the round trip. A node whose clock is off from the others by more than the maximum
offset must not serve (its timestamps could order writes wrongly); :meth:`Liveness.offset_error`
says why.

Pure: times are passed in (monotonic nanoseconds for liveness, wall nanoseconds for
offsets).
"""

from __future__ import annotations

from dataclasses import dataclass

from feedkv.util.locality import NO_LOCALITY, Locality

__all__ = ["DEAD_AFTER_NS", "MAX_OFFSET_NS", "Liveness", "NodeDescriptor", "NodeStatus"]

DEAD_AFTER_NS = 9_000_000_000
MAX_OFFSET_NS = 500_000_000


@dataclass(frozen=True, slots=True)
class NodeDescriptor:
    node_id: int
    address: str  # host:port of its gRPC server
    epoch: int
    started_at_ns: int | None = None  # wall time of its start (None: not known)
    locality: Locality = NO_LOCALITY  # its --locality tiers (feedkv.util.locality)
    sql_address: str = ""  # host:port of its SQL port ("": none, or not open yet)
    build: str = ""  # the build tag it runs (feedkv.util.build; "": not told)
    # it is stopping: it takes no lease or replica (CockroachDB's liveness record's flag)
    draining: bool = False


@dataclass(frozen=True, slots=True)
class NodeStatus:
    desc: NodeDescriptor
    live: bool
    heard_ago_ns: int | None  # None: never heard from (this node itself: 0)
    offset_ns: int | None  # its clock minus this node's, at the last heartbeat
    expires_in_ns: int | None  # until it is seen dead without a heartbeat (None: never heard)


class Liveness:
    def __init__(
        self,
        me: NodeDescriptor,
        *,
        dead_after_ns: int = DEAD_AFTER_NS,
        max_offset_ns: int = MAX_OFFSET_NS,
        started_ns: int = 0,
    ) -> None:
        """``started_ns``: when this node started (monotonic): a node it knows of but
        has not heard from since is dead once ``dead_after_ns`` has passed from then."""
        self.me = me
        self.started_ns = started_ns
        self.dead_after_ns = dead_after_ns
        self.max_offset_ns = max_offset_ns
        self._nodes: dict[int, NodeDescriptor] = {me.node_id: me}
        self._heard: dict[int, int] = {}
        self._offsets: dict[int, int] = {}
        self._uncertainties: dict[int, int] = {}  # half the round trip of each offset

    def learn(self, desc: NodeDescriptor) -> bool:
        """Note a node another node told of (a newer epoch replaces the older, and within
        an epoch a descriptor that tells more replaces one that told less: the SQL port
        it opened after it started, that it drains); returns whether it was news."""
        known = self._nodes.get(desc.node_id)
        if known is not None and (
            known.epoch > desc.epoch or (known.epoch == desc.epoch and not _tells_more(desc, known))
        ):
            return False
        self._nodes[desc.node_id] = desc
        return True

    def heard(
        self,
        desc: NodeDescriptor,
        at_ns: int,
        offset_ns: int | None = None,
        uncertainty_ns: int = 0,
    ) -> None:
        """A heartbeat from ``desc``'s node (or its answer to ours) at monotonic ``at_ns``;
        ``offset_ns`` measured with ``uncertainty_ns`` (half the round trip: the true
        offset is within it of the measure)."""
        self.learn(desc)
        self._heard[desc.node_id] = at_ns
        if offset_ns is not None:
            self._offsets[desc.node_id] = offset_ns
            self._uncertainties[desc.node_id] = max(0, uncertainty_ns)

    def address(self, node_id: int) -> str | None:
        desc = self._nodes.get(node_id)
        return desc.address if desc is not None else None

    def descriptor(self, node_id: int) -> NodeDescriptor | None:
        """What this node knows of ``node_id`` (``None``: nothing)."""
        return self._nodes.get(node_id)

    def nodes(self) -> list[NodeDescriptor]:
        return [self._nodes[n] for n in sorted(self._nodes)]

    def peers(self) -> list[NodeDescriptor]:
        return [d for d in self.nodes() if d.node_id != self.me.node_id]

    def draining(self) -> set[int]:
        """The nodes known to be draining in their current life."""
        return {n for n, desc in self._nodes.items() if desc.draining}

    def is_live(self, node_id: int, now_ns: int) -> bool:
        if node_id == self.me.node_id:
            return True
        heard = self._heard.get(node_id)
        return heard is not None and now_ns - heard <= self.dead_after_ns

    def is_dead(self, node_id: int, now_ns: int) -> bool:
        """Whether a node known to this one has been silent for longer than the bound
        (``False`` for a node never heard of: nothing is known of it). A node whose
        work must move when it dies (changefeed jobs) is judged by this."""
        if node_id == self.me.node_id or node_id not in self._nodes:
            return False
        heard = self._heard.get(node_id, self.started_ns)
        return now_ns - heard > self.dead_after_ns

    def dead_for_longer_than(self, threshold_ns: int, now_ns: int) -> set[int]:
        """The known nodes silent for longer than ``threshold_ns`` (and than the liveness
        bound): CockroachDB's dead stores, whose replicas are replaced elsewhere. A node
        not heard from since this one started counts from that start."""
        bound = max(threshold_ns, self.dead_after_ns)
        return {
            n
            for n in self._nodes
            if n != self.me.node_id and now_ns - self._heard.get(n, self.started_ns) > bound
        }

    def status(self, now_ns: int) -> list[NodeStatus]:
        out = []
        for desc in self.nodes():
            heard = now_ns if desc.node_id == self.me.node_id else self._heard.get(desc.node_id)
            out.append(
                NodeStatus(
                    desc,
                    self.is_live(desc.node_id, now_ns),
                    now_ns - heard if heard is not None else None,
                    self._offsets.get(desc.node_id),
                    heard + self.dead_after_ns - now_ns if heard is not None else None,
                )
            )
        return out

    def offset_error(self, now_ns: int) -> str | None:
        """Why this node must not serve: its clock is surely off by more than the
        maximum offset from a majority of the live nodes it measured (``None``: it may
        serve). Surely, as in CockroachDB: by more than the measure's uncertainty too, so
        that slow heartbeats on a loaded machine are not taken for a clock that is off."""
        measured = [
            (n, off)
            for n, off in self._offsets.items()
            if self.is_live(n, now_ns) and n != self.me.node_id
        ]
        far = [
            (n, off)
            for n, off in measured
            if abs(off) - self._uncertainties.get(n, 0) > self.max_offset_ns
        ]
        if not far or 2 * len(far) < len(measured) + 1:
            return None
        worst, offset = max(far, key=lambda item: abs(item[1]))
        return (
            f"this node's clock is {abs(offset) / 1e6:.0f} ms "
            f"{'behind' if offset > 0 else 'ahead of'} node n{worst}'s, beyond the maximum "
            f"offset of {self.max_offset_ns / 1e6:.0f} ms; fix the clock (NTP): the node serves "
            "again once it is within the maximum offset"
        )


def _tells_more(desc: NodeDescriptor, known: NodeDescriptor) -> bool:
    """Whether ``desc``, of the same life as ``known``, is later: it forgets nothing
    ``known`` told (a relayed copy may be older) and tells something new."""
    told = (bool(desc.sql_address), desc.draining)
    was = (bool(known.sql_address), known.draining)
    return told != was and all(t >= w for t, w in zip(told, was, strict=True))
