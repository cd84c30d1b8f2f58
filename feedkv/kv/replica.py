"""One replica of a replicated range: it proposes evaluated commands and applies committed ones.

A :class:`Replica` joins a range's Raft group (:class:`~feedkv.raft.state.RaftState` on
the store's engine) to the range's data in the same engine. It does no I/O of its own:
its driver (the store's loop, or :mod:`feedkv.testing.range_sim`) ticks it, steps it with
messages, and runs each Ready through it in two phases:

1. :meth:`Replica.stage` inside one engine write transaction: the Ready's hard state and
   entries go to the Raft log, and each committed entry's writes are applied, with the
   applied index, in the same transaction (so a crash never applies an entry twice or
   loses one); it returns the logical ops of the applied entries, in log order;
2. once that transaction is durable, :meth:`Replica.staged` advances the group, finishes
   the proposals that applied, and returns the messages to send.

Proposing (the leaseholder only). :meth:`Replica.propose` evaluates a command against the
applied state with the writes of every proposal in flight on top
(:class:`~feedkv.storage.overlay.OverlayView`), so commands evaluated back to back see
each other, and proposes the resulting writes and ops as one entry
(:mod:`feedkv.kv.replicated_command`). The proposal's completion is set when its entry
applies here, with the result evaluation returned.

Reading (the leaseholder only). :meth:`Replica.read` evaluates a read at once, over the
applied state and the proposals in flight as a command is, and writes nothing to the log;
the read is answered once (a) the Raft leader confirmed, after the read was evaluated,
that it still leads (:meth:`~feedkv.raft.state.RaftState.read_index`: at once while it
holds its Raft lease, else with a quorum's answers to a heartbeat round; one confirmation
for all the reads of a turn, :meth:`Replica.confirm_reads`), and (b) every
entry proposed before the read was evaluated committed, so it saw no write that may
never happen. A deposed leader that does not know it yet never gets (a). The read's
timestamp-cache entry is this store's alone: a later leaseholder covers it with
``lease_start`` (see :meth:`Replica.take_lease_start`).

The lease is the Raft leadership here ("leader leases"), and a new leader serves only
once it has applied its own term's first entry: by then it has applied every entry an
earlier leader committed, so nothing it evaluates misses a committed write. A leader
that loses its leadership forgets its overlay and fails its proposals in flight with
:class:`~feedkv.errors.AmbiguousResultError` (their entries may still commit through the
new leader, which applies them here too, as on any follower). A proposal whose index
applies with another term's entry was overwritten: it fails, and did not happen. A lease
handed over on purpose (:meth:`Replica.transfer_lease`, as a node drains) leaves none
ambiguous: the leader refuses new commands at once, naming the target, and answers
those in flight as their entries apply here, as CockroachDB's old lease holder does.
Those wait at most ``ORPHAN_WAIT_ELECTIONS`` election timeouts (:meth:`Replica.tick`): a
replica cut off from the new leader would otherwise hold them until their callers'
deadlines. Then each whose index it has not seen commit fails as ambiguous; one that
committed is answered as it applies (done, or, with another term, did not happen).

Membership changes are Raft's one at a time (:meth:`Replica.change_members`): a new
replica joins as a learner, receives a snapshot (its store knows nothing of the range),
catches up, and is promoted to a voter; a replica is removed the same way. Each change
applies on every replica with the range's own record of its members
(:meth:`RangeData.members_changed`: the range descriptor's replicas), in the same
transaction. A replica's Raft id is its replica id, never its node's: a change names
the replica it adds or removes, and carries its node in the change's ``context``
(:mod:`feedkv.kv.range_descriptor`); :attr:`Replica.nodes` maps the ids to nodes for its
driver, and the lease holder a refusal names is a node.

A snapshot is the range's data as of an applied index, from :class:`RangeData`, which
knows what the range holds; a replica installs one in the transaction that persists it.
Raft decides on a snapshot knowing only its position; the data is read when the
message leaves (:meth:`Replica.snapshot_message`), which its driver may do on a thread
of its own, as it reads the engine alone: a large range is then not read on the
thread that drives every replica of the store.

Each replica truncates its own log (as etcd's nodes compact theirs): once the log holds
more than ``log_limit`` entries it applied, it drops all but the last ``log_keep`` of
them, in the transaction of its next Ready. A follower that falls further behind than
that gets a snapshot.

A snapshot travels in bounded chunks and waits on the receiver's disk until it is
installed, in one engine transaction (:mod:`feedkv.kv.snapshot_spool`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from feedkv.errors import (
    AmbiguousResultError,
    InvalidArgumentError,
    InvariantViolation,
    NotLeaseHolderError,
)
from feedkv.kv.replica_refusal import Refusal
from feedkv.kv.replicated_command import Effects, decode_command, encode_command
from feedkv.raft import (
    ConfChange,
    Config,
    ConfState,
    EngineRaftStorage,
    Entry,
    EntryType,
    Message,
    ProgressState,
    RaftState,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    decode_conf_change,
    decode_message,
    encode_message,
)
from feedkv.storage.engine import Completion, Engine, Reader, ReadWriter
from feedkv.storage.overlay import Overlay, OverlayView

__all__ = ["ORPHAN_WAIT_ELECTIONS", "AppliedEntry", "RangeData", "Replica"]

T = TypeVar("T")

_NOTHING = Effects()
LOG_LIMIT = 1000  # applied entries a replica's log may hold before it is truncated
LOG_KEEP = 100  # applied entries a truncation keeps, for followers a little behind
# how many election timeouts the proposals kept from a lease handed over wait for their
# entries to apply here (Replica.tick): the new leader commits them as it takes over, so
# they are answered within a heartbeat or two; a drain waits for them within its 5 s
ORPHAN_WAIT_ELECTIONS = 3


@dataclass(frozen=True, slots=True)
class AppliedEntry:
    """An entry :meth:`Replica.stage` applied: its index and its effects (ops for the
    range's observers, reads for the timestamp cache, the closed timestamp); or, with
    ``snapshot``, a snapshot up to ``index`` that replaced the range's data (no ops
    tell what changed: the range's observers must start again from the data)."""

    index: int
    effects: Effects
    snapshot: bool = False


class RangeData(Protocol):
    """What a replica's range holds in the engine, for snapshots and membership.

    A snapshot's payload travels in chunks (:mod:`feedkv.kv.snapshot_spool`): the sender
    reads them with :meth:`snapshot_chunks` into a file of its own (:meth:`spool`), and
    sends them from there (:meth:`spooled`); the receiver keeps them with :meth:`spool`,
    and Raft carries the token :meth:`spool` returns as the snapshot's ``data``, which
    :meth:`accepts` and :meth:`install` take, and :meth:`release` frees."""

    def snapshot_chunks(self, reader: Reader) -> Iterator[bytes]:
        """The range's data in ``reader``, as a snapshot's payload, in chunks of bounded
        size (read as they are taken)."""
        ...

    def spool(self, chunks: Iterable[bytes]) -> bytes:
        """Keep a received snapshot's chunks (as they come); its token. Raises what
        ``chunks`` raises (a transfer cut off), keeping nothing."""
        ...

    def refusal(self, header: bytes) -> Refusal | None:
        """Why a snapshot whose payload starts with ``header`` (the first of its
        :meth:`snapshot_chunks`) may not be installed here now; ``None``: it may."""
        ...

    def accepts(self, data: bytes) -> bool:
        """Whether the snapshot ``data`` names may be installed here now."""
        ...

    def install(self, rw: ReadWriter, data: bytes) -> None:
        """Replace whatever the range held here with the snapshot ``data`` names."""
        ...

    def spooled(self, data: bytes) -> Iterator[bytes]:
        """The chunks of the snapshot ``data`` names, as :meth:`spool` took them, read
        as they are taken."""
        ...

    def release(self, data: bytes) -> None:
        """The snapshot ``data`` names was installed durably, refused, or sent: free it."""
        ...

    def members_changed(self, rw: ReadWriter, conf: ConfState, change: ConfChange | None) -> None:
        """The range's members are now ``conf`` (record it with the range): by
        ``change`` (whose ``context`` is the node of the replica it adds), or by a
        snapshot (``None``) that brought the range's own record."""
        ...

    def replicas(self, reader: Reader) -> tuple[dict[int, int], int]:
        """``(replica id -> node id, next replica id)`` of the range's replicas, as its
        record in ``reader`` names them (``({}, 0)`` when there is none here yet)."""
        ...


@dataclass(slots=True)
class _Read(Generic[T]):
    result: T
    after: int  # the last index proposed when it was evaluated: answered once committed
    done: Completion[T]
    context: int = 0  # the confirmation asked for it (0: not asked yet)
    confirmed: bool = False


@dataclass(slots=True)
class _Proposal(Generic[T]):
    term: int
    result: T
    done: Completion[T]
    early: bool  # answered once committed (Replica.acknowledge), not once applied


class Replica:
    """See the module docstring. Not thread-safe: its driver serialises every call."""

    def __init__(
        self,
        engine: Engine,
        range_id: int,
        replica_id: int,
        *,
        data: RangeData,
        config: Config | None = None,
        rng: random.Random | None = None,
        log_limit: int = LOG_LIMIT,
        log_keep: int = LOG_KEEP,
    ) -> None:
        self.range_id = range_id
        self._log_limit = log_limit
        self._log_keep = log_keep
        self._truncate_to = 0  # a truncation staged, not yet durable
        self.replica_id = replica_id
        self._engine = engine
        self._data = data
        self.storage = EngineRaftStorage(engine, range_id, self._snapshot)
        self.applied = self.storage.applied
        base = config or Config(id=replica_id)
        self.raft = RaftState(
            replace(base, id=replica_id, applied=self.applied),
            self.storage,
            rng or random.Random(),
        )
        self._overlay = Overlay()
        self._proposals: dict[int, _Proposal[Any]] = {}
        self._conf: ConfState | None = None  # a membership staged, not yet durable
        self._lease_term: int | None = None  # the term this replica leads in
        self._term_start = 0  # the index of that term's first entry
        self._reads: list[_Read[Any]] = []  # evaluated, not answered; by context
        self._read_contexts = 0
        self._lease_started = False  # the lease was taken up and not yet reported
        self._handed_over: int | None = None  # the lease term in which it was handed over
        # ticks the proposals kept from a lease handed over have waited, and how many
        # they may (tick)
        self._orphaned_ticks = 0
        self._orphan_ticks = ORPHAN_WAIT_ELECTIONS * self.raft.cfg.election_tick
        # replica id -> node id of the peers it knows (its driver keeps it; None: the
        # replica ids are node ids, as in a simulation), and the next id the range gives
        self.nodes: dict[int, int] | None = None
        self.next_replica_id = 0

    def node_of(self, replica_id: int) -> int:
        """The node of replica ``replica_id`` of this range (0: not known here)."""
        return replica_id if self.nodes is None else self.nodes.get(replica_id, 0)

    @property
    def leader_node(self) -> int:
        """The node of the replica this one believes leads (0: none known)."""
        return self.node_of(self.raft.leader) if self.raft.leader else 0

    def _not_lease_holder(self) -> NotLeaseHolderError[Any]:
        return NotLeaseHolderError(self.range_id, self.replica_id, self.leader_node)

    def _handing_over(self) -> NotLeaseHolderError[Any] | None:
        """The refusal of a command while this leader hands its lease over: it names the
        replica taking it (CockroachDB's redirect to a lease transfer's target)."""
        transferee = self.raft.lead_transferee
        if not transferee:
            return None
        return NotLeaseHolderError(self.range_id, self.replica_id, self.node_of(transferee))

    @staticmethod
    def bootstrap(rw: ReadWriter, range_id: int, voters: Sequence[int]) -> None:
        """Write the first state of one of a new range's first replicas into ``rw``."""
        EngineRaftStorage.bootstrap(rw, range_id, voters)

    # -- the lease ---------------------------------------------------------------------

    @property
    def leader(self) -> int:
        """The replica this one believes leads (0: none known)."""
        return self.raft.leader

    @property
    def holds_lease(self) -> bool:
        return (
            self.raft.role is Role.LEADER
            and self._lease_term == self.raft.term
            and self.applied >= self._term_start
        )

    def propose(
        self, base: Reader, evaluate: Callable[[ReadWriter], tuple[T, Effects]]
    ) -> Completion[T]:
        """Evaluate a command over ``base`` (the applied state) and the proposals in
        flight, and propose its writes; see the module docstring. Raises
        :class:`~feedkv.errors.NotLeaseHolderError` when this replica may not propose
        (nothing was evaluated into the log then), and whatever ``evaluate`` raises."""
        if not self.holds_lease:
            raise self._not_lease_holder()
        refusal = self._handing_over()
        if refusal is not None:
            raise refusal  # NB: before evaluating: Raft would drop the entry
        view = OverlayView(base, self._overlay)
        result, effects = evaluate(view)
        entry = self.raft.propose(encode_command(view.batch, effects))
        if entry is None:
            raise self._not_lease_holder()
        self._overlay.add(entry.index, view.batch)
        replaced = self._proposals.pop(entry.index, None)
        if replaced is not None:  # NB: kept from a lease handed over; its entry was not kept
            replaced.done.set_exception(self._not_lease_holder())
        done: Completion[T] = Completion()
        # NB: a split's new range is served only once applied: its caller waits for that
        self._proposals[entry.index] = _Proposal(entry.term, result, done, not effects.splits)
        return done

    def read(self, base: Reader, evaluate: Callable[[ReadWriter], T]) -> Completion[T]:
        """Evaluate a read over ``base`` (the applied state) and the proposals in flight;
        the completion holds its result once it may be answered (the module docstring),
        or :class:`~feedkv.errors.NotLeaseHolderError` when this replica may not serve
        it. Raises that error at once when it does not hold the lease, and whatever
        ``evaluate`` raises."""
        if not self.holds_lease:
            raise self._not_lease_holder()
        view = OverlayView(base, self._overlay)
        result = evaluate(view)
        if len(view.batch):
            raise InvariantViolation(f"range r{self.range_id}: a read wrote {len(view.batch)} keys")
        done: Completion[T] = Completion()
        self._reads.append(_Read(result, self.raft.log.last_index(), done))
        return done

    def confirm_reads(self) -> None:
        """Ask the group to confirm the leadership for every read evaluated since the
        last call (once per turn of the driver: one heartbeat round serves them all)."""
        if not self._reads or self._reads[-1].context:
            return
        self._read_contexts += 1
        if not self.raft.read_index(self._read_contexts):
            self._fail_reads()
            return
        for read in reversed(self._reads):
            if read.context:
                break
            read.context = self._read_contexts

    def take_lease_start(self) -> bool:
        """Whether this replica took up the lease since the last call. Its driver then
        covers the range's timestamp cache up to now, above every read an earlier
        leaseholder answered. A read confirmed by a heartbeat round was at or below that
        one's clock when it asked, and the clock travels with every Raft message: a
        quorum that confirmed it has since voted this replica in. A read served on the
        Raft lease was served at least the clocks' maximum offset before that quorum
        could vote (the node's ``lease_margin``), so it is below this clock now."""
        started, self._lease_started = self._lease_started, False
        return started

    def transfer_lease(self, to: int) -> bool:
        """Hand the lease to voter ``to`` (Raft's leadership transfer); whether one is
        under way. A planned hand-over leaves no proposal ambiguous: from now on this
        replica refuses commands (naming ``to``), and the proposals in flight, whose
        entries ``to`` holds before it campaigns, are answered as their entries apply
        here once the lease moved (see :meth:`_lose_lease`)."""
        if not self.raft.transfer_leader(to):
            return False
        self._handed_over = self._lease_term
        return True

    def change_members(self, change: ConfChange) -> int:
        """Propose one membership change; returns its log index (it took effect once
        that index applies with this term). Only the lease holder proposes, one change at
        a time: :class:`~feedkv.errors.NotLeaseHolderError` otherwise, or
        :class:`~feedkv.errors.InvalidArgumentError` while another is pending."""
        if not self.holds_lease:
            raise self._not_lease_holder()
        entry = self.raft.propose_conf_change(change)
        if entry is None:
            raise InvalidArgumentError(
                f"range r{self.range_id}: another membership change is still pending"
            )
        return entry.index

    @property
    def members(self) -> ConfState:
        return self.raft.conf_state()

    def tick(self, elapsed: int = 1) -> None:
        """A tick passed (:meth:`~feedkv.raft.state.RaftState.tick`; ``elapsed``: the
        ticks of real time since the last call). The proposals kept from a lease handed
        over (:meth:`orphans`) that have waited ``ORPHAN_WAIT_ELECTIONS`` election
        timeouts are given up: the new leader, which held their entries as it took
        over, commits them with its first entry, and a replica that hears from it learns
        so at its next heartbeat; one that has not by then is cut off from it. Each whose
        index this replica has not seen commit fails as
        :class:`~feedkv.errors.AmbiguousResultError` (it may commit yet, or may not);
        one whose index committed here is answered as it applies, by its entry's term:
        done, or (another term's entry) a retryable refusal, as it did not happen."""
        self.raft.tick(elapsed)
        if self._lease_term is not None or not self._proposals:
            self._orphaned_ticks = 0
            return
        self._orphaned_ticks += elapsed
        if self._orphaned_ticks < self._orphan_ticks:
            return
        # NB: one whose index committed here is answered by its term as it applies
        # (settle_committed, staged): happened, or did not (retryable)
        self._fail_ambiguous([i for i in self._proposals if i > self.raft.committed])

    def orphans(self) -> int:
        """How many of the proposals made here while this replica held the lease await
        their outcome now that it does not (answered as they apply here: stopped first,
        it fails them as ambiguous). A moment's view, read off the loop."""
        return 0 if self._lease_term is not None else len(self._proposals)

    def voters_behind(self) -> dict[int, int | None]:
        """While this replica leads: for the node of each other voter, how many entries
        of this replica's log its replica lacks (``None``: a snapshot is on its way to
        it); empty otherwise. Reads the Raft state only (no engine)."""
        raft = self.raft
        if raft.role is not Role.LEADER:
            return {}
        last, voters = raft.log.last_index(), raft.voters
        behind: dict[int, int | None] = {}
        for replica_id, pr in list(raft.prs.items()):
            node = self.node_of(replica_id)
            if replica_id != self.replica_id and replica_id in voters and node:
                snapshot = pr.state is ProgressState.SNAPSHOT
                behind[node] = None if snapshot else max(0, last - pr.match)
        return behind

    # -- driving ---------------------------------------------------------------------

    def ready(self) -> Ready | None:
        """The group's next Ready, or ``None`` when it has nothing to do."""
        return self.raft.ready() if self.raft.has_ready() else None

    def acknowledge(self, ready: Ready) -> None:
        """Answer the proposals whose entries ``ready`` commits, before they apply (as
        CockroachDB acknowledges a command once committed): a committed entry is in a
        quorum's persisted logs, so it applies here or on the next lease holder, and its
        evaluation's result is known. Its writes stay in the overlay until it applies,
        so what this replica evaluates next sees them; a later lease holder applies it
        before it serves. A split's proposal waits for :meth:`staged`."""
        for entry in ready.committed_entries:
            proposal = self._proposals.get(entry.index)
            if proposal is not None and proposal.early:
                del self._proposals[entry.index]
                self._settle(proposal, entry)
        if ready.read_states:
            newest = ready.read_states[-1].context
            for read in self._reads:
                if not read.context or read.context > newest:
                    break
                read.confirmed = True
        self._answer_reads()

    @property
    def waiting(self) -> bool:
        """Whether :meth:`settle_committed` or :meth:`confirm_reads` has anything to do:
        proposals or reads waiting, or a lease transfer to give up on (its driver asks
        every replica at every turn; most of them, followers, have none)."""
        return bool(self._proposals or self._reads) or self._handed_over is not None

    def settle_committed(self) -> None:
        """Answer the proposals whose entries committed since the last Ready, as
        :meth:`acknowledge` does, without waiting for the next Ready (its driver may
        have a write in flight)."""
        raft = self.raft
        if self._handed_over is not None and raft.role is Role.LEADER and not raft.lead_transferee:
            self._handed_over = None  # NB: Raft gave the transfer up: it leads on
        committed = raft.committed
        while self._proposals:
            index = next(iter(self._proposals))
            if index > committed:
                return
            proposal = self._proposals[index]
            term = raft.log.term(index)
            if not proposal.early or term is None:
                return  # NB: a split's proposal waits for staged(), and so the ones after it
            del self._proposals[index]
            if proposal.term == term:
                proposal.done.set_result(proposal.result)
            else:
                proposal.done.set_exception(self._not_lease_holder())

    def stage(self, rw: ReadWriter, ready: Ready) -> list[AppliedEntry]:
        """Phase 1, inside the engine transaction: persist ``ready`` and apply its
        committed entries. Safe to run again if the engine re-runs the transaction."""
        self.storage.stage(rw, ready)
        applied: list[AppliedEntry] = []
        index = self.applied
        if ready.snapshot is not None:
            meta = ready.snapshot.meta
            self._data.install(rw, ready.snapshot.data)
            self._data.members_changed(rw, meta.conf_state, None)
            index = meta.index
            applied.append(AppliedEntry(index, _NOTHING, snapshot=True))
        for entry in ready.committed_entries:
            if entry.index != index + 1:
                raise InvariantViolation(
                    f"range r{self.range_id}: entry {entry.index} applies after {index}"
                )
            applied.append(AppliedEntry(entry.index, self._apply(rw, entry)))
            index = entry.index
        if index != self.applied:
            self.storage.stage_applied(rw, index)
        # NB: up to what was applied durably before this Ready (the stored log's bounds)
        self._truncate_to = 0
        keep_from = self.applied - self._log_keep
        if ready.snapshot is None and keep_from - self.storage.first_index() >= self._log_limit:
            self.storage.stage_compaction(rw, keep_from)
            self._truncate_to = keep_from
        return applied

    def staged(self, ready: Ready) -> tuple[Message, ...]:
        """Phase 2, once phase 1 is durable: advance the group, settle the proposals
        that applied, follow a change of leader; returns the messages to send now (its
        :attr:`~feedkv.raft.state.Ready.early_messages` may have gone before phase 1)."""
        self.storage.staged(ready)
        if self._truncate_to:
            self.storage.compacted(self._truncate_to)
            self._truncate_to = 0
        if ready.snapshot is not None:
            self.applied = ready.snapshot.meta.index
            self._fail_covered(self.applied)
        if self._conf is not None:
            self.storage.conf_staged(self._conf)
            self._conf = None
        for entry in ready.committed_entries:
            self.applied = entry.index
            proposal = self._proposals.pop(entry.index, None)
            if proposal is not None:
                self._settle(proposal, entry)
        if ready.committed_entries:
            self._overlay.applied(self.applied)
        self.raft.advance(ready)
        self._follow()
        return ready.late_messages

    def close(self) -> None:
        """The replica stops (its store closes, or it crashed): its proposals' fates are
        unknown to their callers."""
        self._lose_lease()

    # -- inside ----------------------------------------------------------------------

    def _answer_reads(self) -> None:
        committed, reads = self.raft.committed, self._reads
        while reads and reads[0].confirmed and reads[0].after <= committed:
            read = reads.pop(0)
            read.done.set_result(read.result)

    def _fail_reads(self) -> None:
        reads, self._reads = self._reads, []
        for read in reads:
            read.done.set_exception(self._not_lease_holder())

    def _settle(self, proposal: _Proposal[Any], entry: Entry) -> None:
        if proposal.term == entry.term:
            proposal.done.set_result(proposal.result)
        else:  # a later leader's entry replaced it: it did not happen
            proposal.done.set_exception(self._not_lease_holder())

    def _apply(self, rw: ReadWriter, entry: Entry) -> Effects:
        if entry.type is EntryType.CONF_CHANGE:
            # NB: the engine may run this twice; taking a change in again is harmless
            change = decode_conf_change(entry.data)
            conf = self.raft.apply_conf_change(change)
            self.storage.stage_conf_state(rw, conf)
            self._data.members_changed(rw, conf, change)
            self._conf = conf
            return _NOTHING
        if not entry.data:  # a new leader's empty entry
            return _NOTHING
        command = decode_command(entry.data)
        command.writes.apply(rw)
        return command.effects

    def _follow(self) -> None:
        """Take up or give up the lease as the group's leadership changed."""
        leading = self.raft.role is Role.LEADER
        if self._lease_term is not None and (not leading or self._lease_term != self.raft.term):
            self._lose_lease(handed_over=self._handed_over == self._lease_term)
        if leading and self._lease_term is None:
            # nothing was proposed in this term yet: the last entry is its empty first
            self._lease_term = self.raft.term
            self._term_start = self.raft.log.last_index()
            self._lease_started = True

    def _lose_lease(self, *, handed_over: bool = False) -> None:
        """The lease is gone. Its proposals in flight may still commit through the next
        leader, so their callers are told the outcome is unknown; unless it was handed
        over (:meth:`transfer_lease`): then they stay, and are answered as their indices
        apply here, as on any follower (:meth:`_settle`: applied with their own term,
        they happened; with another's, they did not), or fail ambiguous only if this
        replica stops first or a snapshot passes them (:meth:`_fail_covered`). The
        target campaigned only once it held every entry proposed here (none was
        proposed after it was asked): they commit in its term, unless another wins."""
        self._lease_term = None
        self._handed_over = None
        self._lease_started = False
        self._fail_reads()
        self._overlay.clear()
        if not handed_over:
            self._fail_covered(None)

    def _fail_covered(self, up_to: int | None) -> None:
        """Fail as ambiguous the proposals whose outcome this replica will not see: at
        or below ``up_to`` (a snapshot replaced the entries; ``None``: all of them)."""
        self._fail_ambiguous([i for i in self._proposals if up_to is None or i <= up_to])

    def _fail_ambiguous(self, indices: Iterable[int]) -> None:
        for index in indices:
            self._proposals.pop(index).done.set_exception(
                AmbiguousResultError(
                    f"range r{self.range_id}: replica {self.replica_id} lost its lease with "
                    f"the proposal at index {index} in flight; it may or may not apply"
                )
            )

    def snapshot_frames(self, m: Message) -> Generator[bytes, None, None]:
        """``m``, a snapshot Raft decided to send, encoded with its position but no data,
        then the range's data in chunks, all as the engine holds it now: at the
        position Raft chose or past it (a follower takes any snapshot ahead of its log,
        and its answer moves the leader's progress on). Reads the engine only, so its
        driver may call it on another thread.

        The first frame costs the most: it copies the range's data, a chunk at a time,
        from one engine snapshot to a spooled file (:meth:`RangeData.spool`) and ends
        that snapshot; the data's frames are read from the file, which goes when the
        generator ends. So a slow receiver never holds an engine read transaction open
        (which would pin the pages it reads, and grow the store's file under writes)
        for longer than a local copy of the range takes."""
        with self._engine.snapshot() as snap:
            index, conf = self.storage.read_applied(snap)
            term = self.storage.read_term(snap, index)
            meta = SnapshotMeta(index, term, conf)
            token = self._data.spool(self._data.snapshot_chunks(snap))
        try:
            yield encode_message(replace(m, snapshot=Snapshot(meta, b"")))
            yield from self._data.spooled(token)
        finally:
            self._data.release(token)

    def snapshot_message(self, m: Message) -> Message:
        """``m`` with its snapshot whole, spooled by this replica's range data (for a
        driver that hands messages over whole, as the simulation does)."""
        frames = self.snapshot_frames(m)
        head = decode_message(next(frames))
        if head.snapshot is None:
            raise InvariantViolation("a snapshot's first frame has no snapshot")
        data = self._data.spool(frames)
        return replace(head, snapshot=replace(head.snapshot, data=data))

    def _snapshot(self) -> Snapshot:
        """Where a snapshot would be now, without its data (:meth:`snapshot_frames`
        reads that)."""
        with self._engine.snapshot() as snap:
            index, conf = self.storage.read_applied(snap)
            term = self.storage.read_term(snap, index)
        return Snapshot(SnapshotMeta(index, term, conf), b"")
