"""The Ready contract: what is handed out together, and handed out once."""

from __future__ import annotations

import random

import pytest

from feedkv.errors import InvalidArgumentError, InvariantViolation
from feedkv.raft.messages import ConfChange, ConfChangeType, Entry, HardState, Message, MessageType
from feedkv.raft.state import Config, RaftState, Ready, Role, SoftState
from feedkv.raft.storage import MemoryStorage
from feedkv.testing.raft_sim import RaftSim

MT = MessageType


def _replica(node: int = 1, voters: tuple[int, ...] = (1, 2, 3), **config: object) -> RaftState:
    cfg = Config(id=node, **config)  # type: ignore[arg-type]
    return RaftState(cfg, MemoryStorage.bootstrap(voters), random.Random(0))


def _persist(raft: RaftState, rd: Ready) -> None:
    storage = raft.log.storage
    assert isinstance(storage, MemoryStorage)
    storage.append(rd.entries)
    if rd.hard_state is not None:
        storage.set_hard_state(rd.hard_state)
    raft.advance(rd)


def test_a_vote_request_goes_out_with_the_vote_to_persist_before_it() -> None:
    raft = _replica(pre_vote=False)
    raft.campaign()
    rd = raft.ready()
    assert rd.hard_state == HardState(term=2, vote=1, commit=1)
    assert rd.must_sync
    assert {(m.type, m.to) for m in rd.messages} == {(MT.VOTE, 2), (MT.VOTE, 3)}
    assert rd.soft_state == SoftState(0, Role.CANDIDATE)


def test_a_pre_vote_persists_nothing() -> None:
    raft = _replica()
    raft.campaign()
    rd = raft.ready()
    assert rd.hard_state is None
    assert not rd.must_sync
    assert {m.type for m in rd.messages} == {MT.PRE_VOTE}
    assert all(m.term == 2 for m in rd.messages)  # the term it would take
    assert raft.term == 1


def test_an_acknowledgement_goes_out_with_the_entries_it_acknowledges() -> None:
    raft = _replica(2)
    entries = (Entry(2, 2, b"a"), Entry(2, 3, b"b"))
    raft.step(Message(MT.APP, 2, 1, 2, log_term=1, index=1, entries=entries, commit=2))
    rd = raft.ready()
    assert rd.entries == entries
    assert rd.hard_state == HardState(2, 0, 2)
    assert [(m.type, m.index) for m in rd.messages] == [(MT.APP_RESP, 3)]
    # committed entries may be in the same Ready: they are applied after the persist
    assert rd.committed_entries == entries[:1]


def test_committed_entries_are_handed_out_once() -> None:
    raft = _replica(1, voters=(1,))
    raft.campaign()
    raft.propose(b"x")
    rd = raft.ready()
    assert rd.committed_entries == ()  # the leader's own copy counts once persisted
    _persist(raft, rd)
    rd = raft.ready()
    assert [e.data for e in rd.committed_entries] == [b"", b"x"]
    _persist(raft, rd)
    assert not raft.has_ready()
    raft.propose(b"y")
    _persist(raft, raft.ready())
    assert [e.data for e in raft.ready().committed_entries] == [b"y"]


def test_a_follower_drops_proposals() -> None:
    raft = _replica(2)
    assert raft.propose(b"x") is None
    assert raft.role is Role.FOLLOWER


def test_misuse_is_refused_loudly() -> None:
    with pytest.raises(InvalidArgumentError, match="heartbeat_tick"):
        Config(id=1, election_tick=2, heartbeat_tick=2)
    with pytest.raises(InvalidArgumentError, match="positive"):
        Config(id=0)
    raft = _replica(1)
    with pytest.raises(InvariantViolation, match="for 3"):
        raft.step(Message(MT.HEARTBEAT, 3, 2, 1))


def test_a_restart_resumes_from_the_persisted_state() -> None:
    raft = _replica(1, voters=(1,))
    raft.campaign()
    for data in (b"a", b"b"):
        raft.propose(data)
    _persist(raft, raft.ready())
    _persist(raft, raft.ready())  # the commit, once the entries were persisted
    restarted = RaftState(Config(id=1, applied=3), raft.log.storage, random.Random(1))
    assert (restarted.term, restarted.vote, restarted.committed) == (raft.term, 1, 4)
    assert restarted.role is Role.FOLLOWER
    assert [e.data for e in restarted.ready().committed_entries] == [b"b"]


@pytest.mark.parametrize("voters", [(1,), (1, 2, 3)])
def test_early_messages_never_commit_what_the_leader_has_not_persisted(
    voters: tuple[int, ...],
) -> None:
    # a leader's appends leave before its fsync; were its unpersisted copy to count, a
    # learner (or follower) could apply an entry the leader's crash then loses
    raft = _replica(1, voters=voters, pre_vote=False)
    raft.campaign()
    for node in voters[1:]:
        raft.step(Message(MT.VOTE_RESP, 1, node, raft.term))
    assert raft.role is Role.LEADER
    raft.apply_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 9))
    _persist(raft, raft.ready())
    for node in (*voters[1:], 9):  # each answers its probe, so appends flow to it
        raft.step(Message(MT.APP_RESP, 1, node, raft.term, index=raft.log.last_index()))
    _persist(raft, raft.ready())
    raft.propose(b"x")
    rd = raft.ready()
    unpersisted = min(e.index for e in rd.entries)
    assert rd.early_messages, "the leader's appends may leave before its fsync"
    assert all(m.commit < unpersisted for m in rd.early_messages)
    assert all(m.type in (MT.APP, MT.HEARTBEAT) for m in rd.early_messages)
    assert all(m.type not in (MT.APP, MT.HEARTBEAT) for m in rd.late_messages)


def test_a_candidate_removed_from_the_voters_does_not_lead_on_the_votes_it_gets() -> None:
    # found by the 3,000-seed soak: a candidate applied its own removal while its votes
    # were on their way, then took office outside the group (and failed on its progress)
    raft = _replica(1, voters=(1, 2, 3), pre_vote=False)
    raft.campaign()
    assert raft.role is Role.CANDIDATE
    raft.apply_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, 1))
    raft.step(Message(MT.VOTE_RESP, 1, 2, raft.term))
    raft.step(Message(MT.VOTE_RESP, 1, 3, raft.term))
    assert raft.role is Role.FOLLOWER


def test_a_leader_persisting_a_ready_sends_new_appends_and_commits_on_its_followers() -> None:
    # a leader persisting a Ready proposes again: the new entry's appends go at once
    # (take_early_messages), both followers persist and answer, and the entry commits
    # before the leader's own write of it (a quorum without the leader's copy)
    sim = RaftSim(0)
    sim.elect(1)
    leader = sim.raft(1)
    first = leader.propose(b"a")
    assert first is not None
    in_flight = leader.ready()  # being persisted; its appends went out
    second = leader.propose(b"b")
    assert second is not None
    early = leader.take_early_messages(len(in_flight.messages))
    assert {(m.type, m.to) for m in early} == {(MT.APP, 2), (MT.APP, 3)}
    assert all(second.index in {e.index for e in m.entries} for m in early)
    for m in (*in_flight.early_messages, *early):
        sim.raft(m.to).step(m)
    for follower in (2, 3):
        for m in sim.handle_ready(follower).messages:  # type: ignore[union-attr]
            if m.to == 1:
                leader.step(m)
    assert leader.committed >= second.index
    assert leader.take_early_messages(len(in_flight.messages)) != []  # the new commit index
    _persist(leader, in_flight)
    rd = leader.ready()
    assert second.index in {e.index for e in rd.committed_entries}


def test_heartbeats_taken_alone_leave_the_appends_for_the_next_ready_together() -> None:
    # a loop with a write in flight sends its heartbeats at once and holds its appends:
    # the entries proposed meanwhile go in one append per follower with the next Ready
    sim = RaftSim(0)
    sim.elect(1)
    leader = sim.raft(1)
    assert leader.propose(b"a") is not None
    in_flight = leader.ready()
    proposed = [leader.propose(b"b"), leader.propose(b"c")]
    assert None not in proposed
    for _ in range(leader.cfg.heartbeat_tick):
        leader.tick()
    taken = leader.take_early_messages(len(in_flight.messages), appends=False)
    assert {(m.type, m.to) for m in taken} == {(MT.HEARTBEAT, 2), (MT.HEARTBEAT, 3)}
    assert leader.take_early_messages(len(in_flight.messages), appends=False) == []
    _persist(leader, in_flight)
    rd = leader.ready()
    appends = [m for m in rd.early_messages if m.type is MT.APP]
    assert sorted(m.to for m in appends) == [2, 3]
    for m in appends:
        assert [e.index for e in m.entries] == [e.index for e in proposed if e is not None]
