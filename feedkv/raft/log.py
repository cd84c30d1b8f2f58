"""A group's log as its consensus core sees it: stable entries with an unstable tail.

The *stable* part is what :class:`~feedkv.raft.storage.RaftStorage` holds (persisted).
The *unstable* part is what the core appended or received since and has not yet handed
out for persisting: a tail of entries starting at ``offset``, and possibly a snapshot
received from the leader. Once the caller has persisted them it says so
(:meth:`RaftLog.stable_to`, :meth:`RaftLog.stable_snap_to`), and the log drops its copy.
An unstable entry may overwrite stable ones (a conflict); the storage truncates when it
is written.

Indexes: ``committed`` is the highest index known to be on a quorum; ``applied`` the
highest the caller has been handed to apply (``applied <= committed <= last_index``,
each only grows, and a violation raises).
"""

from __future__ import annotations

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import Entry, Snapshot
from feedkv.raft.storage import RaftStorage

__all__ = ["RaftLog"]


class RaftLog:
    def __init__(self, storage: RaftStorage, applied: int = 0) -> None:
        self.storage = storage
        self._unstable: list[Entry] = []
        self._offset = storage.last_index() + 1  # index of _unstable[0]
        self._snapshot: Snapshot | None = None  # unstable
        first = storage.first_index()
        self.committed = first - 1
        self.applied = max(applied, first - 1)

    # -- bounds and lookups ----------------------------------------------------------

    def first_index(self) -> int:
        if self._snapshot is not None:
            return self._snapshot.meta.index + 1
        return self.storage.first_index()

    def last_index(self) -> int:
        if self._unstable:
            return self._offset + len(self._unstable) - 1
        if self._snapshot is not None:
            return self._snapshot.meta.index
        return self.storage.last_index()

    def stable_index(self) -> int:
        """The last index of the persisted log (the entries after it are unstable)."""
        if self._snapshot is not None:
            return 0  # NB: the log restarts at the snapshot, not persisted yet
        return self._offset - 1

    def last_term(self) -> int:
        term = self.term(self.last_index())
        if term is None:
            raise InvariantViolation(f"no term for the last index {self.last_index()}")
        return term

    def term(self, index: int) -> int | None:
        """The term at ``index``, or ``None`` when compacted away or past the end."""
        unstable = self._unstable
        if unstable and index >= self._offset:  # NB: the unstable tail needs no bounds worked out
            position = index - self._offset
            return unstable[position].term if position < len(unstable) else None
        if self._snapshot is None:
            # NB: below the unstable tail the log is the storage's, whose term() is None
            # outside its bounds as this one's is (the tail never starts past its end)
            return self.storage.term(index)
        if index < self.first_index() - 1 or index > self.last_index():
            return None
        if self._snapshot is not None and index == self._snapshot.meta.index:
            return self._snapshot.meta.term
        return self.storage.term(index)

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Whether a log ending at ``(last_index, last_term)`` is at least as up to date
        as this one (Raft's election restriction)."""
        ours = self.last_term()
        return last_term > ours or (last_term == ours and last_index >= self.last_index())

    def entries(self, lo: int, max_count: int | None = None) -> list[Entry] | None:
        """The entries from ``lo`` to the end (at most ``max_count``); ``None`` when
        ``lo`` was compacted away (send a snapshot instead)."""
        if lo < self.first_index():
            return None
        hi = self.last_index() + 1
        if lo > hi:
            raise InvariantViolation(f"entries from {lo}, past the log's end at {hi}")
        if max_count is not None:
            hi = min(hi, lo + max_count)
        return self._slice(lo, hi)

    def slice(self, lo: int, hi: int) -> list[Entry]:
        """The entries ``[lo, hi)``, which must be held."""
        if lo < self.first_index() or hi > self.last_index() + 1 or lo > hi:
            raise InvariantViolation(
                f"slice [{lo}, {hi}) out of the log [{self.first_index()}, {self.last_index() + 1})"
            )
        return self._slice(lo, hi)

    def _slice(self, lo: int, hi: int) -> list[Entry]:
        """:meth:`slice` of bounds its caller checked (a leader's appends and a
        replica's committed entries ask on every Ready: the checks once, not twice)."""
        out: list[Entry] = []
        if lo < self._offset:
            out.extend(self.storage.entries(lo, min(hi, self._offset)))
        if hi > self._offset:
            start = max(lo, self._offset)
            out.extend(self._unstable[start - self._offset : hi - self._offset])
        return out

    def snapshot(self) -> Snapshot:
        return self._snapshot if self._snapshot is not None else self.storage.snapshot()

    # -- appending -------------------------------------------------------------------

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> int:
        """Append ``entries`` (contiguous), overwriting any held entry at or after the
        first of them; returns the new last index. Committed entries are never
        overwritten: that would be a bug in the caller, and raises."""
        if not entries:
            return self.last_index()
        first = entries[0].index
        if first - 1 < self.committed:
            raise InvariantViolation(
                f"append at {first} would overwrite committed entries (commit {self.committed})"
            )
        if first > self.last_index() + 1:
            raise InvariantViolation(f"append at {first} after the last index {self.last_index()}")
        if first >= self._offset + len(self._unstable):
            self._unstable.extend(entries)
        elif first <= self._offset:
            # NB: replaces the whole unstable tail; stable entries from ``first`` on are
            # overwritten in storage when this tail is persisted
            self._offset = first
            self._unstable = list(entries)
        else:
            del self._unstable[first - self._offset :]
            self._unstable.extend(entries)
        return self._offset + len(self._unstable) - 1  # NB: the tail is not empty now

    def find_conflict(self, entries: tuple[Entry, ...] | list[Entry]) -> int:
        """The index of the first of ``entries`` whose term differs from the held
        entry's (or that is not held); 0 when all are held."""
        for entry in entries:
            if not self.match_term(entry.index, entry.term):
                return entry.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> int:
        """The highest index ``<= index`` whose term is ``<= term`` (or the first index
        held): no entry above it can match a leader's entry of term ``term`` at
        ``index``, so a rejection can skip them all."""
        while index > self.first_index() - 1:
            held = self.term(index)
            if held is None or held <= term:
                break
            index -= 1
        return index

    def maybe_append(
        self, index: int, log_term: int, commit: int, entries: tuple[Entry, ...]
    ) -> int | None:
        """A leader's append after ``(index, log_term)``: ``None`` when this log does
        not hold that entry, else the last index now known to match the leader's."""
        if not self.match_term(index, log_term):
            return None
        last_new = index + len(entries)
        conflict = self.find_conflict(entries)
        if conflict:
            if conflict <= self.committed:
                raise InvariantViolation(
                    f"entry {conflict} conflicts with a committed one (commit {self.committed})"
                )
            self.append(entries[conflict - index - 1 :])
        self.commit_to(min(commit, last_new))
        return last_new

    # -- commit and apply ------------------------------------------------------------

    def commit_to(self, index: int) -> None:
        if index <= self.committed:
            return
        if index > self.last_index():
            raise InvariantViolation(
                f"commit to {index} past the last index {self.last_index()}: the log was lost"
            )
        self.committed = index

    def maybe_commit(self, index: int, term: int) -> bool:
        """Commit up to ``index`` if that entry is of ``term`` (a leader commits only
        entries of its own term by counting replicas: Raft paper, section 5.4.2)."""
        if index > self.committed and self.term(index) == term:
            self.commit_to(index)
            return True
        return False

    def applied_to(self, index: int) -> None:
        if index < self.applied or index > self.committed:
            raise InvariantViolation(
                f"applied to {index}: outside [{self.applied}, {self.committed}]"
            )
        self.applied = index

    def has_next_committed(self) -> bool:
        return self._snapshot is None and self.committed > self.applied

    def next_committed(self, max_count: int | None = None) -> list[Entry]:
        """Committed entries not yet handed out to apply (none while a snapshot waits
        to be persisted: it goes first)."""
        if not self.has_next_committed():
            return []
        lo = max(self.applied + 1, self.first_index())
        hi = self.committed + 1
        if max_count is not None:
            hi = min(hi, lo + max_count)
        if hi > self.last_index() + 1 or lo > hi:
            raise InvariantViolation(
                f"committed entries [{lo}, {hi}) out of the log ending at {self.last_index()}"
            )
        return self._slice(lo, hi)

    # -- the unstable part -----------------------------------------------------------

    def has_unstable(self) -> bool:
        return bool(self._unstable) or self._snapshot is not None

    def unstable_entries(self) -> list[Entry]:
        return list(self._unstable)

    def unstable_snapshot(self) -> Snapshot | None:
        return self._snapshot

    def stable_to(self, index: int, term: int) -> None:
        """The entries up to ``(index, term)`` are persisted. Ignored when that entry has
        since been replaced in the unstable tail (a newer leader overwrote it)."""
        if not self._unstable or index < self._offset:
            return
        if self.term(index) != term:
            return
        if self.storage.term(index) != term:
            raise InvariantViolation(
                f"entry {index} of term {term} reported stable but not in storage (which "
                f"holds term {self.storage.term(index)}): persist a Ready before advancing"
            )
        del self._unstable[: index + 1 - self._offset]
        self._offset = index + 1

    def stable_snap_to(self, index: int) -> None:
        if self._snapshot is not None and self._snapshot.meta.index == index:
            if self.storage.term(index) != self._snapshot.meta.term:
                raise InvariantViolation(
                    f"snapshot at {index} reported stable but not in storage: persist a "
                    "Ready before advancing"
                )
            self._snapshot = None

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the log with ``snapshot`` (not yet persisted)."""
        index = snapshot.meta.index
        if index <= self.committed:
            raise InvariantViolation(f"restore to {index} at or below the commit {self.committed}")
        self.committed = index
        self._snapshot = snapshot
        self._unstable = []
        self._offset = index + 1
