"""A deterministic simulation of a Raft group: replicas, a faulty network and crashes.

:class:`RaftSim` runs the replicas of one group (:class:`~feedkv.raft.state.RaftState`
on :class:`~feedkv.raft.storage.MemoryStorage`) the way a node would, under one seeded
random source, so a failing seed replays exactly. Its network loses, duplicates, delays
and so reorders messages, and can be partitioned; a replica can crash, which loses
whatever it had not persisted (its in-memory state, the Ready it had not handled, the
messages it had not sent), and restart from its storage. Every message crosses the
wire encoded (:func:`~feedkv.raft.messages.encode_message`).

A :class:`SafetyChecker` watches every step and raises
:class:`~feedkv.errors.InvariantViolation` on the first broken promise of Raft:

- *election safety*: at most one leader per term;
- *log matching*: two logs holding an entry of the same index and term hold the same
  entry there and the same entries before it (checked at each write: an entry of a
  given index and term always has the same content and the same predecessor's term);
- *leader completeness*: a new leader's log holds every entry applied anywhere;
- *state machine safety*: no two replicas apply different entries at one index;
- *linearizable reads*: a read a leader confirms (:meth:`~feedkv.raft.state.RaftState.read_index`)
  reads from a commit index at or past every index committed anywhere when it was asked
  for (so a deposed leader never confirms one), with or without leader leases.

Simulated time is the round. A replica's clock may run late (``Faults.skip_tick``): without
leader leases a skipped tick is lost; with them it is told one round late, as a node's
driver tells the ticks that passed while it was late, and its lease margin covers that
lag.

Replicas live on nodes, and a replica's Raft id is its own, not its node's (as a
store's: :mod:`feedkv.kv.range_descriptor`): ``nodes`` maps each replica id to its node
(by default the same number; the randomized tests give them apart, so a confusion of
the two fails them). The network, its partitions and the crashes are between nodes. A
node re-added to the group after its replica was removed gets a new replica, with a new
id and an empty store, as a store collects a removed replica; a message to the old id
is dropped, and one the old replica sent before may still arrive.

Each replica's state machine is the list of entries it applied, kept with its applied
index as if persisted with it (a range applies in the engine transaction that records
the applied index). Tests of single behaviours use the same class with faults off:
:meth:`RaftSim.stabilize` delivers everything at once, and ``drop`` filters messages.

The range's apply loop is meant to run under this simulator later, in place of the
list of applied entries (:meth:`Replica.apply_entry`).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import msgpack

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import (
    ConfChange,
    ConfChangeType,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    decode_conf_change,
    decode_message,
    encode_message,
)
from feedkv.raft.state import Config, RaftState, Ready, Role
from feedkv.raft.storage import MemoryStorage

__all__ = ["Faults", "RaftSim", "Replica", "SafetyChecker"]


@dataclass(frozen=True)
class Faults:
    """Per-round probabilities of the simulated faults (all 0: a perfect network)."""

    loss: float = 0.0
    duplicate: float = 0.0
    max_delay: int = 0  # rounds a message may wait; > 0 reorders messages
    crash: float = 0.0  # per round: one live replica crashes
    restart: float = 0.0  # per round and crashed replica
    partition: float = 0.0  # per round: the replicas split in two at random
    heal: float = 0.0  # per round: every partition heals
    compact: float = 0.0  # per round and replica: snapshot and compact its log
    skip_ready: float = 0.0  # per round and replica: leave its Ready for later
    skip_tick: float = 0.0  # per round and replica: its clock runs slow
    conf_change: float = 0.0  # per round: the leader proposes a membership change
    transfer: float = 0.0  # per round: the leader hands over to a random voter
    crash_mid_ready: float = 0.0  # per Ready: crash with its early messages sent, unpersisted

    @classmethod
    def chaos(cls) -> Faults:
        return cls(
            loss=0.1,
            duplicate=0.05,
            max_delay=3,
            crash=0.02,
            restart=0.1,
            partition=0.03,
            heal=0.08,
            compact=0.02,
            skip_ready=0.2,
            skip_tick=0.1,
            crash_mid_ready=0.01,
        )


class SafetyChecker:
    """Raft's safety properties, checked as the replicas act (see the module)."""

    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}  # term -> leader
        self.entries: dict[tuple[int, int], tuple[bytes, int]] = {}  # (index, term)
        self.applied: dict[int, tuple[int, bytes]] = {}  # index -> (term, data)
        self.committed = 0  # the highest index known committed anywhere
        self.reads: dict[int, int] = {}  # a read's context -> self.committed when asked
        self.confirmed = 0  # reads confirmed

    def on_commit(self, index: int) -> None:
        self.committed = max(self.committed, index)

    def on_read_asked(self, context: int) -> None:
        self.reads[context] = self.committed

    def on_read_confirmed(self, replica: int, index: int, context: int) -> None:
        floor = self.reads.pop(context, None)  # None: asked outside RaftSim.read
        self.confirmed += 1
        if floor is not None and index < floor:
            raise InvariantViolation(
                f"replica {replica} confirmed read {context} at commit index {index}, but "
                f"{floor} was committed when it was asked for: a stale read"
            )

    def on_leader(self, replica: int, term: int, raft: RaftState) -> None:
        held = self.leaders.setdefault(term, replica)
        if held != replica:
            raise InvariantViolation(f"two leaders in term {term}: {held} and {replica}")
        first = raft.log.first_index()
        for index, (applied_term, _) in self.applied.items():
            if index >= first and raft.log.term(index) != applied_term:
                raise InvariantViolation(
                    f"leader {replica} of term {term} lacks the applied entry {index} of "
                    f"term {applied_term} (holds term {raft.log.term(index)})"
                )

    def on_persist(self, replica: int, entries: tuple[Entry, ...], prev_term: int) -> None:
        for entry in entries:
            key = (entry.index, entry.term)
            seen = self.entries.setdefault(key, (entry.data, prev_term))
            if seen != (entry.data, prev_term):
                raise InvariantViolation(
                    f"log matching: replica {replica} wrote entry {key} with predecessor "
                    f"term {prev_term}, seen before with {seen[1]} (or other data)"
                )
            prev_term = entry.term

    def on_apply(self, replica: int, index: int, term: int, data: bytes) -> None:
        seen = self.applied.setdefault(index, (term, data))
        if seen != (term, data):
            raise InvariantViolation(
                f"state machine safety: replica {replica} applied {(term, data)!r} at "
                f"{index}, another applied {seen!r}"
            )


class _OnDemandStorage(MemoryStorage):
    """Makes a snapshot of its replica's state machine when a leader needs one, as a
    store would (a stored one may predate the follower it is for)."""

    replica: Replica | None = None

    def snapshot(self) -> Snapshot:
        replica = self.replica
        if replica is not None and replica.raft is not None:
            conf = replica.raft.conf_state()
            if replica.applied_index > super().snapshot().meta.index:
                self.create_snapshot(replica.applied_index, conf, replica.image())
        return super().snapshot()


@dataclass
class Replica:
    """One simulated replica (``id``: its Raft id) on node ``node``: its durable storage
    and state machine, and its Raft state (``None`` while crashed)."""

    id: int
    node: int
    storage: MemoryStorage
    config: Config
    rng: random.Random
    raft: RaftState | None = None
    applied: list[tuple[int, int, bytes]] = field(default_factory=list)  # (index, term, data)
    applied_index: int = 0
    late_ticks: int = 0  # ticks owed: the clock ran late

    def start(self) -> None:
        self.raft = RaftState(
            replace(self.config, applied=self.applied_index), self.storage, self.rng
        )

    @property
    def alive(self) -> bool:
        return self.raft is not None

    def apply_entry(self, entry: Entry, checker: SafetyChecker) -> None:
        if self.raft is None:
            raise InvariantViolation(f"replica {self.id} applies while crashed")
        if entry.index != self.applied_index + 1:
            raise InvariantViolation(
                f"replica {self.id} applies {entry.index} after {self.applied_index}"
            )
        if entry.type is EntryType.CONF_CHANGE:
            conf = self.raft.apply_conf_change(decode_conf_change(entry.data))
            self.storage.set_conf_state(conf)
        checker.on_apply(self.id, entry.index, entry.term, entry.data)
        self.applied.append((entry.index, entry.term, entry.data))
        self.applied_index = entry.index

    def restore(self, snapshot: Snapshot, checker: SafetyChecker) -> None:
        rows = msgpack.unpackb(snapshot.data) if snapshot.data else []
        self.applied = [(index, term, data) for index, term, data in rows]
        for index, term, data in self.applied:
            checker.on_apply(self.id, index, term, data)
        self.applied_index = snapshot.meta.index

    def image(self) -> bytes:
        packed: bytes = msgpack.packb([list(row) for row in self.applied])
        return packed


class RaftSim:
    """One Raft group of replicas ``ids`` under one seed, with empty replicas ``spares``
    that may be added; ``nodes``: each replica's node (default: its id). See the module
    docstring."""

    def __init__(
        self,
        seed: int,
        ids: Iterable[int] = (1, 2, 3),
        *,
        spares: Iterable[int] = (),
        nodes: Mapping[int, int] | None = None,
        faults: Faults | None = None,
        election_tick: int = 10,
        pre_vote: bool = True,
        check_quorum: bool = True,
        max_inflight: int = 8,
        max_entries_per_message: int = 8,
        lease_margin: int | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.checker = SafetyChecker()
        self.now = 0
        voters = tuple(sorted(ids))
        spare = tuple(spares)
        self._node_of = {r: r for r in (*voters, *spare)} | dict(nodes or {})
        self.nodes = sorted(set(self._node_of.values()))
        # NB: above every replica and node id: a new replica's id is no node's
        self._next_id = max((*self._node_of, *self.nodes)) + 1
        self.removed: set[int] = set()  # replica ids removed from the group: never again
        self.replicas: dict[int, Replica] = {}  # by replica id: the current ones
        self.drop: Callable[[Message], bool] | None = None
        self.cut: set[tuple[int, int]] = set()  # (from, to) nodes that lose everything
        self._queue: list[tuple[int, int, bytes]] = []
        self._seq = 0
        self._reports: list[tuple[int, int, bool]] = []
        self._config = Config(
            id=1,
            election_tick=election_tick,
            pre_vote=pre_vote,
            check_quorum=check_quorum,
            max_inflight=max_inflight,
            max_entries_per_message=max_entries_per_message,
            lease_margin=lease_margin,
        )
        for replica_id in voters:
            self.add_replica(replica_id, voters=voters)
        for replica_id in spare:
            self.add_replica(replica_id)

    # -- replicas ------------------------------------------------------------------

    def add_replica(self, replica_id: int, voters: tuple[int, ...] | None = None) -> Replica:
        """A started replica: one of a new group of ``voters``, or (by default) an empty
        one waiting for a snapshot; it takes the place of its node's earlier replica."""
        node = self.node_of(replica_id)
        for old in [r for r in self.replicas.values() if r.node == node]:
            del self.replicas[old.id]  # NB: a node holds one replica of a range
        on_demand = _OnDemandStorage() if voters is None else _OnDemandStorage.bootstrap(voters)
        replica = Replica(
            replica_id,
            node,
            on_demand,
            replace(self._config, id=replica_id),
            random.Random(self.rng.random()),
        )
        replica.applied_index = on_demand.snapshot().meta.index
        on_demand.replica = replica
        if node not in self.nodes:
            self.nodes.append(node)
        self.replicas[replica_id] = replica
        replica.start()
        return replica

    def node_of(self, replica_id: int) -> int:
        """The node of replica ``replica_id`` (its id, unless ``nodes`` said otherwise)."""
        return self._node_of.setdefault(replica_id, replica_id)

    def replica_on(self, node: int) -> Replica | None:
        """The replica node ``node`` holds now, if any."""
        return next((r for r in self.replicas.values() if r.node == node), None)

    def raft(self, node: int) -> RaftState:
        raft = self.replicas[node].raft
        if raft is None:
            raise InvariantViolation(f"replica {node} is down")
        return raft

    def live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.alive]

    def leader(self) -> int | None:
        """The live leader of the highest term, if any."""
        best: tuple[int, int] | None = None
        for replica in self.live():
            raft = replica.raft
            if (
                raft is not None
                and raft.role is Role.LEADER
                and (best is None or raft.term > best[0])
            ):
                best = (raft.term, replica.id)
        return None if best is None else best[1]

    def crash(self, node: int) -> None:
        """``node`` stops; everything it had not persisted is lost."""
        self.replicas[node].raft = None

    def restart(self, node: int) -> None:
        replica = self.replicas[node]
        replica.config = replace(replica.config, restarted=True)
        replica.late_ticks = 0
        replica.start()

    # -- the network ---------------------------------------------------------------

    def isolate(self, replica_id: int) -> None:
        """Cut replica ``replica_id``'s node off from every other."""
        node = self.node_of(replica_id)
        for other in self.nodes:
            if other != node:
                self.cut |= {(node, other), (other, node)}

    def partition(self, *sides: Iterable[int]) -> None:
        """Cut the network between the nodes of the replicas of ``sides`` (replacing any
        earlier cut)."""
        self._partition_nodes([{self.node_of(r) for r in side} for side in sides])

    def _partition_nodes(self, groups: list[set[int]]) -> None:
        self.cut.clear()
        for a in self.nodes:
            for b in self.nodes:
                if a != b and not any(a in g and b in g for g in groups):
                    self.cut.add((a, b))

    def heal(self) -> None:
        self.cut.clear()

    def _send(self, m: Message) -> None:
        route = (self.node_of(m.sender), self.node_of(m.to))
        lost = route in self.cut or (self.drop is not None and self.drop(m))
        lost = lost or bool(self.faults.loss and self.rng.random() < self.faults.loss)
        if m.type is MessageType.SNAP:
            # NB: a snapshot goes on a stream of its own, whose sender learns whether
            # it arrived; told later, as no call may come between ready() and advance()
            self._reports.append((m.sender, m.to, not lost))
        if lost:
            return
        copies = 2 if self.faults.duplicate and self.rng.random() < self.faults.duplicate else 1
        raw = encode_message(m)
        for _ in range(copies):
            delay = self.rng.randint(0, self.faults.max_delay) if self.faults.max_delay else 0
            self._seq += 1
            heapq.heappush(self._queue, (self.now + delay, self._seq, raw))

    def deliver(self, *, all_now: bool = False) -> int:
        """Deliver the messages due (``all_now``: every queued one); returns how many."""
        reports, self._reports = self._reports, []
        for sender, to, success in reports:
            reporter = self.replicas.get(sender)
            raft = reporter.raft if reporter is not None else None
            if raft is not None:
                raft.report_snapshot(to, success=success)
        due: list[bytes] = []
        while self._queue and (all_now or self._queue[0][0] <= self.now):
            due.append(heapq.heappop(self._queue)[2])
        if self.faults.max_delay:
            self.rng.shuffle(due)
        for raw in due:
            m = decode_message(raw)
            replica = self.replicas.get(m.to)  # NB: none for an id its node no longer holds
            if replica is not None and replica.raft is not None:
                replica.raft.step(m)
        return len(due)

    # -- driving replicas ----------------------------------------------------------

    def handle_ready(self, node: int) -> Ready | None:
        """Persist, send, apply and advance ``node``'s Ready, as a node's loop would."""
        replica = self.replicas[node]
        raft = replica.raft
        if raft is None or not raft.has_ready():
            return None
        rd = raft.ready()
        for m in rd.early_messages:  # as a node's loop sends them, before its fsync
            self._send(m)
        if self.faults.crash_mid_ready and self.rng.random() < self.faults.crash_mid_ready:
            self.crash(node)
            return rd
        storage = replica.storage
        if rd.snapshot is not None:
            storage.apply_snapshot(rd.snapshot)
        if rd.entries:
            prev_term = storage.term(rd.entries[0].index - 1)
            if prev_term is None:
                raise InvariantViolation(f"replica {node} appends {rd.entries[0].index} past a gap")
            self.checker.on_persist(node, rd.entries, prev_term)
            storage.append(rd.entries)
        if rd.hard_state is not None:
            storage.set_hard_state(rd.hard_state)
        for m in rd.late_messages:
            self._send(m)
        if rd.snapshot is not None:
            replica.restore(rd.snapshot, self.checker)
        for entry in rd.committed_entries:
            replica.apply_entry(entry, self.checker)
            if entry.type is EntryType.CONF_CHANGE:
                change = decode_conf_change(entry.data)
                if change.type is ConfChangeType.REMOVE_NODE:
                    self.removed.add(change.node_id)
        for read in rd.read_states:
            self.checker.on_read_confirmed(node, read.index, read.context)
        raft.advance(rd)
        self.checker.on_commit(raft.committed)
        if rd.soft_state is not None and rd.soft_state.role is Role.LEADER:
            self.checker.on_leader(node, raft.term, raft)
        return rd

    def stabilize(self, max_steps: int = 10_000) -> None:
        """Handle every Ready and deliver every message at once, until all is quiet
        (partitions, ``drop`` and the configured loss still apply)."""
        for _ in range(max_steps):
            handled = [self.handle_ready(r.id) for r in self.live()]
            if not any(handled) and not self.deliver(all_now=True):
                return
        raise InvariantViolation(f"the group did not settle in {max_steps} steps")

    def tick(self, node: int | None = None, times: int = 1) -> None:
        for _ in range(times):
            for replica in self.live() if node is None else [self.replicas[node]]:
                if replica.raft is not None:
                    replica.raft.tick()

    def elect(self, node: int) -> None:
        """Make ``node`` campaign and settle the group; raises unless it leads."""
        self.raft(node).campaign()
        self.stabilize()
        if self.raft(node).role is not Role.LEADER:
            raise InvariantViolation(f"replica {node} did not win: {self.raft(node).role}")

    def propose(self, data: bytes, node: int | None = None) -> Entry | None:
        """Propose on ``node`` (default: the leader); ``None`` when dropped."""
        target = node if node is not None else self.leader()
        if target is None:
            return None
        return self.raft(target).propose(data)

    def read(self, node: int | None = None) -> bool:
        """Ask ``node`` (default: the leader) to confirm a read; whether it took it."""
        target = node if node is not None else self.leader()
        if target is None or self.replicas[target].raft is None:
            return False
        for replica in self.live():
            if replica.raft is not None:
                self.checker.on_commit(replica.raft.committed)
        self._seq += 1
        self.checker.on_read_asked(self._seq)
        if self.raft(target).read_index(self._seq):
            return True
        self.checker.reads.pop(self._seq)
        return False

    def propose_conf_change(self, change: ConfChange) -> Entry | None:
        leader = self.leader()
        return None if leader is None else self.raft(leader).propose_conf_change(change)

    def compact(self, node: int, keep: int = 0) -> None:
        """Snapshot ``node``'s state machine at its applied index and drop its log up to
        ``keep`` entries before that."""
        replica = self.replicas[node]
        raft = replica.raft
        if raft is None:
            return
        storage = replica.storage
        storage.create_snapshot(replica.applied_index, raft.conf_state(), replica.image())
        storage.compact(max(replica.applied_index - keep, storage.first_index() - 1))

    # -- the randomized schedule ---------------------------------------------------

    def round(self, *, propose: float = 0.3, read: float = 0.2) -> None:
        """One round of simulated time: faults, a proposal, ticks, deliveries, Readies;
        the checker runs on every Ready."""
        f, rng = self.faults, self.rng
        self.now += 1
        live = self.live()
        if f.crash and live and rng.random() < f.crash:
            self.crash(rng.choice(live).id)
        for replica in self.replicas.values():
            if not replica.alive and f.restart and rng.random() < f.restart:
                self.restart(replica.id)
        if f.partition and rng.random() < f.partition:
            side = {node for node in self.nodes if rng.random() < 0.5}
            self._partition_nodes([side, set(self.nodes) - side])
        if self.cut and f.heal and rng.random() < f.heal:
            self.heal()
        if rng.random() < propose:
            self.propose(b"p%d" % self.now)
        if rng.random() < read:
            # NB: any live replica, leader or not: a deposed one must never confirm
            self.read(rng.choice(live).id if live else None)
        if f.conf_change and rng.random() < f.conf_change:
            self._random_conf_change()
        if f.transfer and rng.random() < f.transfer and (leader := self.leader()) is not None:
            self.raft(leader).transfer_leader(rng.choice(sorted(self.replicas)))
        for replica in self.live():
            self._tick_late(replica, skip=bool(f.skip_tick and rng.random() < f.skip_tick))
        self.deliver()
        for replica in self.live():
            if not (f.skip_ready and rng.random() < f.skip_ready):
                self.handle_ready(replica.id)
            if f.compact and rng.random() < f.compact:
                self.compact(replica.id, keep=rng.randint(0, 5))

    def _tick_late(self, replica: Replica, *, skip: bool) -> None:
        """This round's tick, maybe late (see the module docstring)."""
        raft = replica.raft
        if raft is None:
            return
        if self._config.lease_margin is None:
            ticks = 0 if skip else 1
        elif skip and not replica.late_ticks:
            ticks, replica.late_ticks = 0, 1
        else:
            ticks, replica.late_ticks = 1 + replica.late_ticks, 0
        if ticks:
            raft.tick(elapsed=ticks)

    def _random_conf_change(self) -> None:
        """Add a learner on a node outside the group, promote one, or remove a voter
        (keeping three)."""
        leader = self.leader()
        if leader is None:
            return
        conf = self.raft(leader).conf_state()
        members = {*conf.voters, *conf.learners}
        # NB: not the leader's node: a removed leader may lead until it learns so
        outside = [
            n
            for n in self.nodes
            if ((r := self.replica_on(n)) is None or r.id not in members)
            and n != self.node_of(leader)
        ]
        # NB: a replica to add is named by its node (``context``, as a store's change)
        choices = [ConfChange(ConfChangeType.ADD_LEARNER, 0, context=n) for n in outside]
        choices += [ConfChange(ConfChangeType.ADD_NODE, n) for n in conf.learners]
        if len(conf.voters) > 3:
            choices += [ConfChange(ConfChangeType.REMOVE_NODE, n) for n in conf.voters]
        if choices:
            change = self.rng.choice(choices)
            if not change.node_id:
                change = replace(change, node_id=self.replica_to_add(change.context))
            self.raft(leader).propose_conf_change(change)

    def replica_to_add(self, node: int) -> int:
        """The id of the replica to add on ``node``: the one it holds, unless that one
        was removed from the group; then a new, empty one with a new id."""
        held = self.replica_on(node)
        if held is not None and held.id not in self.removed:
            return held.id
        replica_id, self._next_id = self._next_id, self._next_id + 1
        self._node_of[replica_id] = node
        self.add_replica(replica_id)
        return replica_id

    def members(self) -> list[int]:
        """The replicas of the group as its leader sees it (all, without a leader)."""
        leader = self.leader()
        if leader is None:
            return sorted(self.replicas)
        conf = self.raft(leader).conf_state()
        return sorted({*conf.voters, *conf.learners})

    def applied_everywhere(self, data: bytes) -> bool:
        """Whether every member of the group applied an entry holding ``data``."""
        return all(
            any(row[2] == data for row in self.replicas[node].applied) for node in self.members()
        )
