"""Secondary index entries: their keys and values.

An index's entries live under their own prefix, ``F3``, apart from the table's rows
(``F2``, :mod:`feedkv.sql.row_codec`)::

    key   = F3 | table id | index id | index columns... [| primary key columns...]
    value = the row's primary key columns (order-preserving encoding)

An index column declared DESC is encoded descending (every byte of its ascending
encoding inverted, :mod:`feedkv.util.encoding`), so its entries sort from the largest
value down, NULLs last, as CockroachDB's descending key encoding orders them.

so a changefeed, which watches a table's row span, never sees them (as CockroachDB's
watch only the primary index), and a table's span holds nothing but its rows. A
non-unique index appends the primary key to every key (entries of equal values stay
apart); a unique one only when an index column is NULL (NULLs are never equal to each
other, so they never conflict), else its key is the values alone and a second row with
them would write the same key: that is the uniqueness check.

An entry is written in the same transaction as its row (:mod:`feedkv.sql.constraints`),
so a reader at any timestamp sees a row and its entries together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.descriptor import Index, TableDescriptor
from feedkv.sql.types import from_key, key_primitive
from feedkv.util.encoding import Direction, decode_value, encode_value, encode_values
from feedkv.util.keys import Span, prefix_end

__all__ = [
    "INDEXES_PREFIX",
    "entry",
    "index_prefix",
    "index_span",
    "primary_key_of",
    "table_indexes_span",
    "values_prefix",
]

INDEXES_PREFIX = b"\xf3"
_ASC, _DESC = Direction.ASC, Direction.DESC


def table_indexes_span(table_id: int) -> Span:
    """Every index entry of table ``table_id``."""
    prefix = INDEXES_PREFIX + encode_value(table_id)
    return Span(prefix, prefix_end(prefix))


def index_prefix(table_id: int, index_id: int) -> bytes:
    return INDEXES_PREFIX + encode_value(table_id) + encode_value(index_id)


def index_span(table_id: int, index_id: int) -> Span:
    prefix = index_prefix(table_id, index_id)
    return Span(prefix, prefix_end(prefix))


def values_prefix(desc: TableDescriptor, index: Index, values: list[Any]) -> bytes:
    """The key prefix of the entries whose leading index columns hold ``values``
    (coerced to the columns' types)."""
    kinds = [_column(desc, i).type.kind for i in index.column_ids]
    primitives = [key_primitive(kind, v) for kind, v in zip(kinds, values, strict=False)]
    directions = None
    if index.descending:
        directions = [_DESC if index.is_descending(n) else _ASC for n in range(len(values))]
    return index_prefix(desc.id, index.id) + encode_values(primitives, directions)


def entry(desc: TableDescriptor, index: Index, row: Mapping[int, Any]) -> tuple[bytes, bytes, bool]:
    """``(key, value, unique)`` of ``row``'s entry in ``index``; ``unique``: the key is
    the index values alone (a unique index, no NULL among them), so another row's entry
    with the same key is a duplicate."""
    values = [row.get(i) for i in index.column_ids]
    key = values_prefix(desc, index, values)
    primary = encode_values([key_primitive(c.type.kind, row.get(c.id)) for c in desc.key_columns])
    unique = index.unique and all(v is not None for v in values)
    if not unique:
        key += primary
    return key, primary, unique


def primary_key_of(desc: TableDescriptor, value: bytes) -> list[Any]:
    """The primary key values an entry's value holds."""
    out = []
    pos = 0
    for column in desc.key_columns:
        raw, pos = decode_value(value, pos)
        out.append(from_key(column.type, raw))
    return out


def _column(desc: TableDescriptor, column_id: int) -> Any:
    column = desc.column_by_id(column_id)
    if column is None:
        raise SQLError("XX000", f"index of table {desc.name!r} names no column {column_id}")
    return column
