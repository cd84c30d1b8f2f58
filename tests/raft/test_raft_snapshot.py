"""Compaction, and snapshots for replicas that fell behind it."""

from __future__ import annotations

from feedkv.raft.messages import Message, MessageType
from feedkv.raft.progress import ProgressState
from feedkv.testing.raft_sim import RaftSim

MT = MessageType


def _lagging_follower(seed: int) -> RaftSim:
    """Replica 3 was cut off while the leader (1) committed 20 entries and compacted."""
    sim = RaftSim(seed)
    sim.elect(1)
    sim.isolate(3)
    for i in range(20):
        sim.propose(b"%d" % i)
        sim.stabilize()
    sim.compact(1)
    sim.compact(2)
    assert sim.raft(1).log.first_index() > sim.raft(3).log.last_index() + 1
    return sim


def test_a_follower_behind_the_compacted_log_gets_a_snapshot() -> None:
    sim = _lagging_follower(0)
    snaps: list[Message] = []
    sim.drop = lambda m: m.type is MT.SNAP and snaps.append(m) is not None
    sim.heal()
    for _ in range(3):
        sim.tick(1)
        sim.stabilize()
    assert len(snaps) == 1
    assert snaps[0].snapshot is not None
    assert sim.raft(3).log.first_index() == snaps[0].snapshot.meta.index + 1
    assert sim.replicas[3].applied == sim.replicas[1].applied
    assert sim.raft(1).prs[3].state is ProgressState.REPLICATE
    sim.propose(b"next")
    sim.stabilize()
    assert sim.applied_everywhere(b"next")


def test_a_failed_snapshot_is_sent_again() -> None:
    sim = _lagging_follower(1)
    failures = 0

    def lose_the_first_snapshot(m: Message) -> bool:
        nonlocal failures
        if m.type is MT.SNAP and failures == 0:
            failures += 1
            return True
        return False

    sim.drop = lose_the_first_snapshot
    sim.heal()
    sim.tick(1)
    sim.stabilize()  # the loss is reported: the leader probes again
    assert failures == 1
    assert sim.raft(1).prs[3].state is ProgressState.PROBE
    for _ in range(3):
        sim.tick(1)
        sim.stabilize()
    assert sim.replicas[3].applied == sim.replicas[1].applied


def test_a_replica_restarts_from_its_snapshot_and_log() -> None:
    sim = _lagging_follower(2)
    applied = sim.replicas[1].applied_index
    sim.crash(1)
    sim.restart(1)
    assert sim.raft(1).applied == applied
    assert sim.raft(1).log.first_index() == applied + 1
    sim.heal()
    for _ in range(40):
        sim.tick()
        sim.stabilize()
    sim.propose(b"after restart")
    sim.stabilize()
    assert sim.applied_everywhere(b"after restart")
