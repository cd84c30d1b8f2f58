"""CockroachDB's Parquet layout for changefeed files (``format=parquet`` into cloud
storage), so a warehouse loader written for CockroachDB's files reads feedkv's.

Columns, in order (CockroachDB 26.1: the Parquet types of the EXPORT docs, which its
changefeeds share, and the changefeed's metadata columns):

- the table's columns (a CDC query's instead), typed as CockroachDB types them: INT
  ``INT64`` (INT2/INT4 ``INT32``), FLOAT ``DOUBLE``, BOOL ``BOOLEAN``, STRING, INET,
  ENUM, INTERVAL (ISO 8601, ``P1DT2H``), DATE, TIMESTAMP and TIMESTAMPTZ as strings in
  CockroachDB's text (``2025-04-01 17:55:46.812942``, ``...+00``), DECIMAL(p,s) the
  ``DECIMAL`` logical type with its precision and scale (a DECIMAL without precision as
  text), UUID a 16-byte ``FIXED_LEN_BYTE_ARRAY``, BYTES and BIT byte arrays, JSONB the
  ``JSON`` logical type, TIME ``INT64`` ``TIME(micros)``, ARRAY a repeated field of its
  element type;
- ``__crdb__event_type``: ``c`` (insert, or a row of a scan), ``u`` (update) or ``d``
  (delete; the row has only its key columns set);
- ``__crdb__updated`` only with ``updated``, ``__crdb__mvcc_timestamp`` only with
  ``mvcc_timestamp`` (HLC strings);
- ``__crdb__before`` only with ``diff``: the row before the change as a JSON object
  (the ``JSON`` logical type; null for an insert), as CockroachDB writes it.

Two departures, each because Arrow's Parquet writer has no way to write CockroachDB's
exact physical type, and each read the same by Spark, DuckDB and pandas: a DECIMAL is a
``FIXED_LEN_BYTE_ARRAY`` (not a ``BYTE_ARRAY``) decimal, and an ENUM a ``STRING`` (not
the ``ENUM`` logical type). A DECIMAL(p,s) value that is NaN or infinite has no decimal
form: writing it raises ``ValueError`` (the changefeed sets its table aside, saying why)
rather than losing it.

Pure: values in, Arrow arrays out.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from feedkv.errors import InvalidArgumentError
from feedkv.sql import jsonb
from feedkv.sql.time_zone import timestamp_text
from feedkv.sql.types import ColumnType, Kind, format_value

if TYPE_CHECKING:
    from feedkv.changefeed.options import ChangefeedOptions

__all__ = [
    "BEFORE",
    "EVENT_TYPE",
    "MVCC_TIMESTAMP",
    "UPDATED",
    "CockroachParquet",
    "arrow_array",
    "arrow_type",
    "decimal_type",
    "finite_decimal",
    "interval_iso8601",
]

EVENT_TYPE = "__crdb__event_type"
UPDATED = "__crdb__updated"
MVCC_TIMESTAMP = "__crdb__mvcc_timestamp"
BEFORE = "__crdb__before"

# Sinks whose Parquet files are CockroachDB's (the lake sinks keep rows their own way).
_FILE_SCHEMES = frozenset({"file", "s3", "azure", "gs", "null"})


@dataclass(frozen=True, slots=True)
class CockroachParquet:
    """Which metadata columns the files carry beside ``__crdb__event_type``."""

    updated: bool = False
    mvcc_timestamp: bool = False
    diff: bool = False

    @classmethod
    def of(cls, options: ChangefeedOptions, sink_uri: str | None) -> CockroachParquet | None:
        """The layout of a changefeed's Parquet files (``None``: its sink is no file
        sink, or it writes no Parquet)."""
        if options.format != "parquet" or sink_uri is None:
            return None
        if urlsplit(sink_uri).scheme.lower() not in _FILE_SCHEMES:
            return None
        return cls.files(options)

    @classmethod
    def files(cls, options: ChangefeedOptions) -> CockroachParquet:
        """The layout of a file sink's Parquet files under ``options``."""
        return cls(options.updated, options.mvcc_timestamp, options.diff)

    @property
    def meta(self) -> tuple[str, ...]:
        """The metadata columns, in order."""
        names = [EVENT_TYPE]
        if self.updated:
            names.append(UPDATED)
        if self.mvcc_timestamp:
            names.append(MVCC_TIMESTAMP)
        if self.diff:
            names.append(BEFORE)
        return tuple(names)


_PLAIN: dict[Kind, pa.DataType] = {
    Kind.FLOAT: pa.float64(),
    Kind.STRING: pa.string(),
    Kind.BYTES: pa.binary(),
    Kind.BOOL: pa.bool_(),
    Kind.DATE: pa.string(),
    Kind.TIMESTAMP: pa.string(),
    Kind.TIMESTAMPTZ: pa.string(),
    Kind.UUID: pa.binary(16),
    Kind.JSONB: pa.json_(),
    Kind.TIME: pa.time64("us"),
    Kind.INTERVAL: pa.string(),
    Kind.INET: pa.string(),
    Kind.ENUM: pa.string(),
    Kind.BIT: pa.binary(),
    Kind.VARBIT: pa.binary(),
}

_MAX_PRECISION = 38  # decimal128's


def decimal_type(ctype: ColumnType) -> pa.DataType | None:
    """The Arrow decimal a DECIMAL column of ``ctype`` is written as: its own precision
    and scale, where Arrow's decimal128 holds them (``None``: no precision, or one over
    38, written as text)."""
    if ctype.precision and ctype.precision <= _MAX_PRECISION:
        return pa.decimal128(ctype.precision, ctype.scale or 0)
    return None


def finite_decimal(value: decimal.Decimal, ctype: ColumnType) -> decimal.Decimal:
    """``value``, a DECIMAL of ``ctype`` written as an Arrow decimal; a NaN or infinity,
    which a typed DECIMAL column holds (as CockroachDB's) but no decimal of Arrow,
    Parquet, Delta, Iceberg or Spark does, is refused with what to do instead: no retry
    changes it, so the changefeed fails."""
    if not value.is_finite():
        raise InvalidArgumentError(
            f"DECIMAL({ctype.precision},{ctype.scale or 0}) value {value} has no decimal "
            "form in Parquet, Arrow or Spark; declare the column DECIMAL without a "
            "precision (written as text), or for a file sink use format=json"
        )
    return value


def arrow_type(ctype: ColumnType | None) -> pa.DataType:
    """The Arrow type a column of ``ctype`` is written as (``None``: a CDC query's
    computed column, written as text)."""
    if ctype is None:
        return pa.string()
    kind = ctype.kind
    if kind is Kind.INT:
        return pa.int32() if ctype.width in (16, 32) else pa.int64()
    if kind is Kind.DECIMAL:
        return decimal_type(ctype) or pa.string()
    if kind is Kind.ARRAY:
        return pa.list_(arrow_type(ctype.element or ColumnType(Kind.STRING)))
    return _PLAIN[kind]


def interval_iso8601(value: Any) -> str:
    """An INTERVAL as ISO 8601 (``P1Y2M3DT4H5M6.5S``; ``PT0S`` for zero), each part
    with its own sign, as CockroachDB writes intervals into Parquet."""
    years, months = divmod(abs(value.months), 12)
    sign = "-" if value.months < 0 else ""
    text = "P"
    if years:
        text += f"{sign}{years}Y"
    if months:
        text += f"{sign}{months}M"
    if value.days:
        text += f"{value.days}D"
    micros = value.micros
    if micros:
        clock_sign = "-" if micros < 0 else ""
        hours, rest = divmod(abs(micros), 3_600_000_000)
        minutes, rest = divmod(rest, 60_000_000)
        seconds, fraction = divmod(rest, 1_000_000)
        text += "T"
        if hours:
            text += f"{clock_sign}{hours}H"
        if minutes:
            text += f"{clock_sign}{minutes}M"
        if seconds or fraction:
            shown = f"{seconds}.{fraction:06d}".rstrip("0") if fraction else str(seconds)
            text += f"{clock_sign}{shown}S"
    return text if text != "P" else "PT0S"


def _timestamp(value: datetime.datetime, zone: bool) -> str:
    """CockroachDB's text of a TIMESTAMP, or with ``zone`` a TIMESTAMPTZ (in UTC):
    no trailing zeros in the fraction, the zone as ``+00``."""
    utc = value.astimezone(datetime.UTC) if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    return timestamp_text(utc, datetime.UTC) if zone else timestamp_text(utc.replace(tzinfo=None))


def _convert(ctype: ColumnType | None, value: Any) -> Any:
    if value is None:
        return None
    if ctype is None:
        return format_value(value)
    kind = ctype.kind
    if kind is Kind.DECIMAL:
        return finite_decimal(value, ctype) if decimal_type(ctype) else format_value(value)
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        return _timestamp(value, kind is Kind.TIMESTAMPTZ)
    if kind is Kind.DATE:
        return value.isoformat()
    if kind is Kind.UUID:
        return value.bytes
    if kind is Kind.JSONB:
        return jsonb.dumps(value, spaced=True)
    if kind is Kind.INTERVAL:
        return interval_iso8601(value)
    if kind in (Kind.BIT, Kind.VARBIT):
        return str(value).encode()
    if kind in (Kind.INET, Kind.ENUM):
        return str(value)
    if kind is Kind.ARRAY:
        element = ctype.element or ColumnType(Kind.STRING)
        return [_convert(element, v) for v in value.values]
    return value


def arrow_array(ctype: ColumnType | None, values: list[Any]) -> pa.Array:
    """A column's values as CockroachDB's Parquet type takes them."""
    return pa.array([_convert(ctype, v) for v in values], type=arrow_type(ctype))
