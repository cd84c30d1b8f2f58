"""Where ranges should live: the rebalancer's decision, pure.

Each node decides for itself, from the range directory and liveness (so no two nodes
move one range): when it holds at least two ranges more than the live node holding the
fewest, it moves one of its ranges there (the smallest, so moves are cheap). Moving one
range at a time per node, and only while the gap is two or more, makes the counts
converge without a range bouncing back and forth. Ranges of dead nodes count for them
(their data is there) but no range moves to a dead node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from feedkv.kv.range_descriptor import RangeDescriptor

__all__ = ["choose_move"]


def choose_move(
    me: int,
    mine: Sequence[RangeDescriptor],
    counts: dict[int, int],
    live: Iterable[int],
    size: Callable[[RangeDescriptor], int] = lambda desc: 0,
) -> tuple[RangeDescriptor, int] | None:
    """The range of this node (``me``, holding ``mine``) to move and the node to move it
    to, or ``None``. ``counts``: ranges per node as the directory knows them."""
    targets = [n for n in live if n != me]
    if not mine or not targets:
        return None
    target = min(targets, key=lambda n: (counts.get(n, 0), n))
    if len(mine) - counts.get(target, 0) < 2:
        return None
    return min(mine, key=lambda d: (size(d), d.range_id)), target
