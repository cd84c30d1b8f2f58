"""The node process's startup heap, frozen for the cyclic garbage collector, and the
collector's young-generation threshold, raised by every node."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv.server.heap import YOUNG_THRESHOLD, freeze_startup_heap, raise_young_threshold


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _unfreeze() -> Iterator[None]:
    """Give the test process's heap back to the collector afterwards, with the
    thresholds it had."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_full_collections_skip_the_startup_heap() -> None:
    kept = _Cycle()
    # NB: not compared with gc.get_freeze_count() after: a frozen object another
    # thread lets go of leaves the permanent generation
    assert freeze_startup_heap() > 0
    gc.collect()
    assert all(o is not kept for o in gc.get_objects())  # NB: not in any generation


def test_cycles_made_after_the_freeze_are_still_collected() -> None:
    freeze_startup_heap()
    made_after = _Cycle()
    gone = weakref.ref(made_after)
    del made_after
    gc.collect()
    assert gone() is None


def test_the_garbage_startup_left_is_collected_not_frozen() -> None:
    left = _Cycle()
    gone = weakref.ref(left)
    del left
    freeze_startup_heap()
    assert gone() is None


def test_an_embedded_node_raises_the_young_threshold_and_keeps_the_older_ones(
    tmp_path: Path,
) -> None:
    gc.set_threshold(700, 11, 12)
    with feedkv.connect(tmp_path / "s"):
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 11, 12)


@pytest.mark.parametrize("young", [0, YOUNG_THRESHOLD + 1])
def test_a_higher_young_threshold_or_a_collector_turned_off_is_kept(young: int) -> None:
    gc.set_threshold(young, 10, 10)
    raise_young_threshold()
    assert gc.get_threshold() == (young, 10, 10)
