"""feedkv's SQL types as PostgreSQL sees them: type OIDs, and each value's text and
binary format, both ways (results out, parameters in).

The OIDs are PostgreSQL's (``pg_type.oid``), as CockroachDB reports them: INT is int8
(INT4 int4, INT2 int2), FLOAT float8, FLOAT4 (REAL) float4, DECIMAL numeric, STRING
text, CHAR(n) bpchar, BYTES bytea, BOOL bool, DATE date, TIMESTAMP timestamp,
TIMESTAMPTZ timestamptz, UUID uuid, JSONB jsonb, a row value ``(1, 'a')`` record (2249);
an array is its elements' array type (int2[] 1005, int4[] 1007, int8[] 1016, float4[]
1021, float8[] 1022, bpchar[] 1014, text[] 1009, ...), its elements in their own widths.
A column's type modifier (RowDescription's, ``pg_attribute.atttypmod``) is PostgreSQL's:
a length plus 4 for CHAR(n) and STRING(n), ``(precision << 16 | scale) + 4`` for
DECIMAL(p,s), the bit count for BIT(n) and VARBIT(n), else -1.

Text formats follow PostgreSQL's output with ``DateStyle=ISO`` (``t``/``f``, ``\\x``
hex bytes, ``2024-05-01 12:00:00.5+00``; a TIMESTAMPTZ in the session's time zone,
``2024-05-01 08:00:00.5-04``); floats print as
CockroachDB prints them (the shortest digits that read back exactly, ``1e+06``). The
binary formats are PostgreSQL's ``*send``/``*recv`` (big-endian integers, days and
microseconds since 2000-01-01, numeric as base-10000 digits, jsonb with its version
byte 1).

Parameters arrive as bytes with the type the client gave in Parse (0 when it gave
none). A text parameter of type 0, text or varchar stays a string, which the SQL layer
converts as it converts a string literal (``id = $1`` with ``'7'``); one of a known type
becomes that type's value; a value that does not read as its type is SQLSTATE 22P02.
"""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import json
import math
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.arrays import Array, parse_array_text
from feedkv.sql.bits import BitString
from feedkv.sql.inet import Inet
from feedkv.sql.interval import Interval
from feedkv.sql.records import RECORD_OID, Record
from feedkv.sql.time_zone import (
    INFINITE_MICROS,
    InfiniteTimestamp,
    current_zone,
    infinite_timestamp,
    infinity_of,
)
from feedkv.sql.types import (
    ColumnType,
    FixedChar,
    Float4,
    Kind,
    float_text,
    format_value,
    kind_of_value,
)

__all__ = [
    "ENUM_OID_BASE",
    "OID",
    "OidName",
    "WireType",
    "binary_reader",
    "column_oid",
    "decode_param",
    "encode_binary",
    "encode_text",
    "kind_of_oid",
    "type_of_param",
    "oid_of_kind",
    "oid_of_type",
    "type_size",
    "typmod_of_type",
    "wire_type",
]


# A user-defined type's OID: this plus its descriptor id, as CockroachDB numbers them.
ENUM_OID_BASE = 100_000


class OID:
    """PostgreSQL type OIDs (``pg_type.oid``) feedkv sends or accepts."""

    UNSPECIFIED: Final = 0
    BOOL: Final = 16
    BYTEA: Final = 17
    CHAR: Final = 18
    NAME: Final = 19
    REGPROC: Final = 24
    INT8: Final = 20
    INT2: Final = 21
    INT4: Final = 23
    TEXT: Final = 25
    OID: Final = 26
    JSON: Final = 114
    FLOAT4: Final = 700
    FLOAT8: Final = 701
    UNKNOWN: Final = 705
    BPCHAR: Final = 1042
    VARCHAR: Final = 1043
    DATE: Final = 1082
    TIMESTAMP: Final = 1114
    TIMESTAMPTZ: Final = 1184
    NUMERIC: Final = 1700
    UUID: Final = 2950
    JSONB: Final = 3802
    TIME: Final = 1083
    INTERVAL: Final = 1186
    INET: Final = 869
    BIT: Final = 1560
    VARBIT: Final = 1562
    INT2VECTOR: Final = 22  # pg_index.indkey's: int2s, their text separated by spaces
    OIDVECTOR: Final = 30  # pg_index.indclass's: oids, the same way
    REGCLASS: Final = 2205  # a relation's OID, its text the relation's name
    REGTYPE: Final = 2206  # a type's OID, its text format_type's name
    VOID: Final = 2278  # accepted only to refuse it (see connection._refuse_void)


_OID_OF_KIND: dict[Kind, int] = {
    Kind.INT: OID.INT8,
    Kind.FLOAT: OID.FLOAT8,
    Kind.DECIMAL: OID.NUMERIC,
    Kind.STRING: OID.TEXT,
    Kind.BYTES: OID.BYTEA,
    Kind.BOOL: OID.BOOL,
    Kind.DATE: OID.DATE,
    Kind.TIMESTAMP: OID.TIMESTAMP,
    Kind.TIMESTAMPTZ: OID.TIMESTAMPTZ,
    Kind.UUID: OID.UUID,
    Kind.JSONB: OID.JSONB,
    Kind.TIME: OID.TIME,
    Kind.INTERVAL: OID.INTERVAL,
    Kind.INET: OID.INET,
    Kind.BIT: OID.BIT,
    Kind.VARBIT: OID.VARBIT,
}

_SIZES = {
    OID.BOOL: 1,
    OID.INT2: 2,
    OID.INT4: 4,
    OID.INT8: 8,
    OID.FLOAT4: 4,
    OID.FLOAT8: 8,
    OID.DATE: 4,
    OID.TIMESTAMP: 8,
    OID.TIMESTAMPTZ: 8,
    OID.UUID: 16,
    OID.TIME: 8,
    OID.INTERVAL: 16,
    OID.OID: 4,
    OID.REGPROC: 4,
    OID.REGCLASS: 4,
    OID.REGTYPE: 4,
    OID.NAME: 64,
    OID.CHAR: 1,
}

_STRINGS = frozenset({OID.UNSPECIFIED, OID.TEXT, OID.VARCHAR, OID.BPCHAR, OID.NAME, OID.CHAR})
_STRINGS_TOO = _STRINGS | {OID.UNKNOWN}

_PG_EPOCH_DATE = datetime.date(2000, 1, 1)
_PG_EPOCH = datetime.datetime(2000, 1, 1)
_PG_EPOCH_TZ = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)


def _int_binary(raw: bytes) -> int:
    """An integer as int2, int4 or int8, told by its width (a column of INT takes
    any: a client may well send an INT4 column's values as int4)."""
    size = len(raw)
    if size not in (2, 4, 8):
        raise ValueError(f"{size} bytes: an integer is 2, 4 or 8")
    return int.from_bytes(raw, "big", signed=True)


def _float_binary(raw: bytes) -> float:
    """A float as float4 or float8, told by its width."""
    if len(raw) == 4:
        return float(struct.unpack("!f", raw)[0])
    if len(raw) == 8:
        return float(struct.unpack("!d", raw)[0])
    raise ValueError(f"{len(raw)} bytes: a float is 4 or 8")


# Element OIDs of arrays read in binary beyond the ones feedkv sends (``pg_type.typarray``).
_MORE_ARRAY_ELEMENTS = {
    1005: OID.INT2,
    1007: OID.INT4,
    1021: OID.FLOAT4,
    1015: OID.VARCHAR,
    1028: OID.OID,  # oid[]: asyncpg's type introspection sends one
}


def _array_from_binary(raw: bytes) -> Array:
    """PostgreSQL's array_recv for one-dimensional arrays (or empty ones): dimensions,
    flags, element type, length and lower bound, then each element's length (-1: NULL)
    and binary value."""
    ndim, flags, element_oid = struct.unpack_from("!iiI", raw)
    kind = _KIND_OF_OID.get(element_oid)
    reader = _BINARY_IN.get(element_oid)
    if kind is None or reader is None or element_oid in _ARRAY_OIDS_READ:
        raise ValueError(f"arrays of type oid {element_oid} are not supported")
    if flags not in (0, 1):
        raise ValueError(f"array flags {flags}")
    if ndim == 0:
        if len(raw) != 12:
            raise ValueError("trailing bytes after an empty array")
        return Array((), ColumnType(kind))
    if ndim != 1:
        raise ValueError(f"{ndim}-dimensional arrays are not supported")
    length, _lower = struct.unpack_from("!ii", raw, 12)
    if length < 0:
        raise ValueError(f"array length {length}")
    at = 20
    items: list[Any] = []
    for _ in range(length):
        (size,) = struct.unpack_from("!i", raw, at)
        at += 4
        if size == -1:
            items.append(None)
            continue
        if size < 0 or at + size > len(raw):
            raise ValueError(f"array element of {size} bytes")
        items.append(reader(raw[at : at + size]))
        at += size
    if at != len(raw):
        raise ValueError(f"{len(raw) - at} trailing bytes after the array")
    return Array(tuple(items), ColumnType(kind))


def binary_reader(ctype: ColumnType) -> Callable[[bytes], Any]:
    """What reads a value of a column of ``ctype`` sent in binary (COPY FROM ... BINARY):
    its type's reader, lenient about integer and float widths. It raises ValueError (or
    struct.error) for bytes that do not read as the type."""
    if ctype.kind is Kind.INT:
        return _int_binary
    if ctype.kind is Kind.FLOAT:
        return _float_binary
    if ctype.kind is Kind.ARRAY:
        return _array_from_binary
    if ctype.kind is Kind.ENUM:
        return _BINARY_IN[OID.TEXT]  # its label
    return _BINARY_IN[oid_of_type(ctype)]


# The OIDs of one-dimensional arrays by element kind (``pg_type.typarray``).
_ARRAY_OIDS: dict[Kind, int] = {
    Kind.BOOL: 1000,
    Kind.BYTES: 1001,
    Kind.STRING: 1009,
    Kind.INT: 1016,
    Kind.FLOAT: 1022,
    Kind.INET: 1041,
    Kind.TIMESTAMP: 1115,
    Kind.DATE: 1182,
    Kind.TIME: 1183,
    Kind.TIMESTAMPTZ: 1185,
    Kind.INTERVAL: 1187,
    Kind.DECIMAL: 1231,
    Kind.UUID: 2951,
    Kind.BIT: 1561,
    Kind.VARBIT: 1563,
    Kind.ENUM: 1009,  # text[], as an enum goes out as text
}
_ELEMENT_OF_ARRAY = {oid: kind for kind, oid in _ARRAY_OIDS.items() if kind is not Kind.ENUM}
_ARRAY_OIDS_READ = frozenset(_ELEMENT_OF_ARRAY) | frozenset(_MORE_ARRAY_ELEMENTS)
# Arrays of the narrower types, as PostgreSQL and CockroachDB name them: int2[], int4[],
# float4[] and bpchar[] (CHAR(n)[]), with their elements' OIDs.
_NARROW_ARRAYS: dict[tuple[Kind, int | None], tuple[int, int]] = {
    (Kind.INT, 16): (1005, OID.INT2),
    (Kind.INT, 32): (1007, OID.INT4),
    (Kind.FLOAT, 32): (1021, OID.FLOAT4),
}
_SENT_ARRAYS = frozenset(_ELEMENT_OF_ARRAY) | {1005, 1007, 1021, 1014}


class OidName(str):
    """A regclass or regtype value: the name it prints as (its text format), and the OID
    it is (its binary format)."""

    oid: int

    def __new__(cls, name: str, oid: int) -> OidName:
        value = super().__new__(cls, name)
        value.oid = oid
        return value


def _oid_name_binary(value: Any) -> bytes:
    return struct.pack("!I", value.oid) if isinstance(value, OidName) else str(value).encode()


class WireType(NamedTuple):
    """A result column's type as a RowDescription gives it."""

    oid: int
    typmod: int = -1  # the type modifier (``atttypmod``); -1: none


def wire_type(ctype: ColumnType) -> WireType:
    return WireType(oid_of_type(ctype), typmod_of_type(ctype))


def oid_of_type(ctype: ColumnType) -> int:
    """The OID of a column of ``ctype`` (an array's depends on its elements')."""
    if ctype.kind is Kind.ARRAY:
        element = ctype.element if ctype.element is not None else ColumnType(Kind.STRING)
        if element.kind is Kind.STRING and element.fixed:
            return 1014  # bpchar[]
        narrow = _NARROW_ARRAYS.get((element.kind, element.width))
        if narrow is not None:
            return narrow[0]
        return _ARRAY_OIDS.get(element.kind, 1009)
    if ctype.kind is Kind.FLOAT and ctype.width == 32:
        return OID.FLOAT4
    if ctype.kind is Kind.INT and ctype.width in (16, 32):
        return OID.INT2 if ctype.width == 16 else OID.INT4  # NB: as CockroachDB's INT2, INT4
    if ctype.kind is Kind.STRING and ctype.width is not None:
        # NB: VARCHAR(n) and STRING(n) are one type here; PostgreSQL clients know it
        # as varchar (CockroachDB sends text for STRING(n))
        return OID.BPCHAR if ctype.fixed else OID.VARCHAR
    if ctype.kind is Kind.ENUM and ctype.type_id is not None:
        return ENUM_OID_BASE + ctype.type_id  # NB: its values are sent as their labels
    return oid_of_kind(ctype.kind)


def _element_oid(element: ColumnType) -> int:
    """The OID of an array's elements, as its array OID (:func:`oid_of_type`) has them:
    int2, int4 and float4 in int2[], int4[] and float4[], bpchar in a CHAR(n)'s."""
    narrow = _NARROW_ARRAYS.get((element.kind, element.width))
    if narrow is not None:
        return narrow[1]
    return oid_of_type(element)


def typmod_of_type(ctype: ColumnType) -> int:
    """``pg_attribute.atttypmod`` of a column of ``ctype`` (see the module docstring)."""
    if ctype.kind is Kind.STRING and ctype.width is not None:
        return ctype.width + 4
    if ctype.kind is Kind.BIT:
        return ctype.width or 1  # NB: a bit type's typmod is its width, as is
    if ctype.kind is Kind.VARBIT and ctype.width is not None:
        return ctype.width
    if ctype.kind is Kind.DECIMAL and ctype.precision is not None:
        return ((ctype.precision << 16) | (ctype.scale or 0)) + 4
    return -1


def oid_of_kind(kind: Kind) -> int:
    # NB: an enum of no known type goes out as text (a type's own OID: oid_of_type)
    return _OID_OF_KIND.get(kind, OID.TEXT)


# What a parameter of each type decodes to (see decode_param): the SQL layer's kind.
_KIND_OF_OID: dict[int, Kind] = {
    **{oid: kind for kind, oid in _OID_OF_KIND.items()},
    OID.INT2: Kind.INT,
    OID.INT4: Kind.INT,
    OID.FLOAT4: Kind.FLOAT,
    OID.JSON: Kind.JSONB,
    OID.VARCHAR: Kind.STRING,
    OID.BPCHAR: Kind.STRING,
    OID.NAME: Kind.STRING,
    OID.CHAR: Kind.STRING,
    OID.OID: Kind.INT,
}


_OID_OF_KIND_INVERSE = {oid: kind for kind, oid in _OID_OF_KIND.items()}


def kind_of_oid(oid: int) -> Kind | None:
    """The kind of value a parameter of type ``oid`` becomes (``None``: unspecified or
    unknown, a string the SQL layer converts where it is used)."""
    return _KIND_OF_OID.get(oid)


def type_of_param(oid: int) -> ColumnType | None:
    """The type of a parameter the client typed ``oid`` (``None``: unspecified or
    unknown): an array type's is an array of its elements' kind, as it is read."""
    element = _ELEMENT_OF_ARRAY.get(oid) or _KIND_OF_OID.get(_MORE_ARRAY_ELEMENTS.get(oid, 0))
    if element is not None:
        return ColumnType(Kind.ARRAY, element=ColumnType(element))
    kind = _KIND_OF_OID.get(oid)
    return None if kind is None else ColumnType(kind)


def type_size(oid: int) -> int:
    """``pg_type.typlen``: the width of a fixed-size type, -1 for a variable one."""
    return _SIZES.get(oid, -1)


def column_oid(values: Sequence[Any]) -> int:
    """The type of a result column, from the values it holds: their kind when they
    share one (INT with DECIMAL is numeric, INT with FLOAT float8; records are record),
    text when they do not or when every value is NULL."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, Record) for v in present):
        return RECORD_OID
    kinds = {kind_of_value(v) for v in present}
    if not kinds:
        return OID.TEXT
    if kinds == {Kind.ARRAY}:
        elements = {v.element for v in present}
        if len(elements) == 1:
            return oid_of_type(ColumnType(Kind.ARRAY, element=elements.pop()))
        return OID.TEXT
    if len(kinds) == 1:
        (kind,) = kinds
        if kind is Kind.FLOAT and all(isinstance(v, Float4) for v in present):
            return OID.FLOAT4
        if kind is Kind.STRING and all(isinstance(v, FixedChar) for v in present):
            return OID.BPCHAR
        if kind is Kind.ENUM and len({v.type_id for v in present}) == 1 and present[0].type_id:
            return ENUM_OID_BASE + int(present[0].type_id)
        return OID.JSONB if kind is None else oid_of_kind(kind)
    if kinds == {Kind.INT, Kind.DECIMAL}:
        return OID.NUMERIC
    if kinds == {Kind.INT, Kind.FLOAT}:
        return OID.FLOAT8
    return OID.TEXT


# Results.


# The types (exactly: not a bool, a FixedChar) whose text is str() of the value outside
# a JSON column (format_value's), the most of what analytic results send
_STR_TEXT = frozenset({int, str, decimal.Decimal})
_JSON_OIDS = frozenset({OID.JSONB, OID.JSON})


def encode_text(value: Any, oid: int, float_digits: int = 0) -> bytes:
    """A non-NULL ``value`` in the text format of type ``oid``; a FLOAT with the
    session's ``extra_float_digits`` (``float_digits``), as CockroachDB sends it."""
    if type(value) in _STR_TEXT and oid not in _JSON_OIDS:
        return str(value).encode()  # NB: format_value's answer, without its dozen checks
    if isinstance(value, Array):
        element = _element_oid(value.element)
        return value.text(lambda v: encode_text(v, element, float_digits).decode()).encode()
    if isinstance(value, Record):
        return value.text(
            lambda v, json: encode_text(v, _element_of_record(v, json), float_digits).decode()
        ).encode()
    if isinstance(value, float):
        if oid == OID.FLOAT4 and not isinstance(value, Float4):
            value = Float4.of(value)
        return float_text(value, float_digits).encode()
    if isinstance(value, FixedChar):
        return value.padded().encode()
    if oid == OID.JSONB or oid == OID.JSON:
        return jsonb.dumps(value, spaced=True).encode()
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return format_value(value).encode()


def encode_binary(value: Any, oid: int, float_digits: int = 0) -> bytes:
    """A non-NULL ``value`` in the binary format of type ``oid`` (a column of text type
    holding values of several kinds sends their text)."""
    if isinstance(value, Array) and oid in _SENT_ARRAYS:
        return _array_binary(value)
    if isinstance(value, Record) and oid == RECORD_OID:
        return _record_binary(value, float_digits)
    encoder = _BINARY_OUT.get(oid)
    if encoder is None:
        return encode_text(value, oid, float_digits)
    return encoder(value)


def _array_binary(value: Array) -> bytes:
    """PostgreSQL's array_send: dimensions, flags, element type, then each element as
    its length and binary value (-1 for NULL)."""
    element = _element_oid(value.element)
    has_null = any(v is None for v in value.values)
    if not value.values:
        return struct.pack("!iii", 0, 0, element)
    out = [struct.pack("!iiiii", 1, int(has_null), element, len(value.values), 1)]
    for item in value.values:
        if item is None:
            out.append(struct.pack("!i", -1))
            continue
        data = encode_binary(item, element)
        out.append(struct.pack("!i", len(data)) + data)
    return b"".join(out)


def _element_of_record(value: Any, json: bool) -> int:
    """The type of a non-NULL element of a record: jsonb where the record knows one, else
    its value's."""
    return OID.JSONB if json else column_oid([value])


def _record_binary(value: Record, float_digits: int) -> bytes:
    """PostgreSQL's record_send: the count of elements, then each element's type,
    length and binary value (-1 for NULL, which has the type unknown, 705)."""
    out = [struct.pack("!i", len(value))]
    for place, item in enumerate(value):
        if item is None:
            out.append(struct.pack("!Ii", OID.UNKNOWN, -1))
            continue
        oid = _element_of_record(item, place in value.json_at)
        data = encode_binary(item, oid, float_digits)
        out.append(struct.pack("!Ii", oid, len(data)) + data)
    return b"".join(out)


def _numeric_binary(value: Any) -> bytes:
    d = decimal.Decimal(value)
    if d.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if d.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xF000 if d < 0 else 0xD000, 0)
    sign, digits, exponent = d.as_tuple()
    if not isinstance(exponent, int):  # NaN and infinities are handled above
        raise SQLError("22003", f"numeric value {d} cannot be sent")
    text = "".join(map(str, digits))
    if exponent > 0:
        text += "0" * exponent
        exponent = 0
    scale = -exponent
    text = text.rjust(scale + 1, "0")  # at least one digit before the point
    whole = text[: len(text) - scale].lstrip("0")
    fraction = text[len(text) - scale :]
    whole = whole.rjust((len(whole) + 3) // 4 * 4, "0")
    fraction = fraction.ljust((len(fraction) + 3) // 4 * 4, "0")
    groups = [int(whole[i : i + 4]) for i in range(0, len(whole), 4)]
    groups += [int(fraction[i : i + 4]) for i in range(0, len(fraction), 4)]
    weight = len(whole) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    header = struct.pack("!hhHh", len(groups), weight, 0x4000 if sign else 0, scale)
    return header + struct.pack(f"!{len(groups)}h", *groups)


def _micros_since(value: datetime.datetime) -> int:
    infinity = infinity_of(value)
    if infinity is not None:
        return INFINITE_MICROS[infinity]
    delta = value - (_PG_EPOCH if value.tzinfo is None else _PG_EPOCH_TZ)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _vector_binary(element: int, fmt: str) -> Callable[[Any], bytes]:
    """int2vector's or oidvector's binary format (their text: numbers separated by
    spaces), PostgreSQL's array_send of a one-dimensional array whose lower bound is 0."""

    def send(value: Any) -> bytes:
        numbers = [int(n) for n in str(value).split()]
        if not numbers:
            return struct.pack("!iii", 0, 0, element)
        head = struct.pack("!iiiii", 1, 0, element, len(numbers), 0)
        size = struct.calcsize(f"!{fmt}")
        return head + b"".join(struct.pack(f"!i{fmt}", size, n) for n in numbers)

    return send


_BINARY_OUT: dict[int, Callable[[Any], bytes]] = {
    OID.INT2VECTOR: _vector_binary(OID.INT2, "h"),
    OID.OIDVECTOR: _vector_binary(OID.OID, "I"),
    OID.BOOL: lambda v: b"\x01" if v else b"\x00",
    OID.INT8: lambda v: struct.pack("!q", v),
    OID.INT2: lambda v: struct.pack("!h", v),  # NB: an INT2 column holds only these
    OID.INT4: lambda v: struct.pack("!i", v),
    OID.OID: lambda v: struct.pack("!I", v),
    OID.REGCLASS: _oid_name_binary,
    OID.REGTYPE: _oid_name_binary,
    OID.FLOAT8: lambda v: struct.pack("!d", v),
    OID.FLOAT4: lambda v: struct.pack("!f", Float4.of(v)),  # NB: past float32: inf
    OID.NUMERIC: _numeric_binary,
    OID.TEXT: lambda v: format_value(v).encode(),
    OID.BPCHAR: lambda v: (v.padded() if isinstance(v, FixedChar) else format_value(v)).encode(),
    OID.BYTEA: bytes,
    OID.DATE: lambda v: struct.pack("!i", (v - _PG_EPOCH_DATE).days),
    OID.TIMESTAMP: lambda v: struct.pack("!q", _micros_since(v)),
    OID.TIMESTAMPTZ: lambda v: struct.pack("!q", _micros_since(v)),
    OID.UUID: lambda v: v.bytes,
    OID.JSONB: lambda v: b"\x01" + jsonb.dumps(v, spaced=True).encode(),
    OID.TIME: lambda v: struct.pack("!q", _time_micros(v)),
    OID.INTERVAL: lambda v: struct.pack("!qii", v.micros, v.days, v.months),
    OID.INET: lambda v: _inet_binary(v),
    # bit and varbit: the number of bits, then the bits packed eight to a byte
    OID.BIT: lambda v: struct.pack("!i", len(v.bits)) + v.to_bytes(),
    OID.VARBIT: lambda v: struct.pack("!i", len(v.bits)) + v.to_bytes(),
}


def _time_micros(value: datetime.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


# PostgreSQL's address families in inet's binary format (PGSQL_AF_INET, PGSQL_AF_INET6).
_AF = {4: 2, 6: 3}


def _inet_binary(value: Inet) -> bytes:
    version, _network, prefix, packed = value.key()
    return bytes([_AF[version], prefix, 0, len(packed)]) + packed


def _inet_from_binary(raw: bytes) -> Inet:
    family, prefix, _cidr, size = raw[:4]
    if {v: k for k, v in _AF.items()}.get(family) is None or len(raw) != 4 + size:
        raise ValueError("malformed inet")
    return Inet(ipaddress.ip_interface((raw[4:], prefix)))


def _bits_from_binary(raw: bytes) -> BitString:
    (count,) = struct.unpack("!i", raw[:4])
    return BitString.from_bytes(count, raw[4:])


def _time_binary(raw: bytes) -> datetime.time:
    micros = _exact(8, "!q")(raw)
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return datetime.time(hour, minute, second, micro)


def _interval_binary(raw: bytes) -> Interval:
    if len(raw) != 16:
        raise ValueError(f"{len(raw)} bytes, expected 16")
    micros, days, months = struct.unpack("!qii", raw)
    return Interval(months, days, micros)


# Parameters.


def decode_param(raw: bytes, oid: int, binary: bool, index: int) -> Any:
    """Parameter ``$index`` (1-based) as a SQL value. SQLSTATE 22P02 when it does not
    read as its type, 22P03 for a binary value of a type without a binary reader."""
    try:
        if binary:
            reader = _BINARY_IN.get(oid)
            if reader is None and oid >= ENUM_OID_BASE:
                return raw.decode()  # a user-defined enum's binary form is its label
            if reader is None:
                raise SQLError(
                    "22P03",
                    f"parameter ${index}: no binary format for type {_type_name(oid)}; "
                    "send it as text",
                )
            return reader(raw)
        text = raw.decode()
        if oid in _STRINGS_TOO:
            return text
        # NB: the scalar types first, looked up once (the common case); no array's OID
        # has a text reader of its own
        parse = _TEXT_IN.get(oid)
        if parse is not None:
            return parse(text)
        array = type_of_param(oid)
        if array is not None and array.element is not None:
            return _array_text(text, array.element.kind)
        return text
    except SQLError:
        raise
    except (ValueError, struct.error, decimal.InvalidOperation, UnicodeDecodeError) as exc:
        shown = raw[:40].decode(errors="replace")
        raise SQLError(
            "22P03" if binary else "22P02",
            f"parameter ${index}: invalid {'binary ' if binary else ''}input for type "
            f"{_type_name(oid)}: {shown!r} ({exc})",
        ) from None


def _type_name(oid: int) -> str:
    return _TYPE_NAMES.get(oid, f"oid {oid}")


_TYPE_NAMES = {
    value: name.lower()
    for name, value in vars(OID).items()
    if not name.startswith("_") and isinstance(value, int)
}
_TRUE = {"t", "true", "yes", "y", "on", "1"}
_FALSE = {"f", "false", "no", "n", "off", "0"}


def _array_text(text: str, kind: Kind) -> Array:
    element_oid = _ARRAY_OIDS_INVERSE[kind]
    parse = _TEXT_IN.get(element_oid)
    items = [
        None if item is None else (item if parse is None else parse(item))
        for item in parse_array_text(text)
    ]
    return Array(tuple(items), ColumnType(kind))


def _bool_text(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError("not a boolean")


def _float_text(text: str) -> float:
    value = float(text)
    if math.isnan(value) and text.strip().lower() != "nan":
        raise ValueError("not a number")
    return value


def _bytea_text(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    out = bytearray()  # the escape format: \\ and \ooo
    i = 0
    while i < len(text):
        if text[i] != "\\":
            out += text[i].encode()
            i += 1
        elif text[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        else:
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
    return bytes(out)


# A time zone after a date (pgjdbc's setDate sends '2024-02-29 +00'), which PostgreSQL's
# date input ignores
_DATE_ZONE = re.compile(r"\s+[+-]\d{1,2}(?::?\d{2})?$")


def _date_text(text: str) -> datetime.date:
    return datetime.date.fromisoformat(_DATE_ZONE.sub("", text.strip()))


def _timestamp_text(text: str) -> datetime.datetime:
    """A TIMESTAMP's text; a time zone in it is ignored, as by PostgreSQL's input (pgjdbc's
    setTimestamp sends one)."""
    infinite = infinite_timestamp(text, aware=False)
    if infinite is not None:
        return infinite
    return datetime.datetime.fromisoformat(text).replace(tzinfo=None)


def _time_text(text: str) -> datetime.time:
    """A TIME's text; a time zone in it is ignored (pgjdbc's setTime sends one)."""
    return datetime.time.fromisoformat(text).replace(tzinfo=None)


def _timestamptz_text(text: str) -> datetime.datetime:
    infinite = infinite_timestamp(text, aware=True)
    if infinite is not None:
        return infinite
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:  # a wall time in the session's time zone
        value = value.replace(tzinfo=current_zone())
    return value.astimezone(datetime.UTC)


def _numeric_from_binary(raw: bytes) -> decimal.Decimal:
    ndigits, weight, sign, scale = struct.unpack_from("!hhHh", raw)
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    if sign in (0xD000, 0xF000):
        return decimal.Decimal("-Infinity" if sign == 0xF000 else "Infinity")
    if sign not in (0, 0x4000) or ndigits < 0 or len(raw) != 8 + 2 * ndigits:
        raise ValueError("malformed numeric")
    digits = struct.unpack_from(f"!{ndigits}h", raw, 8)
    if any(not 0 <= d < 10_000 for d in digits):
        raise ValueError("numeric digit out of range")
    text = "".join(f"{d:04d}" for d in digits) or "0"
    exponent = (weight - ndigits + 1) * 4
    value = decimal.Decimal(f"{'-' if sign else ''}{text}E{exponent}")
    context = decimal.Context(prec=max(len(text) + abs(exponent) + scale, 28))
    return value.quantize(decimal.Decimal(1).scaleb(-scale), context=context)


def _exact(size: int, fmt: str) -> Callable[[bytes], Any]:
    unpacker = struct.Struct(fmt)

    def read(raw: bytes) -> Any:
        if len(raw) != size:
            raise ValueError(f"{len(raw)} bytes, expected {size}")
        return unpacker.unpack(raw)[0]

    return read


def _date_binary(raw: bytes) -> datetime.date:
    return _PG_EPOCH_DATE + datetime.timedelta(days=_exact(4, "!i")(raw))


def _timestamp_binary(raw: bytes) -> datetime.datetime:
    micros = _exact(8, "!q")(raw)
    if micros in (INFINITE_MICROS["infinity"], INFINITE_MICROS["-infinity"]):
        return InfiniteTimestamp(micros > 0, aware=False)
    return _PG_EPOCH + datetime.timedelta(microseconds=micros)


def _timestamptz_binary(raw: bytes) -> datetime.datetime:
    return _timestamp_binary(raw).replace(tzinfo=datetime.UTC)


def _bool_binary(raw: bytes) -> bool:
    if raw not in (b"\x00", b"\x01"):
        raise ValueError("a bool is one byte, 0 or 1")
    return raw == b"\x01"


def _json_text(text: str) -> Any:
    """A JSON parameter: its document, ``JSON_NULL`` for the JSON null."""
    return jsonb.from_document(json.loads(text))


def _jsonb_binary(raw: bytes) -> Any:
    if raw[:1] != b"\x01":
        raise ValueError("jsonb version byte is not 1")
    return _json_text(raw[1:].decode())


_TEXT_IN: dict[int, Callable[[str], Any]] = {
    OID.BOOL: _bool_text,
    OID.INT2: int,
    OID.INT4: int,
    OID.INT8: int,
    OID.OID: int,
    OID.FLOAT4: lambda text: Float4.of(_float_text(text)),
    OID.FLOAT8: _float_text,
    OID.NUMERIC: decimal.Decimal,
    OID.BYTEA: _bytea_text,
    OID.DATE: _date_text,
    OID.TIMESTAMP: _timestamp_text,
    OID.TIMESTAMPTZ: _timestamptz_text,
    OID.UUID: uuid.UUID,
    OID.JSON: _json_text,
    OID.JSONB: _json_text,
    OID.TIME: _time_text,
    OID.INTERVAL: Interval.parse,
    OID.INET: Inet.parse,
    OID.BIT: BitString.parse,
    OID.VARBIT: BitString.parse,
}

_ARRAY_OIDS_INVERSE = {kind: oid for oid, kind in _OID_OF_KIND_INVERSE.items()}

_BINARY_IN: dict[int, Callable[[bytes], Any]] = {
    **{oid: lambda raw: raw.decode() for oid in _STRINGS_TOO},
    OID.BOOL: _bool_binary,
    OID.INT2: _exact(2, "!h"),
    OID.INT4: _exact(4, "!i"),
    OID.INT8: _exact(8, "!q"),
    OID.OID: _exact(4, "!I"),
    OID.FLOAT4: lambda raw: Float4(_exact(4, "!f")(raw)),
    OID.FLOAT8: _exact(8, "!d"),
    OID.NUMERIC: _numeric_from_binary,
    OID.BYTEA: bytes,
    OID.DATE: _date_binary,
    OID.TIMESTAMP: _timestamp_binary,
    OID.TIMESTAMPTZ: _timestamptz_binary,
    OID.UUID: lambda raw: uuid.UUID(bytes=raw),
    OID.JSON: lambda raw: _json_text(raw.decode()),
    OID.JSONB: _jsonb_binary,
    OID.TIME: _time_binary,
    OID.INTERVAL: _interval_binary,
    OID.INET: _inet_from_binary,
    OID.BIT: lambda raw: _bits_from_binary(raw),
    OID.VARBIT: lambda raw: _bits_from_binary(raw),
}
_BINARY_IN.update(dict.fromkeys(_ARRAY_OIDS_READ, _array_from_binary))
