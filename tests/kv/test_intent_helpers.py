"""Helper threads take a call now or not at all (see feedkv.kv.helpers)."""

from __future__ import annotations

import threading
from contextvars import ContextVar

import pytest

from feedkv.kv.helpers import Handed, Helpers
from feedkv.testing.waiting import wait_until

_CALLERS: ContextVar[str] = ContextVar("test_helpers_caller", default="no caller")


def _idle_helper(helpers: Helpers, fn: object) -> Handed[object]:
    """``fn`` handed to a helper, once one is idle (the first call starts one)."""
    return wait_until(lambda: helpers.try_start(fn), what="an idle helper")  # type: ignore[arg-type]


def test_a_call_runs_on_an_idle_helper_and_gives_back_its_result() -> None:
    helpers = Helpers(1, "test-helper")
    handed = _idle_helper(helpers, lambda: threading.current_thread().name)
    assert handed.result() == "test-helper-1"


def test_what_a_call_raises_comes_back_to_its_caller() -> None:
    helpers = Helpers(1, "test-helper")

    def fail() -> None:
        raise ValueError("from the helper")

    handed = _idle_helper(helpers, fail)
    with pytest.raises(ValueError, match="from the helper"):
        handed.result()


def test_a_call_never_waits_behind_a_busy_helper() -> None:
    helpers = Helpers(1, "test-helper")
    release = threading.Event()
    busy = _idle_helper(helpers, release.wait)
    assert helpers.try_start(lambda: None) is None  # the caller runs it itself
    release.set()
    assert busy.result() is True
    after = _idle_helper(helpers, lambda: "free again")
    assert after.result() == "free again"


def test_a_call_runs_in_its_callers_context() -> None:
    """As it would on the caller's own thread: a statement's give-up check (a context
    variable) reaches the intents a helper writes for it."""
    helpers = Helpers(1, "test-helper")
    token = _CALLERS.set("the caller's")
    try:
        handed = _idle_helper(helpers, _CALLERS.get)
    finally:
        _CALLERS.reset(token)
    assert handed.result() == "the caller's"
