"""Reads a leader confirms at once while it holds its lease (``Config.lease_margin``)."""

from __future__ import annotations

from feedkv.raft.messages import Message, MessageType
from feedkv.raft.state import Role
from feedkv.testing.raft_sim import RaftSim

MT = MessageType
ELECTION = 10  # RaftSim's election_tick
MARGIN = 3


def _leased(seed: int = 0) -> RaftSim:
    sim = RaftSim(seed, lease_margin=MARGIN)
    sim.elect(1)
    sim.propose(b"x")
    sim.tick(1)  # a heartbeat round, answered
    sim.stabilize()
    return sim


def test_a_leader_with_a_fresh_quorum_confirms_a_read_at_once() -> None:
    sim = _leased()
    assert sim.raft(1).read_index(1)
    ready = sim.raft(1).ready()
    assert [r.context for r in ready.read_states] == [1]
    assert not [m for m in ready.messages if m.type is MT.HEARTBEAT]


def test_the_lease_runs_out_unless_a_quorum_answers_again() -> None:
    sim = _leased()
    sim.drop = lambda m: m.type is MT.HEARTBEAT_RESP
    sim.tick(1, times=ELECTION - MARGIN - 1)  # rounds go out; no answer comes back
    sim.stabilize()
    assert sim.raft(1).read_index(1)
    assert len(sim.raft(1).ready().read_states) == 1  # the last answered round holds
    sim.stabilize()
    sim.tick(1)
    sim.stabilize()
    assert sim.raft(1).read_index(2)
    ready = sim.raft(1).ready()
    assert ready.read_states == ()  # it waits for a round now
    assert {m.to for m in ready.messages if m.type is MT.HEARTBEAT} == {2, 3}


def test_a_read_waiting_for_a_round_is_confirmed_by_its_answers() -> None:
    sim = RaftSim(0, lease_margin=MARGIN)
    sim.elect(1)
    sim.tick(1, times=ELECTION)  # no round answered for an election timeout
    sim.drop = lambda m: m.type is MT.HEARTBEAT_RESP
    sim.stabilize()
    raft = sim.raft(1)
    assert raft.role is Role.LEADER
    assert raft.read_index(1)
    assert raft.ready().read_states == ()
    sim.drop = None
    seen = []
    for _ in range(10):
        ready = sim.handle_ready(1)
        if ready is not None:
            seen.extend(r.context for r in ready.read_states)
        sim.deliver(all_now=True)
        for node in (2, 3):
            sim.handle_ready(node)
        sim.deliver(all_now=True)
    assert 1 in seen


def test_a_leader_that_told_its_transferee_to_campaign_holds_no_lease() -> None:
    sim = _leased()
    sim.drop = lambda m: m.type is MT.TIMEOUT_NOW  # the transfer never takes
    assert sim.raft(1).transfer_leader(2)
    sim.stabilize()
    sim.tick(1, times=ELECTION)  # the transfer is abandoned; rounds answered again
    sim.stabilize()
    assert sim.raft(1).role is Role.LEADER
    assert sim.raft(1).read_index(1)
    assert sim.raft(1).ready().read_states == ()


def test_a_follower_that_heard_the_leader_grants_no_vote_and_stands_for_no_election() -> None:
    sim = _leased()
    follower = sim.raft(3)
    follower.step(Message(MT.VOTE, 3, 2, follower.term + 1, index=99, log_term=99))
    assert follower.ready().messages == ()  # ignored, no term change
    follower.campaign()
    assert follower.role is Role.FOLLOWER


def test_a_restarted_replica_keeps_a_promise_it_cannot_date() -> None:
    sim = _leased()
    sim.crash(3)
    sim.restart(3)
    raft = sim.raft(3)
    assert raft.leader == 0
    raft.step(Message(MT.VOTE, 3, 2, raft.term + 1, index=99, log_term=99))
    assert raft.ready().messages == ()  # no vote before an election timeout passed
    sim.tick(3, times=ELECTION)
    raft.step(Message(MT.VOTE, 3, 2, raft.term + 1, index=99, log_term=99))
    votes = [m for m in raft.ready().messages if m.type is MT.VOTE_RESP]
    assert votes and not votes[0].reject


def test_a_cut_off_leader_stops_confirming_before_the_others_can_elect_another() -> None:
    sim = _leased()
    sim.isolate(1)
    sim.tick(times=ELECTION)  # every clock runs: the others' promises run out
    assert sim.raft(1).role is Role.LEADER  # check quorum has not deposed it yet
    sim.elect(2)  # the others elect a new leader, which commits its first entry
    assert sim.raft(1).read_index(1)
    ready = sim.handle_ready(1)
    assert ready is not None and ready.read_states == ()
    sim.stabilize()
    assert sim.raft(1).ready().read_states == ()
