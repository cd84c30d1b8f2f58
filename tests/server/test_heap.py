"""The node process's startup heap, frozen for the cyclic garbage collector."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from feedkv.server.heap import freeze_startup_heap


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _unfreeze() -> Iterator[None]:
    """Give the test process's heap back to the collector afterwards."""
    try:
        yield
    finally:
        gc.unfreeze()


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
