"""The rebalancer's decision: even out range counts, one move at a time."""

from __future__ import annotations

from feedkv.kv.placement import choose_move
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
