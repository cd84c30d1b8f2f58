"""A rangefeed processor given a bulk load's ``IngestValues`` op: each value some
registration covers is logged as a put's would be; with no reader of values nothing is
made per key; the resolved timestamp checks the batch's timestamp once. And the op
crosses a replicated command's encoding whole."""

from __future__ import annotations

from feedkv.kv.replicated_command import Effects, decode_command, encode_command
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Value
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.stream import EventStream
from feedkv.storage.engine import WriteBatch
from feedkv.storage.logical_ops import IngestValues, WriteValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

RANGE = Span(b"a", b"z")
CLOSED = Timestamp(5, 0)
KEYS = (b"b", b"d", b"f", b"h")


def batch(wall: int) -> IngestValues:
    return IngestValues(
        Span(KEYS[0], KEYS[-1] + b"\x00"), Timestamp(wall, 0), KEYS, tuple(b"v" + k for k in KEYS)
    )


def live_registration(processor: Processor, span: Span, *, values: bool = True) -> Registration:
    stream = EventStream(processor.budget, per_registration=100)
    reg = Registration("r", span, Timestamp(6, 0), False, stream, values=values)
    processor.register(reg)
    processor.finish_catch_up(reg)
    assert [event for _tag, event in stream.take(timeout=0)] == [Checkpoint(span, CLOSED)]
    return reg


def make_processor() -> Processor:
    processor = Processor(1, RANGE, Budget(1 << 20))
    processor.init([], CLOSED)
    return processor


def test_each_covered_ingested_value_is_sent_as_a_put_in_key_order() -> None:
    processor = make_processor()
    reg = live_registration(processor, Span(b"c", b"g"))
    processor.on_ops([batch(10)])
    taken = [event for _tag, event in reg.stream.take(timeout=0)]
    assert taken == [Value(b"d", b"vd", Timestamp(10, 0)), Value(b"f", b"vf", Timestamp(10, 0))]


def test_a_registration_of_the_whole_range_gets_every_ingested_value() -> None:
    processor = make_processor()
    reg = live_registration(processor, RANGE)
    processor.on_ops([batch(10), WriteValue(b"x", Timestamp(11, 0), b"after", None)])
    taken = [event for _tag, event in reg.stream.take(timeout=0)]
    assert [(v.key, v.ts) for v in taken] == [(k, Timestamp(10, 0)) for k in KEYS] + [
        (b"x", Timestamp(11, 0))
    ]


def test_with_no_reader_of_values_nothing_is_logged() -> None:
    processor = make_processor()
    outside = live_registration(processor, Span(b"p", b"q"))
    checkpoints = live_registration(processor, RANGE, values=False)
    processor.on_ops([batch(10)])
    assert processor.log.values == []
    assert outside.stream.take(timeout=0) == []
    assert checkpoints.stream.take(timeout=0) == []


def test_an_ingest_at_or_below_the_resolved_timestamp_ends_the_feeds() -> None:
    processor = make_processor()
    reg = live_registration(processor, Span(b"p", b"q"))
    processor.on_ops([batch(5)])
    events = [event for _tag, event in reg.stream.take(timeout=0)]
    assert len(events) == 1 and isinstance(events[0], Error)
    assert events[0].reason is ErrorReason.INVARIANT_VIOLATION
    assert "IngestValues" in events[0].message


def test_an_ingest_op_crosses_a_replicated_command_whole() -> None:
    op = batch(10)
    decoded = decode_command(encode_command(WriteBatch(), Effects(ops=(op,))))
    (back,) = decoded.effects.ops
    assert isinstance(back, IngestValues)
    assert (back.span, back.ts, list(back.keys), list(back.values)) == (
        op.span,
        op.ts,
        list(op.keys),
        list(op.values),
    )
    assert back.each() == op.each()
