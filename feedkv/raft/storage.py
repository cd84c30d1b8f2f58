"""The stable part of a Raft group's log, as the consensus core reads it.

:class:`RaftStorage` is the read side that :class:`~feedkv.raft.log.RaftLog` consults:
the persisted hard state and membership, the persisted entries and the last snapshot.
The core never writes to it. The caller writes what each
:class:`~feedkv.raft.state.Ready` hands out (hard state, entries, snapshot) and must make
those writes durable before it sends the Ready's messages; a store hosting many groups
writes the Readies of all of them in one engine transaction and one fsync.

The log is ``(first_index - 1, last_index]``: the entry at ``first_index - 1`` is known
only by its term (it is the last one a snapshot or a compaction covers), the entries
after it are held whole. A group starts either *bootstrapped*, from a snapshot at
:data:`INITIAL_INDEX` holding its first membership (the first replicas of a range), or
*empty* (index 0, no members): a replica added later, which learns everything, its
membership included, from the snapshot its leader sends it. So every replica but the
first ones starts from a snapshot, as in CockroachDB.

:class:`MemoryStorage` keeps all of it in memory: for tests and the simulator.
"""

from __future__ import annotations

from typing import Protocol, Self

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import ConfState, Entry, HardState, Snapshot, SnapshotMeta

__all__ = ["INITIAL_INDEX", "INITIAL_TERM", "MemoryStorage", "RaftStorage"]

INITIAL_INDEX = 1
"""The log index of a bootstrapped group's initial snapshot."""
INITIAL_TERM = 1


class RaftStorage(Protocol):
    """Read access to a group's persisted log. Calls are cheap and never block on
    anything but local reads; the core calls them only with indexes in bounds."""

    def initial_state(self) -> tuple[HardState, ConfState]:
        """The persisted hard state and the membership as of the last applied
        configuration change (or snapshot)."""
        ...

    def first_index(self) -> int:
        """The index of the first entry held whole (``snapshot index + 1`` when
        compacted to the snapshot)."""
        ...

    def last_index(self) -> int:
        """The index of the last entry (``first_index() - 1`` when none is held)."""
        ...

    def term(self, index: int) -> int | None:
        """The term of the entry at ``index``, for ``first_index() - 1 <= index <=
        last_index()``; ``None`` outside that (compacted away, or not there)."""
        ...

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """The entries ``[lo, hi)``; ``first_index() <= lo <= hi <= last_index() + 1``."""
        ...

    def snapshot(self) -> Snapshot:
        """The latest snapshot, which covers at least every compacted entry. A leader
        sends it to a follower whose next entry was compacted away (or that has no log
        at all: a new replica); one that does not list that follower as a member is not
        sent. A store should therefore make it on demand, from its state machine at the
        applied index (as CockroachDB does), rather than keep an old one."""
        ...


class MemoryStorage:
    """A :class:`RaftStorage` in memory, with the writes a caller makes on each Ready.

    ``MemoryStorage.bootstrap(voters)`` starts a new group; ``MemoryStorage()`` an empty
    replica waiting for a snapshot.
    """

    def __init__(self) -> None:
        self._hard_state = HardState()
        self._conf_state = ConfState()
        self._snapshot = Snapshot()
        # NB: _entries[0] is a dummy holding the index and term of the entry before the
        # first held whole (the snapshot's, or the last compacted one)
        self._entries: list[Entry] = [Entry(0, 0)]

    @classmethod
    def bootstrap(cls, voters: tuple[int, ...], learners: tuple[int, ...] = ()) -> Self:
        """The storage of one of a new group's first replicas (each gets the same)."""
        storage = cls()
        conf = ConfState(tuple(sorted(voters)), tuple(sorted(learners)))
        storage.apply_snapshot(Snapshot(SnapshotMeta(INITIAL_INDEX, INITIAL_TERM, conf)))
        storage.set_hard_state(HardState(INITIAL_TERM, 0, INITIAL_INDEX))
        return storage

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self._hard_state, self._conf_state

    def first_index(self) -> int:
        return self._entries[0].index + 1

    def last_index(self) -> int:
        return self._entries[0].index + len(self._entries) - 1

    def term(self, index: int) -> int | None:
        offset = self._entries[0].index
        if index < offset or index > self.last_index():
            return None
        return self._entries[index - offset].term

    def entries(self, lo: int, hi: int) -> list[Entry]:
        if not self.first_index() <= lo <= hi <= self.last_index() + 1:
            raise InvariantViolation(
                f"entries [{lo}, {hi}) out of bounds [{self.first_index()}, "
                f"{self.last_index() + 1})"
            )
        offset = self._entries[0].index
        return self._entries[lo - offset : hi - offset]

    def snapshot(self) -> Snapshot:
        return self._snapshot

    # -- writes: what the caller does with a Ready, and compaction --------------------

    def set_hard_state(self, hard_state: HardState) -> None:
        self._hard_state = hard_state

    def set_conf_state(self, conf_state: ConfState) -> None:
        """Record the membership after applying a configuration change."""
        self._conf_state = conf_state

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        """Append ``entries``, first dropping any held entry at or after the first of
        them (a leader overwrote this replica's uncommitted tail)."""
        if not entries:
            return
        offset = self._entries[0].index
        first = entries[0].index
        if first <= offset:
            raise InvariantViolation(f"append at {first}, at or below the compacted {offset}")
        if first > self.last_index() + 1:
            raise InvariantViolation(
                f"append at {first} leaves a gap after the last index {self.last_index()}"
            )
        del self._entries[first - offset :]
        self._entries.extend(entries)

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the whole log with ``snapshot`` (a leader sent it)."""
        meta = snapshot.meta
        if meta.index <= self._snapshot.meta.index:
            raise InvariantViolation(
                f"snapshot at {meta.index} is not newer than the held {self._snapshot.meta.index}"
            )
        self._snapshot = snapshot
        self._conf_state = meta.conf_state
        self._entries = [Entry(meta.term, meta.index)]

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        """Record the application's image ``data`` as of the applied ``index``."""
        if index <= self._snapshot.meta.index:
            return self._snapshot
        term = self.term(index)
        if term is None or index > self._hard_state.commit:
            raise InvariantViolation(
                f"snapshot at {index}: not a committed entry held (commit "
                f"{self._hard_state.commit}, log ({self.first_index() - 1}, {self.last_index()}])"
            )
        self._snapshot = Snapshot(SnapshotMeta(index, term, conf_state), data)
        return self._snapshot

    def compact(self, index: int) -> None:
        """Drop the entries up to ``index``, which a snapshot must cover."""
        offset = self._entries[0].index
        if index <= offset:
            return
        if index > self._snapshot.meta.index:
            raise InvariantViolation(
                f"compaction to {index} beyond the snapshot at {self._snapshot.meta.index}"
            )
        dummy = Entry(self._entries[index - offset].term, index)
        self._entries = [dummy, *self._entries[index - offset + 1 :]]
