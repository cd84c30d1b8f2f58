"""A deterministic simulation of one replicated range: its replicas' Raft groups and apply
loops on real engines, under a faulty network and crashes.

:class:`RangeSim` runs a :class:`~feedkv.kv.replica.Replica` per node, each on its own
LMDB engine in a directory of the test's, and drives them as a store's loop would: tick,
deliver messages, and run every Ready through ``stage`` (one engine transaction that
persists the log and applies committed entries) and ``staged`` (then send). One seeded
random source decides every fault, so a failing seed replays exactly: messages are lost,
duplicated, delayed (so reordered) and cut by partitions; a node crashes, losing its
replica's memory (its proposals in flight, its overlay, the Ready it had not staged) but
not what its engine committed, and restarts from its engine.

The workload is what makes a wrong apply loop visible: every proposal increments one
counter by reading it and writing it back (evaluated on the leaseholder, over the
proposals in flight), and writes a key of its own; reads of the counter, without a log
entry (:meth:`~feedkv.kv.replica.Replica.read`), go to any replica that believes it
holds the lease. The checks, after every Ready:

- every replica applies the same command, with the same logical ops, at each index;
- no two replicas hold the lease in the same term;
- a read answers at least the highest increment acknowledged before it was asked (no
  stale read, as a deposed leaseholder would give);

and after the faults stop (:meth:`RangeSim.settle`), in :meth:`RangeSim.check_converged`:
every replica's MVCC data is identical, the counter equals the number of increments
applied, every acknowledged increment is applied (its result unique, its key there), and
every version of the counter a read answered is there (no read saw a write that never
happened).

Replica ids, as a store's loop keeps them (:mod:`feedkv.kv.replica_loop`): the first
replicas' ids are their nodes' (so is a spare's first), and a node added again after its
removal gets a new id, never used before. A message goes to the node of the replica id it
names; there, one addressed to an id older than the node's replica (or below its
tombstone) is dropped; one to a newer id collects the node's replica first (its Raft
state and data deleted, a tombstone left); one from a replica the receiver applied the
removal of is dropped, and the sender's node told (a
:class:`~feedkv.kv.replica_refusal.ReplicaTooOld` notice, through the same faulty
network), which collects it; a replica that applies its own removal collects itself;
and once the faults stop, a replica the lease holder saw removed is collected (a
store's replica GC). The
checks: a replica only ever steps messages addressed to its id, no replica is made with
an id below its node's tombstone, and once settled every node outside the range holds
nothing of it (no replica, no Raft state, no data).
"""

from __future__ import annotations

import contextlib
import heapq
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgpack

from feedkv.errors import InvalidArgumentError, InvariantViolation, NotLeaseHolderError
from feedkv.kv.replica import Replica
from feedkv.kv.replica_refusal import Refusal, ReplicaTooOld, decode_inbound, encode_notice
from feedkv.kv.replicated_command import Effects
from feedkv.raft import (
    RAFT_DB,
    ConfChange,
    ConfChangeType,
    Config,
    ConfState,
    EngineRaftStorage,
    EntryType,
    Message,
    MessageType,
    decode_conf_change,
    encode_message,
)
from feedkv.storage import mvcc
from feedkv.storage.engine import Completion, Reader, ReadWriter
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import LogicalOp, WriteValue
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import Timestamp

__all__ = ["RangeFaults", "RangeSim"]

RANGE_ID = 1
COUNTER = b"counter"


@dataclass(frozen=True)
class RangeFaults:
    """Per-round probabilities (all 0: a perfect network and no crashes)."""

    loss: float = 0.0
    duplicate: float = 0.0
    max_delay: int = 0
    crash: float = 0.0
    restart: float = 0.0
    partition: float = 0.0
    heal: float = 0.0
    conf_change: float = 0.0  # per round: the lease holder proposes a membership change
    crash_mid_ready: float = 0.0  # per Ready: crash once its early messages and acks left

    @classmethod
    def chaos(cls) -> RangeFaults:
        return cls(
            loss=0.1,
            duplicate=0.05,
            max_delay=3,
            crash=0.03,
            restart=0.15,
            partition=0.03,
            heal=0.1,
            conf_change=0.02,
            crash_mid_ready=0.02,
        )


@dataclass
class _Node:
    id: int
    engine: LMDBEngine
    replica: Replica | None = None
    replica_id: int = 0  # of the replica it holds, up or crashed (0: none)
    up: bool = True
    tombstone: int = 0  # no replica with a lower id is made here again
    removed: set[int] = field(default_factory=set)  # ids whose removal its replica applied
    ops: dict[int, tuple[LogicalOp, ...]] = field(default_factory=dict)


class RangeSim:
    """One range replicated on nodes ``ids``, under ``seed``; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        seed: int,
        ids: Iterable[int] = (1, 2, 3),
        *,
        spares: Iterable[int] = (),
        faults: RangeFaults | None = None,
        log_limit: int = 1000,
        log_keep: int = 100,
        check_quorum: bool = True,
    ) -> None:
        """``ids``: the range's first replicas; ``spares``: nodes that start empty, for
        membership changes to add; ``check_quorum=False`` lets a cut-off leader go on
        believing it leads (so a read it answers alone would be stale)."""
        self.rng = random.Random(seed)
        self.faults = faults or RangeFaults()
        self.config = Config(
            id=1,
            election_tick=10,
            max_inflight=8,
            max_entries_per_message=8,
            check_quorum=check_quorum,
        )
        self.log_limit, self.log_keep = log_limit, log_keep
        first = sorted(ids)
        self.ids = sorted({*first, *spares})
        self.nodes: dict[int, _Node] = {}
        # replica id -> node: a node's first replica has the node's id, later ones new ids
        self.node_of = {node: node for node in self.ids}
        self.next_id = max(self.ids) + 1
        self.readded = 0  # replicas added on a node that held an older one of the range
        self.dropped_old = 0  # messages dropped as addressed to an older replica
        self.collected = 0  # replicas collected (removed from their nodes)
        self._given = set(first)  # ids some replica had, or an addition proposed
        for node in self.ids:
            engine = LMDBEngine(
                directory / f"n{node}", databases=(*MVCC_DATABASES, RAFT_DB), sync=False
            )
            if node in first:
                engine.write(lambda rw: Replica.bootstrap(rw, RANGE_ID, first))
            self.nodes[node] = _Node(node, engine, replica_id=node if node in first else 0)
            self.restart(node)
        self.changes = 0  # membership changes that took effect
        self.now = 0
        self.cut: set[tuple[int, int]] = set()
        self._queue: list[tuple[int, int, int, bytes]] = []  # (due, seq, node, raw)
        self._reports: list[tuple[int, int, bool]] = []
        self._seq = 0
        self._clock = 0
        self.applied: dict[int, tuple[int, bytes]] = {}  # index -> (term, data) anywhere
        self.acked: list[tuple[int, bytes]] = []  # (counter value, own key) acknowledged
        self._in_flight: list[Completion[tuple[int, bytes]]] = []
        self.failed = 0
        self._reads: list[tuple[int, Completion[tuple[int, Timestamp | None]]]] = []
        self.read_values: list[tuple[int, Timestamp]] = []  # (value, version) answered

    def close(self) -> None:
        for node in self.nodes.values():
            if node.replica is not None:
                node.replica.close()
            node.engine.close()

    # -- nodes -----------------------------------------------------------------------

    def crash(self, node: int) -> None:
        held = self.nodes[node]
        held.up = False
        if held.replica is not None:
            held.replica.close()
            held.replica = None

    def restart(self, node: int) -> None:
        held = self.nodes[node]
        held.up = True
        if held.replica is None and held.replica_id:
            held.replica = self._open_replica(held)

    def _open_replica(self, node: _Node) -> Replica:
        if node.replica_id < node.tombstone:
            raise InvariantViolation(
                f"n{node.id} made replica {node.replica_id}, below its tombstone {node.tombstone}"
            )
        return Replica(
            node.engine,
            RANGE_ID,
            node.replica_id,
            data=WholeEngine(),
            config=self.config,
            rng=random.Random(self.rng.random()),
            log_limit=self.log_limit,
            log_keep=self.log_keep,
        )

    def _collect_replica(self, node: _Node, next_id: int) -> None:
        """The node's replica was removed from the range: its Raft state and data go,
        and no replica with an id below ``next_id`` is made there again."""
        if node.replica is not None:
            node.replica.close()
            node.replica = None
        node.tombstone = max(node.tombstone, next_id, node.replica_id + 1)
        node.replica_id = 0
        node.removed.clear()

        def destroy(rw: ReadWriter) -> None:
            EngineRaftStorage.destroy(rw, RANGE_ID)
            for db in MVCC_DATABASES:
                for key, _ in list(rw.scan(db, b"")):
                    rw.delete(db, key)

        node.engine.write(destroy)
        self.collected += 1

    def node(self, replica: Replica) -> _Node:
        """The node holding ``replica``."""
        return self.nodes[self.node_of[replica.replica_id]]

    def live(self) -> list[Replica]:
        return [n.replica for n in self.nodes.values() if n.replica is not None]

    def members(self) -> list[int]:
        """The range's replicas as its lease holder knows them."""
        holder = self.lease_holder()
        if holder is None:
            raise InvariantViolation("no lease holder to ask for the range's members")
        conf = holder.members
        return sorted({*conf.voters, *conf.learners})

    def change_members(self) -> None:
        """One membership change on the lease holder, if it has none pending: a node
        not in the range joins as a learner, a learner becomes a voter, or (with more
        than three voters) a voter other than the holder leaves."""
        holder = self.lease_holder()
        if holder is None:
            return
        conf = holder.members
        inside = {self.node_of[r] for r in (*conf.voters, *conf.learners)}
        outside = [n for n in self.ids if n not in inside]
        options = [ConfChange(ConfChangeType.ADD_LEARNER, 0, context=n) for n in outside]
        options += [ConfChange(ConfChangeType.ADD_NODE, n) for n in conf.learners]
        if len(conf.voters) > 3:
            options += [
                ConfChange(ConfChangeType.REMOVE_NODE, n)
                for n in conf.voters
                if n != holder.replica_id
            ]
        if options:
            change = self.rng.choice(options)
            if change.type is ConfChangeType.ADD_LEARNER:
                node = change.context
                change = ConfChange(change.type, self.new_replica_id(node), context=node)
            with contextlib.suppress(InvalidArgumentError):
                holder.change_members(change)
                self.changes += 1
                self._given.add(change.node_id)  # NB: it may yet commit: never given again
                if change.type is ConfChangeType.ADD_LEARNER and change.node_id != node:
                    self.readded += 1

    def new_replica_id(self, node: int) -> int:
        """The id of a replica to add on ``node``: the node's own if no replica had it,
        else one never used (a node added back is a new replica)."""
        if node not in self._given:
            return node
        self.node_of[self.next_id] = node
        self.next_id += 1
        return self.next_id - 1

    def _node_of(self, replica_id: int) -> _Node | None:
        node = self.node_of.get(replica_id)
        return self.nodes[node] if node is not None else None

    def lease_holder(self) -> Replica | None:
        holders = [r for r in self.live() if r.holds_lease]
        terms = [r.raft.term for r in holders]
        if len(set(terms)) != len(terms):
            raise InvariantViolation(f"two lease holders in one term: {terms}")
        return max(holders, key=lambda r: r.raft.term, default=None)

    # -- the network -----------------------------------------------------------------

    def _send(self, m: Message) -> None:
        origin, dest = self.node_of[m.sender], self.node_of[m.to]
        if m.type is MessageType.SNAP:
            # its data is read as it leaves (as the store's loop reads it), and its stream
            # tells its sender whether it arrived (told after the Ready is done with, as
            # nothing may step the group in between)
            sender = self.nodes[origin].replica
            lost = sender is None or self._lost(origin, dest)
            self._reports.append((m.sender, m.to, not lost))
            if sender is None or lost:
                return
            self._post(dest, encode_message(sender.snapshot_message(m)))
        elif not self._lost(origin, dest):
            self._post(dest, encode_message(m))

    def inject(self, node: int, m: Message) -> None:
        """Hand ``m`` to ``node`` as if the network delivered it now."""
        self._receive(self.nodes[node], m)

    def _lost(self, origin: int, dest: int) -> bool:
        f = self.faults
        return (origin, dest) in self.cut or bool(f.loss and self.rng.random() < f.loss)

    def _post(self, dest: int, raw: bytes) -> None:
        f = self.faults
        copies = 2 if f.duplicate and self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            self._seq += 1
            delay = self.rng.randint(0, f.max_delay) if f.max_delay else 0
            heapq.heappush(self._queue, (self.now + delay, self._seq, dest, raw))

    def _deliver(self, *, all_now: bool = False) -> int:
        reports, self._reports = self._reports, []
        for sender, to, success in reports:
            replica = self.nodes[self.node_of[sender]].replica
            if replica is not None and replica.replica_id == sender:
                replica.raft.report_snapshot(to, success=success)
        due: list[tuple[int, bytes]] = []
        while self._queue and (all_now or self._queue[0][0] <= self.now):
            _, _, dest, raw = heapq.heappop(self._queue)
            due.append((dest, raw))
        for dest, raw in due:
            node = self.nodes[dest]
            if node.up:
                self._receive(node, decode_inbound(raw))
        return len(due)

    def _receive(self, node: _Node, m: Message | ReplicaTooOld) -> None:
        """Step ``m`` into the node's replica, by the replica ids it names, as a store's
        loop does (see the module docstring)."""
        if isinstance(m, ReplicaTooOld):
            if node.replica_id and node.replica_id <= m.replica_id:
                self._collect_replica(node, m.replica_id + 1)
            return
        if m.to < max(node.replica_id, node.tombstone):
            self.dropped_old += 1  # for a replica this node held before: gone
            return
        if m.to > node.replica_id:
            if node.replica_id:
                self._collect_replica(node, m.to)  # its replica was removed, and added back
            node.replica_id = m.to
            node.replica = self._open_replica(node)
        if m.sender in node.removed:
            # a replica the range removed, which has not heard of it: tell it
            if not self._lost(node.id, self.node_of[m.sender]):
                self._post(self.node_of[m.sender], encode_notice(ReplicaTooOld(m.sender)))
            return
        replica = node.replica
        if replica is None:
            raise InvariantViolation(f"n{node.id} is up without its replica {node.replica_id}")
        if m.to != replica.replica_id:
            raise InvariantViolation(f"replica {replica.replica_id} got a message to {m.to}")
        replica.raft.step(m)

    # -- driving ---------------------------------------------------------------------

    def _handle_ready(self, node: _Node) -> bool:
        replica = node.replica
        ready = replica.ready() if replica is not None else None
        if replica is None or ready is None:
            return False
        for m in ready.early_messages:  # as the store's loop sends them, before its fsync
            self._send(m)
        replica.acknowledge(ready)
        if self.faults.crash_mid_ready and self.rng.random() < self.faults.crash_mid_ready:
            self.crash(node.id)  # NB: what it acknowledged is committed: it must apply
            return True
        applied = node.engine.write(lambda rw: replica.stage(rw, ready))
        for entry in applied:
            if not entry.snapshot:  # NB: a snapshot brings data, not the ops behind it
                node.ops[entry.index] = entry.effects.ops
        for committed in ready.committed_entries:
            self._check_apply(node, committed.index, committed.term, committed.data)
            if committed.type is EntryType.CONF_CHANGE:
                change = decode_conf_change(committed.data)
                if change.type is ConfChangeType.REMOVE_NODE:
                    node.removed.add(change.node_id)
        for m in replica.staged(ready):
            self._send(m)
        if replica.replica_id in node.removed:
            self._collect_replica(node, replica.replica_id + 1)  # it applied its own removal
        self.lease_holder()
        return True

    def _check_apply(self, node: _Node, index: int, term: int, data: bytes) -> None:
        seen = self.applied.setdefault(index, (term, data))
        if seen != (term, data):
            raise InvariantViolation(
                f"node {node.id} applied term {term} at {index}, where another applied {seen[0]}"
            )

    def propose(self) -> None:
        """An increment of the counter (and a write of a key of its own) on the lease
        holder, if there is one."""
        holder = self.lease_holder()
        if holder is None:
            return
        self._clock += 1
        ts = Timestamp(self._clock)
        own = b"k%06d" % self._clock

        def evaluate(rw: ReadWriter) -> tuple[tuple[int, bytes], Effects]:
            current = mvcc.get(rw, COUNTER, ts)
            value = int(current.value) + 1 if current is not None else 1
            ops = mvcc.put(rw, COUNTER, ts, b"%d" % value)
            ops += mvcc.put(rw, own, ts, b"%d" % value)
            return (value, own), Effects(tuple(ops))

        try:
            with self.node(holder).engine.snapshot() as applied:
                self._in_flight.append(holder.propose(applied, evaluate))
        except NotLeaseHolderError:
            self.failed += 1

    def read(self, on: Replica | None = None) -> Completion[tuple[int, Timestamp | None]] | None:
        """A read of the counter on ``on``, or on a replica that believes it holds the
        lease (a deposed one too, should it not know yet); its completion."""
        holders = [r for r in self.live() if r.holds_lease]
        if on is None and not holders:
            return None
        holder = on or self.rng.choice(holders)
        floor = max((value for value, _ in self.acked), default=0)
        self._clock += 1
        ts = Timestamp(self._clock)

        def evaluate(rw: ReadWriter) -> tuple[int, Timestamp | None]:
            current = mvcc.get(rw, COUNTER, ts)
            return (int(current.value), current.ts) if current is not None else (0, None)

        with self.node(holder).engine.snapshot() as applied:
            done = holder.read(applied, evaluate)
        self._reads.append((floor, done))
        return done

    def _collect(self) -> None:
        waiting = []
        for done in self._in_flight:
            if not done.done():
                waiting.append(done)
            elif done.exception() is None:
                self.acked.append(done.result())
            else:
                self.failed += 1
        self._in_flight = waiting
        reading = []
        for floor, read in self._reads:
            if not read.done():
                reading.append((floor, read))
            elif read.exception() is None:
                value, version = read.result()
                if value < floor:
                    raise InvariantViolation(
                        f"a stale read: the counter read {value} after {floor} was acknowledged"
                    )
                if version is not None:
                    self.read_values.append((value, version))
        self._reads = reading

    def round(self, *, propose: float = 0.4, read: float = 0.3) -> None:
        f, rng = self.faults, self.rng
        self.now += 1
        if f.crash and rng.random() < f.crash and len(self.live()) > 0:
            self.crash(rng.choice([self.node(r).id for r in self.live()]))
        for node_id in self.ids:
            if not self.nodes[node_id].up and f.restart and rng.random() < f.restart:
                self.restart(node_id)
        if f.partition and rng.random() < f.partition:
            side = set(rng.sample(self.ids, rng.randint(1, len(self.ids) - 1)))
            self.cut = {(a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)}
        if f.heal and rng.random() < f.heal:
            self.cut.clear()
        if rng.random() < propose:
            self.propose()
        if rng.random() < read:
            self.read()
        if f.conf_change and rng.random() < f.conf_change:
            self.change_members()
        for replica in self.live():
            replica.tick()
            replica.confirm_reads()
        self._deliver()
        for node in self.nodes.values():
            self._handle_ready(node)
        self._collect()

    def settle(self, max_rounds: int = 2_000) -> None:
        """Stop the faults, restart every node and run until every replica has applied
        everything committed and no proposal is in flight."""
        self.faults = RangeFaults()
        self.cut.clear()
        for node_id in self.ids:
            self.restart(node_id)
        for _ in range(max_rounds):
            self.round(propose=0.0)
            self._collect_strays()
            self._deliver(all_now=True)
            while any(self._handle_ready(node) for node in self.nodes.values()):
                self._deliver(all_now=True)
            holder = self.lease_holder()
            if holder is not None and not self._in_flight and not self._reads:
                commit = holder.raft.committed
                members = self.members()
                applied = [self.nodes[self.node_of[r]].replica for r in members]
                held = {self.node_of[r] for r in members}
                if all(r is not None and r.applied == commit for r in applied) and all(
                    not n.replica_id for n in self.nodes.values() if n.id not in held
                ):
                    return
        raise InvariantViolation(f"the range did not settle in {max_rounds} rounds")

    def _collect_strays(self) -> None:
        """Collect each replica the lease holder's membership lacks, none in flight (as
        a store's replica GC does, asking the range's record): a removed learner, or a voter cut
        off when it was removed, may never speak to a member again, so no notice
        reaches it."""
        holder = self.lease_holder()
        if holder is None or holder.raft.pending_conf_index > holder.applied:
            return  # NB: a change in flight may be adding the replica
        conf = holder.members
        for node in self.nodes.values():
            rid = node.replica_id
            if node.up and rid and rid not in conf.voters and rid not in conf.learners:
                self._collect_replica(node, rid + 1)

    # -- checks ----------------------------------------------------------------------

    def check_converged(self) -> int:
        """Every replica holds the same data, and the increments add up; returns the
        counter's value."""
        members = [self.node_of[r] for r in self.members()]
        images = {node: _image(self.nodes[node].engine) for node in members}
        first = images[members[0]]
        for node_id, image in images.items():
            if image != first:
                raise InvariantViolation(f"node {node_id}'s data differs from node {members[0]}'s")
        for node in self.nodes.values():
            if node.id not in members and (
                node.replica_id or _image(node.engine) or _raft_state(node.engine)
            ):
                raise InvariantViolation(f"n{node.id} holds a replica removed from the range")
        ops: dict[int, tuple[LogicalOp, ...]] = {}
        for node in self.nodes.values():
            for index, applied in node.ops.items():
                if ops.setdefault(index, applied) != applied:
                    raise InvariantViolation(f"node {node.id} emitted other ops at {index}")
        with self.nodes[members[0]].engine.snapshot() as snap:
            current = mvcc.get(snap, COUNTER, Timestamp(self._clock + 1))
            counter = int(current.value) if current is not None else 0
            increments = sum(
                1
                for applied in ops.values()
                for op in applied
                if isinstance(op, WriteValue) and op.key == COUNTER
            )
            if counter != increments:
                raise InvariantViolation(f"counter {counter} after {increments} increments")
            values = [value for value, _ in self.acked]
            if len(set(values)) != len(values):
                raise InvariantViolation("two acknowledged increments read the same value")
            for value, own in self.acked:
                kv = mvcc.get(snap, own, Timestamp(self._clock + 1))
                if kv is None or int(kv.value) != value or value > counter:
                    raise InvariantViolation(f"acknowledged increment {value} is lost")
            for value, version in self.read_values:
                kv = mvcc.get(snap, COUNTER, version)
                if kv is None or kv.ts != version or int(kv.value) != value:
                    raise InvariantViolation(f"a read saw {value} at {version}, never written")
        return counter


class WholeEngine:
    """The simulated range's data: every MVCC entry of its engine (a node here holds
    one range), imaged whole for a snapshot. ``nodes``: the replicas, whose replica ids
    are their node ids (a simulation keeps no descriptor)."""

    def __init__(self, nodes: Sequence[int] = ()) -> None:
        self._nodes = tuple(nodes)

    def snapshot_chunks(self, reader: Reader) -> Iterator[bytes]:
        rows = [[db, k, v] for db in MVCC_DATABASES for k, v in reader.scan(db, b"")]
        packed: bytes = msgpack.packb(rows, use_bin_type=True)
        yield packed

    def spool(self, chunks: Iterable[bytes]) -> bytes:
        return b"".join(chunks)  # NB: a simulated range is small: held in memory

    def refusal(self, header: bytes) -> Refusal | None:
        return None

    def accepts(self, data: bytes) -> bool:
        return True

    def spooled(self, data: bytes) -> Iterator[bytes]:
        return iter((data,))

    def release(self, data: bytes) -> None:
        pass

    def install(self, rw: ReadWriter, data: bytes) -> None:
        for db in MVCC_DATABASES:
            for key, _ in list(rw.scan(db, b"")):
                rw.delete(db, key)
        for db, key, value in msgpack.unpackb(data, raw=False):
            rw.put(db, key, value)

    def members_changed(self, rw: ReadWriter, conf: ConfState, change: ConfChange | None) -> None:
        pass  # the simulator asks the replicas themselves

    def replicas(self, reader: Reader) -> tuple[dict[int, int], int]:
        return {n: n for n in self._nodes}, max(self._nodes, default=0) + 1


def _raft_state(engine: LMDBEngine) -> list[tuple[bytes, bytes]]:
    with engine.snapshot() as snap:
        return list(snap.scan(RAFT_DB, b""))


def _image(engine: LMDBEngine) -> list[tuple[str, bytes, bytes]]:
    with engine.snapshot() as snap:
        return [(db, k, v) for db in MVCC_DATABASES for k, v in snap.scan(db, b"")]
