"""MVCC scenarios pinned step by step: visibility, intents, resolution and logical ops."""

from __future__ import annotations

import pytest

from feedkv.errors import (
    ConditionFailedError,
    InvalidArgumentError,
    InvariantViolation,
    WriteIntentError,
    WriteTooOldError,
)
from feedkv.storage import mvcc
from feedkv.storage.intent import IntentRecord, TxnMeta, TxnStatus
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import (
    AbortIntent,
    CommitIntent,
    DeleteRange,
    UpdateIntent,
    WriteIntent,
    WriteValue,
)
from feedkv.util.hlc import Timestamp as T
from feedkv.util.keys import Span, key_next

EVERYTHING = Span(b"\x00", b"\xff")


def txn_meta(ts: int, *, seq: int = 1, epoch: int = 0, name: bytes = b"t1") -> TxnMeta:
    return TxnMeta(name.ljust(16, b"-"), b"anchor", epoch, T(ts), seq)


def read(engine: LMDBEngine, key: bytes, ts: int, txn: TxnMeta | None = None) -> bytes | None:
    with engine.snapshot() as snap:
        kv = mvcc.get(snap, key, T(ts), txn=txn)
    return None if kv is None else kv.value


def test_reads_see_the_newest_version_at_or_below_their_timestamp(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(10), b"v10"))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(20), b"v20"))
    mvcc_engine.write(lambda rw: mvcc.delete(rw, b"k", T(30)))
    assert read(mvcc_engine, b"k", 9) is None
    assert read(mvcc_engine, b"k", 10) == b"v10"
    assert read(mvcc_engine, b"k", 19) == b"v10"
    assert read(mvcc_engine, b"k", 25) == b"v20"
    assert read(mvcc_engine, b"k", 30) is None


def test_writes_return_write_value_ops_with_previous_values(mvcc_engine: LMDBEngine) -> None:
    first = mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(10), b"a"))
    second = mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(20), b"b"))
    gone = mvcc_engine.write(lambda rw: mvcc.delete(rw, b"k", T(30)))
    assert first == [WriteValue(b"k", T(10), b"a", None)]
    assert second == [WriteValue(b"k", T(20), b"b", b"a")]
    assert gone == [WriteValue(b"k", T(30), None, b"b")]


def test_write_below_a_committed_version_is_too_old_and_names_the_retry_timestamp(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(20), b"new"))
    with pytest.raises(WriteTooOldError) as info:
        mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(20), b"same ts"))
    assert info.value.existing_ts == T(20)
    assert info.value.actual_ts == T(20, 1)
    assert read(mvcc_engine, b"k", 100) == b"new"


def test_reader_at_or_above_an_intent_gets_write_intent_error_naming_the_txn(
    mvcc_engine: LMDBEngine,
) -> None:
    txn = txn_meta(50)
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(10), b"committed"))
    ops = mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"provisional", txn=txn))
    assert ops == [WriteIntent(txn.id, b"anchor", b"k", T(50))]
    assert read(mvcc_engine, b"k", 49) == b"committed"
    with pytest.raises(WriteIntentError) as info:
        read(mvcc_engine, b"k", 50)
    assert [(i.key, i.txn.id) for i in info.value.intents] == [(b"k", txn.id)]
    assert txn.id.hex()[:8] in str(info.value)


def test_txn_reads_its_own_intent_at_each_sequence(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(5), b"before"))
    for seq, value in [(1, b"s1"), (2, b"s2"), (4, None)]:
        meta = txn_meta(50, seq=seq)
        mvcc_engine.write(lambda rw, m=meta, v=value: mvcc.put(rw, b"k", T(50), v, txn=m))
    assert read(mvcc_engine, b"k", 50, txn_meta(50, seq=0)) == b"before"
    assert read(mvcc_engine, b"k", 50, txn_meta(50, seq=1)) == b"s1"
    assert read(mvcc_engine, b"k", 50, txn_meta(50, seq=3)) == b"s2"
    assert read(mvcc_engine, b"k", 50, txn_meta(50, seq=4)) is None
    with mvcc_engine.snapshot() as snap:
        raw = snap.get("intents", b"k")
    assert raw is not None
    assert IntentRecord.decode(raw).history == ((1, b"s1"), (2, b"s2"))


def test_replayed_write_at_an_old_sequence_is_idempotent_but_a_different_value_is_refused(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"s1", txn=txn_meta(50, seq=1)))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"s2", txn=txn_meta(50, seq=2)))
    assert mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"s1", txn=txn_meta(50))) == []
    with pytest.raises(InvalidArgumentError, match="sequence"):
        mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"other", txn=txn_meta(50)))


def test_a_new_epoch_replaces_the_old_epochs_intent_and_ignores_it_for_reads(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"e0", txn=txn_meta(50)))
    assert read(mvcc_engine, b"k", 60, txn_meta(60, epoch=1)) is None
    ops = mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(60), b"e1", txn=txn_meta(60, epoch=1)))
    assert ops == [UpdateIntent(txn_meta(60).id, b"k", T(60))]
    assert read(mvcc_engine, b"k", 60, txn_meta(60, epoch=1)) == b"e1"


def test_another_txn_writing_over_an_intent_gets_write_intent_error(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"mine", txn=txn_meta(50)))
    with pytest.raises(WriteIntentError):
        mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(60), b"x", txn=txn_meta(60, name=b"t2")))
    with pytest.raises(WriteIntentError):
        mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(60), b"x"))


def test_commit_at_a_higher_timestamp_moves_the_version_and_reports_commit_intent(
    mvcc_engine: LMDBEngine,
) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(10), b"old"))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"new", txn=txn_meta(50)))
    ops = mvcc_engine.write(
        lambda rw: mvcc.resolve_intent(rw, b"k", txn_meta(70), TxnStatus.COMMITTED)
    )
    assert ops == [CommitIntent(txn_meta(70).id, b"k", T(70), b"new", b"old")]
    assert read(mvcc_engine, b"k", 69) == b"old"
    assert read(mvcc_engine, b"k", 70) == b"new"
    again = mvcc_engine.write(
        lambda rw: mvcc.resolve_intent(rw, b"k", txn_meta(70), TxnStatus.COMMITTED)
    )
    assert again == []


def test_commit_below_the_intent_timestamp_fails_loudly(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"v", txn=txn_meta(50)))
    with pytest.raises(InvariantViolation, match="below its timestamp"):
        mvcc_engine.write(
            lambda rw: mvcc.resolve_intent(rw, b"k", txn_meta(40), TxnStatus.COMMITTED)
        )
    assert read(mvcc_engine, b"k", 49) is None


def test_abort_removes_the_intent_and_publishes_nothing(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"v", txn=txn_meta(50)))
    ops = mvcc_engine.write(
        lambda rw: mvcc.resolve_intent(rw, b"k", txn_meta(50), TxnStatus.ABORTED)
    )
    assert ops == [AbortIntent(txn_meta(50).id, b"k")]
    assert read(mvcc_engine, b"k", 100) is None


def test_push_moves_the_intent_up_so_lower_readers_pass(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"k", T(50), b"v", txn=txn_meta(50)))
    ops = mvcc_engine.write(
        lambda rw: mvcc.resolve_intent(rw, b"k", txn_meta(80), TxnStatus.PENDING)
    )
    assert ops == [UpdateIntent(txn_meta(50).id, b"k", T(80))]
    assert read(mvcc_engine, b"k", 79) is None
    lower = mvcc_engine.write(
        lambda rw: mvcc.resolve_intent(rw, b"k", txn_meta(60), TxnStatus.PENDING)
    )
    assert lower == []
    with pytest.raises(WriteIntentError):
        read(mvcc_engine, b"k", 80)


def test_conditional_put_compares_with_the_current_value(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.conditional_put(rw, b"k", T(10), b"a", None))
    with pytest.raises(ConditionFailedError) as info:
        mvcc_engine.write(lambda rw: mvcc.conditional_put(rw, b"k", T(20), b"b", b"zzz"))
    assert info.value.actual == b"a"
    mvcc_engine.write(lambda rw: mvcc.conditional_put(rw, b"k", T(20), b"b", b"a"))
    assert read(mvcc_engine, b"k", 20) == b"b"


def test_delete_range_writes_point_tombstones_and_reports_each_key(
    mvcc_engine: LMDBEngine,
) -> None:
    for key in (b"a", b"b", b"c", b"d"):
        mvcc_engine.write(lambda rw, k=key: mvcc.put(rw, k, T(10), k.upper()))
    mvcc_engine.write(lambda rw: mvcc.delete(rw, b"c", T(15)))
    span = Span(b"b", b"d")
    deleted, ops = mvcc_engine.write(lambda rw: mvcc.delete_range(rw, span, T(20)))
    assert deleted == [b"b"]
    assert ops == [WriteValue(b"b", T(20), None, b"B"), DeleteRange(span, T(20))]
    with mvcc_engine.snapshot() as snap:
        rows = mvcc.scan(snap, EVERYTHING, T(20)).rows
    assert [kv.key for kv in rows] == [b"a", b"d"]


def test_scan_collects_every_conflicting_intent(mvcc_engine: LMDBEngine) -> None:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"a", T(10), b"a"))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"b", T(20), b"b", txn=txn_meta(20)))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"c", T(30), b"c", txn=txn_meta(30, name=b"t2")))
    with mvcc_engine.snapshot() as snap, pytest.raises(WriteIntentError) as info:
        mvcc.scan(snap, EVERYTHING, T(40))
    assert [i.key for i in info.value.intents] == [b"b", b"c"]
    with mvcc_engine.snapshot() as snap:
        assert [kv.key for kv in mvcc.scan(snap, EVERYTHING, T(19)).rows] == [b"a"]


def test_scan_with_limit_resumes_where_it_stopped_forward_and_reverse(
    mvcc_engine: LMDBEngine,
) -> None:
    keys = [b"k%d" % i for i in range(7)]
    for key in keys:
        mvcc_engine.write(lambda rw, k=key: mvcc.put(rw, k, T(10), k))
    seen: list[bytes] = []
    span = Span(b"k", b"l")
    with mvcc_engine.snapshot() as snap:
        while True:
            result = mvcc.scan(snap, span, T(10), limit=3)
            seen += [kv.key for kv in result.rows]
            if result.resume_key is None:
                break
            span = Span(result.resume_key, span.end)
        assert seen == keys
        backwards: list[bytes] = []
        span = Span(b"k", b"l")
        while True:
            result = mvcc.scan(snap, span, T(10), limit=2, reverse=True)
            backwards += [kv.key for kv in result.rows]
            if result.resume_key is None:
                break
            span = Span(span.start, key_next(result.resume_key))
    assert backwards == keys[::-1]


@pytest.mark.parametrize("skips", [0, 16, 1000])  # seek at once, past 16, never
def test_a_scan_over_long_histories_sees_each_keys_version_at_its_timestamp(
    mvcc_engine: LMDBEngine, monkeypatch: pytest.MonkeyPatch, skips: int
) -> None:
    # NB: up to 40 versions per key, with tombstones, keys that prefix others and keys
    # holding the escape byte; a scan steps over a key's other versions or seeks past them.
    monkeypatch.setattr(mvcc, "_SKIPS_BEFORE_SEEK", skips)
    keys = [b"h", b"h\x00", b"h\x00\x01", b"i", b"j"]
    history: dict[bytes, list[tuple[int, bytes | None]]] = {k: [] for k in keys}
    for n in range(1, 41):
        for i, key in enumerate(keys):
            if (n + i) % 3 == 0:
                continue
            value = None if (n + i) % 7 == 0 else b"%s@%d" % (key, n)
            at = 10 * n + i
            if value is None:
                mvcc_engine.write(lambda rw, k=key, t=at: mvcc.delete(rw, k, T(t)))
            else:
                mvcc_engine.write(lambda rw, k=key, t=at, v=value: mvcc.put(rw, k, T(t), v))
            history[key].append((at, value))

    def expected(at: int) -> list[tuple[bytes, bytes]]:
        out = []
        for key in sorted(keys):
            visible = [v for t, v in history[key] if t <= at]
            if visible and visible[-1] is not None:
                out.append((key, visible[-1]))
        return out

    with mvcc_engine.snapshot() as snap:
        for at in (5, 11, 99, 173, 255, 401, 10_000):
            for limit in (None, 1, 2):
                span, got = Span(b"h", b"k"), []
                while True:
                    result = mvcc.scan(snap, span, T(at), limit=limit)
                    got += [(kv.key, kv.value) for kv in result.rows]
                    if result.resume_key is None:
                        break
                    span = Span(result.resume_key, span.end)
                assert got == expected(at), (at, limit)


def test_keys_that_prefix_other_keys_keep_their_versions_apart(
    mvcc_engine: LMDBEngine,
) -> None:
    keys = [b"a", b"a\x00", b"a\x00\x00", b"a\x00\x01", b"a\x01", b"a\xff"]
    for n, key in enumerate(keys):
        mvcc_engine.write(lambda rw, k=key, n=n: mvcc.put(rw, k, T(10 + n), b"v" + k))
        mvcc_engine.write(lambda rw, k=key, n=n: mvcc.put(rw, k, T(100 + n), b"w" + k))
    with mvcc_engine.snapshot() as snap:
        forward = mvcc.scan(snap, EVERYTHING, T(50)).rows
        reverse = mvcc.scan(snap, EVERYTHING, T(500), reverse=True).rows
        assert mvcc.get(snap, b"a\x00", T(99)) is not None
    assert [(kv.key, kv.value) for kv in forward] == [(k, b"v" + k) for k in keys]
    assert [(kv.key, kv.value) for kv in reverse] == [(k, b"w" + k) for k in reversed(keys)]
