"""Raft logs in the storage engine: many groups' writes in one transaction, one fsync.

:class:`EngineRaftStorage` is one group's :class:`~feedkv.raft.storage.RaftStorage` on an
:class:`~feedkv.storage.engine.Engine`. Every group of a store shares the engine's
:data:`RAFT_DB` sub-database, under its own key prefix (the group id, 8 bytes):

- ``<group>h`` -> the hard state ``[term, vote, commit]``;
- ``<group>c`` -> the membership ``[voters, learners]``;
- ``<group>t`` -> the truncated state ``[index, term]``: the last entry dropped by a
  compaction or replaced by a snapshot (CockroachDB's ``RaftTruncatedState``);
- ``<group>e<index, 8 bytes>`` -> an entry ``[term, type, data]``;
- ``<group>a`` -> the index the state machine has applied, written by the state machine
  in the transaction that applies the entry (:meth:`EngineRaftStorage.stage_applied`).

Writing a Ready is split in two so that a store writes the Readies of all its groups in
one engine transaction: :meth:`EngineRaftStorage.stage` puts one group's writes into a
:class:`~feedkv.storage.engine.ReadWriter` (it may run more than once if the engine
retries the group, and only depends on what it reads there and on the Ready), and
:meth:`EngineRaftStorage.staged` updates the group's cached bounds once the transaction is
durable. :func:`persist_readies` does both for many groups: one transaction, one fsync.
The caller must not stage two Readies of one group in one transaction, nor stage while a
previous write of the group is not durable.

The snapshot a leader sends is made on demand by the caller's ``make_snapshot`` (the
state machine, that is the range's data, lives in the engine beside the log and is read
at the applied index); only its position is kept here, as the truncated state.

The newest entries stay in memory too (at most ``CACHED_ENTRIES`` of them and
``CACHED_BYTES`` of their data), as CockroachDB's Raft entry cache: a leader applies
what it appended a moment ago and sends it to followers that were a moment behind, and
neither reads the engine for it. Older entries (a follower far behind) are read from an
engine snapshot per call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import ConfState, Entry, EntryType, HardState, Snapshot
from feedkv.raft.state import Ready
from feedkv.storage.engine import Engine, Reader, ReadWriter

__all__ = ["RAFT_DB", "EngineRaftStorage", "persist_readies", "read_conf_state"]

RAFT_DB = "raft"
"""The engine sub-database holding every group's log (a store lists it among its own)."""

_GROUP = struct.Struct(">Q")
_INDEX = struct.Struct(">Q")
CACHED_ENTRIES = 512
CACHED_BYTES = 8 << 20


def _pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


class EngineRaftStorage:
    """One group's log in the engine. Not thread-safe: the group's caller serialises
    its use (as it does for the group's :class:`~feedkv.raft.state.RaftState`)."""

    def __init__(
        self, engine: Engine, group_id: int, make_snapshot: Callable[[], Snapshot]
    ) -> None:
        self._engine = engine
        self._prefix = _GROUP.pack(group_id)
        self._make_snapshot = make_snapshot
        with engine.snapshot() as snap:
            hard = snap.get(RAFT_DB, self._key(b"h"))
            conf = snap.get(RAFT_DB, self._key(b"c"))
            truncated = snap.get(RAFT_DB, self._key(b"t"))
            applied = snap.get(RAFT_DB, self._key(b"a"))
            last = snap.seek_before(RAFT_DB, self._key(b"f"))
        self._hard = HardState(*msgpack.unpackb(hard)) if hard else HardState()
        self._conf = _unpack_conf(conf) if conf else ConfState()
        self._truncated = (0, 0)
        if truncated:
            index, term = msgpack.unpackb(truncated)
            self._truncated = (index, term)
        self._last = self._truncated[0]
        if last is not None and last[0].startswith(self._key(b"e")):
            self._last = _INDEX.unpack(last[0][-8:])[0]
        self._cache: dict[int, Entry] = {}  # the newest entries, in index order, no gap
        self._cached_bytes = 0
        self._compacting = (0, 0)  # the (index, term) of the compaction last staged
        self.applied: int = msgpack.unpackb(applied) if applied else self._truncated[0]
        """The applied index as stored when the group was opened."""

    @classmethod
    def bootstrap(
        cls,
        rw: ReadWriter,
        group_id: int,
        voters: Sequence[int],
        index: int = 1,
        term: int = 1,
    ) -> None:
        """Write the first state of one of a new group's first replicas (see
        :mod:`feedkv.raft.storage`) into ``rw``. A hard state already there (a replica
        that heard of the group, and maybe voted in it, before its creation reached it)
        keeps its term and vote; a group already applying past ``index`` is left alone."""
        prefix = _GROUP.pack(group_id)
        applied = rw.get(RAFT_DB, prefix + b"a")
        if applied is not None and msgpack.unpackb(applied) > index:
            return  # the group is under way here already
        held = rw.get(RAFT_DB, prefix + b"h")
        hard = [term, 0, index]
        if held is not None:
            held_term, held_vote, held_commit = msgpack.unpackb(held)
            if held_term >= term:
                hard = [held_term, held_vote, max(held_commit, index)]
        rw.put(RAFT_DB, prefix + b"h", _pack(hard))
        rw.put(RAFT_DB, prefix + b"c", _pack([sorted(voters), []]))
        rw.put(RAFT_DB, prefix + b"t", _pack([index, term]))
        rw.put(RAFT_DB, prefix + b"a", _pack(index))

    @staticmethod
    def destroy(rw: ReadWriter, group_id: int) -> None:
        """Delete everything the group's replica keeps here (it was removed from the
        group): a replica created again later starts empty and waits for a snapshot."""
        prefix = _GROUP.pack(group_id)
        end = _GROUP.pack(group_id + 1)
        keys = [kv[0] for kv in rw.scan(RAFT_DB, prefix, end)]
        for key in keys:
            rw.delete(RAFT_DB, key)

    def _key(self, kind: bytes, index: int | None = None) -> bytes:
        key = self._prefix + kind
        return key if index is None else key + _INDEX.pack(index)

    # -- RaftStorage -----------------------------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self._hard, self._conf

    def first_index(self) -> int:
        return self._truncated[0] + 1

    def last_index(self) -> int:
        return self._last

    def term(self, index: int) -> int | None:
        if index < self._truncated[0] or index > self._last:
            return None
        if index == self._truncated[0]:
            return self._truncated[1]
        cached = self._cache.get(index)
        if cached is not None:
            return cached.term
        with self._engine.snapshot() as snap:
            raw = snap.get(RAFT_DB, self._key(b"e", index))
        if raw is None:
            raise InvariantViolation(f"entry {index} missing from the stored log")
        term: int = msgpack.unpackb(raw)[0]
        return term

    def entries(self, lo: int, hi: int) -> list[Entry]:
        if not self.first_index() <= lo <= hi <= self._last + 1:
            raise InvariantViolation(
                f"entries [{lo}, {hi}) out of bounds [{self.first_index()}, {self._last + 1})"
            )
        if lo == hi:
            return []
        cache = self._cache
        if lo in cache and hi - 1 in cache:
            return [cache[index] for index in range(lo, hi)]
        with self._engine.snapshot() as snap:
            rows = list(snap.scan(RAFT_DB, self._key(b"e", lo), self._key(b"e", hi)))
        out = [_unpack_entry(key, value) for key, value in rows]
        if len(out) != hi - lo:
            raise InvariantViolation(f"entries [{lo}, {hi}): {len(out)} found in the stored log")
        return out

    def snapshot(self) -> Snapshot:
        return self._make_snapshot()

    # -- writes ----------------------------------------------------------------------

    def stage(self, rw: ReadWriter, ready: Ready) -> None:
        """Put ``ready``'s hard state, entries and snapshot position into ``rw``."""
        last = self._last
        if ready.snapshot is not None:
            meta = ready.snapshot.meta
            self._delete_entries(rw, self.first_index(), last)
            rw.put(RAFT_DB, self._key(b"t"), _pack([meta.index, meta.term]))
            rw.put(RAFT_DB, self._key(b"c"), _pack_conf(meta.conf_state))
            last = meta.index
        if ready.entries:
            first = ready.entries[0].index
            if first <= self._truncated[0] and ready.snapshot is None:
                raise InvariantViolation(f"append at {first}, at or below the compacted log")
            if first > last + 1:
                raise InvariantViolation(f"append at {first} leaves a gap after {last}")
            self._delete_entries(rw, ready.entries[-1].index + 1, last)
            for entry in ready.entries:
                rw.put(
                    RAFT_DB,
                    self._key(b"e", entry.index),
                    _pack([entry.term, int(entry.type), entry.data]),
                )
        if ready.hard_state is not None:
            hs = ready.hard_state
            rw.put(RAFT_DB, self._key(b"h"), _pack([hs.term, hs.vote, hs.commit]))

    def staged(self, ready: Ready) -> None:
        """``ready``'s writes are durable: bring the cached bounds up to date."""
        if ready.snapshot is not None:
            meta = ready.snapshot.meta
            self._truncated = (meta.index, meta.term)
            self._conf = meta.conf_state
            self._last = meta.index
            self._cache.clear()
            self._cached_bytes = 0
        if ready.entries:
            for index in range(ready.entries[0].index, self._last + 1):
                self._uncache(index)  # NB: replaced by a newer leader's entries
            self._last = ready.entries[-1].index
            for entry in ready.entries:
                self._cache[entry.index] = entry
                self._cached_bytes += len(entry.data)
            while len(self._cache) > CACHED_ENTRIES or self._cached_bytes > CACHED_BYTES:
                self._uncache(next(iter(self._cache)))
        if ready.hard_state is not None:
            self._hard = ready.hard_state

    def read_applied(self, reader: Reader) -> tuple[int, ConfState]:
        """The applied index and the membership as ``reader`` holds them (a snapshot's
        position, read with the state machine it images)."""
        applied = reader.get(RAFT_DB, self._key(b"a"))
        index: int = msgpack.unpackb(applied) if applied else 0
        return index, _read_conf(reader, self._key(b"c"))

    def read_term(self, reader: Reader, index: int) -> int:
        """The term of entry ``index`` as ``reader`` holds the log (the truncated state's
        if it is the last entry dropped); reads nothing cached, so any thread may call it."""
        truncated = reader.get(RAFT_DB, self._key(b"t"))
        if truncated is not None:
            dropped, term = msgpack.unpackb(truncated)
            if dropped == index:
                return int(term)
        raw = reader.get(RAFT_DB, self._key(b"e", index))
        if raw is None:
            raise InvariantViolation(f"entry {index} missing from the stored log")
        return int(msgpack.unpackb(raw)[0])

    def stage_applied(self, rw: ReadWriter, index: int) -> None:
        """Record that the state machine has applied up to ``index``, in the transaction
        that applies it."""
        rw.put(RAFT_DB, self._key(b"a"), _pack(index))

    def stage_conf_state(self, rw: ReadWriter, conf: ConfState) -> None:
        """Persist the membership after applying a change (in the apply transaction);
        :meth:`conf_staged` once durable."""
        rw.put(RAFT_DB, self._key(b"c"), _pack_conf(conf))

    def conf_staged(self, conf: ConfState) -> None:
        self._conf = conf

    def stage_compaction(self, rw: ReadWriter, index: int) -> None:
        """Drop the entries up to ``index`` (which the state machine has applied);
        :meth:`compacted` once durable."""
        if index <= self._truncated[0]:
            return
        if index > min(self._last, self._hard.commit):
            raise InvariantViolation(
                f"compaction to {index} beyond the committed log (commit {self._hard.commit})"
            )
        term = self.term(index)
        if term is None:
            raise InvariantViolation(f"compaction to {index}, which is not in the log")
        self._compacting = (index, term)  # NB: once durable, the entry is gone to ask
        self._delete_entries(rw, self.first_index(), index)
        rw.put(RAFT_DB, self._key(b"t"), _pack([index, term]))

    def compacted(self, index: int) -> None:
        if index <= self._truncated[0]:
            return
        staged, term = self._compacting
        if staged != index:
            raise InvariantViolation(
                f"compacted to {index}, but the compaction staged was {staged}"
            )
        self._truncated = (index, term)
        while self._cache and next(iter(self._cache)) <= index:
            self._uncache(next(iter(self._cache)))

    def _uncache(self, index: int) -> None:
        entry = self._cache.pop(index, None)
        if entry is not None:
            self._cached_bytes -= len(entry.data)

    def _delete_entries(self, rw: ReadWriter, lo: int, hi: int) -> None:
        """Delete the stored entries ``[lo, hi]``."""
        for index in range(lo, hi + 1):
            rw.delete(RAFT_DB, self._key(b"e", index))


def persist_readies(engine: Engine, readies: Sequence[tuple[EngineRaftStorage, Ready]]) -> None:
    """Write many groups' Readies in one engine transaction and wait for its one fsync;
    then update each group's cached bounds. Blocks until durable."""
    if not readies:
        return

    def write(rw: ReadWriter) -> None:
        for storage, ready in readies:
            storage.stage(rw, ready)

    engine.write(write)
    for storage, ready in readies:
        storage.staged(ready)


def read_conf_state(reader: Reader, group_id: int) -> ConfState:
    """The membership of group ``group_id`` as ``reader`` holds it (empty: none kept)."""
    return _read_conf(reader, _GROUP.pack(group_id) + b"c")


def _read_conf(reader: Reader, key: bytes) -> ConfState:
    raw = reader.get(RAFT_DB, key)
    return _unpack_conf(raw) if raw else ConfState()


def _pack_conf(conf: ConfState) -> bytes:
    return _pack([list(conf.voters), list(conf.learners)])


def _unpack_conf(raw: bytes) -> ConfState:
    voters, learners = msgpack.unpackb(raw)
    return ConfState(tuple(voters), tuple(learners))


def _unpack_entry(key: bytes, value: bytes) -> Entry:
    term, kind, data = msgpack.unpackb(value)
    return Entry(term, _INDEX.unpack(key[-8:])[0], data, EntryType(kind))
