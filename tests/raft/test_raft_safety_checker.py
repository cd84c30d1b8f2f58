"""The simulator's checker catches each broken promise (else a green run means little)."""

from __future__ import annotations

import random

import pytest

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import Entry
from feedkv.raft.state import Config, RaftState
from feedkv.raft.storage import MemoryStorage
from feedkv.testing.raft_sim import SafetyChecker


def _leader_with_log(*terms: int) -> RaftState:
    storage = MemoryStorage.bootstrap((1,))
    storage.append([Entry(t, i) for i, t in enumerate(terms, start=2)])
    return RaftState(Config(id=1), storage, random.Random(0))


def test_two_leaders_in_one_term_are_caught() -> None:
    checker = SafetyChecker()
    checker.on_leader(1, 5, _leader_with_log())
    checker.on_leader(1, 5, _leader_with_log())  # the same one again is fine
    with pytest.raises(InvariantViolation, match="two leaders in term 5"):
        checker.on_leader(2, 5, _leader_with_log())


def test_an_entry_rewritten_with_other_content_or_history_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_persist(1, (Entry(2, 5, b"a"), Entry(2, 6, b"b")), prev_term=1)
    checker.on_persist(2, (Entry(2, 6, b"b"),), prev_term=2)
    with pytest.raises(InvariantViolation, match="log matching"):
        checker.on_persist(3, (Entry(2, 6, b"other"),), prev_term=2)
    with pytest.raises(InvariantViolation, match="log matching"):
        checker.on_persist(3, (Entry(2, 5, b"a"),), prev_term=0)


def test_a_leader_missing_an_applied_entry_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_apply(2, 3, 2, b"")
    checker.on_leader(1, 3, _leader_with_log(2, 2))
    with pytest.raises(InvariantViolation, match="lacks the applied entry 3"):
        checker.on_leader(1, 4, _leader_with_log(2, 3))


def test_two_replicas_applying_different_entries_at_one_index_is_caught() -> None:
    checker = SafetyChecker()
    checker.on_apply(1, 7, 3, b"x")
    checker.on_apply(2, 7, 3, b"x")
    with pytest.raises(InvariantViolation, match="state machine safety"):
        checker.on_apply(3, 7, 4, b"x")
