"""The cluster's range directory: node reports in, lookups out."""

from __future__ import annotations

from feedkv.kv.directory import RangeDirectory
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span


def desc(range_id: int, start: bytes, end: bytes, gen: int, node: int) -> RangeDescriptor:
    return RangeDescriptor(range_id, Span(start, end), gen, replicas=(node,))


def test_lookups_answer_from_every_nodes_report() -> None:
    directory = RangeDirectory()
    directory.report(1, 1, [desc(1, KEY_MIN, b"m", 1, 1)])
    directory.report(2, 1, [desc(2, b"m", KEY_MAX, 1, 2)])

    assert directory.lookup(b"a")[0].lease_holder == 1
    assert directory.lookup(b"x")[0].lease_holder == 2
    assert [d.range_id for d in directory.lookup(b"a", prefetch=5)] == [1, 2]
    assert directory.ranges_of(2) == 1


def test_a_moved_range_is_found_on_its_new_node_before_its_old_node_reports_again() -> None:
    """The newer generation wins where two nodes' reports overlap."""
    directory = RangeDirectory()
    directory.report(1, 1, [desc(1, KEY_MIN, b"m", 1, 1), desc(2, b"m", KEY_MAX, 1, 1)])
    directory.report(2, 1, [desc(2, b"m", KEY_MAX, 2, 2)])

    assert directory.lookup(b"x")[0] == desc(2, b"m", KEY_MAX, 2, 2)
    assert directory.lookup(b"a")[0].lease_holder == 1


def test_an_older_report_is_ignored_and_a_hole_answers_nothing() -> None:
    directory = RangeDirectory()
    assert directory.report(1, 2, [desc(1, KEY_MIN, b"m", 1, 1)])
    assert not directory.report(1, 1, [desc(1, KEY_MIN, KEY_MAX, 0, 1)])

    assert directory.lookup(b"x") == ()
    assert directory.seq(1) == 2 and directory.seq(9) == -1


def test_a_node_holds_the_leases_of_the_ranges_it_is_first_replica_of() -> None:
    directory = RangeDirectory()
    replicated = RangeDescriptor(1, Span(KEY_MIN, b"m"), 1, replicas=(2, 1, 3))
    directory.report(2, 1, [replicated, desc(2, b"m", KEY_MAX, 1, 1)])

    assert [directory.ranges_of(n) for n in (1, 2, 3)] == [2, 1, 1]
    assert [directory.leases_of(n) for n in (1, 2, 3)] == [1, 1, 0]


def test_lease_claims_give_each_range_as_its_newest_lease_holder_reports_it() -> None:
    directory = RangeDirectory()
    old = RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 1, replicas=(1, 2, 3))
    new = RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 1, replicas=(2, 3, 4))
    directory.report(1, 1, [old], {1: 5})  # a dead lease holder's last report
    directory.report(2, 1, [new], {1: 6})
    directory.report(3, 1, [old], {})  # a follower claims no lease

    assert directory.lease_claims() == {1: new}
    assert directory.ranges_of(1) == 0 and directory.ranges_of(4) == 1


def test_a_dead_lease_holders_stale_claim_loses_to_a_survivors_newer_members() -> None:
    """n1 up-replicated its range (each change of members bumps the generation) and died
    before reporting the last change: the survivor's own report, naming every member,
    wins over n1's claim of the lease, so the range is not addressed to n1 alone."""
    directory = RangeDirectory()
    alone = RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 0, replicas=(1,))
    three = RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 4, replicas=(1, 2, 3))
    directory.report(1, 1, [alone], {1: 2})  # n1's last report: the lease, alone
    directory.report(2, 1, [three], {})  # a follower's, as its replica applied it

    assert directory.lookup(b"a") == (three,)
    assert directory.lease_claims() == {1: alone}
