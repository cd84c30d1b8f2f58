"""The allocator's one change per range: add to reach the zone's factor, replace gone
nodes' replicas (add first, then remove), never remove into a lost quorum."""

from __future__ import annotations

import itertools
import random

import pytest

from feedkv.kv.placement import (
    AddVoter,
    NodeStates,
    RemoveVoter,
    choose_replica_change,
    quorum,
)


def states(
    live: set[int], gone: frozenset[int] | set[int] = frozenset(), **load: int
) -> NodeStates:
    counts = {int(k[1:]): v for k, v in load.items()}
    return NodeStates(frozenset(live), frozenset(gone), counts)


def test_an_under_replicated_range_gains_a_voter_on_the_least_loaded_live_node() -> None:
    nodes = states({1, 2, 3, 4}, n2=5, n3=1, n4=3)
    assert choose_replica_change([1], 3, 1, nodes) == AddVoter(3)
    assert choose_replica_change([1, 3], 3, 1, nodes) == AddVoter(4)
    assert choose_replica_change([1, 3, 4], 3, 1, nodes) is None


def test_the_factor_is_capped_at_the_nodes_that_can_hold_a_replica() -> None:
    assert choose_replica_change([1, 2], 5, 1, states({1, 2})) is None
    assert choose_replica_change([1, 2], 5, 1, states({1, 2, 3})) == AddVoter(3)


def test_a_dead_voter_not_yet_gone_keeps_its_replica() -> None:
    # n3 killed 10 s ago (dead, not gone before time_until_store_dead): three replicas
    # stay three, so n3 catches up from its log when it returns
    assert choose_replica_change([1, 2, 3], 3, 1, states({1, 2}, n1=3, n2=3, n3=3)) is None
    # gone, it is replaced when a node can take its replica, else removed
    assert choose_replica_change([1, 2, 3], 3, 1, states({1, 2, 4}, gone={3})) == AddVoter(4)
    assert choose_replica_change([1, 2, 3], 3, 1, states({1, 2}, gone={3})) == RemoveVoter(3)


def test_an_over_replicated_range_removes_others_before_its_lease_holder() -> None:
    nodes = states({1, 2, 3}, n2=1, n3=9)
    assert choose_replica_change([1, 2, 3], 1, 1, nodes) == RemoveVoter(3)
    assert choose_replica_change([1, 2], 1, 1, nodes) == RemoveVoter(2)
    assert choose_replica_change([1], 1, 1, nodes) is None


def test_a_gone_replica_is_replaced_first_then_removed() -> None:
    nodes = states({1, 2, 4}, gone={3})
    assert choose_replica_change([1, 2, 3], 3, 1, nodes) == AddVoter(4)
    assert choose_replica_change([1, 2, 3, 4], 3, 1, nodes) == RemoveVoter(3)


def test_a_gone_replica_with_no_replacement_is_removed_down_to_the_usable_nodes() -> None:
    # no spare node: the factor is capped at the usable nodes, and the gone replica goes
    # (the live voters' quorum is the same with or without it)
    assert choose_replica_change([1, 2, 3], 3, 1, states({1, 2, 3, 4}, gone={3, 4})) == (
        RemoveVoter(3)
    )
    assert choose_replica_change([1, 2, 3], 3, 1, states({1, 2}, gone={3})) == RemoveVoter(3)


def test_a_decommissioning_lease_holder_removes_itself_last() -> None:
    nodes = states({1, 2, 3, 4}, gone={1})
    assert choose_replica_change([1, 2, 3], 3, 1, nodes) == AddVoter(4)
    assert choose_replica_change([1, 2, 3, 4], 3, 1, nodes) == RemoveVoter(1)


def test_no_removal_leaves_fewer_live_voters_than_a_quorum() -> None:
    # voters 1..4, 3 and 4 dead (not yet gone), want 3: removing either dead one leaves
    # 1 and 2 live of 3 voters, a quorum; removing a live one would not
    nodes = states({1, 2})
    assert choose_replica_change([1, 2, 3, 4], 3, 1, nodes) in (RemoveVoter(3), RemoveVoter(4))
    # two voters, one dead: removing the live one would leave no quorum
    assert choose_replica_change([1, 2], 1, 2, states({2})) == RemoveVoter(1)
    assert choose_replica_change([1, 2], 1, 1, states({2})) == RemoveVoter(1)


@pytest.mark.parametrize("seed", range(20))
def test_no_change_ever_leaves_a_range_without_a_live_quorum(seed: int) -> None:
    """Random clusters: applying the allocator's changes until it stops never takes a
    range whose live voters were a quorum below one, and ends with ``want`` healthy
    voters whenever enough usable nodes exist."""
    rng = random.Random(seed)
    all_nodes = list(range(1, rng.randint(2, 7) + 1))
    live = {n for n in all_nodes if rng.random() < 0.8} | {all_nodes[0]}
    gone = {n for n in all_nodes if n not in live and rng.random() < 0.5}
    gone |= {n for n in live if n != all_nodes[0] and rng.random() < 0.15}
    voters = rng.sample(all_nodes, rng.randint(1, len(all_nodes)))
    if all_nodes[0] not in voters:
        voters.append(all_nodes[0])
    want = rng.choice([1, 3, 5])
    nodes = NodeStates(frozenset(live), frozenset(gone), {n: rng.randint(0, 9) for n in all_nodes})
    me = all_nodes[0]
    for _ in itertools.count():
        had_quorum = sum(1 for n in voters if n in live) >= quorum(len(voters))
        change = choose_replica_change(voters, want, me, nodes)
        if change is None or (isinstance(change, RemoveVoter) and change.node_id == me):
            break
        if isinstance(change, AddVoter):
            assert change.node_id in live and change.node_id not in gone
            voters.append(change.node_id)
        else:
            voters.remove(change.node_id)
        if had_quorum:
            assert sum(1 for n in voters if n in live) >= quorum(len(voters)), voters
        assert len(voters) <= len(all_nodes)
    usable = [n for n in all_nodes if n in live and n not in gone]
    healthy = [n for n in voters if n not in gone]
    if me not in gone:
        assert len(healthy) >= min(want, len(usable))


def test_a_range_takes_its_tables_zone_and_a_straddling_one_the_most_replicas() -> None:
    from feedkv.kv.placement import ReplicationZones
    from feedkv.kv.range_descriptor import RangeDescriptor
    from feedkv.util.keys import Span

    zones = ReplicationZones(3, ((Span(b"t1/", b"t10"), 1), (Span(b"t2/", b"t20"), 5)))

    def rng(start: bytes, end: bytes) -> RangeDescriptor:
        return RangeDescriptor(1, Span(start, end), 1, replicas=(1,))

    assert zones.replicas_for(rng(b"t1/", b"t10")) == 1
    assert zones.replicas_for(rng(b"t1/a", b"t1/b")) == 1
    assert zones.replicas_for(rng(b"a", b"b")) == 3
    assert zones.replicas_for(rng(b"t1/", b"t2")) == 3  # part of it is in the default zone
    assert zones.replicas_for(rng(b"t10", b"t30")) == 5


def test_a_leaving_lease_holder_hands_its_lease_to_a_live_staying_voter() -> None:
    from feedkv.kv.placement import choose_lease_target

    nodes = states({1, 2, 3, 4}, gone={1, 3}, n2=7, n4=2)
    assert choose_lease_target([1, 2, 3, 4], 1, nodes) == 4
    assert choose_lease_target([1, 3], 1, nodes) is None
    assert choose_lease_target([1, 2, 5], 1, nodes) == 2  # n5 is not live


def test_a_lease_goes_to_the_most_caught_up_voter_never_to_one_awaiting_a_snapshot() -> None:
    from feedkv.kv.placement import choose_lease_target

    nodes = states({1, 2, 3, 4}, n2=0, n3=5, n4=9)
    # n2 holds the fewest replicas, but lacks entries n3 and n4 hold
    assert choose_lease_target([1, 2, 3, 4], 1, nodes, {2: 40, 3: 0, 4: 0}) == 3
    assert choose_lease_target([1, 2, 3, 4], 1, nodes, {2: 40, 3: 2, 4: 0}) == 4
    # a voter waiting for a snapshot takes none, however caught up the others are
    assert choose_lease_target([1, 2, 3, 4], 1, nodes, {2: None, 3: 7, 4: 9}) == 3
    assert choose_lease_target([1, 2], 1, nodes, {2: None}) is None
    # a voter the leader knows nothing of counts as caught up; no news: by load
    assert choose_lease_target([1, 2, 3], 1, nodes, {3: 0}) == 2
    assert choose_lease_target([1, 2, 3], 1, nodes, {}) == 2


def test_a_lease_on_its_way_keeps_its_target_while_none_is_far_more_caught_up() -> None:
    """The drain asks again each round: a second target would campaign too."""
    from feedkv.kv.placement import choose_lease_target

    nodes = states({1, 2, 3}, n2=0, n3=5)
    assert choose_lease_target([1, 2, 3], 1, nodes, {2: 0, 3: 0}, prefer=3) == 3
    # writes in flight: it lacks an entry or two the other holds, as the next round may
    # see the other way round
    assert choose_lease_target([1, 2, 3], 1, nodes, {2: 0, 3: 2}, prefer=3) == 3
    assert choose_lease_target([1, 2, 3], 1, nodes, {2: 0, 3: 40}, prefer=3) == 2
    assert choose_lease_target([1, 2, 3], 1, nodes, {2: 0, 3: 0}, prefer=None) == 2


def test_a_draining_node_takes_no_lease_and_no_new_replica_but_keeps_its_own() -> None:
    from feedkv.kv.placement import choose_lease_target

    nodes = NodeStates(frozenset({1, 2, 3, 4}), frozenset(), {2: 0, 3: 5, 4: 9}, frozenset({2}))
    # the lease holder n1 drains or leaves: its lease skips n2 (the least loaded)
    assert choose_lease_target([1, 2, 3], 1, nodes) == 3
    assert choose_lease_target([1, 2], 1, nodes) is None  # nothing to hand it to
    # a new replica goes past n2 too, but n2's replica stays (it restarts soon)
    assert choose_replica_change([1, 3], 3, 1, nodes) == AddVoter(4)
    assert choose_replica_change([1, 2, 3], 3, 1, nodes) is None
    alone = NodeStates(frozenset({1, 2}), frozenset(), {}, frozenset({2}))
    assert choose_replica_change([1], 3, 1, alone) is None
