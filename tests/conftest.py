"""Suite-wide ordering: the slow tests first, longest first.

``make test`` runs the suite on several workers (pytest-xdist), which hand out tests in
collection order. A test marked ``slow(seconds)`` (about how long it runs alone) starts
at once on a worker of its own, and the rest of the suite runs beside it instead of
after it."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def key(item: pytest.Item) -> float:
        mark = item.get_closest_marker("slow")
        return -mark.args[0] if mark is not None else 0.0

    items.sort(key=key)  # NB: stable: the others keep their order
