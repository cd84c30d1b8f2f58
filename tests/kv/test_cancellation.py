"""Giving up on a batch (see feedkv.kv.cancellation): the node's calls by token, and a
client's watch over the calls it waits on."""

from __future__ import annotations

import threading

import pytest

from feedkv.errors import RequestCanceledError
from feedkv.kv.cancellation import GIVE_UP, CallCancels, GiveUpWatch, check_given_up
from feedkv.testing.waiting import wait_until


def _gave_up() -> None:
    raise RequestCanceledError("the caller gave up")


def _broken() -> None:
    raise ValueError("a broken check")


def test_the_watch_cancels_the_calls_whose_callers_gave_up_and_no_other() -> None:
    cancelled: list[bytes] = []
    asked = threading.Event()
    watch = GiveUpWatch(cancelled.append, interval_s=0.01)
    try:
        watch.watch(b"stays", asked.set)
        watch.watch(b"gave up", _gave_up)
        wait_until(lambda: b"gave up" in cancelled and asked.is_set(), what="a watch")
        assert b"stays" not in cancelled
        watch.unwatch(b"gave up")
        watch.unwatch(b"stays")
        # the thread waits for calls again, and wakes for the next one (a check that
        # raises anything has given up)
        watch.watch(b"later", _broken)
        wait_until(lambda: b"later" in cancelled, what="the next call's cancel")
    finally:
        watch.close()


def test_a_cancelled_token_gives_its_call_a_check_that_raises() -> None:
    cancels = CallCancels()
    seen: list[bool] = []

    def call() -> str:
        seen.append(cancels.cancel(b"t"))  # the client gave up while the call runs
        with pytest.raises(RequestCanceledError):
            check_given_up()
        return "answered"

    assert cancels.run(b"t", call) == "answered"  # the node still answers
    assert seen == [True]
    assert cancels.cancel(b"t") is False  # ended: a late cancel finds nothing
    assert GIVE_UP.get() is None
