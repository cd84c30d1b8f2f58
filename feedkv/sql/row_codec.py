"""Rows to KV pairs and back.

A row of table T is one KV pair per column family::

    key   = F2 | table id | index id (1) | primary key columns... | family id
    value = msgpack array [column id, value, column id, value, ...] of the family's
            non-NULL columns (empty bytes when there are none)

Every part of the key uses the order-preserving encoding of :mod:`feedkv.util.encoding`
(a primary key column declared DESC encoded descending), so key order is SQL order of
the primary key, and all families of a row sit together
under the row's prefix. Values need no order, only speed: msgpack decodes a row in C, a
fifth of the time the key encoding took column by column (scans and changefeeds decode
every row they read). Family 0's pair always exists (its value may be empty); other
families' pairs exist only while one of their columns is not NULL. The catalog lives
under ``F1`` (:mod:`feedkv.sql.catalog`), below every table.

:func:`decode_row_key` and :class:`RowAssembler` turn any table KV pair back into a
row; that is exactly what a changefeed needs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

import msgpack

from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.sql.descriptor import PRIMARY_INDEX_ID, Family, TableDescriptor
from feedkv.sql.types import (
    ColumnType,
    FixedChar,
    Float4,
    Kind,
    from_key,
    from_key_primitive,
    from_value,
    key_primitive,
    value_primitive,
)
from feedkv.storage.mvcc import KeyValue
from feedkv.util.encoding import (
    Direction,
    decode_int_keys,
    decode_value,
    encode_int,
    encode_int_keys,
    encode_value,
    encode_values,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, prefix_end
from feedkv.util.keyspace import CATALOG_PREFIX, TABLES_PREFIX, table_id_of_key

__all__ = [
    "CATALOG_PREFIX",
    "TABLES_PREFIX",
    "RowAssembler",
    "decode_columns",
    "decode_family_value",
    "decode_row_key",
    "decode_row_values",
    "decode_rows",
    "encode_family_value",
    "family_key",
    "row_kvs",
    "rows_pairs",
    "row_prefix",
    "row_split_key",
    "row_span",
    "table_id_of_key",
    "table_prefix",
    "table_span",
]

Row = dict[int, Any]  # column id -> value


def table_prefix(table_id: int) -> bytes:
    return TABLES_PREFIX + encode_value(table_id)


def table_span(table_id: int) -> Span:
    """Every key of the table (all its rows, all families)."""
    prefix = table_prefix(table_id)
    return Span(prefix, prefix_end(prefix))


def index_prefix(desc: TableDescriptor) -> bytes:
    return _layout(desc).index_prefix


def row_prefix(desc: TableDescriptor, key_values: Iterable[Any]) -> bytes:
    """The key prefix shared by the row's families; ``key_values`` are coerced values
    of the primary key columns, in key order (a leading subset gives a key range)."""
    layout = _layout(desc)
    primitives = [
        value if convert is None or value is None else convert(value)
        for convert, value in zip(layout.key_encoders, key_values, strict=False)
    ]
    directions = layout.key_directions[: len(primitives)] if desc.primary_descending else None
    return layout.index_prefix + encode_values(primitives, directions)


def row_span(desc: TableDescriptor, key_values: Iterable[Any]) -> Span:
    prefix = row_prefix(desc, key_values)
    return Span(prefix, prefix_end(prefix))


def family_key(prefix: bytes, family_id: int) -> bytes:
    return prefix + encode_value(family_id)


def encode_family_value(desc: TableDescriptor, family: Family, row: Mapping[int, Any]) -> bytes:
    return _encode_family(_layout(desc).families[family.id][1], row)


def _encode_family(columns: list[tuple[int, _Convert | None]], row: Mapping[int, Any]) -> bytes:
    parts: list[Any] = []
    for column_id, convert in columns:
        value = row.get(column_id)
        if value is not None and convert is not None:
            value = convert(value)  # None: a key column's key holds it all
        if value is not None:
            parts.append(column_id)
            parts.append(value)
    if not parts:
        return b""
    try:
        packed: bytes = msgpack.packb(parts)
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"a string value is not valid Unicode: {exc.reason}") from None
    return packed


def row_kvs(desc: TableDescriptor, row: Mapping[int, Any]) -> dict[bytes, bytes | None]:
    """The KV pairs of ``row`` (coerced values by column id), in the descriptor's family
    order: a value per family, or ``None`` for a non-primary family whose columns are
    all NULL (delete its pair)."""
    prefix = row_prefix(desc, [row.get(i) for i in desc.primary_key])
    out: dict[bytes, bytes | None] = {}
    for family_id, (suffix, columns) in _layout(desc).families.items():
        value = _encode_family(columns, row)
        out[prefix + suffix] = value if value or family_id == 0 else None
    return out


def rows_pairs(
    desc: TableDescriptor, columns: Mapping[int, list[Any]]
) -> tuple[list[bytes], list[bytes]] | None:
    """The keys and values of many rows given column by column (coerced values by
    column id, every column as long), as :func:`row_kvs` makes them row by row, or
    ``None`` when they cannot be made in bulk: more than one column family, a column
    whose key or value needs converting, or a NULL among the value columns (use
    :func:`row_kvs` then). A bulk load's encoding: every step runs over whole columns
    in C (``map``, ``zip``, ``bytes.join``), no Python code per row."""
    layout = _layout(desc)
    if len(layout.families) != 1 or layout.composite or desc.primary_descending:
        return None
    suffix, family = layout.families[0]
    if any(layout.key_encoders) or any(convert is not None for _, convert in family):
        return None
    value_columns = [columns[column_id] for column_id, _ in family]
    if any(None in column for column in value_columns):
        return None
    key_columns = [columns[column_id] for column_id in desc.primary_key]
    count = len(key_columns[0])
    prefix = layout.index_prefix
    ints = len(key_columns) == 1 and set(map(type, key_columns[0])) == {int}
    keys = encode_int_keys(prefix, key_columns[0], suffix) if ints else None
    if keys is None:
        keys = _encoded_keys(prefix, key_columns, suffix)
    if not family:
        return keys, [b""] * count
    pack = _PACKER.pack
    parts: list[Any] = [repeat(_PACKER.pack_array_header(2 * len(family)), count)]
    for (column_id, _), column in zip(family, value_columns, strict=True):
        parts.append(repeat(pack(column_id), count))
        parts.append(map(pack, column))
    try:
        values = list(map(b"".join, zip(*parts, strict=True)))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"a string value is not valid Unicode: {exc.reason}") from None
    return keys, values


def _encoded_keys(prefix: bytes, key_columns: list[list[Any]], suffix: bytes) -> list[bytes]:
    """The primary keys of rows given column by column, in C over the columns."""
    count = len(key_columns[0])
    # NB: an int column (the common key) skips encode_value's dispatch: two Python
    # frames fewer per key
    encoders = [
        encode_int if set(map(type, column)) == {int} else encode_value for column in key_columns
    ]
    encoded = (
        map(encoders[0], key_columns[0])
        if len(key_columns) == 1
        else map(
            b"".join,
            zip(*map(map, encoders, key_columns), strict=True),
        )
    )
    return list(
        map(b"".join, zip(repeat(prefix, count), encoded, repeat(suffix, count), strict=True))
    )


_PACKER = msgpack.Packer()  # NB: its pack keeps no state between calls (autoreset)


def row_split_key(key: bytes) -> bytes:
    """The start of the SQL row that ``key`` belongs to (``key`` itself outside tables):
    splitting a range there keeps all of a row's column families in one range."""
    if not key.startswith(TABLES_PREFIX):
        return key
    pos, last = len(TABLES_PREFIX), len(TABLES_PREFIX)
    try:
        while pos < len(key):
            last = pos
            try:
                _, pos = decode_value(key, pos)
            except InvalidArgumentError:
                # NB: a DESC key column's markers are the ascending ones inverted (an
                # int's reads as an int of its length either way)
                _, pos = decode_value(key, pos, Direction.DESC)
    except InvalidArgumentError:
        return key
    return key[:last]


_Convert = Callable[[Any], Any]


class _Layout:
    """How one descriptor version's keys and values encode and decode, worked out once:
    the primary index prefix; per key column a converter to its primitive and one back;
    per column id a converter from its stored primitive; and per family its key suffix
    and the (column id, converter to the stored primitive) of its non-key columns; per
    column in order, where a decoded row's value comes from. ``None`` stands for a
    converter where the value is already the primitive."""

    __slots__ = (
        "column_sources",
        "columns",
        "composite",
        "converted",
        "families",
        "family_ids",
        "index_prefix",
        "key_converters",
        "key_directions",
        "key_encoders",
    )

    def __init__(self, desc: TableDescriptor) -> None:
        self.index_prefix = table_prefix(desc.id) + encode_value(PRIMARY_INDEX_ID)
        keys = desc.key_columns
        self.key_converters = [_key_converter(c.type) for c in keys]
        self.key_encoders = [_encoder(key_primitive, c.type.kind) for c in keys]
        self.key_directions = [
            Direction.DESC if desc.key_descending(n) else Direction.ASC for n in range(len(keys))
        ]
        self.columns = {c.id: _value_converter(c.type) for c in desc.columns}
        self.converted = [(i, f) for i, f in self.columns.items() if f is not None]
        key_ids = set(desc.primary_key)
        self.families: dict[int, tuple[bytes, list[tuple[int, _Convert | None]]]] = {}
        # A DECIMAL key's key holds its value but not its scale (10.00 and 10 are one
        # key): as CockroachDB's composite encoding, family 0's value keeps the value as
        # written when the key alone would read back otherwise.
        self.composite = [c.id for c in keys if c.type.kind is Kind.DECIMAL]
        for family in desc.families:
            columns: list[tuple[int, _Convert | None]] = []
            if family.id == 0:
                columns.extend((i, _composite_decimal) for i in self.composite)
            for column_id in family.column_ids:
                column = desc.column_by_id(column_id)
                if column is not None and column_id not in key_ids:
                    columns.append((column_id, _encoder(value_primitive, column.type.kind)))
            self.families[family.id] = (encode_value(family.id), columns)
        self.family_ids = {suffix: i for i, (suffix, _) in self.families.items()}
        # Per column in order: (its index among the key columns, or None: in a value).
        key_index = {column_id: k for k, column_id in enumerate(desc.primary_key)}
        self.column_sources = [(key_index.get(c.id), c.id) for c in desc.columns]


_IDENTITY = frozenset({Kind.INT, Kind.FLOAT, Kind.STRING, Kind.BYTES, Kind.BOOL})


def _composite_decimal(value: Any) -> Any:
    """A DECIMAL key column's stored value: ``None`` when its key reads back as it is."""
    if from_key_primitive(Kind.DECIMAL, key_primitive(Kind.DECIMAL, value)).as_tuple() == (
        value.as_tuple()
    ):
        return None
    return value_primitive(Kind.DECIMAL, value)


def _encoder(to_primitive: Callable[[Kind, Any], Any], kind: Kind) -> _Convert | None:
    # NB: JSONB keys must still reach key_primitive, which refuses them.
    if kind in _IDENTITY:
        return None
    return functools.partial(to_primitive, kind)


def _key_converter(ctype: ColumnType) -> Callable[[Any], Any] | None:
    return _typed(ctype) or (
        None if ctype.kind in _IDENTITY else functools.partial(from_key, ctype)
    )


def _value_converter(ctype: ColumnType) -> Callable[[Any], Any] | None:
    return _typed(ctype) or (
        None if ctype.kind in _IDENTITY else functools.partial(from_value, ctype)
    )


def _typed(ctype: ColumnType) -> Callable[[Any], Any] | None:
    """What gives a FLOAT4 or CHAR(n) value read back its type (stored as a plain float
    and string), or None."""
    if ctype.kind is Kind.FLOAT and ctype.width == 32:
        return Float4
    if ctype.kind is Kind.STRING and ctype.fixed and ctype.width is not None:
        return functools.partial(FixedChar.of, width=ctype.width)
    return None


def _layout(desc: TableDescriptor) -> _Layout:
    layout: _Layout | None = desc._codec
    if layout is None:
        layout = _Layout(desc)
        object.__setattr__(desc, "_codec", layout)
    return layout


def decode_row_key(desc: TableDescriptor, key: bytes) -> tuple[tuple[Any, ...], int, bytes]:
    """``(primary key values, family id, row prefix)`` of a row's KV key."""
    layout = _layout(desc)
    if not key.startswith(layout.index_prefix):
        raise SQLError("XX000", f"key {key!r} is not a row of table {desc.name!r} (id {desc.id})")
    pos = len(layout.index_prefix)
    try:
        values = []
        for convert, direction in zip(layout.key_converters, layout.key_directions, strict=True):
            raw, pos = decode_value(key, pos, direction)
            values.append(raw if convert is None or raw is None else convert(raw))
        prefix_len = pos
        known = layout.family_ids.get(key[pos:])
        if known is not None:
            return tuple(values), known, key[:prefix_len]
        family_id, pos = decode_value(key, pos)  # a family this version does not have
    except InvalidArgumentError as exc:
        raise SQLError("XX000", f"cannot decode row key {key!r}: {exc}") from exc
    if pos != len(key) or not isinstance(family_id, int):
        raise SQLError("XX000", f"cannot decode row key {key!r}: malformed family suffix")
    return tuple(values), family_id, key[:prefix_len]


def decode_family_value(desc: TableDescriptor, value: bytes) -> Row:
    """The columns stored in one family's value. Columns this version of the descriptor
    no longer has (dropped ones) are skipped."""
    if not value:
        return {}
    layout = _layout(desc)
    try:
        flat = msgpack.unpackb(value)
    except (ValueError, msgpack.UnpackException) as exc:
        raise SQLError("XX000", f"cannot decode a row value of {desc.name!r}: {exc}") from exc
    if type(flat) is not list or len(flat) % 2:
        raise SQLError("XX000", f"cannot decode a row value of {desc.name!r}: not column pairs")
    pairs = iter(flat)
    row: Row = dict(zip(pairs, pairs, strict=False))  # even length checked; strict: +0.5 us
    columns = layout.columns
    if not row.keys() <= columns.keys():
        row = {i: v for i, v in row.items() if i in columns}
    for column_id, convert in layout.converted:
        raw = row.get(column_id)
        if raw is not None:
            row[column_id] = convert(raw)
    return row


def decode_rows(
    desc: TableDescriptor, kvs: Iterable[KeyValue]
) -> Iterator[tuple[Row, list[int], Timestamp]]:
    """Whole rows from the family pairs of consecutive rows (in key order), each with
    the family ids it has and the newest timestamp among them."""
    empty: Row = dict.fromkeys(c.id for c in desc.columns)
    key_ids = desc.primary_key
    current: Row | None = None
    families: list[int] = []
    newest = Timestamp(0, 0)
    current_prefix = b""
    for kv in kvs:
        key_values, family, prefix = decode_row_key(desc, kv.key)
        if current is None or prefix != current_prefix:
            if current is not None:
                yield current, families, newest
            current = empty.copy()
            current.update(zip(key_ids, key_values, strict=False))  # as long: one decoder
            current_prefix = prefix
            families = []
            newest = kv.ts
        current.update(decode_family_value(desc, kv.value))
        families.append(family)
        if kv.ts > newest:
            newest = kv.ts
    if current is not None:
        yield current, families, newest


def decode_row_values(
    desc: TableDescriptor, kvs: Iterable[KeyValue]
) -> Iterator[tuple[tuple[Any, ...], list[Any], Timestamp]]:
    """:func:`decode_rows` as a scan emits them: each row's primary key values, every
    column's value in column order, and its newest timestamp. A table of one family
    has one pair per row, decoded without merging (a pair of a family the table no
    longer has holds no column of it)."""
    if len(desc.families) > 1:
        key_ids = desc.primary_key
        for row, _families, ts in decode_rows(desc, kvs):
            # NB: decode_rows fills every column, in column order.
            yield tuple([row[i] for i in key_ids]), list(row.values()), ts
        return
    layout = _layout(desc)
    plan = layout.column_sources
    composite = layout.composite
    for key, value, ts in kvs:
        key_values, family, _prefix = decode_row_key(desc, key)
        if family:
            continue
        get = decode_family_value(desc, value).get
        if composite:
            key_values = tuple(get(i, v) for i, v in zip(desc.primary_key, key_values, strict=True))
        yield key_values, [get(i) if k is None else key_values[k] for k, i in plan], ts


def decode_columns(
    desc: TableDescriptor, kvs: Sequence[KeyValue], column_ids: Sequence[int]
) -> tuple[list[bytes], list[list[Any]]]:
    """:func:`decode_row_values` by column, for a table of one family: the keys of the
    rows of ``kvs`` (consecutive, in key order) and, per column of ``column_ids``, its
    values in the rows' order. The counterpart of :func:`rows_pairs`: the values are
    unpacked by one msgpack call and the columns taken from rows of the usual layout
    (every stored column present, in family order) in C; only other rows (a NULL, a
    dropped or newly added column) are decoded one by one."""
    if len(desc.families) != 1:
        raise InvalidArgumentError(f"table {desc.name!r} has more than one column family")
    layout = _layout(desc)
    keys = list(map(_KEY_OF, kvs))
    ints = None
    if (
        len(desc.primary_key) == 1
        and desc.key_columns[0].type.kind is Kind.INT
        and not desc.primary_descending
    ):
        ints = decode_int_keys(layout.index_prefix, keys, layout.families[0][0])
    if ints is not None:  # NB: the usual key, decoded in C
        key_columns = [ints]
        values = [value or _EMPTY_ROW for value in map(_VALUE_OF, kvs)]
    else:
        keys, key_values, values = [], [], []
        for key, value, _ts in kvs:
            decoded, family, _prefix = decode_row_key(desc, key)
            if family:
                continue  # NB: a family the table no longer has holds none of its columns
            keys.append(key)
            key_values.append(decoded)
            values.append(value or _EMPTY_ROW)
        key_columns = [list(column) for column in zip(*key_values, strict=True)] or [
            [] for _ in desc.primary_key
        ]
    if layout.composite:  # NB: a DECIMAL key's value as written is in the row's value
        rows = [row for _key, row, _ts in decode_row_values(desc, kvs)]
        positions = {c.id: n for n, c in enumerate(desc.columns)}
        return keys, [list(map(itemgetter(positions[i]), rows)) for i in column_ids]
    try:
        # NB: tuples: a million lists would keep the cyclic GC busy (5x the unpacking)
        packed = _PACKER.pack_array_header(len(values)) + b"".join(values)
        flat = msgpack.unpackb(packed, use_list=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise SQLError("XX000", f"cannot decode a row value of {desc.name!r}: {exc}") from exc
    stored = [column_id for column_id, _convert in layout.families[0][1]]
    width = 2 * len(stored)
    ids_of: Callable[[Any], Any] = itemgetter(*range(0, width, 2)) if stored else len
    usual_ids = ids_of(tuple(part for column_id in stored for part in (column_id, None)))
    try:  # NB: in C over the rows; the usual case
        usual = set(map(len, flat)) <= {width} and set(map(ids_of, flat)) <= {usual_ids}
    except (TypeError, LookupError):  # a row value that is not an array
        usual = False
    other = (
        []
        if usual
        else [
            n
            for n, row in enumerate(flat)
            if type(row) is not tuple or len(row) != width or ids_of(row) != usual_ids
        ]
    )
    if other:  # NB: decoded below one by one; their place holds NULLs until then
        nulls = (None,) * width
        unusual = set(other)
        flat = [nulls if n in unusual else row for n, row in enumerate(flat)]
    key_position = {column_id: k for k, column_id in enumerate(desc.primary_key)}
    value_position = {column_id: 2 * n + 1 for n, column_id in enumerate(stored)}
    columns: list[list[Any]] = []
    for column_id in column_ids:
        if column_id in key_position:
            columns.append(key_columns[key_position[column_id]])
            continue
        position = value_position.get(column_id)
        if position is None:  # a column not stored in the family: NULL in every row
            columns.append([None] * len(keys))
            continue
        column = list(map(itemgetter(position), flat))
        convert = layout.columns.get(column_id)
        if convert is not None:
            column = [None if v is None else convert(v) for v in column]
        columns.append(column)
    for n in other:
        row = decode_family_value(desc, values[n])
        for column_id, column in zip(column_ids, columns, strict=True):
            if column_id not in key_position:
                column[n] = row.get(column_id)
    return keys, columns


_EMPTY_ROW = b"\x90"  # msgpack's empty array: a row value with no column, in a batch
_KEY_OF, _VALUE_OF = itemgetter(0), itemgetter(1)  # a KeyValue's key, its value


class RowAssembler:
    """Merges the family KV pairs of consecutive rows (as a scan returns them, in key
    order) into whole rows: ``dict`` of column id -> value with NULLs filled in, plus
    the keys of the pairs the row has (to delete it, or to write only what changed)."""

    def __init__(self, desc: TableDescriptor) -> None:
        self._desc = desc

    def rows(self, kvs: Iterable[KeyValue]) -> Iterator[tuple[Row, dict[bytes, bytes]]]:
        desc = self._desc
        empty: Row = dict.fromkeys(c.id for c in desc.columns)
        key_ids = desc.primary_key
        current: Row | None = None
        pairs: dict[bytes, bytes] = {}
        current_prefix = b""
        for kv in kvs:
            key_values, _family, prefix = decode_row_key(desc, kv.key)
            if current is None or prefix != current_prefix:
                if current is not None:
                    yield current, pairs
                current = empty.copy()
                current.update(zip(key_ids, key_values, strict=False))  # as long: one decoder
                current_prefix = prefix
                pairs = {}
            current.update(decode_family_value(desc, kv.value))
            pairs[kv.key] = kv.value
        if current is not None:
            yield current, pairs
