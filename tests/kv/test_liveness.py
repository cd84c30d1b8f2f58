"""Node liveness and clock offsets, fed by heartbeats (pure: times passed in)."""

from __future__ import annotations

from feedkv.kv.liveness import Liveness, NodeDescriptor

S = 1_000_000_000


def test_a_node_not_heard_from_within_the_bound_is_dead() -> None:
    liveness = Liveness(NodeDescriptor(1, "a:1", 1), dead_after_ns=9 * S)
    liveness.heard(NodeDescriptor(2, "b:1", 1), at_ns=100 * S)

    assert liveness.is_live(2, 109 * S)
    assert not liveness.is_live(2, 110 * S)
    assert liveness.is_live(1, 10**6 * S)  # itself
    assert not liveness.is_live(3, 100 * S)  # never heard of


def test_a_restarted_node_replaces_its_address_with_its_new_epoch() -> None:
    liveness = Liveness(NodeDescriptor(1, "a:1", 1))
    assert liveness.learn(NodeDescriptor(2, "b:1", 1))
    assert not liveness.learn(NodeDescriptor(2, "stale:1", 1))
    assert liveness.learn(NodeDescriptor(2, "b:2", 2))

    assert liveness.address(2) == "b:2"
    assert [d.node_id for d in liveness.peers()] == [2]


def test_a_nodes_sql_address_opened_after_its_start_replaces_none_and_stays() -> None:
    """Within an epoch the descriptor naming the SQL port wins, whichever order gossip
    brings the two in (a third node may relay the older one late)."""
    liveness = Liveness(NodeDescriptor(1, "a:1", 1))
    assert liveness.learn(NodeDescriptor(2, "b:1", 1))
    assert liveness.learn(NodeDescriptor(2, "b:1", 1, sql_address="b:2"))
    assert not liveness.learn(NodeDescriptor(2, "b:1", 1))
    assert not liveness.learn(NodeDescriptor(2, "b:1", 1, sql_address="b:2"))
    [peer] = liveness.peers()
    assert peer.sql_address == "b:2"


def test_a_nodes_drain_is_news_within_its_life_and_a_restart_forgets_it() -> None:
    """A draining node's descriptor replaces its earlier one (a relayed copy from before
    the drain does not undo it); its next life starts undrained."""
    liveness = Liveness(NodeDescriptor(1, "a:1", 1))
    assert liveness.learn(NodeDescriptor(2, "b:1", 1, sql_address="b:2"))
    assert liveness.learn(NodeDescriptor(2, "b:1", 1, sql_address="b:2", draining=True))
    assert not liveness.learn(NodeDescriptor(2, "b:1", 1, sql_address="b:2"))
    assert not liveness.learn(NodeDescriptor(2, "b:1", 1, draining=True))  # forgets the port
    assert liveness.draining() == {2}
    [peer] = liveness.peers()
    assert peer.sql_address == "b:2"
    assert liveness.learn(NodeDescriptor(2, "b:1", 2))
    assert liveness.draining() == set()


def test_a_clock_far_from_the_majority_refuses_with_the_reason() -> None:
    liveness = Liveness(NodeDescriptor(1, "a:1", 1), max_offset_ns=S // 2)
    liveness.heard(NodeDescriptor(2, "b:1", 1), at_ns=S, offset_ns=800_000_000)
    liveness.heard(NodeDescriptor(3, "c:1", 1), at_ns=S, offset_ns=10_000_000)
    assert liveness.offset_error(S) is None  # one of two is far: not a majority

    liveness.heard(NodeDescriptor(3, "c:1", 1), at_ns=S, offset_ns=700_000_000)
    error = liveness.offset_error(S)
    assert error is not None and "800 ms behind node n2" in error


def test_an_offset_within_its_measures_uncertainty_of_the_bound_is_no_refusal() -> None:
    # a slow heartbeat (a loaded machine: 2 s round trips) measures an offset known only
    # to half its round trip, as CockroachDB's clock monitor counts it
    liveness = Liveness(NodeDescriptor(1, "a:1", 1), max_offset_ns=S // 2)
    liveness.heard(NodeDescriptor(2, "b:1", 1), at_ns=S, offset_ns=800_000_000, uncertainty_ns=S)
    liveness.heard(NodeDescriptor(3, "c:1", 1), at_ns=S, offset_ns=-900_000_000, uncertainty_ns=S)
    assert liveness.offset_error(S) is None
    assert [s.offset_ns for s in liveness.status(S)] == [None, 800_000_000, -900_000_000]

    # measured more precisely, the same offsets are surely beyond the bound
    liveness.heard(NodeDescriptor(2, "b:1", 1), at_ns=S, offset_ns=800_000_000, uncertainty_ns=0)
    liveness.heard(
        NodeDescriptor(3, "c:1", 1), at_ns=S, offset_ns=-900_000_000, uncertainty_ns=S // 10
    )
    error = liveness.offset_error(S)
    assert error is not None and "900 ms ahead of node n3" in error
    assert "serves again once it is within the maximum offset" in error


def test_dead_for_longer_than_a_threshold_counts_from_the_last_heartbeat_or_the_start() -> None:
    liveness = Liveness(NodeDescriptor(1, "a:1", 1), dead_after_ns=9 * S, started_ns=100 * S)
    liveness.heard(NodeDescriptor(2, "b:1", 1), at_ns=120 * S)
    liveness.learn(NodeDescriptor(3, "c:1", 1))  # known, never heard since this start

    assert liveness.dead_for_longer_than(60 * S, 160 * S) == set()
    assert liveness.dead_for_longer_than(60 * S, 161 * S) == {3}
    assert liveness.dead_for_longer_than(60 * S, 181 * S) == {2, 3}
    # never below the liveness bound: a node that is still live is not dead
    assert liveness.dead_for_longer_than(1 * S, 125 * S) == {3}
