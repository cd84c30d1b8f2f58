from __future__ import annotations

import pytest

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import ConfState, Entry, HardState, Snapshot, SnapshotMeta
from feedkv.raft.storage import INITIAL_INDEX, INITIAL_TERM, MemoryStorage


def _storage(last: int) -> MemoryStorage:
    storage = MemoryStorage.bootstrap((1, 2, 3))
    storage.append([Entry(2, i) for i in range(2, last + 1)])
    return storage


def test_a_bootstrapped_group_starts_from_its_initial_snapshot() -> None:
    storage = MemoryStorage.bootstrap((3, 1, 2))
    hard, conf = storage.initial_state()
    assert conf == ConfState((1, 2, 3))
    assert hard == HardState(INITIAL_TERM, 0, INITIAL_INDEX)
    assert (storage.first_index(), storage.last_index()) == (INITIAL_INDEX + 1, INITIAL_INDEX)
    assert storage.term(INITIAL_INDEX) == INITIAL_TERM
    assert storage.snapshot().meta.conf_state == conf


def test_an_empty_replica_has_no_members_and_no_log() -> None:
    storage = MemoryStorage()
    assert storage.initial_state() == (HardState(), ConfState())
    assert (storage.first_index(), storage.last_index()) == (1, 0)
    assert storage.snapshot().is_empty


def test_append_overwrites_the_tail_from_its_first_entry() -> None:
    storage = _storage(6)
    storage.append([Entry(3, 4, b"x"), Entry(3, 5)])
    assert storage.last_index() == 5
    assert [e.term for e in storage.entries(2, 6)] == [2, 2, 3, 3]
    with pytest.raises(InvariantViolation, match="gap"):
        storage.append([Entry(3, 9)])


def test_terms_outside_the_log_are_none() -> None:
    storage = _storage(5)
    assert storage.term(0) is None
    assert storage.term(6) is None
    assert storage.term(5) == 2


def test_compaction_keeps_the_term_of_the_last_compacted_entry() -> None:
    storage = _storage(10)
    storage.set_hard_state(HardState(2, 0, 8))
    with pytest.raises(InvariantViolation, match="beyond the snapshot"):
        storage.compact(6)
    snap = storage.create_snapshot(6, ConfState((1, 2, 3)), b"image")
    assert snap.meta == SnapshotMeta(6, 2, ConfState((1, 2, 3)))
    storage.compact(6)
    assert (storage.first_index(), storage.last_index()) == (7, 10)
    assert storage.term(6) == 2
    assert storage.term(5) is None
    with pytest.raises(InvariantViolation, match="out of bounds"):
        storage.entries(6, 8)
    with pytest.raises(InvariantViolation, match="compacted"):
        storage.append([Entry(3, 6)])


def test_a_snapshot_needs_a_committed_entry() -> None:
    storage = _storage(10)
    storage.set_hard_state(HardState(2, 0, 4))
    with pytest.raises(InvariantViolation, match="not a committed entry"):
        storage.create_snapshot(5, ConfState((1,)), b"")


def test_applying_a_snapshot_replaces_log_and_membership() -> None:
    storage = _storage(5)
    snap = Snapshot(SnapshotMeta(20, 4, ConfState((1, 2), (5,))), b"image")
    storage.apply_snapshot(snap)
    assert (storage.first_index(), storage.last_index()) == (21, 20)
    assert storage.initial_state()[1] == ConfState((1, 2), (5,))
    with pytest.raises(InvariantViolation, match="not newer"):
        storage.apply_snapshot(snap)
