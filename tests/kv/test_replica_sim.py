"""A replicated range's apply loop under a simulated faulty network and crashes.

Each seed runs three replicas of one range on real engines through lost, duplicated,
reordered and partitioned messages and node crashes, with every proposal incrementing a
counter evaluated on the lease holder over the proposals in flight. The simulator checks
after every Ready that all replicas apply the same commands and ops at each index and that
no two hold the lease in one term; once the faults stop, that their data is identical,
that the counter equals the increments applied, and that no acknowledged write is lost.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import msgpack
import pytest

from feedkv.errors import AmbiguousResultError, InvariantViolation, NotLeaseHolderError
from feedkv.kv.replica import ORPHAN_WAIT_ELECTIONS, Replica
from feedkv.kv.replicated_command import Effects
from feedkv.raft import ConfChange, ConfChangeType, Message, MessageType, Role, decode_message
from feedkv.storage.engine import Completion
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.testing.range_sim import RangeFaults, RangeSim


def _run(
    tmp_path: Path, seed: int, faults: RangeFaults, rounds: int, spares: tuple[int, ...] = ()
) -> RangeSim:
    sim = RangeSim(tmp_path, seed, faults=faults, spares=spares)
    try:
        for _ in range(rounds):
            sim.round()
        sim.settle()
        sim.check_converged()
    except BaseException:
        sim.close()
        raise
    return sim


def test_a_snapshot_sender_holds_no_engine_snapshot_while_its_frames_go(
    tmp_path: Path,
) -> None:
    """The sender copies the range to its spool with the first frame and ends its read
    transaction there, so a slow receiver pins no pages of its store (and no map growth
    waits on it); the frames after it still carry the data as of the snapshot."""
    sim = _run(tmp_path, 0, RangeFaults(), 100)
    try:
        holder = _settled_holder(sim)
        engine = sim.nodes[holder.replica_id].engine
        frames = holder.snapshot_frames(Message(MessageType.SNAP, 2, holder.replica_id, 1))
        head = decode_message(next(frames))
        assert head.snapshot is not None and head.snapshot.meta.index == holder.applied
        assert engine.open_snapshots == 0
        with engine.snapshot() as snap:
            image = [[db, k, v] for db in MVCC_DATABASES for k, v in snap.scan(db, b"")]
        sim.propose()  # a change after the snapshot's position
        sim.settle()
        (data,) = list(frames)
        assert msgpack.unpackb(data, raw=False) == image and image
    finally:
        sim.close()


def test_a_quiet_range_applies_every_increment_on_every_replica(tmp_path: Path) -> None:
    sim = _run(tmp_path, 0, RangeFaults(), 300)
    try:
        assert sim.check_converged() == len(sim.acked) > 50
        assert sim.failed == 0 or sim.acked
    finally:
        sim.close()


@pytest.mark.parametrize("seed", range(40))
def test_no_acknowledged_write_is_lost_under_faults(tmp_path: Path, seed: int) -> None:
    sim = _run(tmp_path, seed, RangeFaults.chaos(), 250)
    try:
        counter = sim.check_converged()
        assert counter >= len(sim.acked)
    finally:
        sim.close()


def test_a_follower_refuses_to_propose_and_names_the_leader(tmp_path: Path) -> None:
    sim = _run(tmp_path, 1, RangeFaults(), 60)
    try:
        holder = sim.lease_holder()
        assert holder is not None
        follower = next(r for r in sim.live() if r is not holder)
        with (
            sim.nodes[follower.replica_id].engine.snapshot() as snap,
            pytest.raises(NotLeaseHolderError) as caught,
        ):
            follower.propose(snap, lambda rw: (None, Effects()))
        assert caught.value.lease_holder == holder.replica_id
    finally:
        sim.close()


def test_a_crashed_lease_holder_leaves_its_proposals_ambiguous(tmp_path: Path) -> None:
    sim = _run(tmp_path, 2, RangeFaults(), 60)
    try:
        holder = sim.lease_holder()
        assert holder is not None
        with sim.nodes[holder.replica_id].engine.snapshot() as snap:
            done = holder.propose(snap, lambda rw: ("x", Effects()))
        sim.crash(holder.replica_id)
        assert isinstance(done.exception(timeout=0), AmbiguousResultError)
        sim.settle()
        sim.check_converged()
        assert sim.lease_holder() is not None
    finally:
        sim.close()


def test_a_new_replica_gets_a_snapshot_then_votes_and_an_old_one_leaves(tmp_path: Path) -> None:
    sim = RangeSim(tmp_path, 3, spares=(4,))
    try:
        for _ in range(80):
            sim.round()
        holder = sim.lease_holder()
        assert holder is not None and holder.replica_id != 4
        for change in (
            ConfChange(ConfChangeType.ADD_LEARNER, 4),
            ConfChange(ConfChangeType.ADD_NODE, 4),
            ConfChange(
                ConfChangeType.REMOVE_NODE, next(n for n in (1, 2, 3) if n != holder.replica_id)
            ),
        ):
            holder.change_members(change)
            sim.settle()
        for _ in range(80):
            sim.round()
        sim.settle()
        assert 4 in sim.members() and len(sim.members()) == 3
        assert sim.check_converged() == len(sim.acked) > 20
    finally:
        sim.close()


@pytest.mark.parametrize("seed", range(25))
def test_membership_changes_under_faults_lose_nothing(tmp_path: Path, seed: int) -> None:
    sim = _run(tmp_path, seed, RangeFaults.chaos(), 300, spares=(4, 5))
    try:
        assert sim.check_converged() >= len(sim.acked)
    finally:
        sim.close()


@pytest.mark.parametrize("seed", range(20))
def test_truncated_logs_bring_lagging_replicas_back_by_snapshot(tmp_path: Path, seed: int) -> None:
    """Each replica truncates its log after a few entries, so a replica that crashed or
    was cut off for a while comes back through a snapshot; nothing is lost."""
    sim = RangeSim(tmp_path, seed, faults=RangeFaults.chaos(), spares=(4,), log_limit=8, log_keep=2)
    try:
        for _ in range(300):
            sim.round()
        sim.settle()
        assert sim.check_converged() >= len(sim.acked)
        firsts = [r.storage.first_index() for r in sim.live()]
        assert max(firsts) > 20, f"no log was truncated: first indexes {firsts}"
    finally:
        sim.close()


def test_a_node_removed_while_down_and_added_back_is_a_new_replica_its_old_one_collected(
    tmp_path: Path,
) -> None:
    """A voter is removed while its node is down and added back (a new replica id);
    when the node comes back its old replica is collected (Raft state and data gone, a
    tombstone left), the new one catches up, and a message to the old id is dropped."""
    sim = RangeSim(tmp_path, 3, spares=(4,))
    try:
        for _ in range(60):
            sim.round()
        holder = _settled_holder(sim)
        for change in (
            ConfChange(ConfChangeType.ADD_LEARNER, 4),
            ConfChange(ConfChangeType.ADD_NODE, 4),
        ):
            holder.change_members(change)
            sim.settle()
        holder = _settled_holder(sim)
        victim = next(n for n in (1, 2, 3) if n != holder.replica_id)
        sim.crash(victim)
        holder.change_members(ConfChange(ConfChangeType.REMOVE_NODE, victim))
        for _ in range(40):
            sim.round(propose=0.3, read=0.0)
        assert victim not in sim.members()
        back = sim.new_replica_id(victim)
        assert back > 4
        for change in (ConfChangeType.ADD_LEARNER, ConfChangeType.ADD_NODE):
            leading = sim.lease_holder()
            assert leading is not None
            leading.change_members(ConfChange(change, back, context=victim))
            for _ in range(40):
                sim.round(propose=0.3, read=0.0)
        sim.settle()  # NB: restarts the victim's node, with its old replica
        assert back in sim.members() and victim not in sim.members()
        node = sim.nodes[victim]
        assert node.replica_id == back and node.tombstone > victim and sim.collected >= 1
        assert sim.check_converged() == len(sim.acked) > 10

        leader = _settled_holder(sim)
        term = node.replica.raft.term if node.replica is not None else 0
        dropped = sim.dropped_old
        sim.inject(victim, Message(MessageType.HEARTBEAT, victim, leader.replica_id, term + 100))
        assert sim.dropped_old == dropped + 1
        assert node.replica is not None and node.replica.raft.term == term
    finally:
        sim.close()


@pytest.mark.parametrize("seed", range(1, 13))
def test_nodes_removed_and_added_back_under_faults_lose_nothing(tmp_path: Path, seed: int) -> None:
    """Frequent membership changes on five nodes under chaos: voters leave, and their
    nodes come back as new replicas; the checks of the simulation hold (messages to old
    ids dropped, removed replicas collected, nothing lost)."""
    faults = replace(RangeFaults.chaos(), conf_change=0.1)
    sim = _run(tmp_path, seed, faults, 300, spares=(4, 5))
    try:
        assert sim.check_converged() >= len(sim.acked)
        assert sim.collected >= 1  # a voter left in every seed here
    finally:
        sim.close()


def test_the_chaos_seeds_do_add_nodes_back(tmp_path: Path) -> None:
    """The seeds above are not vacuous: some add a node back under a new id, and see
    messages to an old id dropped."""
    faults = replace(RangeFaults.chaos(), conf_change=0.1)
    for seed in (3, 5):
        sim = _run(tmp_path / str(seed), seed, faults, 300, spares=(4, 5))
        try:
            assert sim.readded >= 2 and sim.dropped_old >= 1, seed
        finally:
            sim.close()


SOAK_SEEDS = 1000


@pytest.mark.soak
def test_a_thousand_seeds_of_faults_membership_and_snapshots_lose_nothing(
    tmp_path: Path,
) -> None:
    """Chaos with membership changes and logs truncated after a few entries, over a
    thousand seeds (``pytest --soak``); a failure names its seed."""
    for seed in range(1000, 1000 + SOAK_SEEDS):
        directory = tmp_path / f"seed-{seed}"
        sim = RangeSim(
            directory, seed, faults=RangeFaults.chaos(), spares=(4,), log_limit=8, log_keep=2
        )
        try:
            for _ in range(300):
                sim.round()
            sim.settle()
            assert sim.check_converged() >= len(sim.acked), f"seed {seed}"
        except InvariantViolation as exc:
            raise AssertionError(f"seed {seed}: {exc}") from exc
        finally:
            sim.close()
            shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("seed", range(30))
def test_reads_without_log_entries_are_never_stale_nor_phantom(tmp_path: Path, seed: int) -> None:
    # Without check quorum a cut-off lease holder goes on believing it leads: a read it
    # answered without a quorum's confirmation would be stale, and one answered before
    # the writes it saw committed could show a write that never happens.
    faults = replace(RangeFaults.chaos(), partition=0.03, heal=0.02)
    sim = RangeSim(tmp_path, seed, faults=faults, check_quorum=False)
    try:
        for _ in range(250):
            sim.round(read=0.5)
        sim.settle()
        sim.check_converged()
        assert sim.read_values
    finally:
        sim.close()


def test_a_cut_off_lease_holder_never_answers_a_read(tmp_path: Path) -> None:
    # Without check quorum the cut-off lease holder goes on believing it leads while the
    # others elect a new one and acknowledge increments it never sees: a read it
    # answered would be stale. It waits instead, and fails once it learns it was
    # succeeded.
    sim = RangeSim(tmp_path, 5, check_quorum=False)
    try:
        old = _settled_holder(sim)
        others = [n for n in sim.ids if n != old.replica_id]
        sim.cut = {(old.replica_id, n) for n in others} | {(n, old.replica_id) for n in others}
        acked = len(sim.acked)
        for _ in range(300):
            new = sim.lease_holder()
            # NB: proposals only once the others lead: the old one holds none in flight
            sim.round(propose=0.5 if new is not old else 0.0, read=0.0)
            if new is not None and new is not old and len(sim.acked) > acked:
                break
        else:
            raise AssertionError("the others elected no new lease holder")
        assert old.holds_lease  # it does not know yet
        done = sim.read(on=old)
        assert done is not None
        for _ in range(50):
            sim.round(propose=0.5, read=0.0)
        assert not done.done()
        sim.cut.clear()
        for _ in range(50):
            sim.round(propose=0.0, read=0.0)
        with pytest.raises(NotLeaseHolderError):
            done.result(timeout=0)
    finally:
        sim.close()


def _settled_holder(sim: RangeSim) -> Replica:
    """Rounds until a lease holder acknowledged increments and has none in flight."""
    for _ in range(300):
        sim.round(propose=0.2 if not sim.acked else 0.0, read=0.0)
        holder = sim.lease_holder()
        if (
            holder is not None
            and sim.acked
            and holder.raft.committed == holder.raft.log.last_index()
        ):
            return holder
    raise AssertionError("no lease holder")


def _hand_over_with_a_proposal_in_flight(
    sim: RangeSim,
) -> tuple[Replica, int, Completion[str]]:
    """Five replicas; the lease holder hears from the target of its hand-over alone, so
    its proposal, on the target too, is not committed (two of five) when the target
    campaigns and wins (the others vote for its longer log): the old holder steps down
    with the proposal in flight. Returns the old holder, the target and the proposal,
    once the old holder stepped down."""
    sim.settle()
    holder = _settled_holder(sim)
    me = holder.replica_id
    target, *lagging = [r for r in sim.ids if r != me]
    sim.cut = {link for other in lagging for link in ((me, other), (other, me))}
    engine = sim.nodes[me].engine
    with engine.snapshot() as snap:
        done: Completion[str] = holder.propose(snap, lambda rw: ("handed over", Effects()))
    assert holder.transfer_lease(target)
    with engine.snapshot() as snap, pytest.raises(NotLeaseHolderError) as refused:
        holder.propose(snap, lambda rw: (None, Effects()))
    assert refused.value.lease_holder == target  # a command meanwhile is sent there
    for _ in range(100):
        if holder.raft.role is not Role.LEADER:
            break
        sim.round(propose=0, read=0)
    assert holder.raft.role is not Role.LEADER and not done.done()
    return holder, target, done


def test_a_lease_handed_over_leaves_no_proposal_ambiguous(tmp_path: Path) -> None:
    """The proposal in flight as the lease moved is answered as it applies on the old
    holder through the next leader, not as ambiguous."""
    sim = RangeSim(tmp_path, 5, ids=(1, 2, 3, 4, 5))
    try:
        holder, target, done = _hand_over_with_a_proposal_in_flight(sim)
        assert holder.orphans() == 1  # a drain waits for it before its node stops
        for _ in range(100):
            if done.done():
                break
            sim.round(propose=0, read=0)
        assert done.result(timeout=0) == "handed over"
        assert holder.orphans() == 0
        sim.settle()
        sim.check_converged()
        assert sim.lease_holder() is sim.nodes[target].replica
    finally:
        sim.close()


def test_a_lease_holder_that_stops_after_its_hand_over_leaves_its_proposals_ambiguous(
    tmp_path: Path,
) -> None:
    """Stopped before the proposal in flight applied there, it cannot tell its fate."""
    sim = RangeSim(tmp_path, 5, ids=(1, 2, 3, 4, 5))
    try:
        holder, _, done = _hand_over_with_a_proposal_in_flight(sim)
        sim.crash(holder.replica_id)
        assert isinstance(done.exception(timeout=0), AmbiguousResultError)
        sim.settle()
        sim.check_converged()
    finally:
        sim.close()


def test_a_lease_holder_cut_off_after_its_hand_over_gives_up_its_proposals_within_a_bound(
    tmp_path: Path,
) -> None:
    """Cut off from every other replica once it stepped down, the old holder never hears
    how its proposal in flight ended: it waits ORPHAN_WAIT_ELECTIONS election timeouts,
    not until its caller's deadline, then fails it as ambiguous (it never saw the index
    commit; the new leader holds the entry and may commit it)."""
    sim = RangeSim(tmp_path, 5, ids=(1, 2, 3, 4, 5))
    try:
        holder, _, done = _hand_over_with_a_proposal_in_flight(sim)
        me = holder.replica_id
        sim.cut = {link for other in sim.ids if other != me for link in ((me, other), (other, me))}
        bound = ORPHAN_WAIT_ELECTIONS * holder.raft.cfg.election_tick
        for _ in range(bound - 1):
            sim.round(propose=0, read=0)
        assert not done.done() and holder.orphans() == 1  # waits within the bound

        for _ in range(5):
            sim.round(propose=0, read=0)

        assert isinstance(done.exception(timeout=0), AmbiguousResultError)
        assert holder.orphans() == 0
        sim.cut.clear()
        sim.settle()
        sim.check_converged()
    finally:
        sim.close()
