"""Parquet rows in blocks (:class:`RowBlock`, how Spark tasks pass them) make the same
file as the same rows one by one, across descriptor versions and every type."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from feedkv import DB
from feedkv.changefeed.file_formats import PARQUET_META, ParquetRows, parquet_bytes
from feedkv.changefeed.rows import RowDecoder, RowEvent, Target
from feedkv.changefeed.sink import Message, RowBlock
from feedkv.sql import catalog
from feedkv.sql.types import Kind, format_value
from feedkv.util.hlc import Timestamp


def read(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


def message(event: RowEvent) -> Message:
    return Message("t", b"", None, event.mvcc_ts, event.updated, event.table.version, event)


def block(events: list[RowEvent]) -> Message:
    rows = ParquetRows(events[0].table, events[0].columns)
    for event in events:
        rows.add_event(event)
    last = events[-1]
    return Message(
        "t", b"", None, last.mvcc_ts, last.updated, last.table.version, RowBlock(rows.take())
    )


def scanned(db: DB, table: str, ts: Timestamp) -> list[RowEvent]:
    snapshot = catalog.Snapshot(db, ts)
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), table)
    target = Target(desc.id)
    return list(RowDecoder(db, [target], ts).scan_rows(target, ts))


def test_blocks_make_the_file_their_rows_make(db: DB) -> None:
    db.sql(
        'CREATE TABLE t (k INT PRIMARY KEY, "100%" STRING, f FLOAT, d DECIMAL, b BYTES, '
        "ok BOOL, day DATE, at TIMESTAMP, atz TIMESTAMPTZ, u UUID, j JSONB)"
    )
    db.sql(
        "INSERT INTO t VALUES (1, 'a', 1.5, 12.50, x'01ff', true, '2024-05-01', "
        "'2024-05-01 10:00:00.5', '2024-05-01 10:00:00+02', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"x\": [1, null]}'), "
        "(2, 'é', 'NaN', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
        "(3, 'c', 0, 1, x'', false, NULL, NULL, NULL, NULL, '[]')"
    )
    old = scanned(db, "t", db.now())
    db.sql("ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7")
    new = scanned(db, "t", db.now())
    assert old[0].table.version < new[0].table.version
    # An update (diff knew the row before) and a delete, which keeps only the key.
    changed = [
        new[0]._replace(had_before=True),
        new[1]._replace(after=None, had_before=True),
    ]
    events = [*old, *new, *changed]

    by_row = read(parquet_bytes([message(e) for e in events], None))
    mixed = read(
        parquet_bytes([block(old[:2]), message(old[2]), block(new), *map(message, changed)], None)
    )

    assert mixed.schema.equals(by_row.schema)
    assert repr(mixed.to_pylist()) == repr(by_row.to_pylist())  # NB: NaN != NaN
    assert mixed.column_names[-len(PARQUET_META) :] == list(PARQUET_META)
    rows = mixed.to_pylist()
    assert [(r["k"], r["extra"], r["__crdb__event_type"]) for r in rows] == [
        (1, None, "c"),
        (2, None, "c"),
        (3, None, "c"),
        (1, 7, "c"),
        (2, 7, "c"),
        (3, 7, "c"),
        (1, 7, "u"),
        (2, None, "d"),
    ]
    first = rows[0]
    assert (first["d"], first["u"], first["j"]) == (
        "12.50",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        '{"x": [1, null]}',
    )
    assert rows[7]["100%"] is None  # a deleted row keeps its key only
    assert [r["__crdb__mvcc_timestamp"] for r in rows[:3]] == [str(e.mvcc_ts) for e in old]
    assert {r["__crdb__updated"] for r in rows[3:6]} == {str(new[0].updated)}


def test_a_block_weighs_its_bytes_in_a_batch(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES " + ", ".join(f"({i}, '{'x' * 100}')" for i in range(50)))
    events = scanned(db, "t", db.now())
    made = block(events)
    assert isinstance(made.row, RowBlock)
    assert made.size == made.row.batch.nbytes > 50 * 100


def test_a_computed_column_typed_differently_in_two_blocks_is_text_spelled_one_way(
    db: DB,
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1), (2), (3)")
    rows = scanned(db, "t", db.now())
    columns = (("k", Kind.INT, "k"), ("x", None, None))
    numbers = [rows[0]._replace(after={"k": 1, "x": 10}, columns=columns)]
    mixed = [
        rows[1]._replace(after={"k": 2, "x": b"\xff"}, columns=columns),
        rows[2]._replace(after={"k": 3, "x": True}, columns=columns),
    ]
    alone = read(parquet_bytes([message(e) for e in mixed], None))
    together = read(parquet_bytes([block(numbers), *map(message, mixed)], None))
    assert alone.column("x").to_pylist() == [format_value(b"\xff"), format_value(True)]
    assert together.column("x").to_pylist() == [format_value(10), *alone.column("x").to_pylist()]
