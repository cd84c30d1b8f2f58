"""Garbage collection keeps what reads at or above the threshold can see, and no more."""

from __future__ import annotations

import pytest

from feedkv.errors import BatchTimestampBeforeGCError
from feedkv.storage import gc, mvcc
from feedkv.storage.intent import TxnMeta
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import VERSIONS
from feedkv.util.hlc import Timestamp as T
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span


def version_count(engine: LMDBEngine) -> int:
    with engine.snapshot() as snap:
        return sum(1 for _ in snap.scan(VERSIONS, b""))


def test_gc_keeps_the_newest_version_at_or_below_the_threshold(mvcc_engine: LMDBEngine) -> None:
    for n in (10, 20, 30, 40):
        mvcc_engine.write(lambda rw, n=n: mvcc.put(rw, b"k", T(n), b"v%d" % n))
    result = mvcc_engine.write(lambda rw: gc.gc(rw, Span(b"a", b"z"), T(25)))
    assert (result.keys_seen, result.versions_removed) == (1, 1)
    assert version_count(mvcc_engine) == 3
    with mvcc_engine.snapshot() as snap:
        assert mvcc.get(snap, b"k", T(25)) == mvcc.KeyValue(b"k", b"v20", T(20))
        with pytest.raises(BatchTimestampBeforeGCError, match="below the garbage-collection"):
            mvcc.get(snap, b"k", T(24))


def test_gc_drops_a_deleted_key_entirely(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(10), b"v"))
    mvcc_engine.write(lambda rw: mvcc.delete(rw, b"k", T(20)))
    result = mvcc_engine.write(lambda rw: gc.gc(rw, Span(b"a", b"z"), T(30)))
    assert result.versions_removed == 2
    assert version_count(mvcc_engine) == 0


def test_thresholds_are_per_span_and_only_move_forward(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: gc.gc(rw, Span(b"b", b"d"), T(50)))
    mvcc_engine.write(lambda rw: gc.gc(rw, Span(b"c", b"f"), T(30)))
    with mvcc_engine.snapshot() as snap:
        assert gc.gc_threshold(snap, Span(b"a", b"b")) == T(0)
        assert gc.gc_threshold(snap, Span(b"b", b"c")) == T(50)
        assert gc.gc_threshold(snap, Span(b"c", b"d")) == T(50)
        assert gc.gc_threshold(snap, Span(b"d", b"f")) == T(30)
        assert gc.gc_threshold(snap, Span(b"f", b"z")) == T(0)
        assert gc.gc_threshold(snap, Span(b"a", b"z")) == T(50)
        assert mvcc.get(snap, b"e", T(30)) is None
        with pytest.raises(BatchTimestampBeforeGCError):
            mvcc.scan(snap, Span(b"a", b"z"), T(40))


def test_gc_leaves_intents_alone(mvcc_engine: LMDBEngine) -> None:
    txn = TxnMeta(b"t".ljust(16, b"-"), b"k", 0, T(15), 1)
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(10), b"v"))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(15), b"i", txn=txn))
    mvcc_engine.write(lambda rw: gc.gc(rw, Span(b"a", b"z"), T(40)))
    with mvcc_engine.snapshot() as snap:
        assert [i.key for i in mvcc.scan_intents(snap, Span(b"a", b"z"))] == [b"k"]


def test_gc_of_the_whole_keyspace_records_a_threshold_from_the_first_key(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"\x00", T(10), b"v"))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"\x00", T(20), b"w"))
    result = mvcc_engine.write(lambda rw: gc.gc(rw, Span(KEY_MIN, KEY_MAX), T(30)))
    assert result.versions_removed == 1
    with mvcc_engine.snapshot() as snap:
        assert gc.gc_threshold(snap, Span(KEY_MIN, b"\x01")) == T(30)
        with pytest.raises(BatchTimestampBeforeGCError):
            mvcc.get(snap, b"\x00", T(29))
