"""Counting the work a call does as the Python function calls it makes, a measure that
does not depend on the machine's speed or load (a test of how work grows with rows
compares two counts, never two durations)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["count_calls"]


def count_calls(run: Callable[[], Any]) -> int:
    """The Python function calls ``run()`` makes on this thread (counted with
    :func:`sys.setprofile`; calls on other threads are not counted)."""
    count = 0

    def profile(_frame: FrameType, event: str, _arg: object) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count
