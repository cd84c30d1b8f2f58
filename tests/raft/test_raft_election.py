"""Elections: timeouts, the vote rules, pre-vote, check quorum and leader transfer."""

from __future__ import annotations

import random

from feedkv.raft.messages import NO_NODE, Entry, Message, MessageType
from feedkv.raft.state import Config, RaftState, Role
from feedkv.raft.storage import MemoryStorage
from feedkv.testing.raft_sim import RaftSim

MT = MessageType


def _replica(node: int = 1, *, seed: int = 0, **config: object) -> RaftState:
    cfg = Config(id=node, **config)  # type: ignore[arg-type]
    return RaftState(cfg, MemoryStorage.bootstrap((1, 2, 3)), random.Random(seed))


def _sent(raft: RaftState) -> list[Message]:
    """Handle ``raft``'s Ready (persisting it) and return its messages."""
    rd = raft.ready()
    storage = raft.log.storage
    assert isinstance(storage, MemoryStorage)
    storage.append(rd.entries)
    if rd.hard_state is not None:
        storage.set_hard_state(rd.hard_state)
    raft.advance(rd)
    return list(rd.messages)


def test_a_single_replica_elects_itself_and_commits_alone() -> None:
    sim = RaftSim(0, (1,))
    sim.tick(times=20)
    sim.stabilize()
    assert sim.leader() == 1
    entry = sim.propose(b"x")
    sim.stabilize()
    assert entry is not None
    assert sim.replicas[1].applied[-1] == (entry.index, entry.term, b"x")


def test_a_follower_campaigns_within_its_randomized_timeout() -> None:
    for seed in range(20):
        raft = _replica(seed=seed, election_tick=10)
        timeout = raft.randomized_election_timeout
        assert 10 <= timeout < 20
        for _ in range(timeout - 1):
            raft.tick()
        assert raft.role is Role.FOLLOWER
        raft.tick()
        assert raft.role is Role.PRE_CANDIDATE
        assert {m.to for m in _sent(raft) if m.type is MT.PRE_VOTE} == {2, 3}


def test_timeouts_come_from_the_injected_random_source() -> None:
    timeouts = {seed: _replica(seed=seed).randomized_election_timeout for seed in range(30)}
    assert timeouts == {seed: _replica(seed=seed).randomized_election_timeout for seed in range(30)}
    assert len(set(timeouts.values())) > 3


def test_a_replica_grants_one_vote_per_term() -> None:
    raft = _replica(1, pre_vote=False)
    raft.step(Message(MT.VOTE, 1, 2, 5, log_term=1, index=1))
    raft.step(Message(MT.VOTE, 1, 3, 5, log_term=1, index=1))
    raft.step(Message(MT.VOTE, 1, 2, 5, log_term=1, index=1))  # a retry: same answer
    answers = [(m.to, m.reject) for m in _sent(raft)]
    assert answers == [(2, False), (3, True), (2, False)]
    assert (raft.term, raft.vote) == (5, 2)
    assert raft.ready().hard_state is None  # the vote was handed out to persist


def test_a_vote_needs_a_log_at_least_as_up_to_date() -> None:
    raft = _replica(1, pre_vote=False, check_quorum=False)
    raft.step(Message(MT.APP, 1, 2, 2, log_term=1, index=1, entries=(Entry(2, 2),), commit=1))
    _sent(raft)
    raft.step(Message(MT.VOTE, 1, 3, 3, log_term=1, index=5))  # longer, older term
    raft.step(Message(MT.VOTE, 1, 3, 4, log_term=2, index=2))  # as up to date
    assert [m.reject for m in _sent(raft)] == [True, False]


def test_pre_vote_keeps_a_rejoining_replica_from_disrupting_the_leader() -> None:
    sim = RaftSim(1)
    sim.elect(1)
    term = sim.raft(1).term
    sim.isolate(3)
    for _ in range(100):
        sim.tick(3)
        sim.stabilize()
    assert sim.raft(3).term == term  # a failed pre-vote raises no term
    sim.heal()
    sim.tick(1)
    sim.stabilize()
    assert sim.leader() == 1
    assert {sim.raft(n).term for n in (1, 2, 3)} == {term}
    assert sim.raft(3).leader == 1


def test_without_pre_vote_a_rejoining_replica_unseats_the_leader() -> None:
    # the contrast that shows what pre-vote is for
    sim = RaftSim(1, pre_vote=False, check_quorum=False)
    sim.elect(1)
    term = sim.raft(1).term
    sim.isolate(3)
    for _ in range(100):
        sim.tick(3)
        sim.stabilize()
    assert sim.raft(3).term > term + 3
    sim.heal()
    sim.tick(1)
    sim.stabilize()
    assert sim.raft(1).term > term + 3
    assert sim.raft(1).role is not Role.LEADER or sim.raft(1).term == sim.raft(3).term


def test_a_leader_cut_off_from_its_quorum_steps_down() -> None:
    sim = RaftSim(2)
    sim.elect(1)
    sim.isolate(1)
    # the first check counts the answers heard since the election; the second, none
    election_tick = sim.raft(1).cfg.election_tick
    for _ in range(2 * election_tick - 1):
        sim.tick(1)
        sim.stabilize()
    assert sim.raft(1).role is Role.LEADER
    sim.tick(1)
    assert sim.raft(1).role is Role.FOLLOWER
    assert sim.raft(1).leader == NO_NODE


def test_followers_that_hear_a_leader_ignore_vote_requests() -> None:
    sim = RaftSim(3, pre_vote=False)
    sim.elect(1)
    term = sim.raft(1).term
    sim.raft(3).campaign()  # forced: as a replica whose clock ran fast
    sim.stabilize()
    assert sim.raft(2).term == term  # ignored: it hears from leader 1
    assert sim.raft(1).role is Role.LEADER


def test_a_stale_leader_learns_of_its_successor_and_follows_it() -> None:
    sim = RaftSim(4, check_quorum=False)
    sim.elect(1)
    sim.isolate(1)
    sim.elect(2)
    assert sim.raft(1).role is Role.LEADER  # it does not know yet
    sim.heal()
    sim.tick(1)  # its heartbeat is answered with the newer term
    sim.stabilize()
    assert sim.raft(1).role is Role.FOLLOWER
    sim.tick(2)
    sim.stabilize()
    assert sim.raft(1).leader == 2


def test_leadership_transfers_to_a_caught_up_follower() -> None:
    sim = RaftSim(5)
    sim.elect(1)
    sim.isolate(3)
    for i in range(5):
        sim.propose(b"%d" % i)
    sim.stabilize()
    sim.heal()
    assert sim.raft(1).transfer_leader(3)
    assert sim.raft(1).propose(b"during") is None  # held while handing over
    sim.stabilize()
    assert sim.leader() == 3
    assert sim.raft(1).role is Role.FOLLOWER
    assert sim.propose(b"after") is not None
    sim.stabilize()
    assert sim.applied_everywhere(b"after")


def test_a_transfer_is_abandoned_after_an_election_timeout() -> None:
    sim = RaftSim(6)
    sim.elect(1)
    sim.isolate(2)
    assert sim.raft(1).transfer_leader(2)
    sim.tick(1, times=sim.raft(1).cfg.election_tick)
    assert sim.raft(1).lead_transferee == NO_NODE
    assert sim.raft(1).propose(b"again") is not None
