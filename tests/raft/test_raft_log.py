from __future__ import annotations

import pytest

from feedkv.errors import InvariantViolation
from feedkv.raft.log import RaftLog
from feedkv.raft.messages import ConfState, Entry, HardState, Snapshot, SnapshotMeta
from feedkv.raft.storage import MemoryStorage


def _log(*terms: int) -> RaftLog:
    """A log whose stable entries 2, 3, ... have ``terms`` (index 1: the bootstrap)."""
    storage = MemoryStorage.bootstrap((1,))
    storage.append([Entry(t, i) for i, t in enumerate(terms, start=2)])
    return RaftLog(storage)


def _ents(first: int, *terms: int) -> tuple[Entry, ...]:
    return tuple(Entry(t, i, b"new") for i, t in enumerate(terms, start=first))


def test_lookups_span_stable_and_unstable_entries() -> None:
    log = _log(1, 2)
    log.append(_ents(4, 2, 3))
    assert (log.first_index(), log.last_index(), log.last_term()) == (2, 5, 3)
    assert [log.term(i) for i in range(0, 7)] == [None, 1, 1, 2, 2, 3, None]
    assert [e.index for e in log.slice(2, 6)] == [2, 3, 4, 5]
    assert [e.index for e in log.unstable_entries()] == [4, 5]
    assert log.entries(4, max_count=1) == [Entry(2, 4, b"new")]


@pytest.mark.parametrize(
    ("index", "log_term", "entries", "expected", "terms_after"),
    [
        # the previous entry does not match: rejected, nothing changes
        (3, 3, _ents(4, 3), None, [1, 2]),
        (5, 2, _ents(6, 3), None, [1, 2]),
        # matching and already held: nothing changes
        (2, 1, _ents(3, 2), 3, [1, 2]),
        # new entries after the end
        (3, 2, _ents(4, 3, 3), 5, [1, 2, 3, 3]),
        # a conflict at 3 truncates the tail and appends
        (2, 1, _ents(3, 4, 4), 4, [1, 4, 4]),
        # an empty append only confirms the match (and commits)
        (2, 1, (), 2, [1, 2]),
    ],
)
def test_maybe_append_matches_then_truncates_on_conflict(
    index: int,
    log_term: int,
    entries: tuple[Entry, ...],
    expected: int | None,
    terms_after: list[int],
) -> None:
    log = _log(1, 2)
    assert log.maybe_append(index, log_term, 10, entries) == expected
    assert [log.term(i) for i in range(2, log.last_index() + 1)] == terms_after
    if expected is not None:
        # commit follows the leader's, but never past what is known to match
        assert log.committed == expected


def test_a_conflict_below_the_commit_index_is_a_bug_and_raises() -> None:
    log = _log(1, 2, 2)
    log.commit_to(3)
    with pytest.raises(InvariantViolation, match="committed"):
        log.maybe_append(2, 1, 3, _ents(3, 5))


def test_only_entries_of_the_leaders_term_commit_by_counting() -> None:
    log = _log(1, 2)
    assert not log.maybe_commit(3, term=3)
    assert log.committed == 1
    assert log.maybe_commit(3, term=2)
    assert log.committed == 3
    with pytest.raises(InvariantViolation, match="past the last index"):
        log.commit_to(4)


def test_committed_entries_are_handed_out_once_applied_moves() -> None:
    log = _log(1, 2, 2)
    log.commit_to(3)
    assert [e.index for e in log.next_committed()] == [2, 3]
    assert [e.index for e in log.next_committed(max_count=1)] == [2]
    log.applied_to(3)
    assert not log.has_next_committed()
    with pytest.raises(InvariantViolation):
        log.applied_to(2)


def test_stable_to_ignores_an_entry_since_overwritten() -> None:
    log = _log(1)
    log.append(_ents(3, 2, 2))
    persisted = log.unstable_entries()
    log.append(_ents(4, 3))  # a new leader overwrote index 4 before it was persisted
    assert isinstance(log.storage, MemoryStorage)
    log.storage.append(persisted)
    log.stable_to(4, 2)
    assert [e.index for e in log.unstable_entries()] == [3, 4]
    log.stable_to(3, 2)
    assert [e.index for e in log.unstable_entries()] == [4]


def test_advancing_past_what_storage_holds_raises() -> None:
    log = _log(1)
    log.append(_ents(3, 2))
    with pytest.raises(InvariantViolation, match="persist a Ready"):
        log.stable_to(3, 2)


def test_is_up_to_date_compares_last_term_then_length() -> None:
    log = _log(1, 2)
    assert log.is_up_to_date(2, 3)
    assert log.is_up_to_date(3, 2)
    assert not log.is_up_to_date(2, 2)
    assert not log.is_up_to_date(9, 1)


def test_find_conflict_by_term_skips_entries_of_later_terms() -> None:
    log = _log(1, 1, 4, 4, 5)
    assert log.find_conflict_by_term(6, 3) == 3
    assert log.find_conflict_by_term(6, 5) == 6
    assert log.find_conflict_by_term(6, 0) == 1


def test_restore_puts_a_snapshot_before_an_empty_log() -> None:
    log = _log(1, 2)
    snap = Snapshot(SnapshotMeta(10, 3, ConfState((1,))), b"image")
    log.restore(snap)
    assert (log.first_index(), log.last_index(), log.committed) == (11, 10, 10)
    assert log.term(10) == 3
    assert log.term(5) is None
    assert log.entries(5) is None
    assert log.unstable_snapshot() == snap
    assert not log.has_next_committed()
    log.append(_ents(11, 3))
    assert log.last_index() == 11


def test_a_compacted_log_answers_none_for_what_it_dropped() -> None:
    storage = MemoryStorage.bootstrap((1,))
    storage.append([Entry(2, i) for i in range(2, 8)])
    storage.set_hard_state(HardState(2, 0, 7))
    storage.create_snapshot(5, ConfState((1,)), b"")
    storage.compact(5)
    log = RaftLog(storage, applied=0)
    assert log.applied == 5  # NB: at least what the snapshot covers
    assert log.entries(5) is None
    assert [e.index for e in log.entries(6) or []] == [6, 7]
