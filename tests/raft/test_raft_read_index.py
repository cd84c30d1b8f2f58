"""Reads confirmed by a quorum without a log entry (etcd's ReadIndex)."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.raft.messages import MessageType
from feedkv.raft.state import ReadState
from feedkv.testing.raft_sim import RaftSim

MT = MessageType


def _confirmed(sim: RaftSim, node: int) -> list[ReadState]:
    """Settle the group, collecting the reads ``node`` confirmed meanwhile."""
    seen: list[ReadState] = []
    for _ in range(100):
        handled = [sim.handle_ready(r.id) for r in sim.live()]
        for replica, ready in zip(sim.live(), handled, strict=True):
            if ready is not None and replica.id == node:
                seen.extend(ready.read_states)
        if not any(handled) and not sim.deliver(all_now=True):
            return seen
    raise AssertionError("the group did not settle")


def test_a_leader_confirms_a_read_once_a_quorum_answers_its_heartbeat() -> None:
    sim = RaftSim(0)
    sim.elect(1)
    entry = sim.propose(b"x")
    sim.stabilize()
    assert entry is not None
    assert sim.raft(1).read_index(7)
    assert _confirmed(sim, 1) == [ReadState(entry.index, 7)]


def test_a_single_voter_confirms_at_once() -> None:
    sim = RaftSim(0, (1,))
    sim.elect(1)
    assert sim.raft(1).read_index(1)
    assert sim.raft(1).ready().read_states == (ReadState(sim.raft(1).committed, 1),)


def test_a_cut_off_leader_never_confirms_and_its_reads_go_with_its_office() -> None:
    # NB: no check quorum: the cut-off leader keeps believing it leads
    sim = RaftSim(0, check_quorum=False)
    sim.elect(1)
    sim.isolate(1)
    assert sim.raft(1).read_index(1)
    assert _confirmed(sim, 1) == []
    sim.elect(2)  # the others elect a new leader and commit its entry
    sim.heal()
    sim.tick(2, times=3)  # its heartbeat tells 1 it was succeeded
    assert _confirmed(sim, 1) == []
    assert not sim.raft(1).read_index(2)  # a follower takes no read


def test_a_lost_answer_is_made_good_by_the_next_heartbeat() -> None:
    sim = RaftSim(0)
    sim.elect(1)
    sim.drop = lambda m: m.type is MT.HEARTBEAT_RESP
    assert sim.raft(1).read_index(1)
    assert sim.raft(1).read_index(2)
    assert _confirmed(sim, 1) == []
    sim.drop = None
    sim.tick(1)  # a periodic heartbeat carries the newest read waiting
    assert [r.context for r in _confirmed(sim, 1)] == [1, 2]


def test_a_new_leader_takes_reads_only_once_its_own_entry_committed() -> None:
    sim = RaftSim(0)
    sim.isolate(2)
    sim.isolate(3)
    sim.raft(1).campaign()
    sim.stabilize()
    sim.heal()
    # 1 cannot win alone; without a quorum nobody leads and nothing is confirmed
    assert not sim.raft(1).read_index(1)
    sim.elect(1)
    assert sim.raft(1).read_index(2)


def test_contexts_must_increase() -> None:
    sim = RaftSim(0)
    sim.elect(1)
    sim.isolate(1)
    assert sim.raft(1).read_index(5)
    with pytest.raises(InvalidArgumentError, match="must increase"):
        sim.raft(1).read_index(5)


def test_a_leader_learns_what_every_follower_applied_from_its_heartbeats() -> None:
    sim = RaftSim(0)
    sim.elect(1)
    entry = sim.propose(b"x")
    sim.stabilize()
    assert entry is not None
    assert not sim.raft(1).applied_everywhere(entry.index)  # no heartbeat answered since
    sim.isolate(3)
    sim.tick(1)
    sim.stabilize()
    assert not sim.raft(1).applied_everywhere(entry.index)  # 3 did not answer
    sim.heal()
    sim.tick(1)
    sim.stabilize()
    assert sim.raft(1).applied_everywhere(entry.index)
    assert not sim.raft(2).applied_everywhere(entry.index)  # a follower knows nothing
