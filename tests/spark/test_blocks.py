"""How Spark changefeed tasks gather messages into blocks (one Spark row each) and how
the writer takes them apart, without Spark and without a node: a topic's messages
keep their order, blocks stay within their row and byte limits, and alternating
topics (split column families) still fill blocks."""

from __future__ import annotations

import pyarrow as pa

from feedkv.changefeed.sink import Message
from feedkv.spark.blocks import (
    BlockSize,
    block_messages,
    block_row,
    from_ipc,
    marker_row,
    message_blocks,
    spark_rows,
)
from feedkv.util.hlc import Timestamp


def message(topic: str, n: int, version: int = 1, value: bytes = b"v") -> Message:
    ts = Timestamp(1_700_000_000_000_000_000 + n, n % 3)
    return Message(topic, f"[{n}]".encode(), value, ts, ts.next(), version)


def keys(block: pa.RecordBatch) -> list[bytes]:
    return block.column("key").to_pylist()


def test_a_block_ends_at_its_row_limit_and_keeps_the_order() -> None:
    messages = [message("t", n) for n in range(10)]
    blocks = list(message_blocks(iter(messages), max_rows=4))
    assert [len(b) for _t, _v, b in blocks] == [4, 4, 2]
    assert [k for _t, _v, b in blocks for k in keys(b)] == [m.key for m in messages]


def test_a_block_ends_near_its_byte_limit() -> None:
    messages = [message("t", n, value=b"x" * 1000) for n in range(10)]
    blocks = list(message_blocks(iter(messages), max_bytes=2500))
    assert [len(b) for _t, _v, b in blocks] == [3, 3, 3, 1]


def test_alternating_topics_fill_blocks_side_by_side() -> None:
    messages = [message(topic, n) for n in range(6) for topic in ("t.a", "t.b")]
    blocks = list(message_blocks(iter(messages), max_rows=3))
    assert [(t, len(b)) for t, _v, b in blocks] == [("t.a", 3), ("t.b", 3)] * 2
    for topic in ("t.a", "t.b"):
        got = [k for t, _v, b in blocks if t == topic for k in keys(b)]
        assert got == [m.key for m in messages if m.topic == topic]


def test_a_new_descriptor_version_starts_a_new_block() -> None:
    messages = [message("t", 0), message("t", 1), message("t", 2, 2), message("t", 3, 2)]
    blocks = list(message_blocks(iter(messages)))
    assert [(v, keys(b)) for _t, v, b in blocks] == [(1, [b"[0]", b"[1]"]), (2, [b"[2]", b"[3]"])]


def test_the_writer_reads_back_the_messages_of_a_block() -> None:
    messages = [message("t", n, 4, b"x" * n) for n in range(5)]
    messages.append(message("t", 5, 4)._replace(value=None))  # a tombstone
    [(topic, version, block)] = message_blocks(iter(messages))
    rows = None  # csv rows only: none here
    assert list(block_messages(topic, version, block, rows)) == messages


class Rows:
    """Stands for ParquetRows: ``rows`` rows of ``width`` bytes each."""

    def __init__(self, rows: int, width: int) -> None:
        self.rows, self.width = rows, width

    def __len__(self) -> int:
        return self.rows

    def take(self) -> pa.RecordBatch:
        return pa.record_batch({"b": [b"x" * self.width] * self.rows})


def test_a_parquet_block_size_is_learnt_from_the_last_block() -> None:
    size = BlockSize(max_rows=8192, max_bytes=1 << 20)
    assert size.rows == 512  # before any block
    size.take(Rows(512, 1000))
    assert 900 < size.rows < 1100  # about 1 MiB of 1 kB rows
    size.take(Rows(size.rows, 10))
    assert size.rows == 8192  # small rows: the row limit
    size.take(Rows(4, 10 << 20))
    assert size.rows == 1  # a row past the byte budget: one a block


def test_a_piece_marker_and_a_block_travel_as_spark_rows() -> None:
    lo, hi = Timestamp(1_700_000_000_000_000_000, 0), Timestamp(1_700_000_001_000_000_000, 2)
    [(topic, version, block)] = message_blocks(iter([message("t", n) for n in range(3)]))
    marker, carried = spark_rows([marker_row(lo, hi), block_row(topic, version, block)])
    assert marker == (None, None, None, str(hi), str(lo))
    assert carried[:2] == ("t", 1) and carried[3:] == (None, None)
    assert from_ipc(carried[2]).equals(block)
