"""Row changes to message bytes: envelopes and the JSON format.

A message is a key (the primary key as a JSON array, ``[1, "a"]``) and a value, shaped
by the envelope as CockroachDB users know it:

- ``wrapped`` (default): ``{"after": {...}}``, plus ``"before"`` (``diff``),
  ``"key"`` (``key_in_value``), ``"topic"`` (``topic_in_value``), ``"updated"`` and
  ``"mvcc_timestamp"`` when asked for. A deletion has ``"after": null``.
- ``bare``: the row itself, with a ``"__crdb__"`` object holding ``updated``,
  ``mvcc_timestamp`` and ``key``/``topic`` when asked for; a deletion has no value.
- ``row``: the row itself and nothing else; a deletion has no value.
- ``key_only``: no value at all.

A value of ``None`` is a tombstone: the sink decides how to write it (a Kafka
tombstone, a ``null`` line in a file). Resolved messages are
``{"resolved": "<ts>"}``. Timestamps are strings in the HLC decimal form
``<wall ns>.<logical, 10 digits>``.

Column values follow CockroachDB's JSON forms: numbers for INT, FLOAT and DECIMAL
(exact digits; NaN and infinities as strings), ``"\\x..."`` hex for BYTES, ISO 8601 for
dates and times (``Z`` for TIMESTAMPTZ), JSONB embedded as JSON.

:func:`make_encoder` picks the encoder for a format; Avro lives in
:mod:`feedkv.changefeed.avro` and is imported only when asked for.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, Protocol

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.rows import RowEvent
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.types import Kind, format_value
from feedkv.util.hlc import Timestamp

__all__ = [
    "Encoder",
    "JSONEncoder",
    "RowFormat",
    "RowFormats",
    "ScanEncoder",
    "json_any",
    "json_value",
    "make_encoder",
]


ScanEncoder = Callable[[tuple[Any, ...], Sequence[Any], Timestamp], tuple[bytes, bytes | None]]
"""Encodes one scanned row, given as its primary key, its columns' values in column
order and its MVCC timestamp, into a message's key and value."""


class Encoder(Protocol):
    """Turns row changes and resolved timestamps into message bytes."""

    def encode_key(self, event: RowEvent, topic: str) -> bytes: ...

    def encode_value(self, event: RowEvent, topic: str) -> bytes | None:
        """The message value; ``None`` is a tombstone (a deletion with no value)."""
        ...

    def scan_encoder(
        self, desc: TableDescriptor, topic: str, updated: Timestamp
    ) -> ScanEncoder | None:
        """How to encode the whole rows of a scan of ``desc``'s table as of ``updated``
        (an initial scan, a backfill) without a :class:`RowEvent` each: the hot path of
        a scan. ``None``: encode them as events."""
        ...

    def encode_resolved(self, ts: Timestamp, topic: str | None) -> bytes: ...


def make_encoder(options: ChangefeedOptions) -> Encoder:
    """The encoder for ``options.format``; csv and parquet are file formats written by
    the file sink from :class:`~feedkv.changefeed.rows.RowEvent` objects directly, and
    use the JSON encoder for their keys."""
    if options.format == "avro":
        from feedkv.changefeed.avro import AvroEncoder

        return AvroEncoder(options)
    return JSONEncoder(options)


def _json_float(value: float) -> str:
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    return repr(value)


def _json_decimal(value: decimal.Decimal) -> str:
    if value.is_nan():
        return '"NaN"'
    if value.is_infinite():
        return '"Infinity"' if value > 0 else '"-Infinity"'
    return str(value)


def _json_timestamptz(value: datetime.datetime) -> str:
    text = value.astimezone(datetime.UTC).replace(tzinfo=None).isoformat()
    return json.dumps(text + "Z")


_dumps = json.dumps

_BY_KIND: dict[Kind, Callable[[Any], str]] = {
    Kind.INT: str,
    Kind.FLOAT: _json_float,
    Kind.DECIMAL: _json_decimal,
    Kind.STRING: encode_basestring_ascii,  # what json.dumps does for a str, minus its checks
    Kind.BYTES: lambda v: '"\\\\x' + v.hex() + '"',
    Kind.BOOL: lambda v: "true" if v else "false",
    Kind.DATE: lambda v: '"' + v.isoformat() + '"',
    Kind.TIMESTAMP: lambda v: '"' + v.isoformat() + '"',
    Kind.TIMESTAMPTZ: _json_timestamptz,
    Kind.UUID: lambda v: '"' + str(v) + '"',
    Kind.JSONB: lambda v: _dumps(v, sort_keys=True),
    # As CockroachDB: strings in their SQL text form.
    Kind.TIME: lambda v: _dumps(format_value(v)),
    Kind.INTERVAL: lambda v: _dumps(str(v)),
    Kind.INET: lambda v: _dumps(str(v)),
    Kind.ENUM: lambda v: _dumps(str(v)),
    Kind.ARRAY: lambda v: "[" + ",".join(json_value(v.element.kind, x) for x in v.values) + "]",
}


def json_value(kind: Kind, value: Any) -> str:
    """One column value as JSON text."""
    return "null" if value is None else _BY_KIND[kind](value)


def json_any(value: Any) -> str:
    """A value of a computed column (no declared type) as JSON text, by its Python type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, decimal.Decimal):
        return _json_decimal(value)
    if isinstance(value, bytes):
        return _BY_KIND[Kind.BYTES](value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return _json_timestamptz(value)
        return '"' + value.isoformat() + '"'
    if isinstance(value, datetime.date):
        return '"' + value.isoformat() + '"'
    if isinstance(value, dict | list):
        return _dumps(value, sort_keys=True)
    return _dumps(str(value))


class RowFormat:
    """How one descriptor version's rows become JSON objects: the ``"name": `` prefix
    and value formatter of every column, worked out once."""

    def __init__(self, desc: TableDescriptor) -> None:
        self.columns = {
            c.name: (_dumps(c.name) + ": ", _BY_KIND[c.type.kind]) for c in desc.columns
        }
        self.key = [_BY_KIND[c.type.kind] for c in desc.key_columns]
        self._formats = [fmt for _prefix, fmt in self.columns.values()]
        prefixes = [prefix.replace("%", "%%") for prefix, _fmt in self.columns.values()]
        self._template = "{" + ", ".join(prefix + "%s" for prefix in prefixes) + "}"

    def row(self, row: dict[str, Any]) -> str:
        parts = []
        columns = self.columns
        for name, value in row.items():
            found = columns.get(name)
            if found is None:  # a CDC query's computed column
                parts.append(_dumps(name) + ": " + json_any(value))
                continue
            prefix, fmt = found
            parts.append(prefix + ("null" if value is None else fmt(value)))
        return "{" + ", ".join(parts) + "}"

    def values(self, values: Sequence[Any]) -> str:
        """:meth:`row` for every column's value in column order (as many as the
        descriptor has: one format per version)."""
        formats = self._formats
        return self._template % tuple(
            ["null" if v is None else f(v) for f, v in zip(formats, values, strict=False)]
        )

    def key_array(self, key: tuple[Any, ...]) -> str:
        # NB: one format per descriptor version, so key and formats are equally long.
        parts = ["null" if v is None else f(v) for f, v in zip(self.key, key, strict=False)]
        return "[" + ", ".join(parts) + "]"


class RowFormats:
    """The :class:`RowFormat` of each descriptor version, built on first use."""

    def __init__(self) -> None:
        self._formats: dict[tuple[int, int], RowFormat] = {}

    def __call__(self, desc: TableDescriptor) -> RowFormat:
        found = self._formats.get((desc.id, desc.version))
        if found is None:
            found = self._formats[(desc.id, desc.version)] = RowFormat(desc)
        return found


class JSONEncoder:
    def __init__(self, options: ChangefeedOptions) -> None:
        self._o = options
        self._format = RowFormats()

    def encode_key(self, event: RowEvent, topic: str) -> bytes:
        return self._format(event.table).key_array(event.key).encode()

    def encode_value(self, event: RowEvent, topic: str) -> bytes | None:
        o = self._o
        if o.envelope == "key_only":
            return None
        fmt = self._format(event.table)
        return self._envelope(
            None if event.after is None else fmt.row(event.after),
            None if event.before is None else fmt.row(event.before),
            fmt.key_array(event.key) if o.key_in_value else "",
            topic,
            event.updated,
            event.mvcc_ts,
        )

    def scan_encoder(self, desc: TableDescriptor, topic: str, updated: Timestamp) -> ScanEncoder:
        fmt = self._format(desc)
        envelope = self._envelope

        def encode(
            key: tuple[Any, ...], values: Sequence[Any], mvcc_ts: Timestamp
        ) -> tuple[bytes, bytes | None]:
            key_json = fmt.key_array(key)
            return key_json.encode(), envelope(
                fmt.values(values), None, key_json, topic, updated, mvcc_ts
            )

        return encode

    def _envelope(
        self,
        after: str | None,
        before: str | None,
        key: str,
        topic: str,
        updated: Timestamp,
        mvcc_ts: Timestamp,
    ) -> bytes | None:
        """The value of a row change from its parts as JSON text (``key`` is needed
        only with ``key_in_value``)."""
        o = self._o
        envelope = o.envelope
        if envelope == "key_only":
            return None
        if envelope == "wrapped":
            parts = ['"after": ' + ("null" if after is None else after)]
            if o.diff:
                parts.append('"before": ' + ("null" if before is None else before))
            parts += self._metadata(key, topic, updated, mvcc_ts)
            return ("{" + ", ".join(parts) + "}").encode()
        if after is None:
            return None
        meta = self._metadata(key, topic, updated, mvcc_ts) if envelope == "bare" else []
        if not meta:
            return after.encode()
        crdb = '"__crdb__": {' + ", ".join(meta) + "}"
        return (after[:-1] + (", " if len(after) > 2 else "") + crdb + "}").encode()

    def _metadata(self, key: str, topic: str, updated: Timestamp, mvcc_ts: Timestamp) -> list[str]:
        """The ``key``, ``topic``, ``updated`` and ``mvcc_timestamp`` fields asked for."""
        o = self._o
        meta = []
        if o.key_in_value:
            meta.append('"key": ' + key)
        if o.topic_in_value:
            meta.append('"topic": ' + _dumps(topic))
        if o.updated:
            meta.append(f'"updated": "{updated}"')
        if o.mvcc_timestamp:
            meta.append(f'"mvcc_timestamp": "{mvcc_ts}"')
        return meta

    def encode_resolved(self, ts: Timestamp, topic: str | None) -> bytes:
        return f'{{"resolved": "{ts}"}}'.encode()
