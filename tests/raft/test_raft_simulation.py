"""Hundreds of seeded schedules of a Raft group under loss, duplication, reordering,
delays, partitions, crashes that lose unpersisted state, and compactions.

The :class:`~feedkv.testing.raft_sim.SafetyChecker` checks election safety, log
matching, leader completeness and state machine safety at every Ready; a violation
raises. After the chaos, the network heals and every replica restarts: a leader must be
elected and a new proposal applied on every replica within a bounded time (liveness).
A failing seed replays exactly: run it alone with ``-k "seed-N"``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from feedkv.raft.state import Role
from feedkv.testing.raft_sim import Faults, RaftSim

CHAOS_ROUNDS = 300
HEAL_ROUNDS = 300


def _sim(seed: int, nodes: tuple[int, ...], spares: tuple[int, ...] = (), **kw: Any) -> RaftSim:
    """A group on ``nodes`` (and empty replicas on ``spares``) whose replica ids are two
    above their nodes' ids, as a store's replica ids are not its node's: a node id taken
    for a replica id names another replica, or none."""
    ids = {node: node + 2 for node in (*nodes, *spares)}
    return RaftSim(
        seed,
        [ids[n] for n in nodes],
        spares=[ids[n] for n in spares],
        nodes={r: n for n, r in ids.items()},
        **kw,
    )


def _heal_and_commit(sim: RaftSim, data: bytes) -> int:
    """Heal, restart everyone, turn faults off; rounds until a leader leads and
    ``data`` is applied on every member (proposing again whenever it is dropped)."""
    sim.heal()
    for replica in sim.replicas.values():
        if not replica.alive:
            sim.restart(replica.id)
    sim.faults = Faults()
    for rounds in range(1, HEAL_ROUNDS + 1):
        proposed = any(row[2] == data for r in sim.replicas.values() for row in r.applied)
        if not proposed and rounds % 20 == 1:
            sim.propose(data)
        sim.round(propose=0.0)
        if sim.leader() is not None and sim.applied_everywhere(data):
            return rounds
    leaders = {r.id: (r.raft.role.value, r.raft.term) for r in sim.live() if r.raft}
    raise AssertionError(
        f"{data!r} not applied everywhere {HEAL_ROUNDS} rounds after healing; {leaders}"
    )


def _run(seed: int, ids: tuple[int, ...], faults: Faults) -> RaftSim:
    sim = _sim(seed, ids, faults=faults)
    for _ in range(CHAOS_ROUNDS):
        sim.round()
    _heal_and_commit(sim, b"final")
    return sim


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(300)])
def test_three_replicas_stay_safe_and_recover_under_chaos(seed: int) -> None:
    sim = _run(seed, (1, 2, 3), Faults.chaos())
    assert sim.checker.leaders, "no leader was ever elected"


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(50)])
def test_five_replicas_stay_safe_and_recover_under_chaos(seed: int) -> None:
    sim = _run(seed, (1, 2, 3, 4, 5), Faults.chaos())
    assert len(sim.checker.applied) > 1


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(100)])
def test_membership_changes_and_transfers_stay_safe_under_chaos(seed: int) -> None:
    # three voters and two spare replicas; the leader adds learners, promotes them,
    # removes voters (keeping three) and hands leadership over, all under the chaos
    faults = replace(Faults.chaos(), conf_change=0.05, transfer=0.01)
    sim = _sim(seed, (1, 2, 3), spares=(4, 5), faults=faults)
    for _ in range(CHAOS_ROUNDS):
        sim.round()
    _heal_and_commit(sim, b"final")
    leader = sim.leader()
    assert leader is not None
    assert len(sim.raft(leader).conf_state().voters) >= 3


@pytest.mark.parametrize("seed", range(20))
def test_a_quiet_network_commits_every_proposal(seed: int) -> None:
    sim = _sim(seed, (1, 2, 3))
    for _ in range(60):
        sim.round(propose=0.5)
    leader = sim.leader()
    assert leader is not None
    assert sim.raft(leader).role is Role.LEADER
    # every proposal on a stable leader commits: the applied log is dense and shared
    for replica in sim.replicas.values():
        assert [row[0] for row in replica.applied] == list(range(2, replica.applied_index + 1))
    assert len({r.applied_index for r in sim.replicas.values()}) <= 2


SOAK_SEEDS = 3000


@pytest.mark.soak
def test_thousands_of_seeds_stay_safe_and_recover_under_chaos() -> None:
    """The chaos above, with membership changes and leader transfers, over thousands of
    seeds (``pytest --soak``); a failure names its seed, which replays alone."""
    faults = replace(Faults.chaos(), conf_change=0.05, transfer=0.01)
    for seed in range(1000, 1000 + SOAK_SEEDS):
        try:
            sim = _sim(seed, (1, 2, 3), spares=(4, 5), faults=faults)
            for _ in range(CHAOS_ROUNDS):
                sim.round()
            _heal_and_commit(sim, b"final")
        except Exception as exc:
            raise AssertionError(f"seed {seed}: {exc!r}") from exc


@pytest.mark.parametrize("check_quorum", [True, False], ids=["check-quorum", "no-check-quorum"])
@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(100)])
def test_reads_confirmed_under_chaos_are_never_stale(seed: int, check_quorum: bool) -> None:
    # reads asked of any replica, leader or not, while leaders come and go (without
    # check quorum a cut-off leader goes on believing it leads): the checker fails a
    # read confirmed at a commit index below one committed when it was asked for
    faults = replace(Faults.chaos(), partition=0.1, heal=0.03, transfer=0.02)
    sim = _sim(seed, (1, 2, 3), faults=faults, check_quorum=check_quorum)
    for _ in range(CHAOS_ROUNDS):
        sim.round(read=0.5)
    _heal_and_commit(sim, b"final")
    confirmed = sim.checker.confirmed
    assert sim.read()  # healed, the leader confirms a read again
    for _ in range(HEAL_ROUNDS):
        sim.round(propose=0.0, read=0.0)
        if sim.checker.confirmed > confirmed:
            return
    raise AssertionError(f"no read confirmed {HEAL_ROUNDS} rounds after healing")


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(100)])
def test_lease_reads_under_chaos_are_never_stale(seed: int) -> None:
    # leader leases: a leader confirms reads without a heartbeat round while a quorum
    # answered one recently; partitions, crashes and restarts, late clocks and leader
    # transfers must never let a deposed leader confirm one
    faults = replace(Faults.chaos(), partition=0.1, heal=0.03, transfer=0.02)
    sim = _sim(seed, (1, 2, 3), faults=faults, lease_margin=3)
    for _ in range(CHAOS_ROUNDS):
        sim.round(read=0.5)
    _heal_and_commit(sim, b"final")
    confirmed = sim.checker.confirmed
    assert sim.read()
    sim.stabilize()
    assert sim.checker.confirmed > confirmed  # NB: with any still pending from the chaos
