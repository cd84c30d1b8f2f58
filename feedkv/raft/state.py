"""The consensus state machine of one replica of one Raft group.

:class:`RaftState` is pure: it never performs I/O, reads a clock, starts a thread or
draws randomness of its own (the random source that spreads election timeouts is
injected). Its inputs are method calls:

- :meth:`~RaftState.tick`: one unit of logical time passed (the caller's timer);
- :meth:`~RaftState.step`: a message arrived from another replica;
- :meth:`~RaftState.propose`, :meth:`~RaftState.propose_conf_change`: the leader's
  caller wants an entry in the log;
- :meth:`~RaftState.campaign`, :meth:`~RaftState.transfer_leader`;
- :meth:`~RaftState.read_index`: the leader's caller wants to serve a read without
  writing it to the log, once the leader knows it still leads;
- :meth:`~RaftState.report_snapshot`, :meth:`~RaftState.report_unreachable`: how the
  transport fared;
- :meth:`~RaftState.apply_conf_change`: the caller applied a committed membership change.

Its output is a :class:`Ready`, taken with :meth:`~RaftState.ready` when
:meth:`~RaftState.has_ready` says there is one. The caller handles it in this order, then
calls :meth:`~RaftState.advance` with it before taking the next:

1. persist ``hard_state``, ``entries`` (appended after dropping any stored entry at or
   after the first of them) and ``snapshot``, durably (fsync). A store hosting many groups
   writes the Readies of all of them in one engine transaction: one fsync for all;
2. only then send ``messages`` (a vote or an acknowledgement promises what was just
   persisted), except :attr:`Ready.early_messages`, which may go out before step 1 or
   while it runs: a leader's appends and heartbeats promise nothing of its own storage,
   as a leader counts its own copy of an entry towards the commit only once
   :meth:`~RaftState.advance` reports it persisted (so its followers write the entries
   while it does, as in etcd's raft, and a commit index never counts a copy that a
   crash could lose);
3. apply ``snapshot`` to the state machine, then ``committed_entries`` in order (for a
   ``CONF_CHANGE`` entry, call :meth:`~RaftState.apply_conf_change` and persist the
   :class:`ConfState` it returns with the applied index);
4. serve the reads of ``read_states`` (see :meth:`~RaftState.read_index`);
5. :meth:`~RaftState.advance`.

Between :meth:`~RaftState.ready` and :meth:`~RaftState.advance` the caller takes no other
Ready, but may go on stepping, proposing, ticking and reading, as etcd's raft lets its
node do (what that changes comes in the next Ready), and may send the appends and
heartbeats that produced at once (:meth:`~RaftState.take_early_messages`): a leader's
followers then write its new entries while it persists the Ready before them.

Restarting is building a new :class:`RaftState` on the persisted storage, with
``Config.applied`` set to the applied index the state machine persisted.

The algorithm is Raft's (Ongaro and Ousterhout, 2014) with the refinements of etcd's raft
package, whose design this follows: pre-vote (a replica that was cut off cannot disrupt a
healthy leader when it returns, because it must first learn that a majority would vote
for it, without raising its term), check quorum (a leader that has not heard from a
majority for an election timeout steps down, and followers that hear from a leader
ignore vote requests, except a leader transfer's), progress tracking per follower
(:mod:`feedkv.raft.progress`), leader transfer, learners, and membership changes of one
replica at a time: at most one change is pending (proposed and not yet applied by the
leader), and each takes effect where it is applied. One departure: the empty append a
leader sends a follower in step only to tell it the commit index is marked
``COMMIT_ONLY`` and answered only if rejected (its answer would tell the leader nothing
it waits for; :class:`~feedkv.raft.messages.Message`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from feedkv.errors import InvalidArgumentError, InvariantViolation
from feedkv.raft.log import RaftLog
from feedkv.raft.messages import (
    COMMIT_ONLY,
    NO_NODE,
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    encode_conf_change,
)
from feedkv.raft.progress import Progress, ProgressState
from feedkv.raft.storage import RaftStorage

__all__ = ["Config", "RaftState", "ReadState", "Ready", "Role", "SoftState"]

MT = MessageType
_EARLY = frozenset({MT.APP, MT.HEARTBEAT})
_HEARTBEATS = frozenset({MT.HEARTBEAT})


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class Config:
    """One replica's settings. Ticks are the caller's unit of time.

    ``election_tick``: a follower that hears no leader for a randomised timeout in
    ``[election_tick, 2 * election_tick)`` campaigns; a leader checks its quorum every
    ``election_tick``. ``heartbeat_tick``: a leader's heartbeat interval (well below
    ``election_tick``). ``max_inflight``: appends in flight to one follower in the
    replicate state. ``applied``: the index the state machine had applied (on restart).

    ``lease_margin``: ticks of safety margin for leader-lease reads (``None``: every
    read waits for a heartbeat round; see :meth:`RaftState.read_index`). It must cover
    how far the caller's ticks may run behind real time plus the clocks' maximum offset
    in ticks. ``restarted``: this replica starts again on storage it persisted before;
    it may have promised a leader not to vote against it for ``election_tick`` ticks,
    and keeps that promise, not knowing when it made it, for ``election_tick`` ticks.
    """

    id: int
    election_tick: int = 10
    heartbeat_tick: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_inflight: int = 64
    max_entries_per_message: int = 64
    max_committed_per_ready: int | None = None
    applied: int = 0
    lease_margin: int | None = None
    restarted: bool = False

    def __post_init__(self) -> None:
        if self.id <= NO_NODE:
            raise InvalidArgumentError(f"a replica id must be positive, not {self.id}")
        if not 0 < self.heartbeat_tick < self.election_tick:
            raise InvalidArgumentError(
                f"need 0 < heartbeat_tick ({self.heartbeat_tick}) < election_tick "
                f"({self.election_tick})"
            )
        if self.max_inflight < 1 or self.max_entries_per_message < 1:
            raise InvalidArgumentError("max_inflight and max_entries_per_message must be >= 1")
        if self.lease_margin is not None and self.lease_margin < 1:
            raise InvalidArgumentError(f"lease_margin must be >= 1, not {self.lease_margin}")


@dataclass(frozen=True, slots=True)
class SoftState:
    """What need not be persisted but the caller wants to know: who leads, and this
    replica's role (a store moves its lease or wakes waiting proposals on a change)."""

    leader: int
    role: Role


@dataclass(frozen=True, slots=True)
class ReadState:
    """The read the caller named ``context`` may be served: a quorum confirmed that this
    replica still led after it was asked for. ``index`` is the commit index then; a read
    of a state machine that applied it misses no entry committed before the ask."""

    index: int
    context: int


@dataclass(frozen=True, slots=True)
class _PendingRead:
    context: int
    index: int
    round: int  # the first heartbeat round sent after it was asked


@dataclass(frozen=True, slots=True)
class Ready:
    """Work for the caller; see the module docstring for the order.

    ``hard_state``, ``soft_state``: ``None`` when unchanged since the last Ready.
    """

    soft_state: SoftState | None
    hard_state: HardState | None
    entries: tuple[Entry, ...]
    snapshot: Snapshot | None
    committed_entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    read_states: tuple[ReadState, ...] = ()

    @property
    def must_sync(self) -> bool:
        """Whether this Ready has anything to persist (and so to fsync)."""
        return self.hard_state is not None or bool(self.entries) or self.snapshot is not None

    @property
    def early_messages(self) -> tuple[Message, ...]:
        """The messages that may be sent before this Ready is persisted (step 2 of the
        module docstring)."""
        return tuple(m for m in self.messages if m.type in _EARLY)

    @property
    def late_messages(self) -> tuple[Message, ...]:
        """The messages to send only once this Ready is persisted."""
        return tuple(m for m in self.messages if m.type not in _EARLY)


class RaftState:
    """One replica of one group. Not thread-safe: the caller serialises calls (a store
    holds one lock per group, or drives all its groups from one loop)."""

    def __init__(self, config: Config, storage: RaftStorage, rng: random.Random) -> None:
        self.cfg = config
        self.id = config.id
        self._rng = rng
        hard, conf = storage.initial_state()
        self.log = RaftLog(storage, applied=config.applied)
        self.term = hard.term
        self.vote = hard.vote
        self.log.commit_to(hard.commit)
        if self.log.applied > self.log.committed:
            raise InvariantViolation(
                f"applied {self.log.applied} is past the persisted commit {self.log.committed}"
            )
        self.voters: set[int] = set(conf.voters)
        self.learners: set[int] = set(conf.learners)
        self.role = Role.FOLLOWER
        self.leader = NO_NODE
        self.prs: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.lead_transferee = NO_NODE
        self.pending_conf_index = 0
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = config.election_tick
        self._msgs: list[Message] = []
        self._append_due = False  # a leader's appends wait for the next Ready (_bcast_append)
        self._pending_reads: list[_PendingRead] = []  # asked, not yet confirmed; by context
        self._read_states: list[ReadState] = []
        self._ticks = 0  # ticks of real time since this replica started (tick's elapsed)
        # NB: rounds are numbered across terms (an answer names the round it answers);
        # the tick each recent round went out at, for the lease (see read_index)
        self._round = 0
        self._round_ticks: dict[int, int] = {}
        self._transfer_term = 0  # a term in which this leader told a voter to campaign
        # no vote against a leader heard from until this tick (check quorum's promise)
        self._promised_until = config.election_tick if config.restarted else 0
        self._prev_hard = hard
        self._prev_soft = SoftState(NO_NODE, Role.FOLLOWER)
        self._become_follower(self.term, NO_NODE)

    # -- what the caller may read --------------------------------------------------

    @property
    def committed(self) -> int:
        return self.log.committed

    @property
    def applied(self) -> int:
        return self.log.applied

    def conf_state(self) -> ConfState:
        return ConfState(tuple(sorted(self.voters)), tuple(sorted(self.learners)))

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed)

    def soft_state(self) -> SoftState:
        return SoftState(self.leader, self.role)

    # -- inputs --------------------------------------------------------------------

    def tick(self, elapsed: int = 1) -> None:
        """A tick of logical time passed: the timers (elections, heartbeats, check
        quorum) move one tick. ``elapsed``: the ticks of real time since the last call
        (a driver that came late passes more); a leader's lease counts those (see
        :meth:`read_index`), while a late tick only slows the timers down, which is
        safe (a follower keeps its promise longer) and spares a busy node the elections
        it would otherwise hold for no reason."""
        if elapsed < 1:
            raise InvalidArgumentError(f"a tick elapses at least 1 tick, not {elapsed}")
        self._ticks += elapsed
        if self.role is Role.LEADER:
            self._tick_heartbeat()
        else:
            self._tick_election()

    def campaign(self) -> None:
        """Start an election now (with a pre-vote first when configured); ignored by a
        leader, a learner and a replica that is not a member, and, with leader-lease
        reads, by one that promised a leader its vote (see :meth:`read_index`)."""
        if self.cfg.lease_margin is not None and self._in_lease():
            return
        if self.role is not Role.LEADER:
            self._campaign(pre_vote=self.cfg.pre_vote, transfer=False)

    def propose(self, data: bytes) -> Entry | None:
        """Append ``data`` to the log, if this replica leads. Returns the entry (its
        index and term name it: it committed if the entry applied at that index has that
        term), or ``None`` when dropped: not the leader, or handing leadership over. A
        proposal is not durable until it is applied; the caller retries on its own."""
        return self._propose(Entry(self.term, 0, data, EntryType.NORMAL))

    def propose_conf_change(self, change: ConfChange) -> Entry | None:
        """Propose one membership change. Dropped (``None``) like :meth:`propose`, and
        also while another change is pending (proposed and not yet applied here)."""
        if change.node_id <= NO_NODE:
            raise InvalidArgumentError(f"a replica id must be positive, not {change.node_id}")
        if self.pending_conf_index > self.log.applied:
            return None
        entry = self._propose(
            Entry(self.term, 0, encode_conf_change(change), EntryType.CONF_CHANGE)
        )
        if entry is not None:
            self.pending_conf_index = entry.index
        return entry

    def transfer_leader(self, to: int) -> bool:
        """Hand leadership to voter ``to``: bring its log up to date, then tell it to
        campaign at once. Proposals are dropped meanwhile; the transfer is abandoned
        after an election timeout. Returns whether a transfer is under way."""
        if self.role is not Role.LEADER or to == self.id or to not in self.voters:
            return False
        if self.lead_transferee != to:
            self.lead_transferee = to
            self.election_elapsed = 0
            if self.prs[to].match == self.log.last_index():
                self._send_timeout_now(to)
            else:
                self._send_append(to)
        return True

    def read_index(self, context: int) -> bool:
        """Confirm that this replica still leads, for a read the caller names ``context``
        (positive, greater than every context asked before in this term): once a quorum
        of voters answered a heartbeat sent after this call, a :class:`ReadState` with
        ``context`` comes in a Ready (etcd's ReadIndex; a leader that was deposed and does
        not know it yet never gets one). Returns ``False``, and nothing will come, when
        this replica does not lead or has not committed an entry of its own term yet
        (until then its commit index may lag its predecessor's).

        With ``Config.lease_margin``, the ReadState comes at once while the leader holds
        its lease (the Raft thesis's leader leases, section 6.4.1): a voter that answered
        a heartbeat heard from this leader, after it sent that heartbeat, and promised
        (check quorum) to vote for no one else for ``election_tick`` ticks after it heard;
        so while a quorum's answers are to heartbeats sent less than ``election_tick -
        lease_margin`` ticks ago, no other leader can have been elected. A leader that
        told its transferee to campaign holds no lease for the rest of its term (that
        campaign ignores the promises), and a restarted voter keeps a promise it cannot date
        (``Config.restarted``)."""
        if self.role is not Role.LEADER or self.log.term(self.log.committed) != self.term:
            return False
        if self._pending_reads and context <= self._pending_reads[-1].context:
            raise InvalidArgumentError(
                f"read context {context} after {self._pending_reads[-1].context}: "
                "contexts must increase"
            )
        self._pending_reads.append(_PendingRead(context, self.log.committed, self._round + 1))
        if self._holds_lease():
            self._read_states.extend(ReadState(r.index, r.context) for r in self._pending_reads)
            self._pending_reads = []
        elif self._release_reads():
            self._broadcast_heartbeat()
        return True

    def applied_everywhere(self, index: int) -> bool:
        """Whether this leader knows that every member of its group (voters and
        learners) applied ``index`` (followers tell with each heartbeat answer)."""
        if self.role is not Role.LEADER or self.log.applied < index:
            return False
        return all(pr.applied >= index for node, pr in self.prs.items() if node != self.id)

    def report_snapshot(self, to: int, *, success: bool) -> None:
        """The transport finished sending (or failed to send) a snapshot to ``to``. The
        caller must report every snapshot message: until then the leader sends that
        follower nothing but heartbeats."""
        pr = self.prs.get(to)
        if self.role is not Role.LEADER or pr is None or pr.state is not ProgressState.SNAPSHOT:
            return
        if not success:
            pr.pending_snapshot = 0
        pr.become_probe()
        # NB: wait for the follower's answer (or its next heartbeat's) before probing
        pr.probe_sent = True

    def report_unreachable(self, to: int) -> None:
        """A message to ``to`` could not be delivered: stop streaming to it."""
        pr = self.prs.get(to)
        if self.role is Role.LEADER and pr is not None and pr.state is ProgressState.REPLICATE:
            pr.become_probe()

    def apply_conf_change(self, change: ConfChange) -> ConfState:
        """The caller applied a committed ``CONF_CHANGE`` entry: take it into effect
        here. Returns the membership to persist with the applied index."""
        node = change.node_id
        if change.type is ConfChangeType.ADD_NODE:
            self.learners.discard(node)
            self.voters.add(node)
        elif change.type is ConfChangeType.ADD_LEARNER:
            if node not in self.voters:
                self.learners.add(node)
        else:
            self.voters.discard(node)
            self.learners.discard(node)
        self._sync_progress()
        if self.id not in self.voters and self.role is not Role.FOLLOWER:
            # NB: a candidate too: the votes it awaits would make a non-member lead
            self._become_follower(self.term, NO_NODE)
        elif self.role is Role.LEADER:
            if self.lead_transferee not in self.voters:
                self.lead_transferee = NO_NODE
            if self._maybe_commit():
                self._bcast_append()
            self._release_reads()
        return self.conf_state()

    def step(self, m: Message) -> None:
        """Take in message ``m`` from another replica."""
        if m.to != self.id:
            raise InvariantViolation(f"replica {self.id} got a message for {m.to}: {m}")
        if m.term > self.term:
            if m.type in (MT.VOTE, MT.PRE_VOTE) and not m.force and self._in_lease():
                return  # NB: a leader is alive; a cut-off replica cannot unseat it
            if m.type is MT.PRE_VOTE or (m.type is MT.PRE_VOTE_RESP and not m.reject):
                pass  # a pre-vote changes no term
            elif m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
                self._become_follower(m.term, m.sender)
            else:
                self._become_follower(m.term, NO_NODE)
        elif m.term < self.term:
            if m.type in (MT.APP, MT.HEARTBEAT):
                # NB: tells a stale leader (cut off, then back) that it was succeeded
                self._send(Message(MT.APP_RESP, m.sender, self.id, self.term))
            elif m.type is MT.PRE_VOTE:
                self._send(Message(MT.PRE_VOTE_RESP, m.sender, self.id, self.term, reject=True))
            return

        if m.type in (MT.VOTE, MT.PRE_VOTE):
            self._on_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role is Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    # -- output --------------------------------------------------------------------

    def has_ready(self) -> bool:
        prev_hard, prev_soft = self._prev_hard, self._prev_soft
        return (  # NB: asked of every group at every turn of its driver: no objects made
            bool(self._msgs)
            or self._append_due
            or self.log.has_unstable()
            or self.log.has_next_committed()
            or bool(self._read_states)
            or self.term != prev_hard.term
            or self.vote != prev_hard.vote
            or self.log.committed != prev_hard.commit
            or self.leader != prev_soft.leader
            or self.role is not prev_soft.role
        )

    def ready(self) -> Ready:
        self._flush_appends()
        prev_hard, prev_soft = self._prev_hard, self._prev_soft
        # NB: compared field by field, as has_ready does: most Readies change neither
        # state, so neither object is made for them
        soft_changed = self.leader != prev_soft.leader or self.role is not prev_soft.role
        hard_changed = (
            self.term != prev_hard.term
            or self.vote != prev_hard.vote
            or self.log.committed != prev_hard.commit
        )
        return Ready(
            soft_state=self.soft_state() if soft_changed else None,
            hard_state=self.hard_state() if hard_changed else None,
            entries=tuple(self.log.unstable_entries()),
            snapshot=self.log.unstable_snapshot(),
            committed_entries=tuple(self.log.next_committed(self.cfg.max_committed_per_ready)),
            messages=tuple(self._msgs),
            read_states=tuple(self._read_states),
        )

    def take_early_messages(self, taken: int = 0, *, appends: bool = True) -> list[Message]:
        """The messages that may go before they are persisted (appends, heartbeats) among
        those after the first ``taken`` (the messages of a Ready taken and not yet
        advanced), removed from the next Ready. ``appends=False``: the heartbeats only;
        the appends stay due, and the next Ready carries one per follower with every
        entry proposed and the commit index reached until then."""
        if appends:
            self._flush_appends()
        if len(self._msgs) <= taken:
            return []  # NB: asked of every group at each turn while its driver writes
        kinds = _EARLY if appends else _HEARTBEATS
        rest = self._msgs[taken:]
        early = [m for m in rest if m.type in kinds]
        if early:
            self._msgs[taken:] = [m for m in rest if m.type not in kinds]
        return early

    def advance(self, ready: Ready) -> None:
        """The caller persisted, sent and applied ``ready``."""
        if ready.soft_state is not None:
            self._prev_soft = ready.soft_state
        if ready.hard_state is not None:
            self._prev_hard = ready.hard_state
        if ready.entries:
            last = ready.entries[-1]
            self.log.stable_to(last.index, last.term)
        if ready.snapshot is not None:
            self.log.applied_to(ready.snapshot.meta.index)
            self.log.stable_snap_to(ready.snapshot.meta.index)
        if ready.committed_entries:
            self.log.applied_to(ready.committed_entries[-1].index)
        del self._msgs[: len(ready.messages)]
        del self._read_states[: len(ready.read_states)]
        if ready.entries and self.role is Role.LEADER:
            self._own_copy_persisted()

    # -- roles ---------------------------------------------------------------------

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = NO_NODE
        self.leader = NO_NODE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = self.cfg.election_tick + self._rng.randrange(
            self.cfg.election_tick
        )
        self.votes = {}
        self.lead_transferee = NO_NODE
        self._pending_reads = []  # NB: a confirmation of another term confirms nothing
        self.prs = {}
        self._sync_progress()

    def _sync_progress(self) -> None:
        """One progress per member: kept for those who stay, fresh for new ones."""
        members = self.voters | self.learners
        last = self.log.last_index()
        for node in list(self.prs):
            if node not in members:
                del self.prs[node]
        for node in members:
            pr = self.prs.get(node)
            if pr is None:
                pr = self.prs[node] = Progress(last + 1, self.cfg.max_inflight)
                if node == self.id:
                    pr.match = self.log.stable_index()
            pr.is_learner = node in self.learners

    def _become_follower(self, term: int, leader: int) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader = leader

    def _become_pre_candidate(self) -> None:
        # NB: no term change and no vote: a pre-vote that fails leaves no trace
        self.role = Role.PRE_CANDIDATE
        self.leader = NO_NODE
        self.votes = {}
        self.election_elapsed = 0

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.vote = self.id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        if self.role is not Role.CANDIDATE:
            raise InvariantViolation(f"replica {self.id} became leader as a {self.role.value}")
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader = self.id
        self.prs[self.id].become_replicate()
        # NB: an uncommitted change may sit in the log; no new one until it applies
        self.pending_conf_index = self.log.last_index()
        self._append_entries([Entry(self.term, self.log.last_index() + 1)])

    def _promotable(self) -> bool:
        return self.id in self.voters

    def _in_lease(self) -> bool:
        """Whether a vote request must be ignored: a leader is alive (check quorum)."""
        if not self.cfg.check_quorum:
            return False
        return self.role is Role.LEADER or self._ticks < self._promised_until

    def _holds_lease(self) -> bool:
        """Whether no other leader can have been elected yet (see :meth:`read_index`)."""
        margin = self.cfg.lease_margin
        if (
            margin is None
            or not self.cfg.check_quorum
            or self.role is not Role.LEADER
            or self._transfer_term == self.term
        ):
            return False
        sent = sorted(
            (
                self._ticks
                if voter == self.id
                else self._round_ticks.get(self.prs[voter].round, -1)
                for voter in self.voters
            ),
            reverse=True,
        )
        oldest = sent[self._quorum() - 1]
        return oldest >= 0 and self._ticks < oldest + self.cfg.election_tick - margin

    def _quorum(self) -> int:
        return len(self.voters) // 2 + 1

    # -- elections -----------------------------------------------------------------

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self._promotable() and self.election_elapsed >= self.randomized_election_timeout:
            self.election_elapsed = 0
            self._campaign(pre_vote=self.cfg.pre_vote, transfer=False)

    def _campaign(self, *, pre_vote: bool, transfer: bool) -> None:
        if not self._promotable():
            return
        if pre_vote:
            self._become_pre_candidate()
            kind, term = MT.PRE_VOTE, self.term + 1
        else:
            self._become_candidate()
            kind, term = MT.VOTE, self.term
        if self._tally(self.id, granted=True):
            return
        last_index, last_term = self.log.last_index(), self.log.last_term()
        for voter in sorted(self.voters):
            if voter != self.id:
                self._send(
                    Message(
                        kind,
                        voter,
                        self.id,
                        term,
                        log_term=last_term,
                        index=last_index,
                        force=transfer,
                    )
                )

    def _tally(self, voter: int, *, granted: bool) -> bool:
        """Count ``voter``'s answer; act on a decided election. Returns whether it was
        decided."""
        if voter not in self.voters:
            return False
        self.votes.setdefault(voter, granted)
        yes = sum(1 for v in self.votes.values() if v)
        no = len(self.votes) - yes
        if yes >= self._quorum():
            if not self._promotable():  # NB: no longer a voter: it may not lead
                self._become_follower(self.term, NO_NODE)
            elif self.role is Role.PRE_CANDIDATE:
                self._campaign(pre_vote=False, transfer=False)
            else:
                self._become_leader()
                self._bcast_append()
            return True
        if no >= self._quorum():
            self._become_follower(self.term, NO_NODE)
            return True
        return False

    def _on_vote_request(self, m: Message) -> None:
        resp = MT.VOTE_RESP if m.type is MT.VOTE else MT.PRE_VOTE_RESP
        can_vote = (
            self.vote == m.sender
            or (self.vote == NO_NODE and self.leader == NO_NODE)
            or (m.type is MT.PRE_VOTE and m.term > self.term)
        )
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            # NB: a granted pre-vote answers in the term the pre-candidate asked for
            self._send(Message(resp, m.sender, self.id, m.term))
            if m.type is MT.VOTE:
                self.election_elapsed = 0
                self.vote = m.sender
        else:
            self._send(Message(resp, m.sender, self.id, self.term, reject=True))

    def _step_candidate(self, m: Message) -> None:
        wanted = MT.PRE_VOTE_RESP if self.role is Role.PRE_CANDIDATE else MT.VOTE_RESP
        if m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
            self._become_follower(m.term, m.sender)
            self._step_follower(m)
        elif m.type is wanted:
            self._tally(m.sender, granted=not m.reject)

    # -- the follower --------------------------------------------------------------

    def _step_follower(self, m: Message) -> None:
        if m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
            self.election_elapsed = 0
            self.leader = m.sender
            self._promised_until = self._ticks + self.cfg.election_tick
            if m.type is MT.APP:
                self._on_append(m)
            elif m.type is MT.HEARTBEAT:
                self.log.commit_to(m.commit)
                # NB: its applied index, for a leader waiting until every replica applied
                # an entry (a range merge waits so for its right-hand range's last one)
                self._send(
                    Message(
                        MT.HEARTBEAT_RESP,
                        m.sender,
                        self.id,
                        self.term,
                        index=self.log.applied,
                        context=m.context,
                    )
                )
            else:
                self._on_snapshot(m)
        elif m.type is MT.TIMEOUT_NOW:
            self._campaign(pre_vote=False, transfer=True)

    def _on_append(self, m: Message) -> None:
        if m.index < self.log.committed:
            self._send(Message(MT.APP_RESP, m.sender, self.id, self.term, index=self.log.committed))
            return
        last = self.log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last is not None:
            if m.context != COMMIT_ONLY:
                self._send(Message(MT.APP_RESP, m.sender, self.id, self.term, index=last))
            return
        hint = self.log.find_conflict_by_term(min(m.index, self.log.last_index()), m.log_term)
        self._send(
            Message(
                MT.APP_RESP,
                m.sender,
                self.id,
                self.term,
                index=m.index,
                reject=True,
                reject_hint=hint,
            )
        )

    def _on_snapshot(self, m: Message) -> None:
        snap = m.snapshot
        if snap is None:
            raise InvariantViolation(f"a snapshot message without a snapshot: {m}")
        meta = snap.meta
        members = set(meta.conf_state.voters) | set(meta.conf_state.learners)
        if meta.index <= self.log.committed or self.id not in members:
            index = self.log.committed
        elif self.log.match_term(meta.index, meta.term):
            self.log.commit_to(meta.index)  # NB: the log already holds it: fast-forward
            index = self.log.committed
        else:
            self.log.restore(snap)
            self.voters = set(meta.conf_state.voters)
            self.learners = set(meta.conf_state.learners)
            self._sync_progress()
            index = self.log.last_index()
        self._send(Message(MT.APP_RESP, m.sender, self.id, self.term, index=index))

    # -- the leader ----------------------------------------------------------------

    def _propose(self, entry: Entry) -> Entry | None:
        if self.role is not Role.LEADER or self.lead_transferee != NO_NODE:
            return None
        placed = Entry(self.term, self.log.last_index() + 1, entry.data, entry.type)
        self._append_entries([placed])
        self._bcast_append()
        return placed

    def _append_entries(self, entries: list[Entry]) -> None:
        # NB: this replica's own copy counts towards the commit once persisted
        # (_own_copy_persisted), as its appends may leave before it is
        self.log.append(entries)

    def _own_copy_persisted(self) -> None:
        own = self.prs.get(self.id)
        if own is not None and own.maybe_update(self.log.stable_index()) and self._maybe_commit():
            self._bcast_append()

    def _maybe_commit(self) -> bool:
        if not self.voters:
            return False
        matches = sorted((self.prs[v].match for v in self.voters), reverse=True)
        return self.log.maybe_commit(matches[self._quorum() - 1], self.term)

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.cfg.election_tick:
            self.election_elapsed = 0
            if self.cfg.check_quorum:
                active = sum(1 for v in self.voters if v == self.id or self.prs[v].recent_active)
                if active < self._quorum():
                    self._become_follower(self.term, NO_NODE)
                    return
                for node, pr in self.prs.items():
                    pr.recent_active = node == self.id
            self.lead_transferee = NO_NODE
        if self.heartbeat_elapsed >= self.cfg.heartbeat_tick:
            self.heartbeat_elapsed = 0
            self._broadcast_heartbeat()

    def _send_timeout_now(self, to: int) -> None:
        self._transfer_term = self.term  # NB: its campaign ignores the lease's promises
        self._send(Message(MT.TIMEOUT_NOW, to, self.id, self.term))

    def _broadcast_heartbeat(self) -> None:
        """A heartbeat round: each answer names it, for the reads asked before it and
        the lease (the tick it went out at)."""
        self._round += 1
        self._round_ticks[self._round] = self._ticks
        for old in [
            r for r, t in self._round_ticks.items() if t < self._ticks - self.cfg.election_tick
        ]:
            del self._round_ticks[old]  # too old to give a lease
        for to in self.prs:
            if to != self.id:
                commit = min(self.prs[to].match, self.log.committed)
                self._send(
                    Message(
                        MT.HEARTBEAT, to, self.id, self.term, commit=commit, context=self._round
                    )
                )

    def _release_reads(self) -> bool:
        """Hand over the reads a quorum confirmed (an answer to a round confirms every
        read asked before that round went out); returns whether any are left waiting."""
        pending = self._pending_reads
        while pending:
            asked = pending[0].round
            confirmed = sum(1 for v in self.voters if v == self.id or self.prs[v].round >= asked)
            if confirmed < self._quorum():
                break
            read = pending.pop(0)
            self._read_states.append(ReadState(read.index, read.context))
        return bool(pending)

    def _step_leader(self, m: Message) -> None:
        if m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
            raise InvariantViolation(
                f"two leaders in term {self.term}: {self.id} and {m.sender} ({m.type.name})"
            )
        pr = self.prs.get(m.sender)
        if pr is None:
            return
        if m.type is MT.HEARTBEAT_RESP:
            pr.applied = max(pr.applied, m.index)
            if m.context > pr.round:
                pr.round = m.context
                self._release_reads()
            pr.recent_active = True
            pr.probe_sent = False
            if pr.state is ProgressState.REPLICATE and pr.is_paused():
                pr.inflight.popleft()  # NB: lets one append through if acks were lost
            if pr.match < self.log.last_index():
                self._send_append(m.sender)
        elif m.type is MT.APP_RESP:
            self._on_append_response(m, pr)

    def _on_append_response(self, m: Message, pr: Progress) -> None:
        pr.recent_active = True
        if m.reject:
            if pr.maybe_decrease_to(m.index, m.reject_hint):
                if pr.state is ProgressState.REPLICATE:
                    pr.become_probe()
                self._send_append(m.sender)
            return
        was_paused = pr.is_paused()
        if not (
            pr.maybe_update(m.index) or (pr.match == m.index and pr.state is ProgressState.PROBE)
        ):
            return
        if pr.state is ProgressState.PROBE:
            pr.become_replicate()
        elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
            pr.become_probe()
            pr.become_replicate()
        if self._maybe_commit():
            self._bcast_append()
        elif was_paused:
            self._send_append(m.sender)
        # NB: most answers come from a follower in step, which lacks nothing
        while pr.next <= self.log.last_index() and self._send_append(m.sender, send_if_empty=False):
            pass
        if m.sender == self.lead_transferee and pr.match == self.log.last_index():
            self._send_timeout_now(m.sender)

    def _bcast_append(self) -> None:
        """Send every follower what it lacks, and the commit index, with the next Ready
        (or :meth:`take_early_messages`): the entries proposed and the commits made in
        one turn of the driver travel as one append per follower, not one each."""
        self._append_due = True

    def _flush_appends(self) -> None:
        if not self._append_due:
            return
        self._append_due = False
        if self.role is not Role.LEADER:
            return
        committed = self.log.committed
        for node, pr in self.prs.items():
            if node != self.id:
                self._send_append(node, send_if_empty=pr.commit_sent < committed, for_commit=True)

    def _send_append(
        self, to: int, *, send_if_empty: bool = True, for_commit: bool = False
    ) -> bool:
        """Send ``to`` what it lacks, if its progress allows; whether anything went.
        ``for_commit``: sent to tell the commit index (then an empty append to a follower
        in step is marked ``COMMIT_ONLY``: it is not answered)."""
        pr = self.prs[to]
        if pr.is_paused():
            return False
        prev = pr.next - 1
        prev_term = self.log.term(prev)
        entries = None
        if prev_term is not None:
            entries = self.log.entries(pr.next, self.cfg.max_entries_per_message)
        if prev_term is None or entries is None:
            return self._send_snapshot(to, pr)
        if not entries and not send_if_empty:
            return False
        # NB: the answer to an empty append that only tells a follower in step the commit
        # index says nothing the leader waits for; a probe's is waited for, and so is a
        # heartbeat answer's append (it recovers an acknowledgement that was lost)
        commit_only = for_commit and not entries and pr.state is ProgressState.REPLICATE
        self._send(
            Message(
                MT.APP,
                to,
                self.id,
                self.term,
                log_term=prev_term,
                index=prev,
                entries=tuple(entries),
                commit=self.log.committed,
                context=COMMIT_ONLY if commit_only else 0,
            )
        )
        pr.commit_sent = self.log.committed
        if entries:
            pr.sent(entries[-1].index)
        elif pr.state is ProgressState.PROBE:
            pr.probe_sent = True
        return True

    def _send_snapshot(self, to: int, pr: Progress) -> bool:
        if not pr.recent_active:
            return False  # NB: a snapshot is large; wait until the follower answers
        snap = self.log.snapshot()
        if snap.is_empty:
            raise InvariantViolation(f"entries before {pr.next} are compacted but no snapshot")
        members = snap.meta.conf_state
        if to not in members.voters and to not in members.learners:
            return False  # NB: it would ignore a snapshot that does not name it; wait for one
        self._send(Message(MT.SNAP, to, self.id, self.term, snapshot=snap))
        pr.become_snapshot(snap.meta.index)
        return True

    def _send(self, m: Message) -> None:
        self._msgs.append(m)
