"""Column types: their names, how values are checked on assignment, and how they are
stored in keys (order-preserving) and in values.

A SQL value in Python is one of: ``None`` (NULL), ``int`` (INT), ``float`` (FLOAT),
``decimal.Decimal`` (DECIMAL), ``str`` (STRING), ``bytes`` (BYTES), ``bool`` (BOOL),
``datetime.date`` (DATE), naive ``datetime.datetime`` (TIMESTAMP), UTC-aware
``datetime.datetime`` (TIMESTAMPTZ), ``uuid.UUID`` (UUID) and, for JSONB, the parsed JSON
document (dict, list, str, int, float, bool), or :data:`~feedkv.sql.jsonb.JSON_NULL` for
a JSON null (which is not SQL NULL: see :mod:`feedkv.sql.jsonb`).

Each type maps onto the primitives of :mod:`feedkv.util.encoding` so that key order is
SQL order: DATE is days and timestamps microseconds since the Unix epoch, UUID its 16
bytes, DECIMAL a byte string built by :func:`decimal_key` whose byte order is numeric
order. JSONB cannot be part of a key.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import math
import re
import struct
import uuid
from dataclasses import dataclass
from typing import Any

import msgpack

from feedkv.errors import (
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
    SQLError,
    TimestampParseError,
)
from feedkv.sql import jsonb
from feedkv.sql.arrays import Array, parse_array_text
from feedkv.sql.bits import BitString
from feedkv.sql.enums import EnumValue
from feedkv.sql.inet import Inet
from feedkv.sql.interval import Interval
from feedkv.sql.jsonb import JSON_NULL, is_json
from feedkv.sql.records import Record
from feedkv.sql.time_zone import (
    INFINITE_MICROS,
    InfiniteTimestamp,
    current_zone,
    infinite_timestamp,
    infinity_of,
    shifted,
    timestamp_text,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.units import parse_duration_ns

__all__ = [
    "DECIMAL_NAN",
    "TYPE_NAMES",
    "ColumnType",
    "FixedChar",
    "Float4",
    "Kind",
    "assign",
    "coerce",
    "coerce_column",
    "decimal_from_key",
    "decimal_key",
    "decimal_of_float",
    "float_text",
    "format_value",
    "literal_text",
    "from_key",
    "enum_type_of",
    "from_key_primitive",
    "from_value",
    "from_value_primitive",
    "key_primitive",
    "is_nan",
    "kind_name",
    "kind_of_value",
    "logical_decimal",
    "parse_type_name",
    "standard_name",
    "timestamp_of",
    "type_of_value",
    "value_primitive",
]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# DECIMAL arithmetic as CockroachDB's: +, - and * are exact; a quotient (/, avg) has 20
# significant digits, rounded half up.
_DECIMAL_TRAPS = [decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow]
# NB: exponents are bounded as in CockroachDB (+-2000): an exact sum of 1e999999999 and
# 1e-999999999 would otherwise be a billion digits. Past them: Overflow, 22003.
EXACT_DECIMAL = decimal.Context(
    prec=4000, rounding=decimal.ROUND_HALF_UP, Emax=2000, Emin=-2000, traps=_DECIMAL_TRAPS
)
DECIMAL_QUOTIENT = decimal.Context(
    prec=20, rounding=decimal.ROUND_HALF_UP, Emax=2000, Emin=-2000, traps=_DECIMAL_TRAPS
)
DECIMAL_NAN = decimal.Decimal("NaN")
EPOCH_DATE = datetime.date(1970, 1, 1)
EPOCH = datetime.datetime(1970, 1, 1)
UTC = datetime.UTC


class Kind(enum.Enum):
    # NB: a kind is its own member only (no mixin), so hashing by identity is sound; the
    # Enum's hash of the name is a Python call on every lookup of a dict keyed by kind
    # (coerce's, per value written)
    __hash__ = object.__hash__

    INT = "INT8"
    FLOAT = "FLOAT8"
    DECIMAL = "DECIMAL"
    STRING = "STRING"
    BYTES = "BYTES"
    BOOL = "BOOL"
    DATE = "DATE"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMPTZ = "TIMESTAMPTZ"
    UUID = "UUID"
    JSONB = "JSONB"
    TIME = "TIME"
    INTERVAL = "INTERVAL"
    INET = "INET"
    ENUM = "ENUM"  # a user-defined enum type (ColumnType.labels)
    ARRAY = "ARRAY"  # of ColumnType.element
    BIT = "BIT"  # exactly ColumnType.width bits (1 when None)
    VARBIT = "VARBIT"  # at most ColumnType.width bits (any number when None)


_ALIASES = {
    "INT": Kind.INT,
    "INT8": Kind.INT,
    "INT4": Kind.INT,
    "INT2": Kind.INT,
    "INTEGER": Kind.INT,
    "BIGINT": Kind.INT,
    "SMALLINT": Kind.INT,
    "TINYINT": Kind.INT,
    "FLOAT": Kind.FLOAT,
    "FLOAT8": Kind.FLOAT,
    "FLOAT4": Kind.FLOAT,  # NB: width 32 (parse_type_name)
    "REAL": Kind.FLOAT,
    "DOUBLE": Kind.FLOAT,
    "DECIMAL": Kind.DECIMAL,
    "NUMERIC": Kind.DECIMAL,
    "DEC": Kind.DECIMAL,
    "STRING": Kind.STRING,
    "TEXT": Kind.STRING,
    "VARCHAR": Kind.STRING,
    "CHAR": Kind.STRING,
    "NVARCHAR": Kind.STRING,
    "NCHAR": Kind.STRING,
    "NAME": Kind.STRING,  # NB: PostgreSQL's identifier type, a string here
    "BYTES": Kind.BYTES,
    "BYTEA": Kind.BYTES,
    "BLOB": Kind.BYTES,
    "VARBINARY": Kind.BYTES,
    "BINARY": Kind.BYTES,
    "BOOL": Kind.BOOL,
    "BOOLEAN": Kind.BOOL,
    "DATE": Kind.DATE,
    "TIMESTAMP": Kind.TIMESTAMP,
    "DATETIME": Kind.TIMESTAMP,
    "TIMESTAMPTZ": Kind.TIMESTAMPTZ,
    "UUID": Kind.UUID,
    "JSONB": Kind.JSONB,
    "JSON": Kind.JSONB,
    "TIME": Kind.TIME,
    "INTERVAL": Kind.INTERVAL,
    "INET": Kind.INET,
    "BIT": Kind.BIT,
    "VARBIT": Kind.VARBIT,
}
TYPE_NAMES = frozenset(_ALIASES)  # the built-in type names, upper-case


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A column's type. ``width`` limits STRING length in characters, INT values to
    16 or 32 bits (INT2, INT4; ``None`` is INT8) and FLOAT values to 32 bits (FLOAT4,
    REAL: rounded to the nearest float32; ``None`` is FLOAT8); ``precision`` and
    ``scale`` apply to DECIMAL (values are rounded to ``scale`` digits)."""

    kind: Kind
    width: int | None = None
    precision: int | None = None
    scale: int | None = None
    # ENUM: the type's name, and its labels in order (None: not resolved yet, as the
    # parser leaves a type name it does not know; the schema change resolves it).
    type_name: str | None = None
    labels: tuple[str, ...] | None = None
    codes: tuple[bytes, ...] | None = None  # ENUM: each label's code (see enums)
    type_id: int | None = None  # ENUM: the type's descriptor id
    # ENUM: labels its transaction added and has not committed (TypeDescriptor.adding)
    pending: tuple[str, ...] = ()
    element: ColumnType | None = None  # ARRAY: the type of its elements
    # STRING: CHAR(n), fixed-length: trailing spaces are insignificant and not kept (as
    # in CockroachDB and PostgreSQL; a client is sent the value padded to ``width``)
    fixed: bool = False

    def sql(self) -> str:
        if self.kind is Kind.ENUM:
            return str(self.type_name or "ENUM")
        if self.kind is Kind.ARRAY:
            return (self.element.sql() if self.element else "STRING") + "[]"
        if self.kind is Kind.STRING and self.fixed:
            return "CHAR" if self.width == 1 else f"CHAR({self.width})"
        if self.kind is Kind.STRING and self.width is not None:
            return f"STRING({self.width})"
        if self.kind is Kind.BIT:
            return f"BIT({self.width or 1})"
        if self.kind is Kind.VARBIT and self.width is not None:
            return f"VARBIT({self.width})"
        if self.kind in (Kind.INT, Kind.FLOAT) and self.width is not None:
            return f"{self.kind.value[:-1]}{self.width // 8}"
        if self.kind is Kind.DECIMAL and self.precision is not None:
            if self.scale is not None:
                return f"DECIMAL({self.precision},{self.scale})"
            return f"DECIMAL({self.precision})"
        return str(self.kind.value)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.name}
        for name in ("width", "precision", "scale", "type_name"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.labels is not None:
            out["labels"] = list(self.labels)
        if self.codes is not None:
            out["codes"] = [code.hex() for code in self.codes]
        if self.type_id is not None:
            out["type_id"] = self.type_id
        if self.pending:
            out["pending"] = list(self.pending)
        if self.element is not None:
            out["element"] = self.element.to_json()
        if self.fixed:
            out["fixed"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColumnType:
        return cls(
            Kind[data["kind"]],
            width=data.get("width"),
            precision=data.get("precision"),
            scale=data.get("scale"),
            type_name=data.get("type_name"),
            labels=tuple(data["labels"]) if "labels" in data else None,
            codes=tuple(bytes.fromhex(c) for c in data["codes"]) if "codes" in data else None,
            type_id=data.get("type_id"),
            pending=tuple(data.get("pending", ())),
            element=ColumnType.from_json(data["element"]) if "element" in data else None,
            fixed=bool(data.get("fixed", False)),
        )

    def __str__(self) -> str:
        return self.sql()


def parse_type_name(name: str, params: list[int] | None = None) -> ColumnType:
    """The column type called ``name`` (any of the usual aliases), with its parameters."""
    kind = _ALIASES.get(name.upper())
    if kind is None:
        raise SQLError("42704", f'type "{name.lower()}" does not exist')
    params = params or []
    if kind is Kind.STRING and name.upper() in ("VARCHAR", "CHAR", "STRING", "NCHAR", "NVARCHAR"):
        if len(params) > 1:
            raise SQLError("42601", f"{name.upper()} takes at most one parameter (a width)")
        if params and params[0] < 1:
            raise SQLError("22023", f"length for type {name.upper()} must be at least 1")
        if name.upper() == "CHAR":  # NB: as CockroachDB, a bare CHAR is CHAR(1)
            return ColumnType(kind, width=params[0] if params else 1, fixed=True)
        if params:
            return ColumnType(kind, width=params[0])
        return ColumnType(kind)
    if kind is Kind.DECIMAL:
        if len(params) > 2:
            raise SQLError("42601", "DECIMAL takes at most two parameters (precision, scale)")
        precision = params[0] if params else None
        scale = params[1] if len(params) > 1 else (0 if params else None)
        if precision is not None and precision < 1:
            raise SQLError("22023", f"precision {precision} must be at least 1")
        if precision is not None and scale is not None and not 0 <= scale <= precision:
            raise SQLError(
                "22023", f"scale ({scale}) must be between 0 and precision ({precision})"
            )
        return ColumnType(kind, precision=precision, scale=scale)
    if kind in (Kind.BIT, Kind.VARBIT):
        if len(params) > 1:
            raise SQLError("42601", f"{name.upper()} takes at most one parameter (a width)")
        if params and params[0] < 1:
            raise SQLError("22023", f"length for type {name.upper()} must be at least 1")
        return ColumnType(kind, width=params[0] if params else None)
    if kind is Kind.INT and name.upper() in _NARROW_INTS:
        return ColumnType(kind, width=_NARROW_INTS[name.upper()])
    if name.upper() in ("FLOAT4", "REAL"):
        return ColumnType(kind, width=32)
    if params and kind in (Kind.TIME, Kind.INTERVAL, Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        raise SQLError("0A000", f"{name.upper()}({params[0]}): a precision is not supported")
    return ColumnType(kind)


# As CockroachDB: INT and INTEGER are INT8 (its default_int_size); these are narrower.
_NARROW_INTS = {"INT2": 16, "SMALLINT": 16, "INT4": 32}


def type_of_value(value: object) -> str:
    """The SQL type name of a Python value (for error messages)."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, decimal.Decimal):
        return "decimal"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, datetime.datetime):
        return "timestamptz" if value.tzinfo is not None else "timestamp"
    if isinstance(value, datetime.date):
        return "date"
    if isinstance(value, uuid.UUID):
        return "uuid"
    if isinstance(value, datetime.time):
        return "time"
    if isinstance(value, Interval):
        return "interval"
    if isinstance(value, Inet):
        return "inet"
    if isinstance(value, BitString):
        return "varbit"
    if isinstance(value, EnumValue):
        return value.type_name or "enum"
    if isinstance(value, Array):
        return str(value.element.sql()).lower() + "[]"
    if isinstance(value, Record):  # NB: CockroachDB's name: tuple{int, string}
        return "tuple{" + ", ".join(type_of_value(v) for v in value) + "}"
    if is_json(value):
        return "jsonb"
    return type(value).__name__


def is_nan(value: object) -> bool:
    """A FLOAT or DECIMAL NaN (SQL's NaN equals NaN and sorts below every number)."""
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    return isinstance(value, float) and value != value


def kind_of_value(value: object) -> Kind | None:
    """The column kind a Python value belongs to (``None`` for NULL or JSON documents)."""
    found = _KIND_OF_TYPE.get(type(value))
    if found is not None:
        return found  # NB: the common types, without type_of_value's walk
    if isinstance(value, EnumValue):
        return Kind.ENUM
    if isinstance(value, Array):
        return Kind.ARRAY
    name = type_of_value(value)
    return _KIND_BY_NAME.get(name)


# Exactly these types (not subclasses: an enum's value, a FixedChar, a Float4)
_KIND_OF_TYPE: dict[type, Kind] = {
    bool: Kind.BOOL,
    int: Kind.INT,
    float: Kind.FLOAT,
    decimal.Decimal: Kind.DECIMAL,
    str: Kind.STRING,
}
_KIND_BY_NAME = {
    "bool": Kind.BOOL,
    "int": Kind.INT,
    "float": Kind.FLOAT,
    "decimal": Kind.DECIMAL,
    "string": Kind.STRING,
    "bytes": Kind.BYTES,
    "timestamptz": Kind.TIMESTAMPTZ,
    "timestamp": Kind.TIMESTAMP,
    "date": Kind.DATE,
    "uuid": Kind.UUID,
    "time": Kind.TIME,
    "interval": Kind.INTERVAL,
    "inet": Kind.INET,
    "varbit": Kind.VARBIT,
}


# Each kind's SQL standard name, as pg_typeof and format_type print it.
_STANDARD_NAMES = {
    Kind.INT: "bigint",
    Kind.FLOAT: "double precision",
    Kind.DECIMAL: "numeric",
    Kind.STRING: "text",
    Kind.BYTES: "bytea",
    Kind.BOOL: "boolean",
    Kind.DATE: "date",
    Kind.TIMESTAMP: "timestamp without time zone",
    Kind.TIMESTAMPTZ: "timestamp with time zone",
    Kind.UUID: "uuid",
    Kind.JSONB: "jsonb",
    Kind.TIME: "time without time zone",
    Kind.INTERVAL: "interval",
    Kind.INET: "inet",
    Kind.BIT: "bit",
    Kind.VARBIT: "bit varying",
}


def standard_name(ctype: ColumnType) -> str:
    """``ctype``'s SQL standard name (``bigint``, ``timestamp with time zone``,
    ``text[]``; an enum's is its own name)."""
    if ctype.kind is Kind.ARRAY:
        return standard_name(ctype.element or ColumnType(Kind.STRING)) + "[]"
    if ctype.kind is Kind.ENUM:
        return str(ctype.type_name)
    return _STANDARD_NAMES[ctype.kind]


def coerce(value: object, ctype: ColumnType, column: str | None) -> Any:
    """``value`` as a value of ``ctype`` for assignment to ``column`` (``None``: not a
    column, a comparison or cast), or an error that names the column and both types.
    ``None`` stays ``None`` (NOT NULL is checked elsewhere)."""
    if value is None:
        return None
    try:
        return _COERCE[ctype.kind](value, ctype)
    except _Mismatch:
        where = f' of column "{column}"' if column else ""
        raise SQLError(
            "42804", f"value type {type_of_value(value)} doesn't match type {ctype.sql()}{where}"
        ) from None
    except SQLError as exc:
        if column is None:
            raise
        raise SQLError(exc.code, f"{exc.message} (column {column!r})", detail=exc.detail) from None


def kind_name(kind: Kind) -> str:
    """A kind as CockroachDB's type errors name it (``int``, ``float``, ``string``,
    ``decimal``...)."""
    return {Kind.INT: "int", Kind.FLOAT: "float", Kind.STRING: "string"}.get(
        kind, kind.value.lower()
    )


def assign(value: object, ctype: ColumnType, column: str) -> Any:
    """:func:`coerce` of a value an INSERT, UPSERT or UPDATE writes to ``column``, after
    CockroachDB's assignment cast to a string type (PostgreSQL's I/O conversion): a
    number or a BOOL goes into a string column as its text (``1`` as ``'1'``; too long
    for a CHAR(n), 22001).

    NB: a value already of the column's type, an ``int`` into an INT8 or a ``str`` into
    a STRING of no width, is itself, answered here: the commonest write, and
    :func:`coerce`'s calls were half the cost of a row's values."""
    kind = ctype.kind
    if kind is Kind.STRING:
        if type(value) is str and ctype.width is None and not ctype.fixed:
            return value
        if type(value) is not str and isinstance(value, _NUMBERS):
            value = float_text(value, 0) if isinstance(value, float) else format_value(value)
    elif (
        kind is Kind.INT
        and type(value) is int
        and ctype.width is None
        and INT64_MIN <= value <= INT64_MAX
    ):
        return value
    return coerce(value, ctype, column)


_NUMBERS = (int, float, decimal.Decimal)  # NB: a tuple made once, not a union per call


def coerce_column(values: list[Any], ctype: ColumnType, column: str | None) -> list[Any]:
    """:func:`coerce` of every value of a column, as one call: for text into INT, one
    ``int`` over the column and a range check of its least and greatest (ints only the
    check); text into a
    STRING of no width is itself. Raises what :func:`coerce` raises for the first bad
    value (any one, when several are bad)."""
    kinds = set(map(type, values))  # NB: in C, where a check per value would not be
    if ctype.kind is Kind.STRING and ctype.width is None and kinds <= {str, type(None)}:
        return values
    if ctype.kind is Kind.INT and kinds == {int}:  # parsed already (pyarrow's CSV reader)
        bits = ctype.width or 64
        if -(1 << (bits - 1)) <= min(values) and max(values) < 1 << (bits - 1):
            return values
    if ctype.kind is Kind.INT and kinds == {str}:
        try:
            ints = list(map(int, values))
        except ValueError:
            pass  # coerce below names the bad text
        else:
            bits = ctype.width or 64
            if ints and -(1 << (bits - 1)) <= min(ints) and max(ints) < 1 << (bits - 1):
                return ints
    return [coerce(value, ctype, column) for value in values]


class _Mismatch(FeedKVError):
    """Raised by a converter for a value of the wrong kind; :func:`coerce` turns it into
    the SQLSTATE 42804 error that names the column."""


def _bad_text(text: str, ctype: ColumnType) -> SQLError:
    return SQLError("22P02", f"could not parse {text!r} as type {ctype.sql()}")


def _to_int(value: object, ctype: ColumnType) -> int:
    if isinstance(value, bool):
        raise _Mismatch
    if isinstance(value, int):
        result = value
    elif isinstance(value, float | decimal.Decimal):
        if not (math.isfinite(value) if isinstance(value, float) else value.is_finite()):
            raise SQLError("22003", f"{value} is out of range for type INT8")
        # NB: as CockroachDB: a FLOAT rounds half to even (math.RoundToEven), a DECIMAL
        # half away from zero (apd's RoundHalfUp): 2.5::FLOAT::INT is 2, 2.5::INT 3
        rounding = decimal.ROUND_HALF_EVEN if isinstance(value, float) else decimal.ROUND_HALF_UP
        result = int(decimal.Decimal(value).to_integral_value(rounding))
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            raise _bad_text(value, ctype) from None
    else:
        raise _Mismatch
    bits = ctype.width or 64
    if not -(1 << (bits - 1)) <= result < 1 << (bits - 1):
        raise SQLError("22003", f"integer {result} is out of range for type {ctype.sql()}")
    return result


def _to_float(value: object, ctype: ColumnType) -> float:
    if isinstance(value, bool):
        raise _Mismatch
    if isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            raise _bad_text(value, ctype) from None
    elif isinstance(value, int | float | decimal.Decimal):
        try:
            result = float(value)
        except OverflowError:
            raise SQLError("22003", f"{value} is out of range for type FLOAT8") from None
    else:
        raise _Mismatch
    if ctype.width != 32:
        return result
    narrowed = Float4.of(result)
    if math.isinf(narrowed) and math.isfinite(result):
        raise SQLError("22003", f"{value} is out of range for type FLOAT4")
    return narrowed


def decimal_of_float(value: float) -> decimal.Decimal:
    """The DECIMAL a FLOAT casts to, as CockroachDB makes it: the float's shortest
    digits in exponent form (Go's ``%E`` with the fewest digits), read as a decimal; so
    no trailing zeros: ``1.0`` gives ``1``, ``0.1`` gives ``0.1``, ``100.0`` gives
    ``1E+2``, ``1e20`` gives ``1E+20``; infinities stay infinite."""
    # NB: repr is Python's shortest round-tripping text, the digits Go's -1 precision
    # picks; normalize drops the trailing zeros repr's plain form adds ('1.0', '100.0')
    result = decimal.Decimal(repr(value))
    return result.normalize() if result.is_finite() else result


class Float4(float):
    """A FLOAT4 (REAL) value: a float32, held as the float64 of the same value (as
    CockroachDB holds it). Its text has float32's digits (:func:`float_text`); any
    arithmetic on it gives a plain float, a FLOAT8, as in CockroachDB."""

    __slots__ = ()

    @classmethod
    def of(cls, value: float) -> Float4:
        """``value`` rounded to the nearest float32 (half to even); past float32's
        range it is an infinity, as a Go ``float32(value)`` is."""
        try:
            return cls(struct.unpack("<f", struct.pack("<f", value))[0])
        except OverflowError:
            return cls(math.copysign(math.inf, value))


def _to_decimal(value: object, ctype: ColumnType) -> decimal.Decimal:
    if isinstance(value, bool):
        raise _Mismatch
    if isinstance(value, decimal.Decimal):
        result = value
    elif isinstance(value, int):
        result = decimal.Decimal(value)
    elif isinstance(value, float):
        result = decimal_of_float(value)
    elif isinstance(value, str):
        try:
            result = decimal.Decimal(value.strip())
        except decimal.InvalidOperation:
            raise _bad_text(value, ctype) from None
    else:
        raise _Mismatch
    if result.is_nan():
        # NB: as CockroachDB: a DECIMAL NaN is neither signaling nor negative
        # ('-sNaN'::DECIMAL is NaN), so NaNs are one value, equal and one key
        return DECIMAL_NAN
    if ctype.scale is not None and result.is_finite():  # NB: DECIMAL(3,1) holds Infinity
        # NB: the default context holds 28 digits; a DECIMAL(40,2) needs more.
        wide = decimal.Context(prec=len(result.as_tuple().digits) + ctype.scale + 2)
        result = result.quantize(
            decimal.Decimal(1).scaleb(-ctype.scale), decimal.ROUND_HALF_UP, context=wide
        )
        digits = len(result.as_tuple().digits)
        if ctype.precision is not None and digits > ctype.precision and result != 0:
            whole = ctype.precision - ctype.scale
            limit = f"10^{whole}" if whole else "1"
            raise SQLError(
                "22003",
                f"value with precision {ctype.precision}, scale {ctype.scale} must round to"
                f" an absolute value less than {limit}",
            )
    return result


def _to_string(value: object, ctype: ColumnType) -> str:
    if not isinstance(value, str):
        raise _Mismatch
    if ctype.fixed:
        value = value.rstrip(" ")
    if ctype.width is not None and len(value) > ctype.width:
        raise SQLError("22001", f"value too long for type {ctype.sql()}")
    if ctype.fixed and ctype.width is not None:
        return FixedChar.of(value, ctype.width)
    return value


class FixedChar(str):
    """A CHAR(n) value: its text without trailing spaces, as SQL expressions see it
    (``length``, ``=``, ``||``, which gives a plain STRING); a client is sent it padded
    with spaces to ``width``, as CockroachDB sends it."""

    width: int

    @classmethod
    def of(cls, text: str, width: int) -> FixedChar:
        value = cls(text)
        value.width = width
        return value

    def padded(self) -> str:
        return str(self).ljust(self.width)


def _to_bytes(value: object, ctype: ColumnType) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        if value.startswith("\\x"):
            try:
                return bytes.fromhex(value[2:])
            except ValueError:
                raise _bad_text(value, ctype) from None
        return value.encode()
    raise _Mismatch


_TRUE_WORDS = {"t", "true", "yes", "y", "on", "1"}
_FALSE_WORDS = {"f", "false", "no", "n", "off", "0"}


def _to_bool(value: object, ctype: ColumnType) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
        raise _bad_text(value, ctype)
    raise _Mismatch


def _refuse_infinite(value: datetime.datetime, what: str) -> None:
    """22008 for an infinite timestamp cast to ``what``, which has no such value here."""
    infinity = infinity_of(value)
    if infinity is not None:
        raise SQLError("22008", f"{what} out of range: a {what} cannot be {infinity}")


def _to_date(value: object, ctype: ColumnType) -> datetime.date:
    if isinstance(value, datetime.datetime):
        _refuse_infinite(value, "DATE")
        if value.tzinfo is not None:  # the day in the session's zone
            value = shifted(value, current_zone())
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip())
        except ValueError:
            try:
                return datetime.datetime.fromisoformat(value.strip()).date()
            except ValueError:
                raise _bad_text(value, ctype) from None
    raise _Mismatch


def _parse_datetime(value: str, ctype: ColumnType) -> datetime.datetime:
    infinite = infinite_timestamp(value, aware=False)
    if infinite is not None:
        return infinite
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise _bad_text(value, ctype) from None


def _to_timestamp(value: object, ctype: ColumnType) -> datetime.datetime:
    if isinstance(value, str):
        value = _parse_datetime(value, ctype)
    if isinstance(value, datetime.datetime) and infinity_of(value):
        return value.replace(tzinfo=None)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:  # the wall time in the session's zone
            value = shifted(value, current_zone()).replace(tzinfo=None)
        return value
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day)
    raise _Mismatch


def _to_timestamptz(value: object, ctype: ColumnType) -> datetime.datetime:
    if isinstance(value, str):
        value = _parse_datetime(value, ctype)
    if isinstance(value, datetime.datetime) and infinity_of(value):
        return value.replace(tzinfo=UTC)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:  # a wall time in the session's zone
            return shifted(value.replace(tzinfo=current_zone()), UTC)
        return shifted(value, UTC)
    if isinstance(value, datetime.date):
        midnight = datetime.datetime(value.year, value.month, value.day)
        return shifted(midnight.replace(tzinfo=current_zone()), UTC)
    raise _Mismatch


def _to_uuid(value: object, ctype: ColumnType) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value.strip())
        except ValueError:
            raise _bad_text(value, ctype) from None
    if isinstance(value, bytes) and len(value) == 16:
        return uuid.UUID(bytes=value)
    raise _Mismatch


def _to_json(value: object, ctype: ColumnType) -> Any:
    if value is JSON_NULL or isinstance(value, jsonb.JsonString):
        return value
    if isinstance(value, str):
        try:
            return jsonb.loads(value)
        except ValueError as exc:
            raise SQLError("22P02", f"could not parse JSON: {exc}") from None
    # NB: a whole JSON number is an int or a Decimal, as a document's numbers are.
    if isinstance(value, dict | list | tuple | int | float | bool | decimal.Decimal):
        try:
            # Through text and back: the value is then exactly what storage returns
            # (string keys, lists for tuples, a DECIMAL's number with its digits).
            return jsonb.loads(jsonb.dumps(value))
        except (TypeError, ValueError) as exc:
            raise SQLError("22P02", f"value is not a JSON document: {exc}") from None
    raise _Mismatch


def _to_time(value: object, ctype: ColumnType) -> datetime.time:
    if isinstance(value, datetime.time):
        if value.tzinfo is not None:
            raise _Mismatch
        return value
    if isinstance(value, datetime.datetime):
        _refuse_infinite(value, "TIME")
        if value.tzinfo is not None:  # the time of day in the session's zone
            value = shifted(value, current_zone())
        return value.time()
    if isinstance(value, str):
        text = value.strip()
        try:
            return datetime.time.fromisoformat(text)
        except ValueError:
            if _CLOCK_SHAPE.fullmatch(text):
                raise SQLError("22008", f"date/time field value out of range: {text!r}") from None
            raise SQLError("22007", f"invalid input syntax for type time: {text!r}") from None
    raise _Mismatch


_CLOCK_SHAPE = re.compile(r"\d{1,2}:\d{1,2}(:\d{1,2}(\.\d+)?)?")


def _to_interval(value: object, ctype: ColumnType) -> Interval:
    if isinstance(value, Interval):
        return value
    if isinstance(value, str):
        return Interval.parse(value)
    if isinstance(value, datetime.timedelta):
        return Interval(0, value.days, value.seconds * 1_000_000 + value.microseconds)
    raise _Mismatch


def _to_inet(value: object, ctype: ColumnType) -> Inet:
    if isinstance(value, Inet):
        return value
    if isinstance(value, str):
        return Inet.parse(value)
    raise _Mismatch


def _to_bits(value: object, ctype: ColumnType) -> BitString:
    varying = ctype.kind is Kind.VARBIT
    if isinstance(value, BitString):
        return value.fitted(ctype.width, varying)
    if isinstance(value, str):
        return BitString.parse(value).fitted(ctype.width, varying)
    if isinstance(value, int) and not isinstance(value, bool) and not varying:
        return BitString.of_int(value, ctype.width or 1)
    raise _Mismatch


def _to_enum(value: object, ctype: ColumnType) -> EnumValue:
    if ctype.labels is None:
        raise SQLError("42704", f'type "{ctype.type_name}" does not exist')
    if isinstance(value, EnumValue):
        if value.labels != ctype.labels:
            raise _Mismatch
        return value
    if isinstance(value, str):
        if value in ctype.pending:
            raise SQLError("22023", f'enum value "{value}" is not yet public')
        return EnumValue.of(
            value, ctype.labels, ctype.type_name or "", ctype.codes or (), ctype.type_id or 0
        )
    raise _Mismatch


def _to_array(value: object, ctype: ColumnType) -> Array:
    element = ctype.element or ColumnType(Kind.STRING)
    if isinstance(value, Array):
        if value.element == element:
            return value
        items: list[Any] = list(value.values)
    elif isinstance(value, list | tuple):
        items = list(value)
    elif isinstance(value, str):
        items = list(parse_array_text(value))
    else:
        raise _Mismatch
    return Array(tuple(coerce(item, element, None) for item in items), element)


_COERCE: dict[Kind, Any] = {
    Kind.INT: _to_int,
    Kind.FLOAT: _to_float,
    Kind.DECIMAL: _to_decimal,
    Kind.STRING: _to_string,
    Kind.BYTES: _to_bytes,
    Kind.BOOL: _to_bool,
    Kind.DATE: _to_date,
    Kind.TIMESTAMP: _to_timestamp,
    Kind.TIMESTAMPTZ: _to_timestamptz,
    Kind.UUID: _to_uuid,
    Kind.JSONB: _to_json,
    Kind.TIME: _to_time,
    Kind.INTERVAL: _to_interval,
    Kind.INET: _to_inet,
    Kind.ENUM: _to_enum,
    Kind.ARRAY: _to_array,
    Kind.BIT: _to_bits,
    Kind.VARBIT: _to_bits,
}


# Storage.

Primitive = None | bool | int | float | str | bytes


def _micros(value: datetime.datetime) -> int:
    infinity = infinity_of(value)
    if infinity is not None:
        return INFINITE_MICROS[infinity]
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_micros(micros: int, aware: bool) -> datetime.datetime:
    if micros in (INFINITE_MICROS["infinity"], INFINITE_MICROS["-infinity"]):
        return InfiniteTimestamp(micros > 0, aware)
    value = EPOCH + datetime.timedelta(microseconds=micros)
    return value.replace(tzinfo=UTC) if aware else value


# Kinds whose values cannot be in a key (or an index): no order-preserving encoding.
_NO_KEYS = frozenset({Kind.JSONB, Kind.INTERVAL, Kind.ARRAY})


def key_primitive(kind: Kind, value: Any) -> Primitive:
    """``value`` (already coerced) as a key column primitive whose order is SQL order."""
    if value is None:
        return None
    if kind is Kind.DECIMAL:
        return decimal_key(value)
    if kind in _NO_KEYS:
        raise SQLError("0A000", f"{kind.value} values cannot be part of a key or an index")
    return _shared_primitive(kind, value)


def from_key_primitive(kind: Kind, raw: Primitive) -> Any:
    if raw is None:
        return None
    if kind is Kind.DECIMAL:
        return decimal_from_key(bytes(raw))  # type: ignore[arg-type]
    return _from_shared(kind, raw)


def value_primitive(kind: Kind, value: Any) -> Primitive:
    """``value`` (already coerced) as a stored-value primitive (exact round trip)."""
    if value is None:
        return None
    if kind is Kind.DECIMAL:
        return str(value)
    if kind is Kind.JSONB:
        return jsonb.dumps(value)  # NB: JSON null is the text null, SQL NULL is None
    if kind is Kind.INTERVAL:
        return str(value.to_primitive())
    if kind is Kind.ENUM:
        return bytes(value.code)
    if kind is Kind.ARRAY:
        element = value.element
        packed: bytes = msgpack.packb([value_primitive(element.kind, v) for v in value.values])
        return packed
    return _shared_primitive(kind, value)


def from_value_primitive(kind: Kind, raw: Primitive) -> Any:
    if raw is None:
        return None
    if kind is Kind.DECIMAL:
        return decimal.Decimal(str(raw))
    if kind is Kind.JSONB:
        return jsonb.loads(str(raw))
    if kind is Kind.INTERVAL:
        return Interval.from_primitive(str(raw))
    return _from_shared(kind, raw)


def from_key(ctype: ColumnType, raw: Primitive) -> Any:
    """A key primitive of a column of ``ctype`` as its value (ENUM needs the labels)."""
    if ctype.kind is Kind.ENUM and raw is not None:
        return _enum_of_code(ctype, raw)
    return from_key_primitive(ctype.kind, raw)


def enum_type_of(value: EnumValue) -> ColumnType:
    """The ENUM column type ``value`` is of."""
    return ColumnType(
        Kind.ENUM,
        type_name=value.type_name,
        labels=value.labels,
        codes=value.codes,
        type_id=value.type_id or None,
    )


def _enum_of_code(ctype: ColumnType, raw: Primitive) -> EnumValue:
    labels, codes = ctype.labels or (), ctype.codes or ()
    try:
        label = labels[codes.index(bytes(raw))]  # type: ignore[arg-type]
    except ValueError:
        raise InvariantViolation(
            f"enum {ctype.type_name} has no label of code {raw!r}: a row outlived its label"
        ) from None
    return EnumValue(label, labels, ctype.type_name or "", codes, ctype.type_id or 0)


def from_value(ctype: ColumnType, raw: Primitive) -> Any:
    """A stored-value primitive of a column of ``ctype`` as its value."""
    if ctype.kind is Kind.ENUM and raw is not None:
        return _enum_of_code(ctype, raw)
    if ctype.kind is Kind.ARRAY and raw is not None:
        element = ctype.element or ColumnType(Kind.STRING)
        items = msgpack.unpackb(bytes(raw))  # type: ignore[arg-type]
        return Array(tuple(from_value(element, item) for item in items), element)
    return from_value_primitive(ctype.kind, raw)


def _shared_primitive(kind: Kind, value: Any) -> Primitive:
    if kind is Kind.DATE:
        return int((value - EPOCH_DATE).days)
    if kind is Kind.TIMESTAMP or kind is Kind.TIMESTAMPTZ:
        return _micros(value)
    if kind is Kind.UUID:
        return bytes(value.bytes)
    if kind is Kind.TIME:
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return int(seconds * 1_000_000 + value.microsecond)
    if kind is Kind.INET:
        return bytes(value.to_primitive())
    if kind is Kind.BIT or kind is Kind.VARBIT:
        return str(value.bits)
    if kind is Kind.ENUM:  # NB: keys and values hold the label's code (see enums)
        return bytes(value.code)
    result: Primitive = value
    return result


def _from_shared(kind: Kind, raw: Primitive) -> Any:
    if kind is Kind.DATE:
        return EPOCH_DATE + datetime.timedelta(days=int(raw))  # type: ignore[arg-type]
    if kind is Kind.TIMESTAMP:
        return _from_micros(int(raw), aware=False)  # type: ignore[arg-type]
    if kind is Kind.TIMESTAMPTZ:
        return _from_micros(int(raw), aware=True)  # type: ignore[arg-type]
    if kind is Kind.UUID:
        return uuid.UUID(bytes=bytes(raw))  # type: ignore[arg-type]
    if kind is Kind.TIME:
        seconds, micros = divmod(int(raw), 1_000_000)  # type: ignore[arg-type]
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return datetime.time(hour, minute, second, micros)
    if kind is Kind.INET:
        return Inet.from_primitive(bytes(raw))  # type: ignore[arg-type]
    if kind is Kind.BIT or kind is Kind.VARBIT:
        return BitString(str(raw))
    return raw


_EXPONENT = struct.Struct(">I")
_EXPONENT_BIAS = 1 << 31
_NAN_KEY = b"\x00"
_NEGATIVE_INFINITY_KEY = b"\x00\x01"
_INFINITY_KEY = b"\x04"
_SPECIAL_KEYS = {
    _NAN_KEY: DECIMAL_NAN,
    _NEGATIVE_INFINITY_KEY: decimal.Decimal("-Infinity"),
    _INFINITY_KEY: decimal.Decimal("Infinity"),
}


def decimal_key(value: decimal.Decimal) -> bytes:
    """A byte string whose byte order is the numeric order of decimals, NaN first (as
    CockroachDB orders it: below -Infinity).

    Zero is ``02``. A positive number ``0.d1d2... * 10**e`` is ``03``, then ``e`` biased
    as 4 big-endian bytes, then its digits as ASCII with trailing zeros dropped: a
    shorter digit string is a prefix of a longer one and sorts first, as it should. A
    negative number is ``01`` and the inverted bytes of the same with a ``00`` appended,
    so a larger magnitude sorts first and a prefix no longer does. Equal numbers with
    different scales (1.5, 1.50) get the same key. NaN is ``00``, -Infinity ``0001``,
    Infinity ``04``.
    """
    if value.is_nan():
        return _NAN_KEY
    if value.is_infinite():
        return _NEGATIVE_INFINITY_KEY if value < 0 else _INFINITY_KEY
    if value == 0:
        return b"\x02"
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise SQLError("22P02", f"DECIMAL value {value} is not supported in a key")
    significant = "".join(map(str, digits)).lstrip("0")
    adjusted = exponent + len(significant)
    body = _EXPONENT.pack(adjusted + _EXPONENT_BIAS) + significant.rstrip("0").encode()
    if not sign:
        return b"\x03" + body
    return b"\x01" + bytes(255 - b for b in body + b"\x00")


def decimal_from_key(raw: bytes) -> decimal.Decimal:
    """The inverse of :func:`decimal_key` (normalized: 1.50 comes back as 1.5)."""
    if raw == b"\x02":
        return decimal.Decimal(0)
    if raw in _SPECIAL_KEYS:
        return _SPECIAL_KEYS[raw]
    negative = raw[:1] == b"\x01"
    body = bytes(255 - b for b in raw[1:-1]) if negative else raw[1:]
    (biased,) = _EXPONENT.unpack(body[:4])
    digits = body[4:].decode()
    exponent = biased - _EXPONENT_BIAS - len(digits)
    sign = "-" if negative else ""
    if exponent >= 0:  # an integer: no exponent notation (100, not 1E+2)
        return decimal.Decimal(f"{sign}{digits}{'0' * exponent}")
    return decimal.Decimal(f"{sign}{digits}E{exponent}")


# Display.


def literal_text(value: Any) -> str:
    """``value`` as CockroachDB shows a datum in a message: :func:`format_value`'s text,
    a string quoted as a SQL literal (``'it''s'``)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return format_value(value)


def format_value(value: Any) -> str:
    """``value`` as ``feedkv sql`` prints it (NULL as ``NULL``)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, datetime.datetime):
        return timestamp_text(value)
    if isinstance(value, datetime.time):
        text = value.isoformat()
        return text.rstrip("0") if value.microsecond else text
    if isinstance(value, Array):
        return value.text(format_value)
    if isinstance(value, Record):
        return value.text(_in_record)
    if is_json(value):
        return jsonb.dumps(value, spaced=True)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if isinstance(value, Float4):
            return _shortest_float(float(_shortest_float32(value)))
        return _shortest_float(value)
    return str(value)


def _in_record(value: Any, json: bool) -> str:
    """An element of a record as its text shows it: the wire's text of it, as CockroachDB
    writes a tuple (a BOOL is ``t`` or ``f``, a JSONB value its JSON text)."""
    if json:
        return jsonb.dumps(value, spaced=True)
    if isinstance(value, bool):
        return "t" if value else "f"
    return format_value(value)


def float_text(value: float, extra_float_digits: int = 0) -> str:
    """A FLOAT as CockroachDB's text of it (a cast to STRING, the wire's text format)
    with the session's ``extra_float_digits``: at 1 and above the shortest text that
    reads back as ``value`` (:func:`format_value`'s); else ``15 + extra_float_digits``
    significant digits (at least one), as Go's ``%g``: the default 0 shows
    ``0.1::FLOAT + 0.2::FLOAT`` as ``0.3``. A :class:`Float4` has float32's digits
    instead: 6 + ``extra_float_digits`` (CockroachDB's FLT_DIG), or at 1 and above the
    shortest text that reads back as that float32 (``0.1::FLOAT4`` is ``0.1``)."""
    if not math.isfinite(value):
        return format_value(value)
    if extra_float_digits >= 1:
        return format_value(value)
    if isinstance(value, Float4):
        return _float_g(value, max(6 + extra_float_digits, 1))
    return _float_g(value, max(15 + extra_float_digits, 1))


def _shortest_float32(value: float) -> str:
    """The fewest significant digits (``%g``) that read back as the float32 ``value``."""
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        if Float4.of(float(text)) == value:
            return text
    return repr(value)  # NB: 9 digits always read back; kept for the type checker


def _float_g(value: float, precision: int) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', precision, 64)`` for a finite value: the
    exact binary value rounded half to even to ``precision`` significant digits,
    trailing zeros dropped; exponent form when the decimal exponent is below -4 or at
    least ``precision``."""
    exact = decimal.Decimal(value)
    minus = "-" if exact.is_signed() else ""
    if exact.is_zero():
        return minus + "0"
    rounded = decimal.Context(prec=precision, rounding=decimal.ROUND_HALF_EVEN).plus(exact)
    _sign, digit_tuple, exponent = rounded.as_tuple()
    shown = "".join(map(str, digit_tuple)).rstrip("0")
    point = len(digit_tuple) + int(exponent)  # digits before the decimal point
    exponent_from = precision
    if exponent_from > len(shown) >= point:  # NB: Go's rule: a whole number shows whole
        exponent_from = len(shown)
    return _g_text(minus, shown, point, exponent_from)


def _shortest_float(value: float) -> str:
    """A finite float as CockroachDB prints it (Go's shortest ``%g``): the fewest digits
    that read back as ``value``, in exponent form (``1e+06``, ``1.5e-07``) when the
    decimal exponent is below -4 or 6 and above, else plain (``100``, ``0.0001``)."""
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exponent)  # digits before the decimal point
    if shown == "0":
        point = 1
    return _g_text("-" if sign else "", shown, point, 6)


def _g_text(minus: str, shown: str, point: int, exponent_from: int) -> str:
    """Significant digits ``shown`` with ``point`` of them before the decimal point, as
    Go's ``%g`` writes them: exponent form when the decimal exponent is below -4 or at
    least ``exponent_from``, else plain."""
    power = point - 1
    if power < -4 or power >= exponent_from:
        mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{shown}"
    whole = shown[:point].ljust(point, "0")
    fraction = shown[point:]
    return f"{minus}{whole}.{fraction}" if fraction else f"{minus}{whole}"


def logical_decimal(ts: Timestamp) -> decimal.Decimal:
    """A timestamp as ``cluster_logical_timestamp()`` shows it: ``<wall>.<logical:010>``."""
    return decimal.Decimal(f"{ts.wall}.{ts.logical:010d}")


def wall_instant(ts: Timestamp) -> datetime.datetime:
    """The instant of ``ts``'s wall time, as a TIMESTAMPTZ value (in microseconds)."""
    return _EPOCH + datetime.timedelta(microseconds=ts.wall // 1000)


_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


def timestamp_of(value: Any, now: Timestamp) -> Timestamp:
    """An AS OF SYSTEM TIME value as a timestamp: a logical timestamp (``123.0000000001``
    or a DECIMAL), a negative interval (``'-10s'``) before ``now``, or a date/time."""
    if isinstance(value, decimal.Decimal | int) and not isinstance(value, bool):
        whole, _, fraction = format(decimal.Decimal(value), "f").partition(".")
        if len(fraction) > 10 or whole.startswith("-"):
            raise SQLError("22007", f"AS OF SYSTEM TIME: {value} is not a logical timestamp")
        return Timestamp.parse(f"{whole}.{fraction.ljust(10, '0')}")
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        return Timestamp(int(aware.timestamp() * 1_000_000) * 1000, 0)
    if isinstance(value, Interval):
        return _interval_before(value, now, format_value(value))
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("-"):
            try:
                back = parse_duration_ns(text[1:])
            except InvalidArgumentError as exc:
                raise SQLError("22007", f"AS OF SYSTEM TIME: {exc}") from None
            if back < 1000:  # NB: as CockroachDB: else it is now, not a time before it
                raise SQLError(
                    "22007",
                    f"AS OF SYSTEM TIME: interval value {text!r} too small, absolute value "
                    "must be >= 1µs",
                )
            return Timestamp(now.wall - back, 0)
        try:
            parsed = Timestamp.parse_decimal(text)
        except TimestampParseError:
            pass
        else:
            if parsed == Timestamp(0, 0):
                raise SQLError("22007", "AS OF SYSTEM TIME: zero timestamp is invalid")
            return parsed
        try:
            return timestamp_of(coerce(text, ColumnType(Kind.TIMESTAMPTZ), "AS OF"), now)
        except SQLError:
            pass
        try:
            interval = Interval.parse(text)
        except (SQLError, InvalidArgumentError):
            pass
        else:
            return _interval_before(interval, now, text)
    raise SQLError(
        "22007",
        f"AS OF SYSTEM TIME: {value!r} is not a timestamp; use a logical timestamp "
        "(cluster_logical_timestamp()), a negative interval such as '-10s', or a date/time",
    )


def _interval_before(interval: Interval, now: Timestamp, text: str) -> Timestamp:
    """AS OF SYSTEM TIME given an interval: that long before ``now``, which it must be
    (as CockroachDB: at least 1 us, and not after now)."""
    span = interval.span()
    if span == 0:
        raise SQLError(
            "22007",
            f"AS OF SYSTEM TIME: interval value {text!r} too small, absolute value must be >= 1µs",
        )
    if span > 0:
        raise SQLError(
            "22007", f"AS OF SYSTEM TIME: cannot specify timestamp in the future ({text!r})"
        )
    moment = datetime.datetime.fromtimestamp(now.wall // 1000 / 1_000_000, datetime.UTC)
    moved = interval.added_to(moment)
    return Timestamp(int(moved.timestamp() * 1_000_000) * 1000, 0)
