"""WriteIntents, CommitIntents and AbortIntents (a bulk load's intents in a transaction)
as a range's processor takes them: the batch holds the resolved timestamp below its
timestamp until it is resolved, and a commit sends each covered key once, at the commit
timestamp; the ops cross a replicated command whole."""

from __future__ import annotations

import pytest

from feedkv.kv.replicated_command import Effects, decode_command, encode_command
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Value
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.resolved_timestamp import ResolvedTimestamp
from feedkv.rangefeed.stream import EventStream
from feedkv.storage.engine import WriteBatch
from feedkv.storage.logical_ops import (
    AbortIntent,
    AbortIntents,
    CommitIntents,
    LogicalOp,
    UpdateIntent,
    WriteIntents,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

RANGE = Span(b"a", b"z")
CLOSED = Timestamp(5, 0)
KEYS = (b"b", b"d", b"f", b"h")
BATCH = Span(KEYS[0], KEYS[-1] + b"\x00")
TXN = b"t" * 16


def laid(wall: int) -> WriteIntents:
    return WriteIntents(TXN, b"b", BATCH, Timestamp(wall, 0), len(KEYS))


def committed(wall: int) -> CommitIntents:
    return CommitIntents(TXN, BATCH, Timestamp(wall, 0), KEYS, tuple(b"v" + k for k in KEYS))


def test_bulk_intents_hold_resolved_until_all_are_resolved() -> None:
    rts = ResolvedTimestamp()
    rts.forward_closed(Timestamp(8, 0))
    rts.init([])
    rts.consume(laid(10))
    assert rts.forward_closed(Timestamp(20, 0)) is True
    assert rts.resolved == Timestamp(10, 0).prev()
    rts.consume(UpdateIntent(TXN, KEYS[0], Timestamp(12, 0)))  # a push of the batch
    assert rts.resolved == Timestamp(12, 0).prev()
    rts.consume(AbortIntent(TXN, KEYS[0]))  # one key resolved on its own (by a reader)
    assert rts.resolved == Timestamp(12, 0).prev()
    assert rts.consume(AbortIntents(TXN, BATCH, len(KEYS) - 1)) is True
    assert rts.resolved == Timestamp(20, 0)


def test_a_scanned_batch_is_released_by_its_commit() -> None:
    """A feed registered after the intents were laid counts them one by one in its scan;
    the commit of the batch releases them all."""
    rts = ResolvedTimestamp()
    rts.forward_closed(Timestamp(20, 0))
    rts.init([(TXN, b"b", Timestamp(10, 0)) for _ in KEYS])
    assert rts.resolved == Timestamp(10, 0).prev()
    assert rts.consume(committed(11)) is True
    assert rts.resolved == Timestamp(20, 0)


def registered(processor: Processor, span: Span) -> Registration:
    stream = EventStream(processor.budget, per_registration=100)
    reg = Registration("r", span, Timestamp(6, 0), False, stream)
    processor.register(reg)
    processor.finish_catch_up(reg)
    assert [event for _tag, event in stream.take(timeout=0)] == [Checkpoint(span, CLOSED)]
    return reg


def test_a_committed_batch_sends_each_covered_key_once_at_the_commit_timestamp() -> None:
    processor = Processor(1, RANGE, Budget(1 << 20))
    processor.init([], CLOSED)
    reg = registered(processor, Span(b"c", b"g"))
    processor.on_ops([laid(10)])
    processor.on_closed(Timestamp(30, 0))
    assert [e for _tag, e in reg.stream.take(timeout=0)] == [
        Checkpoint(Span(b"c", b"g"), Timestamp(10, 0).prev())
    ]
    processor.on_ops([committed(12)])
    assert [e for _tag, e in reg.stream.take(timeout=0)] == [
        Value(b"d", b"vd", Timestamp(12, 0)),
        Value(b"f", b"vf", Timestamp(12, 0)),
        Checkpoint(Span(b"c", b"g"), Timestamp(30, 0)),
    ]


@pytest.mark.parametrize("op", [laid(10), committed(12), AbortIntents(TXN, BATCH, 4)])
def test_bulk_intent_ops_cross_a_replicated_command_whole(op: LogicalOp) -> None:
    (back,) = decode_command(encode_command(WriteBatch(), Effects(ops=(op,)))).effects.ops
    if isinstance(op, CommitIntents):
        assert isinstance(back, CommitIntents)
        assert back.each() == op.each()
        assert (back.txn_id, back.span, back.ts) == (op.txn_id, op.span, op.ts)
    else:
        assert back == op
