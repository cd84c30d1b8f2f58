"""Row formats for files: CSV (``initial_scan='only'`` exports) and Parquet.

Both write the rows themselves (the :class:`~feedkv.changefeed.rows.RowEvent` each
message carries), not encoded messages. CSV has one line per row with the columns in
table order and no header, values as ``feedkv sql`` prints them but NULL as an empty
field. Parquet files have the table's columns, typed (DECIMAL and JSONB as text), plus
``__crdb__event_type`` (``c`` insert or scan, ``u`` update, ``d`` delete: ``u`` and ``d``
need ``diff`` to tell an update from an insert, so without it every write is ``c``),
``__crdb__updated`` and ``__crdb__mvcc_timestamp``.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import Message
from feedkv.sql.descriptor import Column
from feedkv.sql.types import Kind, format_value

__all__ = ["arrow_type", "arrow_value", "csv_bytes", "parquet_bytes"]


def csv_bytes(batch: list[Message]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for message in batch:
        event: RowEvent = message.row
        row = event.after or {}
        writer.writerow(["" if v is None else format_value(v) for v in row.values()])
    return out.getvalue().encode()


_ARROW: dict[Kind, pa.DataType] = {
    Kind.INT: pa.int64(),
    Kind.FLOAT: pa.float64(),
    Kind.DECIMAL: pa.string(),
    Kind.STRING: pa.string(),
    Kind.BYTES: pa.binary(),
    Kind.BOOL: pa.bool_(),
    Kind.DATE: pa.date32(),
    Kind.TIMESTAMP: pa.timestamp("us"),
    Kind.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    Kind.UUID: pa.string(),
    Kind.JSONB: pa.string(),
}


def arrow_type(kind: Kind) -> pa.DataType:
    """The Arrow type a column of ``kind`` is written as."""
    return _ARROW[kind]


def arrow_value(kind: Kind, value: Any) -> Any:
    """A column value as its Arrow type (:func:`arrow_type`) takes it."""
    if value is None:
        return None
    if kind is Kind.DECIMAL or kind is Kind.UUID:
        return str(value)
    if kind is Kind.JSONB:
        return json.dumps(value, sort_keys=True)
    return value


def parquet_bytes(batch: list[Message], compression: str | None) -> bytes:
    columns: dict[str, Column] = {}
    for message in batch:
        for column in message.row.table.columns:
            columns.setdefault(column.name, column)
    data: dict[str, list[Any]] = {name: [] for name in columns}
    kinds, updated, mvcc = [], [], []
    for message in batch:
        event: RowEvent = message.row
        row = event.after
        if row is None:
            kinds.append("d")
            key_names = [c.name for c in event.table.key_columns]
            row = dict(zip(key_names, event.key, strict=True))
        else:
            kinds.append("u" if event.had_before else "c")
        for name, column in columns.items():
            data[name].append(arrow_value(column.type.kind, row.get(name)))
        updated.append(str(event.updated))
        mvcc.append(str(event.mvcc_ts))
    arrays = [pa.array(data[name], type=_ARROW[c.type.kind]) for name, c in columns.items()]
    names = list(columns)
    arrays += [
        pa.array(kinds, pa.string()),
        pa.array(updated, pa.string()),
        pa.array(mvcc, pa.string()),
    ]
    names += ["__crdb__event_type", "__crdb__updated", "__crdb__mvcc_timestamp"]
    table = pa.Table.from_arrays(arrays, names=names)
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression or "snappy")
    return out.getvalue()
