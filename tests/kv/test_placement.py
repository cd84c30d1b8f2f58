"""The rebalancer's decision: even out range counts, one move at a time; and the range
counts a node reports as CockroachDB's store metrics."""

from __future__ import annotations

from feedkv.kv.placement import RangeCounts, choose_move, range_counts
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.util.keys import Span


def ranges(n: int, node: int) -> list[RangeDescriptor]:
    return [
        RangeDescriptor(
            node * 100 + i, Span(b"%d/%d" % (node, i), b"%d/%da" % (node, i)), 1, replicas=(node,)
        )
        for i in range(n)
    ]


def test_a_node_with_two_more_ranges_than_the_emptiest_moves_its_smallest_there() -> None:
    mine = ranges(4, 1)
    sizes = {d.range_id: 10 - i for i, d in enumerate(mine)}

    move = choose_move(1, mine, {1: 4, 2: 3, 3: 1}, [1, 2, 3], lambda d: sizes[d.range_id])

    assert move == (mine[-1], 3)


def test_counts_within_one_stay_put_and_nothing_moves_to_a_dead_node() -> None:
    assert choose_move(1, ranges(3, 1), {1: 3, 2: 2, 3: 2}, [1, 2, 3]) is None
    assert choose_move(1, ranges(3, 1), {1: 3, 2: 3, 3: 0}, [1, 2]) is None  # n3 is dead
    assert choose_move(1, [], {}, [1, 2]) is None
    assert choose_move(1, ranges(5, 1), {1: 5}, [1]) is None  # alone


def test_repeated_decisions_converge_to_an_even_spread() -> None:
    held = {1: ranges(9, 1), 2: [], 3: []}
    for _round in range(20):
        for node in (1, 2, 3):
            counts = {n: len(rs) for n, rs in held.items()}
            move = choose_move(node, held[node], counts, [1, 2, 3])
            if move is not None:
                desc, target = move
                held[node].remove(desc)
                held[target].append(desc)
    assert sorted(len(rs) for rs in held.values()) == [3, 3, 3]


def _desc(range_id: int, *replicas: int) -> RangeDescriptor:
    return RangeDescriptor(
        range_id, Span(b"r%d" % range_id, b"r%da" % range_id), 1, replicas=replicas
    )


def test_each_range_is_counted_by_its_lease_holder_or_first_live_replica() -> None:
    healthy = _desc(1, 1, 2, 3)  # n1 holds its lease
    elsewhere = _desc(2, 2, 1, 3)  # n2 holds it, live
    orphaned = _desc(3, 3, 1, 2)  # n3 claims it, dead: n1 is its first live replica
    lost = _desc(4, 3, 2, 1)  # n2 and n3 dead: one live replica of three
    descs = [healthy, elsewhere, orphaned, lost]
    claims = {1: 1, 2: 2, 3: 3, 4: 3}

    def counts(me: int, live: frozenset[int], want: int = 3) -> RangeCounts:
        return range_counts(descs, me, lambda d: claims[d.range_id] == me and me in live,
                            claims, live, lambda d: want)  # fmt: skip

    assert counts(1, frozenset({1, 2, 3})) == RangeCounts(4, 1, 1, 0, 0)
    assert counts(2, frozenset({1, 2, 3})) == RangeCounts(4, 1, 1, 0, 0)
    # n3 dead: range 3 and 4 move to their first live replicas' counts
    assert counts(1, frozenset({1, 2})) == RangeCounts(4, 1, 2, 0, 2)
    assert counts(2, frozenset({1, 2})) == RangeCounts(4, 1, 2, 0, 2)
    # n2 dead too: n1 counts every range, each with one live replica of three
    assert counts(1, frozenset({1})) == RangeCounts(4, 1, 4, 4, 4)
    # a factor of one: nothing under-replicated while a replica lives
    assert counts(1, frozenset({1}), want=1).underreplicated == 0
