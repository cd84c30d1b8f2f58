"""Row formats for files: CSV (``initial_scan='only'`` exports) and Parquet.

Both write the rows themselves (the :class:`~feedkv.changefeed.rows.RowEvent` each
message carries), not encoded messages. CSV has one line per row with the columns in
table order and no header, values as ``feedkv sql`` prints them but NULL as an empty
field. Parquet files have the table's columns, typed (JSONB as text, a DECIMAL as a
decimal of its precision and scale, or as text when it has none), plus
``__crdb__event_type`` (``c`` insert or scan, ``u`` update, ``d`` delete, and for lake
changelogs ``b``, the row before an update: ``u`` and ``d`` need ``diff`` to tell an
update from an insert, so without it every write is ``c``), ``__crdb__updated`` and
``__crdb__mvcc_timestamp``; the schema's metadata names the primary key's columns and
the descriptor version (:data:`ROWS_KEY`, :data:`ROWS_VERSION`). With a CDC query,
Parquet files have the query's columns instead: one it reads as is keeps its column's
type, a computed one takes the type of its values (text when they differ).
"""

from __future__ import annotations

import csv
import decimal
import io
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from feedkv.changefeed import cockroach_parquet
from feedkv.changefeed.cockroach_parquet import CockroachParquet
from feedkv.changefeed.rows import Columns, RowEvent
from feedkv.changefeed.sink import Message, RowBlock
from feedkv.sql import jsonb
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.types import ColumnType, Kind, format_value
from feedkv.util.hlc import Timestamp

__all__ = [
    "PARQUET_META",
    "ROWS_KEY",
    "ROWS_VERSION",
    "ParquetRows",
    "arrow_type",
    "arrow_value",
    "csv_bytes",
    "parquet_bytes",
]


def csv_bytes(batch: list[Message], header: bool = False) -> bytes:
    """The rows of ``batch`` as CSV; with ``header`` (the option ``csv_header``), a first
    line of the column names of the file's first row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header and batch:
        first: RowEvent = batch[0].row
        writer.writerow(list(first.after or {}))
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
    Kind.TIME: pa.string(),
    Kind.INTERVAL: pa.string(),
    Kind.INET: pa.string(),
    Kind.BIT: pa.string(),
    Kind.VARBIT: pa.string(),
    Kind.ENUM: pa.string(),
    Kind.ARRAY: pa.string(),
}


def arrow_type(ctype: ColumnType) -> pa.DataType:
    """The Arrow type a column of ``ctype`` is written as: a DECIMAL with a precision
    as a decimal of its precision and scale (up to 38 digits), other DECIMALs as text."""
    if ctype.kind is Kind.DECIMAL:
        return cockroach_parquet.decimal_type(ctype) or _ARROW[Kind.DECIMAL]
    return _ARROW[ctype.kind]


_SQL_TEXT = frozenset(
    {Kind.TIME, Kind.INTERVAL, Kind.INET, Kind.ENUM, Kind.ARRAY, Kind.BIT, Kind.VARBIT}
)
_CONVERTED = frozenset({Kind.DECIMAL, Kind.UUID, Kind.JSONB, *_SQL_TEXT})  # written as text


def arrow_value(ctype: ColumnType, value: Any) -> Any:
    """A column value as its Arrow type (:func:`arrow_type`) takes it."""
    kind = ctype.kind
    if value is None or kind not in _CONVERTED:
        return value
    if kind is Kind.JSONB:
        return jsonb.dumps(value, spaced=True)
    if kind in _SQL_TEXT:
        return format_value(value)
    if kind is Kind.DECIMAL and cockroach_parquet.decimal_type(ctype):
        return cockroach_parquet.finite_decimal(value, ctype)
    return str(value)


PARQUET_META = ("__crdb__event_type", "__crdb__updated", "__crdb__mvcc_timestamp")
# The schema metadata of ParquetRows' batches: the primary key's column names (JSON) and
# the descriptor version of the rows.
ROWS_KEY = "feedkv.key"
ROWS_VERSION = "feedkv.version"


class ParquetRows:
    """Rows of one descriptor version gathered as a Parquet file's columns (the table's,
    or with ``columns`` a CDC query's, then :data:`PARQUET_META`), taken as record
    batches. With ``cockroach``, in CockroachDB's layout instead (its column types and
    metadata columns: :mod:`feedkv.changefeed.cockroach_parquet`), as file sinks write
    them; without, in the layout the lake sinks keep rows in."""

    def __init__(
        self,
        desc: TableDescriptor,
        columns: Columns | None = None,
        *,
        images: bool = False,
        cockroach: CockroachParquet | None = None,
    ) -> None:
        self.desc = desc
        self.columns = columns
        self.images = images
        self.cockroach = cockroach
        named = columns or tuple((c.name, c.type.kind, c.name) for c in desc.columns)
        self._names = [name for name, _kind, _source in named]
        self._sources = [source for _name, _kind, source in named]
        self._key_names = [c.name for c in desc.key_columns]
        self._ctypes: list[ColumnType | None] = [
            _column_type(desc, kind, source) for _name, kind, source in named
        ]
        self._before: list[str | None] = []  # cockroach's __crdb__before, with diff
        # NB: columns, not rows: a block's rows held as lists or tuples kept the cyclic
        # GC busy (~1 us a row); values in column lists are not tracked.
        self._columns: list[list[Any]] = [[] for _ in named]
        self._event_types: list[str] = []
        self._updated: list[str] = []
        self._mvcc: list[str] = []
        self._texts: dict[Timestamp, str] = {}  # NB: rows share timestamps (a txn's, a scan's)
        # Which rows these are, for a reader that keeps rows by key (the lake sinks).
        self._metadata = {
            ROWS_KEY: json.dumps(self._key_names),
            ROWS_VERSION: str(desc.version),
        }

    def __len__(self) -> int:
        return len(self._event_types)

    def holds(self, desc: TableDescriptor, columns: Columns | None = None) -> bool:
        """Whether rows of ``desc`` (with ``columns``) go here: the same table, version
        and projection."""
        return (desc.id, desc.version) == (self.desc.id, self.desc.version) and (
            columns == self.columns
        )

    def add(
        self,
        values: Sequence[Any],
        event_type: str,
        mvcc_ts: Timestamp,
        updated: Timestamp,
        before: str | None = None,
    ) -> None:
        """One row: ``values`` in the file's column order; ``event_type`` ``c``, ``u`` or
        ``d``; ``before``: the previous row as JSON (CockroachDB's ``__crdb__before``)."""
        self._before.append(before)
        texts = self._texts
        for column, value in zip(self._columns, values, strict=True):
            column.append(value)
        self._event_types.append(event_type)
        self._mvcc.append(texts.get(mvcc_ts) or texts.setdefault(mvcc_ts, str(mvcc_ts)))
        self._updated.append(texts.get(updated) or texts.setdefault(updated, str(updated)))

    def add_event(self, event: RowEvent) -> None:
        """One row change: a deletion keeps its key columns only (those a query reads
        as is, under their names in the query); ``u`` needs ``diff`` (``had_before``) to
        tell an update from an insert. With ``images`` (a lake changelog, as Delta's
        Change Data Feed has them) and ``diff``, an update is preceded by the row before
        it (event type ``b``) and a deletion carries the whole deleted row. In CockroachDB's
        layout the row before is ``__crdb__before`` instead."""
        if self.cockroach is not None:
            self._add_cockroach(event)
            return
        row = event.after
        before = event.before if self.images and event.had_before else None
        if before is not None:
            values = [before.get(name) for name in self._names]
            if row is None:
                self.add(values, "d", event.mvcc_ts, event.updated)
                return
            self.add(values, "b", event.mvcc_ts, event.updated)
        if row is None:
            key = dict(zip(self._key_names, event.key, strict=True))
            values = [key.get(source) if source else None for source in self._sources]
            self.add(values, "d", event.mvcc_ts, event.updated)
            return
        event_type = "u" if event.had_before else "c"
        self.add([row.get(name) for name in self._names], event_type, event.mvcc_ts, event.updated)

    def _add_cockroach(self, event: RowEvent) -> None:
        row = event.after
        before = None
        if event.before is not None and self.cockroach is not None and self.cockroach.diff:
            before = _before_json(event.table, event.before)
        if row is None:
            key = dict(zip(self._key_names, event.key, strict=True))
            values = [key.get(source) if source else None for source in self._sources]
            self.add(values, "d", event.mvcc_ts, event.updated, before)
            return
        event_type = "u" if event.had_before else "c"
        values = [row.get(name) for name in self._names]
        self.add(values, event_type, event.mvcc_ts, event.updated, before)

    def take(self) -> pa.RecordBatch:
        """The rows added since the last take."""
        if self.cockroach is not None:
            return self._take_cockroach(self.cockroach)
        self._before.clear()
        arrays = []
        for values, ctype in zip(self._columns, self._ctypes, strict=True):
            if ctype is None:
                arrays.append(_computed_array(values))
            else:
                converted = values
                if ctype.kind in _CONVERTED:
                    converted = [arrow_value(ctype, v) for v in values]
                arrays.append(pa.array(converted, type=arrow_type(ctype)))
            values.clear()
        for meta in (self._event_types, self._updated, self._mvcc):
            arrays.append(pa.array(meta, pa.string()))
            meta.clear()
        self._texts.clear()
        names = [*self._names, *PARQUET_META]
        fields = [pa.field(name, array.type) for name, array in zip(names, arrays, strict=True)]
        schema = pa.schema(fields, metadata=self._metadata)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _take_cockroach(self, layout: CockroachParquet) -> pa.RecordBatch:
        arrays = []
        for values, ctype in zip(self._columns, self._ctypes, strict=True):
            if ctype is None:  # a computed column: typed by its values
                arrays.append(_computed_array(values))
            else:
                arrays.append(cockroach_parquet.arrow_array(ctype, values))
            values.clear()
        meta: dict[str, pa.Array] = {
            cockroach_parquet.EVENT_TYPE: pa.array(self._event_types, pa.string()),
            cockroach_parquet.UPDATED: pa.array(self._updated, pa.string()),
            cockroach_parquet.MVCC_TIMESTAMP: pa.array(self._mvcc, pa.string()),
            cockroach_parquet.BEFORE: pa.array(self._before, pa.json_()),
        }
        arrays += [meta[name] for name in layout.meta]
        for column in (self._event_types, self._updated, self._mvcc, self._before):
            column.clear()
        self._texts.clear()
        names = [*self._names, *layout.meta]
        fields = [pa.field(name, array.type) for name, array in zip(names, arrays, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata=self._metadata))


def _column_type(desc: TableDescriptor, kind: Kind | None, source: str | None) -> ColumnType | None:
    """The type of a file column: its table column's (a query column read as is), else
    of its kind (``None``: a computed one of no one kind)."""
    if source is not None:
        found = next((c for c in desc.columns if c.name == source), None)
        if found is not None:
            return found.type
    return ColumnType(kind) if kind is not None else None


def _before_json(desc: TableDescriptor, row: dict[str, Any]) -> str:
    """A previous row as the JSON object CockroachDB's ``__crdb__before`` holds (the
    changefeed's JSON of a row: keys sorted)."""
    from feedkv.changefeed.encoder import RowFormat

    return RowFormat(desc).row(row)


def _computed_array(values: list[Any]) -> pa.Array:
    """A CDC query's computed column, typed by its values: JSON, UUID and DECIMAL
    values as text (as table columns are written), and all as text when their types
    differ."""
    plain = [_plain(v) for v in values]
    try:
        return pa.array(plain)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _text_array(plain)


def _text_array(values: list[Any]) -> pa.Array:
    """Values as ``feedkv sql`` prints them (one spelling, whichever block they are in)."""
    return pa.array([None if v is None else format_value(v) for v in values], pa.string())


def _plain(value: Any) -> Any:
    if jsonb.is_json(value):
        return jsonb.dumps(value, spaced=True)
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    return value


def _concat(tables: list[pa.Table]) -> pa.Table:
    """``tables`` as one, their columns merged by name; a column typed differently by
    its values in two blocks (a computed one) becomes text."""
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        types: dict[str, set[pa.DataType]] = {}
        for table in tables:
            for field in table.schema:
                types.setdefault(field.name, set()).add(field.type)
        mixed = {name for name, seen in types.items() if len(seen - {pa.null()}) > 1}
        return pa.concat_tables(
            [_as_text(table, mixed) for table in tables], promote_options="permissive"
        )


def _as_text(table: pa.Table, names: set[str]) -> pa.Table:
    for index, field in enumerate(table.schema):
        if field.name in names and field.type != pa.string():
            text = _text_array(table.column(index).to_pylist())
            table = table.set_column(index, field.name, text)
    return table


def parquet_bytes(
    batch: list[Message], compression: str | None, cockroach: CockroachParquet | None = None
) -> bytes:
    """A Parquet file of ``batch``'s rows, in order: :class:`RowEvent` rows and
    :class:`RowBlock` blocks. Rows of several descriptor versions share the file's
    columns (each version's, in the order they first appear); a row fills those its
    version has. ``cockroach``: in CockroachDB's layout (blocks must be built in it)."""
    batches: list[pa.RecordBatch] = []
    rows: ParquetRows | None = None
    for message in batch:
        row = message.row
        same = isinstance(row, RowEvent) and rows is not None and rows.holds(row.table, row.columns)
        if rows is not None and not same:
            batches.append(rows.take())
            rows = None
        if isinstance(row, RowBlock):
            batches.append(row.batch)
            continue
        if rows is None:
            rows = ParquetRows(row.table, row.columns, cockroach=cockroach)
        rows.add_event(row)
    if rows is not None:
        batches.append(rows.take())
    table = _concat([pa.Table.from_batches([b]) for b in batches])
    meta = cockroach.meta if cockroach is not None else PARQUET_META
    names = [n for n in table.column_names if n not in meta] + list(meta)
    out = io.BytesIO()
    pq.write_table(table.select(names), out, compression=compression or "snappy")
    return out.getvalue()
