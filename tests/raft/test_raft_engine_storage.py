"""Raft logs in the LMDB engine, and many groups' Readies in one transaction."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.errors import InvariantViolation
from feedkv.raft import engine_storage
from feedkv.raft.engine_storage import RAFT_DB, EngineRaftStorage, persist_readies
from feedkv.raft.messages import ConfState, Entry, HardState, Snapshot, SnapshotMeta
from feedkv.raft.state import Config, RaftState, Ready, Role
from feedkv.raft.storage import MemoryStorage
from feedkv.storage.lmdb_engine import LMDBEngine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LMDBEngine]:
    with LMDBEngine(tmp_path / "store", databases=[RAFT_DB]) as opened:
        yield opened


def _no_snapshot() -> Snapshot:
    raise AssertionError("no snapshot expected")


def _ready(
    entries: tuple[Entry, ...] = (),
    hard_state: HardState | None = None,
    snapshot: Snapshot | None = None,
) -> Ready:
    return Ready(None, hard_state, entries, snapshot, (), ())


def _bootstrapped(engine: LMDBEngine, group: int, voters: tuple[int, ...]) -> EngineRaftStorage:
    engine.write(lambda rw: EngineRaftStorage.bootstrap(rw, group, voters))
    return EngineRaftStorage(engine, group, _no_snapshot)


def _handle(raft: RaftState, storage: EngineRaftStorage, engine: LMDBEngine) -> Ready:
    rd = raft.ready()
    persist_readies(engine, [(storage, rd)])
    raft.advance(rd)
    return rd


def test_a_group_drives_its_log_through_the_engine_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with LMDBEngine(path, databases=[RAFT_DB]) as engine:
        storage = _bootstrapped(engine, 7, (1,))
        raft = RaftState(Config(id=1), storage, random.Random(0))
        raft.campaign()
        for i in range(5):
            raft.propose(b"cmd %d" % i)
        _handle(raft, storage, engine)  # persisted: then the leader's own copy counts
        rd = _handle(raft, storage, engine)
        assert [e.data for e in rd.committed_entries][-5:] == [b"cmd %d" % i for i in range(5)]
        hard = raft.hard_state()
    with LMDBEngine(path, databases=[RAFT_DB]) as engine:
        storage = EngineRaftStorage(engine, 7, _no_snapshot)
        assert storage.initial_state() == (hard, ConfState((1,)))
        assert (storage.first_index(), storage.last_index()) == (2, 7)
        assert [e.data for e in storage.entries(3, 8)] == [b"cmd %d" % i for i in range(5)]
        raft = RaftState(Config(id=1, applied=7), storage, random.Random(0))
        assert raft.committed == 7
        raft.campaign()
        assert raft.role is Role.LEADER


@pytest.mark.parametrize("cached", [512, 3, 0], ids=["all-cached", "tail-cached", "uncached"])
def test_the_engine_log_reads_like_the_memory_log(
    engine: LMDBEngine, cached: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same Readies into both storages: every read must agree, whether the entries
    # come from the entry cache, the engine or both
    monkeypatch.setattr(engine_storage, "CACHED_ENTRIES", cached)
    on_disk = _bootstrapped(engine, 1, (1, 2, 3))
    in_memory = MemoryStorage.bootstrap((1, 2, 3))
    snap = Snapshot(SnapshotMeta(30, 4, ConfState((1, 2, 3), (4,))))
    readies = [
        _ready(tuple(Entry(2, i, b"%d" % i) for i in range(2, 12)), HardState(2, 1, 5)),
        _ready(tuple(Entry(3, i, b"x") for i in range(8, 10)), HardState(3, 0, 7)),  # conflict
        _ready(tuple(Entry(3, i) for i in range(10, 14))),
        _ready((Entry(4, 31), Entry(4, 32)), HardState(4, 0, 30), snapshot=snap),
    ]

    def reads(storage: EngineRaftStorage | MemoryStorage) -> object:
        first, last = storage.first_index(), storage.last_index()
        return (
            storage.initial_state(),
            first,
            last,
            [storage.term(i) for i in range(0, last + 2)],
            storage.entries(first, last + 1),
        )

    for rd in readies:
        persist_readies(engine, [(on_disk, rd)])
        if rd.snapshot is not None:
            in_memory.apply_snapshot(rd.snapshot)
        in_memory.append(rd.entries)
        if rd.hard_state is not None:
            in_memory.set_hard_state(rd.hard_state)
        assert reads(on_disk) == reads(in_memory)
        reopened = EngineRaftStorage(engine, 1, _no_snapshot)
        assert reads(reopened) == reads(on_disk)


def test_compaction_drops_entries_and_keeps_the_last_term(engine: LMDBEngine) -> None:
    storage = _bootstrapped(engine, 3, (1,))
    entries = tuple(Entry(2, i) for i in range(2, 10))
    persist_readies(engine, [(storage, _ready(entries, HardState(2, 1, 9)))])
    engine.write(lambda rw: storage.stage_compaction(rw, 6))
    storage.compacted(6)
    assert (storage.first_index(), storage.last_index(), storage.term(6)) == (7, 9, 2)
    assert storage.term(5) is None
    reopened = EngineRaftStorage(engine, 3, _no_snapshot)
    assert (reopened.first_index(), reopened.term(6)) == (7, 2)
    with pytest.raises(InvariantViolation, match="beyond the committed log"):
        engine.write(lambda rw: storage.stage_compaction(rw, 10))


def test_many_groups_persist_in_one_transaction(engine: LMDBEngine) -> None:
    storages = [_bootstrapped(engine, group, (1,)) for group in range(1, 51)]
    rafts = [RaftState(Config(id=1), s, random.Random(g)) for g, s in enumerate(storages)]
    for raft in rafts:
        raft.campaign()
        raft.propose(b"write")
    before = engine.stats.groups
    readies = [raft.ready() for raft in rafts]
    persist_readies(engine, list(zip(storages, readies, strict=True)))
    assert engine.stats.groups == before + 1  # one commit, one fsync, fifty groups
    for raft, rd in zip(rafts, readies, strict=True):
        raft.advance(rd)
        assert raft.ready().committed_entries[-1].data == b"write"
    # the groups' logs are kept apart
    assert all(s.last_index() == 3 for s in storages)
    assert all(s.entries(3, 4)[0].data == b"write" for s in storages)
