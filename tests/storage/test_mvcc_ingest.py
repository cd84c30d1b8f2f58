"""mvcc.ingest: a bulk load's batch of new keys, written as committed versions at one
timestamp, checked and written as a batch: what reads, exports and feeds see of it is
what they would see of the same puts."""

from __future__ import annotations

import pytest

from feedkv.errors import (
    ConditionFailedError,
    InvalidArgumentError,
    WriteIntentError,
    WriteTooOldError,
)
from feedkv.storage import mvcc
from feedkv.storage.export import iter_export
from feedkv.storage.intent import TxnMeta
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import IngestValues, WriteValue
from feedkv.storage.overlay import Overlay, OverlayView
from feedkv.util.hlc import Timestamp as T
from feedkv.util.keys import Span

SPAN = Span(b"a", b"z")
KEYS = (b"b", b"b\x00", b"b\x00x", b"c", b"d")  # NB: zero bytes are escaped in versions


def ingest(engine: LMDBEngine, keys: tuple[bytes, ...], ts: int, span: Span = SPAN) -> list:
    values = tuple(b"v-" + k for k in keys)
    return engine.write(lambda rw: mvcc.ingest(rw, span, keys, values, T(ts)))


def test_ingested_versions_read_export_and_feed_like_puts(mvcc_engine: LMDBEngine) -> None:
    ops = ingest(mvcc_engine, KEYS, 10)
    assert ops == [IngestValues(Span(b"b", b"d\x00"), T(10), KEYS, tuple(b"v-" + k for k in KEYS))]
    assert ops[0].each() == [WriteValue(k, T(10), b"v-" + k, None) for k in KEYS]
    with mvcc_engine.snapshot() as snap:
        rows = mvcc.scan(snap, SPAN, T(10)).rows
        assert [(kv.key, kv.value, kv.ts) for kv in rows] == [(k, b"v-" + k, T(10)) for k in KEYS]
        assert mvcc.scan(snap, SPAN, T(9)).rows == []
        assert mvcc.get(snap, b"b\x00", T(11)) == (b"b\x00", b"v-b\x00", T(10))
        exported = list(iter_export(snap, SPAN, T(9), T(10)))
        assert [(v.key, v.value, v.ts) for v in exported] == [(k, b"v-" + k, T(10)) for k in KEYS]
    # and a later write of an ingested key stacks on it as on any version
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"c", T(12), b"new"))
    with mvcc_engine.snapshot() as snap:
        assert mvcc.get(snap, b"c", T(11)) == (b"c", b"v-c", T(10))
        assert mvcc.get(snap, b"c", T(12)) == (b"c", b"new", T(12))


def test_a_key_holding_a_value_fails_the_batch_and_nothing_is_written(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"c", T(5), b"old"))
    with pytest.raises(ConditionFailedError) as caught:
        ingest(mvcc_engine, KEYS, 10)
    assert caught.value.key == b"c"
    assert caught.value.actual == b"old"
    with mvcc_engine.snapshot() as snap:
        assert [kv.key for kv in mvcc.scan(snap, SPAN, T(20)).rows] == [b"c"]
        assert list(iter_export(snap, SPAN, T(5), T(20))) == []


def test_a_deleted_key_may_be_ingested_but_not_below_its_tombstone(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"c", T(5), b"old"))
    mvcc_engine.write(lambda rw: mvcc.delete(rw, b"c", T(8)))
    with pytest.raises(WriteTooOldError) as caught:
        ingest(mvcc_engine, (b"b", b"c"), 8)
    assert caught.value.existing_ts == T(8)
    ingest(mvcc_engine, (b"b", b"c"), 9)
    with mvcc_engine.snapshot() as snap:
        assert mvcc.get(snap, b"c", T(9)) == (b"c", b"v-c", T(9))
        assert mvcc.get(snap, b"c", T(8)) is None


def test_an_intent_on_an_ingested_key_is_a_conflict_and_one_beside_them_is_not(
    mvcc_engine: LMDBEngine,
) -> None:
    meta = TxnMeta(b"t1".ljust(16, b"-"), b"anchor", 0, T(5), 1)
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"c", T(5), b"mine", txn=meta))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"m", T(5), b"mine", txn=meta))
    with pytest.raises(WriteIntentError) as caught:
        ingest(mvcc_engine, (b"b", b"c", b"d"), 10)
    assert [i.key for i in caught.value.intents] == [b"c"]
    ingest(mvcc_engine, (b"b", b"d", b"n"), 10)  # NB: b"m" lies between them
    with mvcc_engine.snapshot() as snap:
        assert mvcc.get(snap, b"n", T(10)) == (b"n", b"v-n", T(10))


@pytest.mark.parametrize(
    ("keys", "values", "span", "message"),
    [
        ((b"c", b"b"), (b"1", b"2"), SPAN, "must ascend, each once: b'c' comes before b'b'"),
        ((b"b", b"b"), (b"1", b"2"), SPAN, "must ascend"),
        ((b"b", b"c"), (b"1",), SPAN, "one value per key: got 2 keys and 1 values"),
        ((b"b", b"z"), (b"1", b"2"), SPAN, "leave"),
        ((b"b",), ("text",), SPAN, "values are bytes"),
    ],
)
def test_a_malformed_batch_is_refused_and_writes_nothing(
    mvcc_engine: LMDBEngine, keys: tuple, values: tuple, span: Span, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        mvcc_engine.write(lambda rw: mvcc.ingest(rw, span, keys, values, T(10)))
    with mvcc_engine.snapshot() as snap:
        assert mvcc.scan(snap, Span(b"\x00", b"\xff"), T(20)).rows == []


def test_an_overlay_view_records_the_batch_for_the_raft_log(mvcc_engine: LMDBEngine) -> None:
    """A replicated range evaluates into a write batch: the same writes, applied on
    every replica, give the same versions."""
    with mvcc_engine.snapshot() as snap:
        view = OverlayView(snap, Overlay())
        mvcc.ingest(view, SPAN, KEYS, tuple(b"v-" + k for k in KEYS), T(10))
        assert [kv.key for kv in mvcc.scan(view, SPAN, T(10)).rows] == list(KEYS)
    assert len(view.batch) == 2 * len(KEYS)  # a version and a time-index entry a key
    mvcc_engine.write(view.batch.apply)
    with mvcc_engine.snapshot() as snap:
        assert [kv.key for kv in mvcc.scan(snap, SPAN, T(10)).rows] == list(KEYS)
