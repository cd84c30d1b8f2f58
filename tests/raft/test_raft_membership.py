"""Membership changes of one replica at a time, and learners."""

from __future__ import annotations

from feedkv.raft.messages import ConfChange, ConfChangeType, ConfState, Message, MessageType
from feedkv.raft.state import Role
from feedkv.testing.raft_sim import RaftSim

ADD, LEARNER, REMOVE = (
    ConfChangeType.ADD_NODE,
    ConfChangeType.ADD_LEARNER,
    ConfChangeType.REMOVE_NODE,
)


def _settle(sim: RaftSim, rounds: int = 5) -> None:
    for _ in range(rounds):
        sim.tick()
        sim.stabilize()


def test_a_new_learner_starts_from_a_snapshot_and_follows_the_log() -> None:
    sim = RaftSim(0)
    sim.elect(1)
    sim.propose(b"before")
    sim.stabilize()
    snaps: list[int] = []
    sim.drop = lambda m: m.type is MessageType.SNAP and snaps.append(m.to) is not None
    sim.add_replica(4)  # empty: no log, no members
    assert sim.propose_conf_change(ConfChange(LEARNER, 4)) is not None
    _settle(sim)
    assert snaps == [4]
    assert sim.raft(1).conf_state() == ConfState((1, 2, 3), (4,))
    assert sim.raft(4).conf_state() == ConfState((1, 2, 3), (4,))
    sim.propose(b"after")
    _settle(sim)
    assert sim.applied_everywhere(b"after")
    assert any(row[2] == b"before" for row in sim.replicas[4].applied)


def test_a_learner_neither_campaigns_nor_counts_toward_quorum() -> None:
    sim = RaftSim(1)
    sim.elect(1)
    sim.add_replica(4)
    sim.propose_conf_change(ConfChange(LEARNER, 4))
    _settle(sim)
    sim.isolate(4)
    sim.tick(4, times=100)
    assert sim.raft(4).role is Role.FOLLOWER
    sim.heal()
    sim.isolate(2)
    sim.isolate(3)
    entry = sim.propose(b"needs a voter")
    _settle(sim, 3)
    assert entry is not None
    assert sim.raft(4).log.last_index() >= entry.index  # the learner has it...
    assert sim.raft(1).committed < entry.index  # ...but only voters make a quorum


def test_a_promoted_learner_votes() -> None:
    sim = RaftSim(2, check_quorum=False)
    sim.elect(1)
    sim.add_replica(4)
    sim.propose_conf_change(ConfChange(LEARNER, 4))
    _settle(sim)
    sim.propose_conf_change(ConfChange(ADD, 4))
    _settle(sim)
    assert sim.raft(4).conf_state() == ConfState((1, 2, 3, 4))
    sim.isolate(1)
    sim.elect(4)
    assert sim.raft(4).role is Role.LEADER


def test_only_one_change_is_pending_at_a_time() -> None:
    sim = RaftSim(3)
    sim.elect(1)
    sim.add_replica(4)
    sim.add_replica(5)
    assert sim.propose_conf_change(ConfChange(LEARNER, 4)) is not None
    assert sim.propose_conf_change(ConfChange(LEARNER, 5)) is None
    _settle(sim)
    assert sim.propose_conf_change(ConfChange(LEARNER, 5)) is not None


def test_a_new_leader_waits_for_changes_it_inherited_to_apply() -> None:
    sim = RaftSim(4, check_quorum=False)
    sim.elect(1)
    sim.drop = lambda m: m.type is MessageType.APP_RESP  # nothing commits
    assert sim.propose_conf_change(ConfChange(REMOVE, 3)) is not None
    sim.stabilize()
    sim.crash(1)
    sim.drop = lambda m: m.type is MessageType.APP  # 2's first entry stays its own
    sim.elect(2)
    assert sim.raft(2).propose_conf_change(ConfChange(LEARNER, 4)) is None
    sim.drop = None
    sim.tick(2)
    sim.stabilize()
    assert sim.raft(2).conf_state().voters == (1, 2)
    assert sim.raft(2).propose_conf_change(ConfChange(LEARNER, 4)) is not None


def test_removing_a_replica_shrinks_the_quorum() -> None:
    sim = RaftSim(5)
    sim.elect(1)
    sim.propose_conf_change(ConfChange(REMOVE, 3))
    _settle(sim)
    assert sim.raft(1).conf_state() == ConfState((1, 2))
    sim.crash(3)
    entry = sim.propose(b"two voters")
    _settle(sim)
    assert entry is not None
    assert sim.raft(2).committed >= entry.index


def test_a_removed_leader_steps_down_and_the_rest_elect_another() -> None:
    sim = RaftSim(6)
    sim.elect(1)
    sim.propose_conf_change(ConfChange(REMOVE, 1))
    sim.stabilize()
    assert sim.raft(1).role is Role.FOLLOWER
    _settle(sim, 40)
    leader = sim.leader()
    assert leader in (2, 3)
    assert sim.raft(leader).conf_state() == ConfState((2, 3))


def test_a_node_added_back_gets_a_new_empty_replica_and_its_old_ids_messages_are_lost() -> None:
    """Replica ids 11-14 on nodes 1-4. Node 2's replica is removed, and node 2 added
    back: as a store does, it holds a new replica (a new id, an empty log) that catches
    up from a snapshot; nothing is sent to the old id."""
    sim = RaftSim(0, (11, 12, 13), spares=(14,), nodes={11: 1, 12: 2, 13: 3, 14: 4})
    sim.elect(11)
    sim.propose_conf_change(ConfChange(LEARNER, 14))
    _settle(sim)
    sim.propose_conf_change(ConfChange(ADD, 14))
    _settle(sim)
    sim.propose_conf_change(ConfChange(REMOVE, 12))
    _settle(sim)
    assert sim.removed == {12}
    sim.propose(b"while node 2 was out")
    _settle(sim)
    new_id = sim.replica_to_add(2)
    assert new_id not in (1, 2, 3, 4, 11, 12, 13, 14) and sim.node_of(new_id) == 2
    assert 12 not in sim.replicas and sim.replica_on(2) is sim.replicas[new_id]
    assert sim.replicas[new_id].applied == []
    sent_to_old: list[Message] = []

    def watch(message: Message) -> bool:
        if message.to == 12:
            sent_to_old.append(message)
        return False  # NB: watched, not dropped

    sim.drop = watch
    sim.propose_conf_change(ConfChange(LEARNER, new_id, context=2))
    _settle(sim)
    assert sim.raft(11).conf_state() == ConfState((11, 13, 14), (new_id,))
    assert any(row[2] == b"while node 2 was out" for row in sim.replicas[new_id].applied)
    assert sent_to_old == []  # nobody addresses the old replica
    assert sim.applied_everywhere(b"while node 2 was out")
