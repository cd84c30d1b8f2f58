"""How ``make test`` spreads the suite over its workers (pytest-xdist, ``--dist
loadgroup``), which take tests in collection order:

- the slow tests first, longest first: a test marked ``slow(seconds)`` (about how long
  it runs alone) starts at once on a worker of its own, and the rest of the suite runs
  beside it instead of after it;
- the tests on the shared in-process Spark session (the ``spark`` fixture) on one worker,
  which so starts one Spark, not one per worker: on two cores, JVMs starting at once
  hold each other back."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # NB: before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def key(item: pytest.Item) -> float:
        mark = item.get_closest_marker("slow")
        return -mark.args[0] if mark is not None else 0.0

    items.sort(key=key)  # NB: stable: the others keep their order
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))
