"""How ``make test`` spreads the suite over its workers (pytest-xdist, ``--dist
loadgroup``), which take tests in collection order:

- the slow tests first, longest first: a test marked ``slow(seconds)`` (about how long
  it runs alone) starts at once on a worker of its own, and the rest of the suite runs
  beside it instead of after it;
- the tests on the shared in-process Spark session (the ``spark`` fixture) are marked
  for one worker (``xdist_group("spark")``), which starts one Spark, not one per
  worker. NB: pytest-xdist 3.8.0 applies no group under pytest 9.2 (it writes the group
  into a field pytest no longer reads, pytest-dev/pytest-xdist#1386), hence pytest 9.1.1
  in pyproject.toml; tests/test_xdist_groups.py fails when the groups are lost again.
  The tests of three-node clusters are marked ``xdist_group("cluster")`` in their
  modules: one such cluster at a time, not one on each worker of two cores.

Soak tests (marked ``soak``: long kill runs, such as the 20-kill nemesis of a cluster)
are skipped unless pytest is given ``--soak``; the suite runs their bounded versions.

Property tests (hypothesis) run without a per-example deadline: a deadline is a timed
assertion, and on a loaded machine a correct example can take longer than any bound."""

from __future__ import annotations

import pytest
from hypothesis import settings

settings.register_profile("feedkv", deadline=None)
settings.load_profile("feedkv")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="also run the soak tests (marked soak)")


@pytest.hookimpl(tryfirst=True)  # NB: before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--soak"):
        skip = pytest.mark.skip(reason="a soak test: run with --soak")
        for item in items:
            if item.get_closest_marker("soak") is not None:
                item.add_marker(skip)

    def key(item: pytest.Item) -> tuple[bool, float]:
        mark = item.get_closest_marker("slow")
        return item.get_closest_marker("isolated") is None, -mark.args[0] if mark else 0.0

    items.sort(key=key)  # NB: stable: the others keep their order
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))
