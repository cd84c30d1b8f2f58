"""How a Spark changefeed task's output travels to the writer: blocks in Spark rows.

A task's Spark rows have the columns of :data:`ARROW_SCHEMA` (Spark's DDL:
:data:`SCHEMA`). Each piece of a batch starts with a marker row (:func:`marker_row`)
whose ``resolved`` and ``lo`` columns are the piece's window ``(lo, resolved]``; the
other rows carry a block each (:func:`block_row`): up to ``BATCH_ROWS`` messages of one
topic and descriptor version, about :data:`BLOCK_BYTES` at most, as one Arrow IPC
stream, so Spark does not convert each message twice.

- Messages travel as :data:`MESSAGE_BLOCK` columns (:func:`message_blocks`, read back
  by :func:`block_messages`). A csv row travels with its message, packed without its
  descriptor (:func:`pack_row`); the writer reads each descriptor version once.
- Parquet rows travel as the columns of their file (a
  :class:`~feedkv.changefeed.sink.RowBlock`); :class:`BlockSize` learns how many rows
  make a block of about :data:`BLOCK_BYTES`, and :func:`row_block_messages` cuts a
  block into messages the file sink writes as they are.

Pure: no Spark, no node.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

from feedkv.changefeed.file_formats import ParquetRows
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import Message, RowBlock
from feedkv.spark.rows import BATCH_ROWS, ArrowBuffer
from feedkv.util.hlc import Timestamp

__all__ = [
    "ARROW_SCHEMA",
    "BLOCK_BYTES",
    "FIRST_BLOCK_ROWS",
    "MESSAGE_BLOCK",
    "SCHEMA",
    "Block",
    "BlockSize",
    "PackedRow",
    "RowUnpacker",
    "block_messages",
    "block_row",
    "from_ipc",
    "marker_row",
    "message_blocks",
    "pack_row",
    "row_block_messages",
    "spark_rows",
    "to_ipc",
    "unpack_row",
]

SCHEMA = "topic STRING, schema_id BIGINT, block BINARY, resolved STRING, lo STRING"
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("schema_id", pa.int64()),
        ("block", pa.binary()),  # Arrow IPC: a MESSAGE_BLOCK, or a RowBlock for parquet
        ("resolved", pa.string()),  # a piece's marker: its window (lo, resolved]
        ("lo", pa.string()),
    ]
)
# Messages of one topic and descriptor version, as columns. ``row`` is a csv row
# (:func:`pack_row`), else null.
MESSAGE_BLOCK = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("mvcc_wall", pa.int64()),
        ("mvcc_logical", pa.int64()),
        ("updated_wall", pa.int64()),
        ("updated_logical", pa.int64()),
        ("row", pa.binary()),
    ]
)


Block = tuple[str, int, pa.RecordBatch]  # topic, descriptor version (schema id), rows
BLOCK_BYTES = 8 << 20  # a block's bytes, about: one Spark row must stay far below 2 GiB
FIRST_BLOCK_ROWS = 512  # a piece's first parquet block, before its rows' size is known


class PackedRow(NamedTuple):
    """A row change without its descriptor: the table, its version and family by name."""

    table_id: int
    version: int
    family: str | None
    key: tuple[Any, ...]
    after: dict[str, Any] | None
    had_before: bool


class RowUnpacker(Protocol):
    """Turns a packed row change (:func:`pack_row`) back into a :class:`RowEvent`."""

    def event(self, packed: bytes, mvcc_ts: Timestamp, updated: Timestamp) -> RowEvent: ...


def marker_row(lo: Timestamp, hi: Timestamp) -> pa.RecordBatch:
    """A piece's marker: its window ``[lo, hi]``, ``lo`` the least timestamp its rows
    may have (:attr:`~feedkv.spark.offsets.Piece.first_ts`), after which a file sink
    names the piece's files."""
    return _spark_row(None, None, None, hi, lo)


def block_row(topic: str, schema_id: int, block: pa.RecordBatch) -> pa.RecordBatch:
    """A block of ``topic``'s messages (or parquet rows) at descriptor version
    ``schema_id``, as one Spark row."""
    return _spark_row(topic, schema_id, to_ipc(block), None, None)


def _spark_row(
    topic: str | None,
    schema_id: int | None,
    block: bytes | None,
    resolved: Timestamp | None,
    lo: Timestamp | None,
) -> pa.RecordBatch:
    values = (topic, schema_id, block, resolved, lo)
    arrays = [
        pa.array([str(v) if isinstance(v, Timestamp) else v], type=field.type)
        for v, field in zip(values, ARROW_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


@dataclass
class _OpenBlock:
    """A topic's block of messages being filled."""

    schema_id: int
    gathered: ArrowBuffer = field(default_factory=lambda: ArrowBuffer(MESSAGE_BLOCK))
    nbytes: int = 0


def message_blocks(
    messages: Iterator[Message], *, max_rows: int = BATCH_ROWS, max_bytes: int = BLOCK_BYTES
) -> Iterator[Block]:
    """``messages`` in :data:`MESSAGE_BLOCK` batches of one topic and descriptor version,
    each up to ``max_rows`` messages or about ``max_bytes``. A topic's blocks keep its
    messages' order; topics fill blocks side by side (split column families alternate
    them), since each goes to files of its own."""
    blocks: dict[str, _OpenBlock] = {}
    for message in messages:
        topic = message.topic
        block = blocks.get(topic)
        if block is not None and block.schema_id != message.schema_id:
            yield topic, block.schema_id, block.gathered.flush()
            block = None
        if block is None:
            block = blocks[topic] = _OpenBlock(message.schema_id)
        buffer = block.gathered
        columns = buffer.columns
        row = None if message.row is None else pack_row(message.row)
        columns["key"].append(message.key)
        columns["value"].append(message.value)
        columns["mvcc_wall"].append(message.mvcc_ts.wall)
        columns["mvcc_logical"].append(message.mvcc_ts.logical)
        columns["updated_wall"].append(message.updated.wall)
        columns["updated_logical"].append(message.updated.logical)
        columns["row"].append(row)
        block.nbytes += message.size + (len(row) if row else 0)
        if len(buffer) >= max_rows or block.nbytes >= max_bytes:
            yield topic, block.schema_id, buffer.flush()
            del blocks[topic]
    for topic, block in blocks.items():
        yield topic, block.schema_id, block.gathered.flush()


def block_messages(
    topic: str, schema_id: int, block: pa.RecordBatch, rows: RowUnpacker
) -> Iterator[Message]:
    """The messages of a :data:`MESSAGE_BLOCK`."""
    columns = [column.to_pylist() for column in block.columns]
    for key, value, mvcc_wall, mvcc_logical, wall, logical, row in zip(*columns, strict=True):
        mvcc_ts, updated = Timestamp(mvcc_wall, mvcc_logical), Timestamp(wall, logical)
        event = None if row is None else rows.event(row, mvcc_ts, updated)
        yield Message(topic, key, value, mvcc_ts, updated, schema_id, event)


class BlockSize:
    """How many rows a parquet block takes: up to ``max_rows``, about ``max_bytes``. A
    block's bytes are known once it is taken, so the limit is learnt from the last
    block (the first is small)."""

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.rows = min(max_rows, FIRST_BLOCK_ROWS)

    def take(self, block: ParquetRows) -> pa.RecordBatch:
        rows, batch = len(block), block.take()
        self.rows = max(1, min(self.max_rows, rows * self.max_bytes // max(1, batch.nbytes)))
        return batch


def row_block_messages(
    topic: str, schema_id: int, batch: pa.RecordBatch, ts: Timestamp, file_size: int
) -> Iterator[Message]:
    """A parquet block as :class:`RowBlock` messages of about an eighth of
    ``file_size`` each, so the file sink ends files near where it would for the rows
    one by one. Their timestamps are ``ts`` (the window's end): a block is many rows,
    and the file sink does not read them."""
    rows = max(1, batch.num_rows * file_size // 8 // max(1, batch.nbytes))
    for start in range(0, batch.num_rows, rows):
        yield Message(topic, b"", None, ts, ts, schema_id, RowBlock(batch.slice(start, rows)))


def to_ipc(batch: pa.RecordBatch) -> bytes:
    """``batch`` as an Arrow IPC stream: a block in one Spark row."""
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(out.getvalue())


def from_ipc(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(data).read_next_batch()


def pack_row(event: RowEvent) -> bytes:
    """A row change for csv without its descriptor (:func:`unpack_row` reads it back):
    the writer reads each descriptor version once (a :class:`RowUnpacker`)."""
    family = event.family.name if event.family is not None else None
    fields = (event.table.id, event.table.version, family, event.key, event.after)
    return pickle.dumps((*fields, event.had_before), protocol=pickle.HIGHEST_PROTOCOL)


def unpack_row(packed: bytes) -> PackedRow:
    """What :func:`pack_row` packed."""
    return PackedRow(*pickle.loads(packed))


def spark_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    """The rows of record batches in :data:`ARROW_SCHEMA` as tuples."""
    for batch in batches:
        yield from zip(
            *(batch.column(name).to_pylist() for name in ARROW_SCHEMA.names), strict=True
        )
