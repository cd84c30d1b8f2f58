"""Log replication: commit rules, conflict repair, flow control, lost messages."""

from __future__ import annotations

from feedkv.raft.messages import COMMIT_ONLY, Message, MessageType
from feedkv.raft.progress import ProgressState
from feedkv.raft.state import Role
from feedkv.testing.raft_sim import RaftSim

MT = MessageType


def _log_of(sim: RaftSim, node: int) -> list[tuple[int, int, bytes]]:
    log = sim.raft(node).log
    return [(e.index, e.term, e.data) for e in log.slice(log.first_index(), log.last_index() + 1)]


def test_an_entry_commits_once_a_majority_holds_it() -> None:
    sim = RaftSim(0)
    sim.elect(1)
    sim.isolate(3)
    entry = sim.propose(b"two of three")
    sim.stabilize()
    assert entry is not None
    assert sim.raft(1).committed == entry.index
    assert sim.replicas[2].applied[-1][2] == b"two of three"
    sim.isolate(2)
    lonely = sim.propose(b"one of three")
    sim.stabilize()
    assert lonely is not None
    assert sim.raft(1).committed == entry.index  # not on a majority: not committed


def test_a_divergent_uncommitted_tail_is_replaced_by_the_leaders_log() -> None:
    sim = RaftSim(1, check_quorum=False)
    sim.elect(1)
    sim.isolate(1)
    for i in range(5):
        sim.propose(b"lost %d" % i)  # only on 1: never committed
    sim.stabilize()
    sim.elect(2)
    for i in range(3):
        sim.propose(b"kept %d" % i, node=2)
    sim.stabilize()
    sim.heal()
    sim.tick(2)
    sim.stabilize()
    assert sim.raft(1).role is Role.FOLLOWER
    assert _log_of(sim, 1) == _log_of(sim, 2) == _log_of(sim, 3)
    assert not any(row[2].startswith(b"lost") for row in sim.replicas[1].applied)
    assert sim.applied_everywhere(b"kept 2")


def test_an_entry_of_an_earlier_term_does_not_commit_by_counting_replicas() -> None:
    # Figure 8 of the Raft paper, on five replicas. Entry X (term 2) reaches a majority
    # only under a later leader (term 4); were it committed then, replica 5 could still
    # win term 5 and overwrite it. It must wait for an entry of term 4 to commit.
    sim = RaftSim(2, (1, 2, 3, 4, 5), pre_vote=False, check_quorum=False, max_entries_per_message=1)
    sim.elect(1)
    sim.partition({1, 2}, {3}, {4}, {5})
    x = sim.propose(b"X")
    sim.stabilize()
    assert x is not None
    assert sim.raft(1).committed < x.index

    sim.crash(1)
    sim.partition({3, 4, 5}, {1}, {2})
    sim.drop = lambda m: m.sender == 5 and m.type is MT.APP
    sim.elect(5)  # term 3: its empty entry at X's index reaches nobody
    sim.crash(5)
    sim.drop = None

    sim.restart(1)
    sim.partition({1, 2, 3}, {4}, {5})
    sim.raft(1).campaign()  # term 3: replica 3 already voted in it
    sim.stabilize()
    # replica 3 gets X, then nothing more
    sim.drop = lambda m: (
        m.to == 3 and m.index >= x.index and sim.raft(3).log.last_index() >= x.index
    )
    sim.elect(1)  # term 4: X reaches 3, 1's entry of term 4 only 2
    assert sim.raft(1).term == 4
    assert sim.raft(1).prs[3].match == x.index
    assert sim.raft(1).committed < x.index  # X is on 1, 2, 3, and still not committed
    assert not any(row[2] == b"X" for row in sim.replicas[1].applied)

    sim.crash(1)
    sim.drop = None
    sim.restart(5)
    sim.partition({2, 3, 4, 5}, {1})
    sim.raft(5).campaign()  # term 4 is taken
    sim.stabilize()
    sim.elect(5)  # term 5: its entry of term 3 outranks X; 3 and 4 vote for it
    sim.propose(b"after")
    sim.stabilize()
    sim.heal()
    sim.restart(1)
    sim.tick(5)
    sim.stabilize()
    # the checker saw every apply: nobody applied X, everybody applied 5's log
    assert sim.applied_everywhere(b"after")
    assert not any(row[2] == b"X" for r in sim.replicas.values() for row in r.applied)


def test_a_leader_streams_at_most_max_inflight_appends_to_a_follower() -> None:
    sim = RaftSim(3, max_inflight=2, max_entries_per_message=1)
    sim.elect(1)
    leader = sim.raft(1)
    assert leader.prs[2].state is ProgressState.REPLICATE
    acks: list[Message] = []
    sim.drop = lambda m: m.type is MT.APP_RESP and m.sender == 2 and not acks.append(m)
    for i in range(5):
        sim.propose(b"%d" % i)
    sim.stabilize()
    assert len(acks) == 2  # two appends went out, then the pipe was full
    assert leader.prs[2].is_paused()
    sim.drop = None
    for _ in range(3):
        sim.tick(1)  # a heartbeat answer frees one slot: the stream resumes
        sim.stabilize()
    assert sim.applied_everywhere(b"4")


def test_a_lost_append_is_sent_again_after_a_heartbeat() -> None:
    sim = RaftSim(4)
    sim.elect(1)
    sim.drop = lambda m: m.type is MT.APP and m.to == 3
    sim.propose(b"x")
    sim.stabilize()
    assert not any(row[2] == b"x" for row in sim.replicas[3].applied)
    sim.drop = None
    sim.tick(1)
    sim.stabilize()
    assert sim.applied_everywhere(b"x")


def test_heartbeats_carry_the_commit_index_to_followers() -> None:
    sim = RaftSim(5)
    sim.elect(1)
    # the follower gets the entry, but not the append that tells it the entry committed
    appends_to_3 = 0

    def only_the_first_append_to_3(m: Message) -> bool:
        nonlocal appends_to_3
        if m.type is MT.APP and m.to == 3:
            appends_to_3 += 1
            return appends_to_3 > 1
        return False

    sim.drop = only_the_first_append_to_3
    sim.propose(b"x")
    sim.stabilize()
    assert sim.raft(3).log.last_index() == sim.raft(1).committed
    assert sim.raft(3).committed < sim.raft(1).committed
    sim.drop = lambda m: m.type is MT.APP and m.to == 3
    sim.tick(1)
    sim.stabilize()
    assert sim.raft(3).committed == sim.raft(1).committed


def test_a_commit_only_append_to_a_follower_in_step_goes_unanswered() -> None:
    sim = RaftSim(11)
    sim.elect(1)
    sent: list[Message] = []
    sim.drop = lambda m: sent.append(m) is not None  # records, drops nothing
    entry = sim.propose(b"x")
    sim.stabilize()
    assert entry is not None
    assert all(sim.raft(n).committed == entry.index for n in (1, 2, 3))
    commit_only = [m for m in sent if m.type is MT.APP and not m.entries]
    assert {m.to for m in commit_only} == {2, 3}
    assert all(m.context == COMMIT_ONLY and m.commit == entry.index for m in commit_only)
    answers = [m for m in sent if m.type is MT.APP_RESP]
    assert sorted(m.sender for m in answers) == [2, 3]  # the entry's acks, nothing more
    assert all(m.index == entry.index and not m.reject for m in answers)


def test_a_lost_ack_is_recovered_by_a_heartbeat_though_commit_appends_go_unanswered() -> None:
    sim = RaftSim(12)
    sim.elect(1)
    sim.isolate(3)
    sim.drop = lambda m: m.type is MT.APP_RESP and m.sender == 2
    entry = sim.propose(b"x")
    sim.stabilize()
    assert entry is not None
    assert sim.raft(1).committed < entry.index  # its only ack was lost
    sim.drop = None
    sim.tick(1)  # the heartbeat's answer brings an append that is answered
    sim.stabilize()
    assert sim.raft(1).committed == entry.index
    assert sim.raft(2).committed == entry.index


def test_an_empty_append_to_a_probed_follower_is_answered() -> None:
    sim = RaftSim(13, (1, 2, 3, 4, 5))
    sim.elect(1)
    sim.drop = lambda m: (
        (m.type is MT.APP and m.to in (4, 5)) or (m.type is MT.APP_RESP and m.sender == 3)
    )
    entry = sim.propose(b"x")
    sim.stabilize()
    assert entry is not None
    leader = sim.raft(1)
    assert leader.committed < entry.index  # acked by 2 alone
    leader.prs[2].become_probe()  # as after a lost stream; it holds all the leader's log
    sent: list[Message] = []
    sim.drop = lambda m: sent.append(m) is not None  # records, drops nothing
    sim.tick(1)  # 3's heartbeat answer recovers its ack: the entry commits
    sim.stabilize()
    probes = [m for m in sent if m.type is MT.APP and m.to == 2 and not m.entries]
    assert probes and all(m.context != COMMIT_ONLY for m in probes)
    assert any(m.type is MT.APP_RESP and m.sender == 2 for m in sent)
    assert leader.prs[2].state is ProgressState.REPLICATE
    assert sim.applied_everywhere(b"x")


def test_a_crash_loses_what_was_not_persisted_and_the_group_goes_on() -> None:
    sim = RaftSim(6)
    sim.elect(1)
    entry = sim.propose(b"unpersisted")
    assert entry is not None
    sim.crash(1)  # before its Ready was handled: the entry never left it
    sim.restart(1)
    assert sim.raft(1).log.last_index() < entry.index
    for _ in range(40):
        sim.tick()
        sim.stabilize()
    leader = sim.leader()
    assert leader is not None
    sim.propose(b"next")
    sim.stabilize()
    assert sim.applied_everywhere(b"next")
    assert not any(row[2] == b"unpersisted" for r in sim.replicas.values() for row in r.applied)
