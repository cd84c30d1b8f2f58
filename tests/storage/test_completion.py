"""Completion: the one-lock future the commit thread completes, and its done callbacks."""

from __future__ import annotations

import threading

import pytest

from feedkv.storage.engine import Completion


def test_a_callback_added_before_completion_runs_once_when_it_completes() -> None:
    done: Completion[int] = Completion()
    calls: list[int] = []
    done.add_done_callback(lambda: calls.append(done.result()))
    assert calls == []
    done.set_result(7)
    assert calls == [7]


def test_a_callback_added_after_completion_runs_at_once() -> None:
    done = Completion.failed(ValueError("no"))
    calls: list[str] = []
    done.add_done_callback(lambda: calls.append(repr(done.exception())))
    assert calls == ["ValueError('no')"]
    with pytest.raises(ValueError, match="no"):
        done.result()


def test_of_holds_its_value() -> None:
    assert Completion.of("x").result() == "x"
    assert Completion.of("x").done()


def test_a_callback_racing_completion_runs_exactly_once() -> None:
    for _ in range(2000):
        done: Completion[int] = Completion()
        calls: list[int] = []
        setter = threading.Thread(target=done.set_result, args=(1,))
        setter.start()
        done.add_done_callback(lambda calls=calls: calls.append(1))  # type: ignore[misc]
        setter.join()
        assert calls == [1]


def test_every_callback_runs_in_the_order_added() -> None:
    # The store removes a write from its in-flight set in one callback and the node's
    # stream answers the call in another: both must run (a lost one leaked the first).
    done: Completion[int] = Completion()
    calls: list[str] = []
    done.add_done_callback(lambda: calls.append("first"))
    done.add_done_callback(lambda: calls.append("second"))
    done.set_result(1)
    done.add_done_callback(lambda: calls.append("third"))
    assert calls == ["first", "second", "third"]
