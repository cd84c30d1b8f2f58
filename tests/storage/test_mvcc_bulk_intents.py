"""mvcc.ingest_intents and the batch resolution of mvcc.resolve_intents: a bulk load's
keys laid down as a transaction's intents in one engine write, and resolved as one batch
with one op; what readers, exports and the intent records show is what per-key intents
and per-key resolution would show."""

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
from feedkv.storage.intent import IntentRecord, TxnMeta, TxnStatus
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import (
    AbortIntents,
    CommitIntent,
    CommitIntents,
    UpdateIntent,
    WriteIntents,
    WriteValue,
)
from feedkv.storage.schema import INTENTS
from feedkv.util.hlc import Timestamp as T
from feedkv.util.keys import Span

SPAN = Span(b"a", b"z")
KEYS = (*(b"k%03d" % i for i in range(40)), b"m\x00x")  # NB: a zero byte, escaped
VALUES = tuple(b"value of " + k for k in KEYS)
TXN = TxnMeta(b"t" * 16, KEYS[0], 0, T(10), seq=1)
OTHER = TxnMeta(b"o" * 16, b"k0005", 0, T(10), seq=1)


def lay(engine: LMDBEngine, ts: int = 10, txn: TxnMeta = TXN) -> list:
    return engine.write(lambda rw: mvcc.ingest_intents(rw, SPAN, KEYS, VALUES, T(ts), txn))


def resolve(engine: LMDBEngine, txn: TxnMeta, status: TxnStatus, span: Span = SPAN) -> list:
    return engine.write(lambda rw: mvcc.resolve_intents(rw, span, txn, status))


def records(engine: LMDBEngine) -> dict[bytes, bytes]:
    with engine.snapshot() as snap:
        return dict(snap.scan(INTENTS, SPAN.start, SPAN.end))


def test_bulk_intents_are_the_records_per_key_intents_would_be(mvcc_engine: LMDBEngine) -> None:
    ops = lay(mvcc_engine, 12)
    assert ops == [WriteIntents(TXN.id, TXN.key, Span(KEYS[0], KEYS[-1] + b"\x00"), T(12), 41)]
    laid = TXN.with_ts(T(12))
    expected = {k: IntentRecord(laid, v).encode() for k, v in zip(KEYS, VALUES, strict=True)}
    assert records(mvcc_engine) == expected
    with mvcc_engine.snapshot() as snap:
        with pytest.raises(WriteIntentError) as caught:
            mvcc.scan(snap, SPAN, T(12))
        assert [i.key for i in caught.value.intents] == list(KEYS)
        assert mvcc.scan(snap, SPAN, T(11)).rows == []  # below the intents: nothing
        own = mvcc.scan(snap, SPAN, T(12), txn=TXN).rows
        assert [(kv.key, kv.value) for kv in own] == list(zip(KEYS, VALUES, strict=True))


def test_a_commit_resolves_the_batch_at_the_commit_timestamp_with_one_op(
    mvcc_engine: LMDBEngine,
) -> None:
    lay(mvcc_engine, 10)
    ops = resolve(mvcc_engine, TXN.with_ts(T(15)), TxnStatus.COMMITTED)
    assert len(ops) == 1
    (op,) = ops
    assert isinstance(op, CommitIntents)
    assert (op.txn_id, op.span, op.ts) == (TXN.id, Span(KEYS[0], KEYS[-1] + b"\x00"), T(15))
    assert op.each() == [WriteValue(k, T(15), v, None) for k, v in zip(KEYS, VALUES, strict=True)]
    assert records(mvcc_engine) == {}
    with mvcc_engine.snapshot() as snap:
        rows = mvcc.scan(snap, SPAN, T(15)).rows
        assert [(kv.key, kv.value, kv.ts) for kv in rows] == [
            (k, v, T(15)) for k, v in zip(KEYS, VALUES, strict=True)
        ]
        assert mvcc.scan(snap, SPAN, T(14)).rows == []
        exported = [(v.key, v.value, v.ts) for v in iter_export(snap, SPAN, T(14), T(15))]
        assert exported == [(k, v, T(15)) for k, v in zip(KEYS, VALUES, strict=True)]
    assert resolve(mvcc_engine, TXN.with_ts(T(15)), TxnStatus.COMMITTED) == []  # idempotent


def test_an_abort_removes_the_batch_with_one_op(mvcc_engine: LMDBEngine) -> None:
    lay(mvcc_engine)
    ops = resolve(mvcc_engine, TXN, TxnStatus.ABORTED)
    assert ops == [AbortIntents(TXN.id, Span(KEYS[0], KEYS[-1] + b"\x00"), 41)]
    assert records(mvcc_engine) == {}
    with mvcc_engine.snapshot() as snap:
        assert mvcc.scan(snap, SPAN, T(100)).rows == []


def test_a_push_moves_the_batch_and_its_commit_lands_there(mvcc_engine: LMDBEngine) -> None:
    lay(mvcc_engine, 10)
    assert resolve(mvcc_engine, TXN.with_ts(T(20)), TxnStatus.PENDING) == [
        UpdateIntent(TXN.id, KEYS[0], T(20))
    ]
    moved = TXN.with_ts(T(20))
    assert records(mvcc_engine) == {
        k: IntentRecord(moved, v).encode() for k, v in zip(KEYS, VALUES, strict=True)
    }
    assert resolve(mvcc_engine, TXN.with_ts(T(15)), TxnStatus.PENDING) == []  # never back
    (op,) = resolve(mvcc_engine, TXN.with_ts(T(21)), TxnStatus.COMMITTED)
    assert isinstance(op, CommitIntents)
    assert op.ts == T(21)


def test_another_transactions_intent_in_the_span_is_left_alone(mvcc_engine: LMDBEngine) -> None:
    keys = KEYS[:5] + KEYS[6:]
    values = VALUES[:5] + VALUES[6:]
    mvcc_engine.write(lambda rw: mvcc.put(rw, KEYS[5], T(9), b"theirs", txn=OTHER.with_ts(T(9))))
    mvcc_engine.write(lambda rw: mvcc.ingest_intents(rw, SPAN, keys, values, T(10), TXN))
    (op,) = resolve(mvcc_engine, TXN, TxnStatus.COMMITTED)
    assert isinstance(op, CommitIntents)
    assert list(op.keys) == list(keys)
    assert list(records(mvcc_engine)) == [KEYS[5]]
    with mvcc_engine.snapshot() as snap:
        assert mvcc.get(snap, KEYS[4], T(10)) == (KEYS[4], VALUES[4], T(10))
        with pytest.raises(WriteIntentError):
            mvcc.get(snap, KEYS[5], T(10))


def test_intents_of_separate_writes_are_resolved_one_by_one(mvcc_engine: LMDBEngine) -> None:
    """Not one batch (each put its own sequence number): the per-key path, as before."""
    for seq, key in enumerate(KEYS[:20], start=1):
        meta = TxnMeta(TXN.id, TXN.key, 0, T(10), seq=seq)
        mvcc_engine.write(lambda rw, k=key, m=meta: mvcc.put(rw, k, T(10), b"v", txn=m))
    ops = resolve(mvcc_engine, TXN, TxnStatus.COMMITTED)
    assert ops == [CommitIntent(TXN.id, k, T(10), b"v", None) for k in KEYS[:20]]


def test_a_batch_over_old_values_is_resolved_one_by_one_with_them(
    mvcc_engine: LMDBEngine,
) -> None:
    """A key deleted before the load (a tombstone) takes a bulk intent; one whose value
    came back meanwhile cannot be in the batch, so the batch path declines only when a
    previous value must be published: here none is, and the tombstone stays below."""
    mvcc_engine.write(lambda rw: mvcc.put(rw, KEYS[3], T(5), b"gone"))
    mvcc_engine.write(lambda rw: mvcc.delete(rw, KEYS[3], T(6)))
    lay(mvcc_engine, 10)
    (op,) = resolve(mvcc_engine, TXN, TxnStatus.COMMITTED)
    assert isinstance(op, CommitIntents)
    with mvcc_engine.snapshot() as snap:
        assert mvcc.get(snap, KEYS[3], T(5)) == (KEYS[3], b"gone", T(5))
        assert mvcc.get(snap, KEYS[3], T(10)) == (KEYS[3], VALUES[3], T(10))


def test_bulk_intents_are_checked_as_an_ingest_is(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, KEYS[7], T(5), b"old"))
    with pytest.raises(ConditionFailedError) as held:
        lay(mvcc_engine, 10)
    assert held.value.key == KEYS[7]
    mvcc_engine.write(lambda rw: mvcc.delete(rw, KEYS[7], T(12)))
    with pytest.raises(WriteTooOldError):
        lay(mvcc_engine, 11)
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k0100", T(13), b"x", txn=OTHER.with_ts(T(13))))
    other_keys = (b"k0100", b"k0101")
    with pytest.raises(WriteIntentError):
        mvcc_engine.write(
            lambda rw: mvcc.ingest_intents(rw, SPAN, other_keys, (b"1", b"2"), T(14), TXN)
        )
    mine = TxnMeta(OTHER.id, OTHER.key, 0, T(14), seq=2)
    with pytest.raises(InvalidArgumentError, match="only write"):
        mvcc_engine.write(
            lambda rw: mvcc.ingest_intents(rw, SPAN, other_keys, (b"1", b"2"), T(14), mine)
        )
    assert records(mvcc_engine) == {b"k0100": IntentRecord(OTHER.with_ts(T(13)), b"x").encode()}
