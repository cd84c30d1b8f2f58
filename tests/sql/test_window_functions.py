"""window_functions: frames and window functions over one partition, without a store."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv.sql.expr import Context
from feedkv.sql.window_functions import DEFAULT_FRAME, Frame, Function, Partition


def partition(values: list[Any], peers: list[tuple[int, int]] | None = None) -> Partition:
    """Rows of one column, each its own peer unless ``peers`` says otherwise."""
    return Partition([(v,) for v in values], peers or [(i, i) for i in range(len(values))])


def column(env: Any, ctx: Context) -> Any:
    return env[0]


def constant(value: Any) -> Any:
    return lambda env, ctx: value


def run(name: str, args: list[Any], part: Partition, frame: Frame = DEFAULT_FRAME) -> list[Any]:
    return Function(name, args, None, frame).values(part, Context())


def test_range_frames_move_peers_together() -> None:
    peers = [(0, 0), (1, 2), (1, 2), (3, 3)]
    assert [DEFAULT_FRAME.bounds(p, peers[p], 4) for p in range(4)] == [
        (0, 0),
        (0, 2),
        (0, 2),
        (0, 3),
    ]
    rows = Frame(True, ("unbounded", 0), ("current", 0))
    assert [rows.bounds(p, peers[p], 4) for p in range(4)] == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_row_offsets_stop_at_the_partition_edges() -> None:
    frame = Frame(True, ("preceding", 2), ("following", 1))
    assert [frame.bounds(p, (p, p), 4) for p in range(4)] == [(0, 1), (0, 2), (0, 3), (1, 3)]


@pytest.mark.parametrize(
    ("rows", "buckets", "expected"),
    [
        (6, 4, [1, 1, 2, 2, 3, 4]),
        (3, 5, [1, 2, 3]),
        (4, 2, [1, 1, 2, 2]),
    ],
)
def test_ntile_makes_the_first_buckets_one_row_larger(
    rows: int, buckets: int, expected: list[int]
) -> None:
    assert run("ntile", [constant(buckets)], partition(list(range(rows)))) == expected


def test_ranks_of_peers() -> None:
    part = partition([1, 2, 2, 3], [(0, 0), (1, 2), (1, 2), (3, 3)])
    assert run("rank", [], part) == [1, 2, 2, 4]
    assert run("dense_rank", [], part) == [1, 2, 2, 3]
    assert run("row_number", [], part) == [1, 2, 3, 4]
    assert run("percent_rank", [], part) == [0.0, 1 / 3, 1 / 3, 1.0]
    assert run("cume_dist", [], part) == [0.25, 0.75, 0.75, 1.0]


def test_lag_and_lead_take_an_offset_and_a_default() -> None:
    part = partition([10, 20, 30])
    assert run("lag", [column], part) == [None, 10, 20]
    assert run("lead", [column, constant(2), constant(-1)], part) == [30, -1, -1]
    assert run("lag", [column, constant(None)], part) == [None, None, None]


def test_last_value_with_the_default_frame_is_the_last_peer() -> None:
    part = partition([1, 2, 3], [(0, 1), (0, 1), (2, 2)])
    assert run("last_value", [column], part) == [2, 2, 3]
    assert run("nth_value", [column, constant(3)], part) == [None, None, 3]
