"""The loop that drives a store's replicated ranges: ticks, messages, proposals, Readies.

A :class:`~feedkv.kv.replica.Replica` is pure and not thread-safe, so one thread per
store owns every replica of the store. Each turn of :class:`ReplicaLoop`:

1. takes everything waiting in its inbox, in arrival order: Raft messages from other
   nodes (stepped into their range's replica) and proposals (evaluated on the lease
   holder over the applied state, see :meth:`~feedkv.kv.replica.Replica.propose`; the
   proposals and reads that came in a row are evaluated in one read of the engine); a
   proposal that comes while the loop's write is in flight does not wake it: it waits,
   in order with any read behind it, for the next turn (at the latest the one the
   write's end wakes), whose Readies its entry would have waited for anyway;
2. ticks every replica when a tick is due (``tick_s``; a Raft election timeout is
   ``election_tick`` ticks), telling it how many fell due: a leader's count of them
   never falls behind real time by more than a tick when it decides whether it holds
   its lease (``Config.lease_margin``), while its timers move one tick a turn;
3. stages the Readies of *every* replica that has one in one engine transaction (their
   logs, hard states and applied entries: one fsync for all the ranges of the store, the
   group commit), hands each range's applied entries to ``on_stage`` inside that
   transaction (under the engine's ``eval_lock``: the place for monotone updates of state
   evaluation reads, as the engine may run the transaction twice) and to ``on_apply``
   once it is durable (on the engine's commit thread, under its ``apply_lock``, as a
   store hands a command's ops to its observers), finishes each (``staged``), notes
   which ranges' leases it holds now (:meth:`ReplicaLoop.holds_lease`), and sends the
   messages, batched per destination node: one ``send(node, batch)`` call per node and
   turn, however many ranges talk to it (the turn's early messages leave as its write
   is submitted; each request on a Raft stream costs several thread hand-offs on both
   nodes, much more than the messages it carries). While that write is in flight the
   turns that follow send their heartbeats at once, but their appends wait for its end
   and leave with the next Readies, one per follower and range: the longer writes take
   under load, the more entries each append carries.

Evaluation runs under the engine's ``eval_lock``
(:meth:`~feedkv.storage.engine.Engine.read_now`), so it never runs beside a command the
engine's commit thread evaluates: the state they share (timestamp cache, closed
timestamps) sees one evaluation at a time. A read writes nothing to the log
(:meth:`~feedkv.kv.replica.Replica.read`): the reads a turn took share one confirmation
of the leadership, asked before the turn's Readies, so their heartbeats leave with them.
When a replica takes up a lease, ``on_lease`` is called on the loop before it evaluates
anything (the store covers the range's timestamp cache then). An entry that merged a
range into its left neighbour (``Effects.merges``) ends the right-hand range's replica
here in the same turn, before it can write again, and messages for it are dropped from
then on (:mod:`feedkv.kv.replicated_merge`).

A store holds at most one replica of a range. Its Raft peer id is its replica id
(:mod:`feedkv.kv.range_descriptor`), never used before in the range; the loop maps replica
ids to nodes by the range's descriptor, and by where messages came from. A message for a
range the store has no replica of creates one, empty, with the id the message is
addressed to (a replica being added: the leader sends it a snapshot), unless that id is
one the range gave out before and this store dropped (its tombstone) or never held. A
message addressed to an older replica id than this store's replica is for a replica that
is gone: dropped. One addressed to a newer id tells this store that its replica was
removed and the node added again: the old replica is collected before the new one is
made. Collecting a replica (``on_removed``) writes its tombstone and drops its Raft state
and feeds at once, on the loop, and deletes its data on a thread of the store's
(:mod:`feedkv.kv.replica_collector`): a large range does not stall the store's other
ranges; until its data is gone the loop takes no snapshot of the range. A message from a
replica the range removed (its id is below the range's next id and not a member) is
dropped, and its sender told (:class:`~feedkv.kv.replica_refusal.ReplicaTooOld`), so a
removed replica that missed its removal (its node was down) never has a vote counted or
a campaign answered, and collects itself (CockroachDB's ReplicaTooOldError). A node's
transport calls :meth:`ReplicaLoop.receive` with the batches other nodes sent it;
``send`` must not block for long (it runs on the loop), and a message it loses is a
message the network lost, which Raft tolerates.

Snapshots go their own way, in bounded chunks (:mod:`feedkv.kv.snapshot_spool`): a
thread of the loop's copies the range from an engine snapshot to a spooled file, ends
the engine snapshot, and streams the file's chunks through ``send_snapshot`` (it blocks
until the receiver kept every chunk, or raises), then tells Raft whether it arrived. The
receiving node's transport hands the frames to :meth:`ReplicaLoop.receive_snapshot`,
which looks at the message and the data's header first and refuses what it could not
install (:class:`~feedkv.kv.replica_refusal.SnapshotRefusedError`, with its reason,
before the data is taken); else it spools the chunks to disk as they come and then
steps the snapshot's message, naming the spooled file, into the replica (which installs
it from the file in one engine transaction; the file goes once that is durable, or when
the replica refuses the snapshot). A sender whose snapshot was refused makes none for
that replica for ``refused_backoff_s`` (each would copy the range again), and tells Raft
at once that it failed.
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from feedkv.errors import (
    AmbiguousResultError,
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
    NodeUnavailableError,
    RangeNotFoundError,
)
from feedkv.kv.replica import AppliedEntry, RangeData, Replica
from feedkv.kv.replica_refusal import (
    Refusal,
    ReplicaTooOld,
    SnapshotRefusedError,
    decode_inbound,
    encode_notice,
)
from feedkv.kv.replicated_command import Effects
from feedkv.raft import (
    ConfChange,
    ConfChangeType,
    Config,
    ConfState,
    EntryType,
    Message,
    MessageType,
    Ready,
    decode_message,
    encode_message,
)
from feedkv.storage.engine import Completion, Engine, ReadWriter

__all__ = ["ReplicaLoop", "Send"]

T = TypeVar("T")

# NB: at least an election timeout: after a stall that long every lease ran out, so the
# ticks not made up cannot stretch one
MAX_TICKS_MADE_UP = 100

log = logging.getLogger(__name__)

Send = Callable[[int, list[tuple[int, bytes]]], None]
"""``send(node_id, [(range_id, encoded message), ...])``: one node's share of a turn."""

SendSnapshot = Callable[[int, int, Iterator[bytes]], None]
"""``send_snapshot(node_id, range_id, frames)``: stream a snapshot's frames (the encoded
message, then its data's chunks) to the node, taking them on the calling thread; returns
once the node kept them all, raises when the transfer failed."""

OnRemoved = Callable[[int, int], Completion[None] | None]
"""``on_removed(range_id, next_replica_id)``: the loop collected its replica of the range
(it no longer drives it); make sure no replica with an id below the one given is made
here again, and delete what it kept. Runs on the loop, so it must not take long: the
returned completion is set once the replica's data is gone (until then the loop takes
no snapshot of the range: :mod:`feedkv.kv.replica_collector`)."""

Evaluate = Callable[[ReadWriter], tuple[Any, Effects]]
OnEntries = Callable[[int, Sequence[AppliedEntry]], None]
OnStage = Callable[[ReadWriter, int, Sequence[AppliedEntry]], None]


@dataclass(frozen=True, slots=True)
class _Campaign:
    range_id: int


@dataclass(frozen=True, slots=True)
class _Change:
    range_id: int
    change: ConfChange
    done: Completion[int]


@dataclass(frozen=True, slots=True)
class _Proposal:
    range_id: int
    evaluate: Evaluate
    done: Completion[Any]


@dataclass(frozen=True, slots=True)
class _Reading:
    range_id: int
    evaluate: Callable[[Any], Any]
    done: Completion[Any]


@dataclass(frozen=True, slots=True)
class _Remove:
    range_id: int
    then: Callable[[], Completion[None] | None]
    if_leaderless: bool


@dataclass(frozen=True, slots=True)
class _Collected:
    """The data of the range's removed replica is gone (or its deletion failed)."""

    range_id: int
    done: Completion[None]


@dataclass(frozen=True, slots=True)
class _Transfer:
    range_id: int
    to: int


@dataclass(frozen=True, slots=True)
class _SnapshotSent:
    """A snapshot's message left for the transport (or could not be made)."""

    range_id: int
    to: int
    success: bool


@dataclass(frozen=True, slots=True)
class _Spooled:
    """A snapshot's message from node ``sender``, its data spooled (the token)."""

    range_id: int
    message: Message
    sender: int


@dataclass(frozen=True, slots=True)
class _Inbound:
    """Messages node ``sender`` sent (0: not known)."""

    batch: list[tuple[int, bytes]]
    sender: int


class _Written:
    """The engine finished the turn's write in flight (it wakes the loop)."""


_WRITTEN = _Written()


class _Wake:
    """A read waits among the evaluations deferred while a write is in flight."""


_WAKE = _Wake()


@dataclass(frozen=True, slots=True)
class _Write:
    """A turn's Readies, staged in one engine write that is in flight."""

    readies: list[tuple[Replica, Ready]]
    done: Completion[list[list[AppliedEntry]]]
    taken: dict[int, int]  # range id -> how many messages its Ready took


_Item = (
    _Proposal
    | _Reading
    | _Change
    | _Campaign
    | _Remove
    | _Transfer
    | _SnapshotSent
    | _Written
    | _Wake
    | _Inbound
    | _Spooled
    | _Collected
)
"""What the loop's inbox carries (``None`` wakes it to stop)."""


class ReplicaLoop:
    """Drives every replicated range of one store; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        node_id: int,
        send: Send,
        range_data: Callable[[int], RangeData],
        *,
        send_snapshot: SendSnapshot,
        tick_s: float = 0.05,
        config: Config | None = None,
        refused_backoff_s: float = 1.0,
        on_stage: OnStage | None = None,
        on_apply: OnEntries | None = None,
        on_lease: Callable[[int], None] | None = None,
        on_removed: OnRemoved | None = None,
        seed: int | None = None,
    ) -> None:
        self.engine = engine
        self.node_id = node_id
        self._send = send
        self._send_snapshot = send_snapshot
        self._spooled: dict[int, bytes] = {}  # range id -> a snapshot its replica took
        self._range_data = range_data
        self._tick_s = tick_s
        self._config = config or Config(id=node_id)
        self._refused_backoff_s = refused_backoff_s
        self.snapshots_held_back = 0  # snapshots not made during a backoff (tests, metrics)
        self._on_stage = on_stage
        self._on_apply = on_apply
        self._on_lease = on_lease
        self._on_removed = on_removed
        self._leases: dict[int, int] = {}  # range id -> term, of the leases held here
        self._changes: list[tuple[Replica, _Change, int]] = []  # (..., its log index)
        self._rng = random.Random(seed)
        self._replicas: dict[int, Replica] = {}
        self._merged: set[int] = set()  # ranges merged away: their messages are dropped
        # ranges whose removed replica's data is still being deleted: no snapshot of them
        self._collecting: set[int] = set()
        self._inbox: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"replicas-n{node_id}", daemon=True)
        self._snapshots: queue.SimpleQueue[tuple[Replica, Message] | None] = queue.SimpleQueue()
        self._snapshotter = threading.Thread(
            target=self._send_snapshots, name=f"snapshots-n{node_id}", daemon=True
        )
        self._lock = threading.Lock()  # guards _replicas against readers off the loop
        self._writing: _Write | None = None
        # the proposals and reads that came while a write was in flight: the loop is not
        # woken for a proposal then (see propose)
        self._deferred_lock = threading.Lock()
        self._deferring = False
        self._deferred: list[_Proposal | _Reading] = []
        # node id -> the messages of this turn for it (sent once, at the turn's end)
        self._outbox: dict[int, list[tuple[int, bytes]]] = {}

    def add(
        self,
        range_id: int,
        *,
        replica_id: int = 0,
        campaign: bool = False,
        restarted: bool = False,
    ) -> Replica:
        """Serve the range's replica on this store (its first state as written by
        :meth:`Replica.bootstrap` or an earlier run, or none: it waits for a snapshot);
        ``replica_id``: its id (0: this node's replica in the range's descriptor);
        ``campaign``: stand for election at once (a group of one need not wait);
        ``restarted``: the store restarts with this replica (``Config.restarted``)."""
        data = self._range_data(range_id)
        with self.engine.snapshot() as snap:
            nodes, next_id = data.replicas(snap)
        if not replica_id:
            replica_id = next((r for r, n in nodes.items() if n == self.node_id), 0)
        if not replica_id:
            raise InvariantViolation(f"r{range_id} names no replica on n{self.node_id} to serve")
        replica = Replica(
            self.engine,
            range_id,
            replica_id,
            data=data,
            config=replace(self._config, restarted=restarted),
            rng=random.Random(self._rng.random()),
        )
        replica.nodes = dict(nodes)
        if nodes:  # NB: else it waits for its snapshot, and knows no members yet
            replica.next_replica_id = next_id
        with self._lock:
            self._replicas[range_id] = replica
        if campaign:
            self._inbox.put(_Campaign(range_id))
        return replica

    def start(self) -> ReplicaLoop:
        self._thread.start()
        self._snapshotter.start()
        return self

    def stop(self) -> None:
        """Stop the loop; proposals in flight end ambiguous, new ones are refused."""
        self._stopped.set()
        self._inbox.put(None)
        self._snapshots.put(None)
        if self._thread.is_alive():
            self._thread.join()
        if self._snapshotter.is_alive():
            self._snapshotter.join()
        for replica in self._replicas.values():
            replica.close()
        self._refuse_waiting()

    # -- inputs (any thread) -----------------------------------------------------------

    def receive(self, batch: list[tuple[int, bytes]], sender: int = 0) -> None:
        """Messages node ``sender`` sent, as ``(range_id, encoded message)`` (each
        message names its sending and receiving replica ids)."""
        self._inbox.put(_Inbound(batch, sender))

    def receive_snapshot(self, range_id: int, frames: Iterator[bytes], sender: int) -> None:
        """A snapshot node ``sender`` streams (the frames of
        :meth:`~feedkv.kv.replica.Replica.snapshot_frames`), on the transport's thread:
        refuses it at its header (:class:`~feedkv.kv.replica_refusal.SnapshotRefusedError`,
        having read two frames) when the loop could not take it, else spools its chunks
        as they come, then hands its message to the loop. Raises what ``frames`` raises
        (the transfer was cut off: nothing was kept, nothing changed)."""
        message = decode_message(next(frames))
        if message.snapshot is None:
            raise InvariantViolation(f"r{range_id}: a snapshot stream without a snapshot")
        data = self._range_data(range_id)
        header = next(frames, None)
        if header is None:
            raise InvariantViolation(f"r{range_id}: a snapshot stream without its data")
        refusal = self._refusal(range_id, message) or data.refusal(header)
        if refusal is not None:
            # NB: before its data is taken: the sender stops reading and sending it
            raise SnapshotRefusedError(
                refusal,
                f"r{range_id} replica {message.to} at index {message.snapshot.meta.index} "
                f"on n{self.node_id}",
            )
        token = data.spool(itertools.chain((header,), frames))
        spooled = replace(message, snapshot=replace(message.snapshot, data=token))
        self._inbox.put(_Spooled(range_id, spooled, sender))

    def _refusal(self, range_id: int, message: Message) -> Refusal | None:
        """Why the loop would refuse the snapshot ``message``, as far as a look from the
        transport's thread tells (the loop checks again as it steps it: what passes
        here may still be dropped there, never the other way round)."""
        snapshot = message.snapshot
        if range_id in self._merged:
            return Refusal.MERGED
        if range_id in self._collecting:
            return Refusal.COLLECTING
        with self._lock:
            replica = self._replicas.get(range_id)
        if replica is not None:
            if message.to < replica.replica_id:
                return Refusal.NEWER_REPLICA
            if message.to > replica.replica_id:
                # NB: the old replica's data goes first; the loop starts on that with
                # the next message addressed to the new one, and the leader retries
                return Refusal.COLLECTING
            if snapshot is not None and snapshot.meta.index <= replica.applied:
                return Refusal.APPLIED
            return None
        with self.engine.snapshot() as snap:
            nodes, next_id = self._range_data(range_id).replicas(snap)
        if message.to < next_id and message.to not in nodes:
            return Refusal.REPLICA_REMOVED
        return None

    def propose(self, range_id: int, evaluate: Evaluate) -> Completion[Any]:
        """Evaluate a command on this node's replica of ``range_id`` and replicate it;
        the completion holds the evaluation's result once the entry applied here, or
        :class:`~feedkv.errors.NotLeaseHolderError` (with the leader it knows) or
        :class:`~feedkv.errors.AmbiguousResultError`."""
        done: Completion[Any] = Completion()
        if self._stopped.is_set():
            done.set_exception(NodeUnavailableError(f"node {self.node_id} is stopping"))
            return done
        item = _Proposal(range_id, evaluate, done)
        with self._deferred_lock:
            if self._deferring:
                # NB: the loop is not woken for it (see the module docstring): in kv0 on
                # three replicas, a third of its turns were a proposal's alone
                self._deferred.append(item)
                return done
        self._inbox.put(item)
        return done

    def read(self, range_id: int, evaluate: Callable[[ReadWriter], T]) -> Completion[T]:
        """Evaluate a read on this node's replica of ``range_id`` (its lease holder)
        without a log entry; the completion holds its result once it may be answered,
        or the errors of :meth:`propose`."""
        done: Completion[T] = Completion()
        if self._stopped.is_set():
            done.set_exception(NodeUnavailableError(f"node {self.node_id} is stopping"))
            return done
        item = _Reading(range_id, evaluate, done)
        with self._deferred_lock:
            deferred = self._deferring
            if deferred:
                # NB: behind the proposals deferred before it (a client's read after
                # its own write sees it), but the loop is woken: a read waits for no
                # write, and the heartbeats confirming it leave at once
                self._deferred.append(item)
        self._inbox.put(_WAKE if deferred else item)
        return done

    def change_members(self, range_id: int, change: ConfChange) -> Completion[int]:
        """Propose a membership change of ``range_id`` on its lease holder (this store);
        the completion holds the change's log index once it applied here."""
        done: Completion[int] = Completion()
        self._inbox.put(_Change(range_id, change, done))
        return done

    def remove(
        self,
        range_id: int,
        then: Callable[[], Completion[None] | None],
        *,
        if_leaderless: bool = False,
    ) -> None:
        """Stop driving this store's replica of ``range_id`` (it was removed from the
        group), then call ``then`` on the loop (which deletes what the replica kept, as
        ``on_removed`` does, and returns what it returns).
        ``if_leaderless``: only if the replica still knows no leader when the loop
        takes this up (see :meth:`~feedkv.kv.store.Store.drop_replica`)."""
        self._inbox.put(_Remove(range_id, then, if_leaderless))

    def transfer_lease(self, range_id: int, to: int) -> None:
        """Have this store's replica of ``range_id``, if it leads, hand the leadership
        (so the lease) to its voter on node ``to`` (Raft's leadership transfer: it
        campaigns at once, without waiting out an election timeout). Returns at once;
        the caller watches :meth:`holds_lease`."""
        self._inbox.put(_Transfer(range_id, to))

    def holds_lease(self, range_id: int) -> bool:
        """Whether this store's replica of ``range_id`` holds its lease (as of the
        loop's last turn)."""
        return range_id in self._leases

    def leases(self) -> list[int]:
        """The ranges whose lease this store's replica holds (as of the last turn)."""
        return list(self._leases)

    def lease_terms(self) -> dict[int, int]:
        """``range id -> Raft term`` of each lease this store's replica holds."""
        return dict(self._leases)

    def has(self, range_id: int) -> bool:
        """Whether this store holds a replica of ``range_id``."""
        return range_id in self._replicas

    def forget(self, range_ids: Sequence[int]) -> None:
        """Drop every message for these ranges (merged away here, before this loop
        started: :func:`~feedkv.kv.replicated_merge.write_tombstone`). Before
        :meth:`start`."""
        self._merged.update(range_ids)

    def collecting(self, range_id: int, done: Completion[None]) -> None:
        """The data of a replica of ``range_id`` removed before this loop started is
        being deleted until ``done``: take no snapshot of the range till then. Before
        :meth:`start`."""
        self._await_collection(range_id, done)

    def _await_collection(self, range_id: int, done: Completion[None] | None) -> None:
        if done is None:
            return
        self._collecting.add(range_id)
        done.add_done_callback(lambda: self._inbox.put(_Collected(range_id, done)))

    def applied_everywhere(self, range_id: int, index: int) -> bool:
        """Whether this store's replica leads ``range_id`` and knows that every member of
        its group applied ``index`` (read off the loop: a moment's view)."""
        with self._lock:
            replica = self._replicas.get(range_id)
        return replica is not None and replica.raft.applied_everywhere(index)

    def members(self, range_id: int) -> ConfState:
        """The nodes of the members of ``range_id``'s group as this store's replica
        knows them (sorted; 0 for a member whose node it does not know)."""
        with self._lock:
            replica = self._replicas[range_id]
        conf = replica.members
        return ConfState(
            tuple(sorted(map(replica.node_of, conf.voters))),
            tuple(sorted(map(replica.node_of, conf.learners))),
        )

    def orphans(self) -> int:
        """How many proposals of this store's replicas await their outcome after their
        lease moved (:meth:`Replica.orphans`; a moment's view)."""
        with self._lock:
            replicas = list(self._replicas.values())
        return sum(replica.orphans() for replica in replicas)

    def voters_behind(self, range_id: int) -> dict[int, int | None]:
        """While this store's replica of ``range_id`` leads: how far each other voter's
        replica is behind it, by node (:meth:`Replica.voters_behind`); empty otherwise
        (read off the loop: a moment's view)."""
        with self._lock:
            replica = self._replicas.get(range_id)
        return replica.voters_behind() if replica is not None else {}

    def term(self, range_id: int) -> int:
        """The Raft term this store's replica of ``range_id`` is in (a moment's view)."""
        with self._lock:
            return self._replicas[range_id].raft.term

    def replica_id(self, range_id: int) -> int:
        """The replica id of this store's replica of ``range_id`` (0: it holds none)."""
        with self._lock:
            replica = self._replicas.get(range_id)
        return replica.replica_id if replica is not None else 0

    def members_settled(self, range_id: int) -> bool:
        """Whether no membership change of ``range_id`` is proposed and not yet applied."""
        with self._lock:
            replica = self._replicas[range_id]
        return replica.raft.pending_conf_index <= replica.applied

    def status(self, range_id: int) -> tuple[int, int, int]:
        """``(node of the leader it knows, committed index, applied index)`` of its
        replica (read off the loop: a moment's view)."""
        with self._lock:
            replica = self._replicas[range_id]
        return replica.leader_node, replica.raft.committed, replica.applied

    # -- the loop ----------------------------------------------------------------------

    def _run(self) -> None:
        next_tick = time.monotonic() + self._tick_s
        while not self._stopped.is_set():
            timeout = max(0.0, next_tick - time.monotonic())
            try:
                item = self._inbox.get(timeout=timeout)
            except queue.Empty:
                item = None
            evaluations: list[_Proposal | _Reading] = []
            while item is not None:
                if isinstance(item, _Proposal | _Reading):
                    evaluations.append(item)
                else:
                    self._evaluate(evaluations)  # NB: in order with what came between
                    evaluations = []
                    self._take(item)
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    item = None
            self._evaluate(evaluations)
            # NB: after what the inbox held: each item there came before those deferred
            self._evaluate(self._take_deferred())
            if self._stopped.is_set():
                return
            replicas = list(self._replicas.values())  # NB: a split adds one off the loop
            now = time.monotonic()
            if now >= next_tick:
                due = int((now - next_tick) / self._tick_s) + 1
                next_tick += due * self._tick_s
                for replica in replicas:
                    replica.tick(elapsed=min(due, MAX_TICKS_MADE_UP))
            for replica in replicas:
                if replica.waiting:
                    replica.settle_committed()
                    replica.confirm_reads()
            try:
                self._handle_readies()
                self._flush()
            except FeedKVError:
                log.exception("node %d: the replica loop failed; it stops", self.node_id)
                self._stopped.set()

    def _take_deferred(self) -> list[_Proposal | _Reading]:
        """The proposals and reads deferred while a write is in flight, in order."""
        with self._deferred_lock:
            taken, self._deferred = self._deferred, []
        return taken

    def _defer(self, deferring: bool) -> None:
        """Defer proposals (a write is in flight) or no longer; those deferred go into
        the inbox then, in order, ahead of any that comes after."""
        with self._deferred_lock:
            self._deferring = deferring
            if not deferring:
                for item in self._deferred:
                    self._inbox.put(item)
                self._deferred = []

    def _take(self, item: _Item) -> None:
        if isinstance(item, _Written | _Wake):
            return  # the turn finishes the write, or evaluates what was deferred
        if isinstance(item, _Proposal | _Reading):
            self._evaluate([item])
            return
        if isinstance(item, _Change):
            self._change(item)
            return
        if isinstance(item, _Campaign):
            self._replicas[item.range_id].raft.campaign()
            return
        if isinstance(item, _Transfer):
            replica = self._replicas.get(item.range_id)
            if replica is not None:
                to = [r for r in replica.members.voters if replica.node_of(r) == item.to]
                if to:
                    replica.transfer_lease(to[0])
            return
        if isinstance(item, _SnapshotSent):
            replica = self._replicas.get(item.range_id)
            if replica is not None:
                # NB: handed to the transport is all a sender learns; one that was lost
                # shows as the follower's rejection of the next append, and goes again
                replica.raft.report_snapshot(item.to, success=item.success)
            return
        if isinstance(item, _Spooled):
            self._take_snapshot(item)
            return
        if isinstance(item, _Collected):
            if item.done.exception(timeout=0) is None:
                self._collecting.discard(item.range_id)
            # NB: else its record stays, and so does the refusal, until the next start
            return
        if isinstance(item, _Remove):
            held = self._replicas.get(item.range_id)
            if item.if_leaderless and held is not None and held.raft.leader:
                return  # NB: a leader talks to it: it is a member again
            with self._lock:
                removed = self._replicas.pop(item.range_id, None)
            self._leases.pop(item.range_id, None)
            if removed is not None:
                removed.close()
                self._release_spooled(item.range_id)
                self._await_collection(item.range_id, item.then())
            return
        for range_id, raw in item.batch:
            if range_id in self._merged:
                continue  # NB: from a replica that has not applied the merge yet
            message = decode_inbound(raw)
            if isinstance(message, ReplicaTooOld):
                self._removed_notice(range_id, message.replica_id)
                continue
            if message.snapshot is not None:
                continue  # NB: a snapshot comes spooled (receive_snapshot), never whole
            self._step(range_id, message, item.sender)

    def _step(self, range_id: int, message: Message, sender: int) -> None:
        """Step one message into its replica here, by the replica ids it names (see the
        module docstring)."""
        replica = self._replicas.get(range_id)
        if replica is not None and message.to < replica.replica_id:
            return  # for a replica this store held before: gone
        if replica is not None and message.to > replica.replica_id:
            log.info(
                "n%d: r%d has replica %d here now: replica %d was removed",
                self.node_id,
                range_id,
                message.to,
                replica.replica_id,
            )
            self._collect(replica, message.to)
            replica = None
        if replica is None:
            with self.engine.snapshot() as snap:
                nodes, next_id = self._range_data(range_id).replicas(snap)
            if message.to < next_id and message.to not in nodes:
                return  # an id this store dropped, or never held: the range moved past it
        if message.snapshot is not None and (
            range_id in self._collecting
            or not self._range_data(range_id).accepts(message.snapshot.data)
        ):
            return  # as if lost: the leader sends it again
        if replica is None:
            replica = self.add(range_id, replica_id=message.to)
        if replica.nodes is None:
            replica.nodes = {}
        from_id = message.sender
        if (
            replica.next_replica_id
            and from_id not in replica.nodes
            and (from_id < replica.next_replica_id)
        ):
            # a replica the range removed, which has not heard of it: tell it
            if sender:
                self._send(sender, [(range_id, encode_notice(ReplicaTooOld(from_id)))])
            return
        if sender and from_id not in replica.nodes:
            replica.nodes[from_id] = sender  # a member this replica's record lacks yet
        replica.raft.step(message)

    def _take_snapshot(self, item: _Spooled) -> None:
        """Step a spooled snapshot; its file is freed at once unless the replica took it
        (then once it is installed durably, :meth:`_finish`)."""
        token = item.message.snapshot.data if item.message.snapshot is not None else b""
        data = self._range_data(item.range_id)
        if item.range_id in self._merged:
            data.release(token)
            return
        self._step(item.range_id, item.message, item.sender)
        replica = self._replicas.get(item.range_id)
        taken = replica.raft.log.unstable_snapshot() if replica is not None else None
        if taken is None or taken.data != token:
            data.release(token)  # refused (stale, or not for this replica)
            return
        replaced = self._spooled.get(item.range_id)
        if replaced is not None and replaced != token:
            data.release(replaced)  # NB: a newer snapshot took its place before it was staged
        self._spooled[item.range_id] = token

    def _removed_notice(self, range_id: int, removed_id: int) -> None:
        """Another replica of the range says the range removed replica ``removed_id``."""
        replica = self._replicas.get(range_id)
        if replica is not None and replica.replica_id <= removed_id:
            log.info(
                "n%d: replica %d of r%d was removed from its group; collected",
                self.node_id,
                replica.replica_id,
                range_id,
            )
            self._collect(replica, removed_id + 1)

    def _collect(self, replica: Replica, next_id: int) -> None:
        """Stop driving a replica the range removed; the store deletes what it kept and
        makes no replica of the range with an id below ``next_id`` again."""
        with self._lock:
            self._replicas.pop(replica.range_id, None)
        self._leases.pop(replica.range_id, None)
        replica.close()
        self._release_spooled(replica.range_id)
        if self._on_removed is not None:
            self._await_collection(replica.range_id, self._on_removed(replica.range_id, next_id))

    def _release_spooled(self, range_id: int) -> None:
        token = self._spooled.pop(range_id, None)
        if token is not None:
            self._range_data(range_id).release(token)

    def _refresh(self, replica: Replica) -> None:
        """Read the replica's peers again from its range's record (its members changed,
        or a snapshot brought them)."""
        with self.engine.snapshot() as snap:
            nodes, next_id = self._range_data(replica.range_id).replicas(snap)
        if nodes:  # NB: what it learned from messages gives way to the record
            replica.nodes = dict(nodes)
            replica.next_replica_id = max(replica.next_replica_id, next_id)

    def _change(self, item: _Change) -> None:
        replica = self._replicas.get(item.range_id)
        if replica is None:
            item.done.set_exception(RangeNotFoundError(item.range_id))
            return
        try:
            if not item.change.node_id:
                item = replace(item, change=self._with_replica_id(replica, item.change))
            index = replica.change_members(item.change)
        except FeedKVError as exc:
            item.done.set_exception(exc)
            return
        self._changes.append((replica, item, index))

    def _with_replica_id(self, replica: Replica, change: ConfChange) -> ConfChange:
        """``change`` of the replica on node ``change.context``: its id in the group, or,
        for a replica added, a fresh one (read on the loop, where the last change is
        applied: changes go one at a time)."""
        node = change.context
        with self.engine.snapshot() as snap:
            nodes, next_id = self._range_data(replica.range_id).replicas(snap)
        conf = replica.members
        held = [r for r in (*conf.voters, *conf.learners) if nodes.get(r) == node]
        if held:
            return replace(change, node_id=held[0])
        if change.type is ConfChangeType.REMOVE_NODE:
            raise InvalidArgumentError(f"r{replica.range_id} has no replica on n{node}")
        used = max((*conf.voters, *conf.learners), default=0)
        return replace(change, node_id=max(next_id, replica.next_replica_id, used + 1))

    def _settle_changes(self) -> None:
        waiting, self._changes = self._changes, []
        for replica, item, index in waiting:
            if replica.applied >= index and _took_effect(item.change, replica.members):
                item.done.set_result(index)
            elif replica.applied >= index or not replica.holds_lease:
                item.done.set_exception(
                    AmbiguousResultError(
                        f"range r{replica.range_id}: the lease moved with a membership "
                        f"change at {index} in flight"
                    )
                )
            else:
                self._changes.append((replica, item, index))

    def _evaluate(self, items: list[_Proposal | _Reading]) -> None:
        """Evaluate the proposals and reads taken in a row, in order, in one read of the
        engine (one wait for ``eval_lock``, one transaction, not one each). One that
        fails gets its error, and those after it are evaluated in a new read."""
        start = 0
        while start < len(items):
            position = [start]

            def run(applied: ReadWriter, position: list[int] = position) -> None:
                for item in items[position[0] :]:
                    self._evaluate_one(applied, item)
                    position[0] += 1

            try:
                self.engine.read_now(run)
                return
            except Exception as exc:  # evaluation's errors are the caller's answer
                if position[0] == len(items):
                    raise
                items[position[0]].done.set_exception(exc)
                start = position[0] + 1

    def _evaluate_one(self, applied: ReadWriter, item: _Proposal | _Reading) -> None:
        replica = self._replicas.get(item.range_id)
        if replica is None:
            item.done.set_exception(RangeNotFoundError(item.range_id))
            return
        inner: Completion[Any]
        if isinstance(item, _Proposal):
            inner = replica.propose(applied, item.evaluate)
        else:
            inner = replica.read(applied, item.evaluate)
        inner.add_done_callback(functools.partial(_relay, inner, item.done))

    def _handle_readies(self) -> None:
        """Finish the write in flight once the engine made it durable, then stage the
        Readies waiting in the next one. While a write is in flight the loop goes on
        stepping messages, proposing and reading (as etcd's raft lets its node do between
        a Ready and its advance), sends heartbeats (:meth:`_send_heartbeats`), and
        answers proposals as they commit (:meth:`Replica.settle_committed`): a leader's
        followers' acknowledgements commit an entry while the leader's own write of it
        is still in flight. A write that
        installs a snapshot or applies a membership change is waited for: those change
        the Raft state inside the engine transaction."""
        writing = self._writing
        if writing is not None:
            if not writing.done.done():
                self._send_heartbeats(writing)
                return
            self._writing = None
            self._defer(False)
            self._finish(writing.readies, writing.done.result())
        readies: list[tuple[Replica, Ready]] = []
        for replica in list(self._replicas.values()):
            ready = replica.ready()
            if ready is not None:
                readies.append((replica, ready))
        if not readies:
            return
        for replica, ready in readies:
            _post(self._outbox, replica, ready.early_messages)
            replica.acknowledge(ready)
        if not any(ready.must_sync or ready.committed_entries for _, ready in readies):
            self._finish(readies, [])  # heartbeats and their answers alone: nothing to write
            return

        def stage(rw: ReadWriter) -> list[list[AppliedEntry]]:
            applied = [replica.stage(rw, ready) for replica, ready in readies]
            if self._on_stage is not None:
                for (replica, _), entries in zip(readies, applied, strict=True):
                    if entries:
                        self._on_stage(rw, replica.range_id, entries)
            return applied

        def hand_over(applied: list[list[AppliedEntry]]) -> None:
            if self._on_apply is not None:
                for (replica, _), entries in zip(readies, applied, strict=True):
                    if entries:
                        self._on_apply(replica.range_id, entries)

        done = self.engine.submit(stage, hand_over)
        self._flush()  # NB: the followers write while this store does
        if any(_changes_raft_state(ready) for _, ready in readies):
            self._finish(readies, done.result())
            return
        taken = {replica.range_id: len(ready.messages) for replica, ready in readies}
        self._writing = _Write(readies, done, taken)
        self._defer(True)
        done.add_done_callback(lambda: self._inbox.put(_WRITTEN))

    def _send_heartbeats(self, writing: _Write) -> None:
        """Send the heartbeats made since the write in flight was staged (they confirm
        reads and hold leases). NB: not the appends made meanwhile: they go with the
        next Readies, together. Sent turn by turn, they cost kv0 on three replicas about
        twice the Raft stream requests per commit and a fifth more node CPU."""
        taken = writing.taken
        for replica in list(self._replicas.values()):
            early = replica.raft.take_early_messages(taken.get(replica.range_id, 0), appends=False)
            if early:
                _post(self._outbox, replica, early)

    def _finish(
        self, readies: list[tuple[Replica, Ready]], applied: list[list[AppliedEntry]]
    ) -> None:
        """Phase 2 of the Readies of a turn, once their write is durable; the messages
        it releases go with the turn's others."""
        for replica, ready in readies:
            if self._replicas.get(replica.range_id) is not replica:
                continue  # removed or merged away while its write was in flight
            late = replica.staged(ready)
            if ready.snapshot is not None and self._spooled.get(replica.range_id) == (
                ready.snapshot.data
            ):
                self._release_spooled(replica.range_id)  # installed, durably
            if _changes_raft_state(ready):
                self._refresh(replica)
            _post(self._outbox, replica, [m for m in late if m.type is not MessageType.SNAP])
            for m in late:
                if m.type is MessageType.SNAP:
                    self._snapshots.put((replica, m))
            self._follow_lease(replica)
        for entries in applied:
            for entry in entries:
                for _, right in entry.effects.merges:
                    self._end_merged(right)
        self._settle_changes()

    def _send_snapshots(self) -> None:
        """Stream each snapshot off the loop (a large range takes long to read and
        send), then tell the loop whether it arrived. A snapshot its receiver refused is
        not made again for that replica for ``refused_backoff_s``: Raft asks again at
        each heartbeat's answer, and each would copy the whole range to the spool."""
        refused_until: dict[tuple[int, int], float] = {}  # (range id, replica id) -> when
        while True:
            job = self._snapshots.get()
            if job is None or self._stopped.is_set():
                return  # NB: a stopping loop sends none of those still queued
            replica, m = job
            node, success = replica.node_of(m.to), False
            key = (replica.range_id, m.to)
            if time.monotonic() < refused_until.get(key, 0.0):
                self.snapshots_held_back += 1
                self._inbox.put(_SnapshotSent(replica.range_id, m.to, success=False))
                continue
            refused_until.pop(key, None)
            frames = replica.snapshot_frames(m)
            try:
                if node:
                    self._send_snapshot(node, replica.range_id, frames)
                    success = True
            except SnapshotRefusedError as exc:
                refused_until[key] = time.monotonic() + self._refused_backoff_s
                log.info("r%d: the snapshot for replica %d on n%d: %s", *key, node, exc)
            except Exception as exc:  # NB: whatever cut it off, Raft sends it again
                log.info(
                    "r%d: the snapshot for replica %d on n%d failed: %s",
                    replica.range_id,
                    m.to,
                    node,
                    exc,
                )
            finally:
                frames.close()  # NB: its spooled copy goes here
            self._inbox.put(_SnapshotSent(replica.range_id, m.to, success=success))

    def _end_merged(self, range_id: int) -> None:
        """The range merged into its left neighbour here: its group ends (the store
        deleted its Raft state with the merge)."""
        self._merged.add(range_id)
        with self._lock:
            replica = self._replicas.pop(range_id, None)
        self._leases.pop(range_id, None)
        self._release_spooled(range_id)
        if replica is not None:
            replica.close()

    def _flush(self) -> None:
        """Send what the turn gathered so far: one batch per node."""
        outbox, self._outbox = self._outbox, {}
        for node, batch in outbox.items():
            self._send(node, batch)

    def _follow_lease(self, replica: Replica) -> None:
        if replica.take_lease_start() and self._on_lease is not None:
            self._on_lease(replica.range_id)
        if replica.holds_lease:
            self._leases[replica.range_id] = replica.raft.term
        else:
            self._leases.pop(replica.range_id, None)

    def _refuse_waiting(self) -> None:
        stopped = NodeUnavailableError(f"node {self.node_id} stopped")
        for _, change, _ in self._changes:
            change.done.set_exception(stopped)
        self._changes = []
        self._defer(False)  # NB: into the inbox, refused below
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Proposal | _Reading | _Change):
                item.done.set_exception(stopped)


def _changes_raft_state(ready: Ready) -> bool:
    """Whether staging ``ready`` changes its replica's Raft state in the engine
    transaction (a snapshot, or a membership change applied)."""
    return ready.snapshot is not None or any(
        e.type is EntryType.CONF_CHANGE for e in ready.committed_entries
    )


def _took_effect(change: ConfChange, conf: ConfState) -> bool:
    node = change.node_id
    if change.type is ConfChangeType.ADD_NODE:
        return node in conf.voters
    if change.type is ConfChangeType.ADD_LEARNER:
        return node in conf.learners or node in conf.voters
    return node not in conf.voters and node not in conf.learners


def _post(
    outbox: dict[int, list[tuple[int, bytes]]], replica: Replica, messages: Sequence[Message]
) -> None:
    for m in messages:
        node = replica.node_of(m.to)
        if node:  # NB: else as if lost: a peer whose node is not known here yet
            outbox.setdefault(node, []).append((replica.range_id, encode_message(m)))


def _relay(inner: Completion[T], outer: Completion[T]) -> None:
    exc = inner.exception(timeout=0)
    if exc is not None:
        outer.set_exception(exc)
    else:
        outer.set_result(inner.result(timeout=0))
