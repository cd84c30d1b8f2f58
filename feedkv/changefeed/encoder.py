"""Row changes to message bytes: envelopes and the JSON format.

A message is a key (the primary key as a JSON array, ``[1, "a"]``) and a value, shaped
by the envelope as CockroachDB users know it:

- ``wrapped`` (default): ``{"after": {...}}``, plus ``"before"`` (``diff``),
  ``"key"`` (``key_in_value``), ``"mvcc_timestamp"``, ``"topic"`` (``topic_in_value``)
  and ``"updated"`` when asked for. A deletion has ``"after": null``.
- ``bare``: the row itself, with a ``"__crdb__"`` object holding ``key``,
  ``mvcc_timestamp``, ``topic`` and ``updated`` when asked for; a deletion is the row
  with only its key columns set (the others ``null``), not a tombstone.
- ``row``: the row itself, with ``mvcc_timestamp`` and ``updated`` under
  ``"__crdb__"`` when asked for (``diff`` is taken and writes nothing: there is no
  place for a ``"before"``); a deletion has no value.
- ``key_only``: no value at all.

A value of ``None`` is a tombstone: the sink decides how to write it (a Kafka
tombstone, a ``null`` line in a file). Resolved messages are ``{"resolved":"<ts>"}``
(``{"__crdb__":{"resolved":"<ts>"}}`` outside the wrapped envelope). Timestamps are
strings in the HLC decimal form ``<wall ns>.<logical, 10 digits>``.

The bytes are CockroachDB's (its JSONB text): object keys sorted (column names too),
``", "`` and ``": "`` between items, strings in raw UTF-8 with only ``"``, ``\\``,
control characters and U+2028/U+2029 escaped. Resolved messages are written as Go's
``encoding/json`` writes them, without spaces, as CockroachDB's are.

Column values follow CockroachDB's JSON forms: numbers for INT, FLOAT and DECIMAL
(exact digits; NaN and infinities as strings), ``"\\x..."`` hex for BYTES, ISO 8601 for
dates and times with no trailing zeros in the fraction (``Z`` for TIMESTAMPTZ), JSONB
embedded as JSON.

:func:`make_encoder` picks the encoder for a format; Avro lives in
:mod:`feedkv.changefeed.avro` and is imported only when asked for.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
import time
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring as _encode_basestring
from typing import Any, Protocol

from feedkv.changefeed.enriched import connect_schema, op_of
from feedkv.changefeed.enriched_source import UNKNOWN_SOURCE, FeedSource, source_object
from feedkv.changefeed.message_key import key_column_of, key_column_value
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.rows import RowEvent
from feedkv.sql.arrays import Array
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.jsonb import JSON_NULL, is_json
from feedkv.sql.time_zone import infinity_of
from feedkv.sql.types import Kind, format_value
from feedkv.util.hlc import Timestamp

__all__ = [
    "Encoder",
    "JSONEncoder",
    "JSON_NULL_OBJECT",
    "RowFormat",
    "RowFormats",
    "ScanEncoder",
    "json_any",
    "json_string",
    "json_value",
    "make_encoder",
    "resolved_json",
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


DatabaseNames = Callable[[int], str]
"""The name of the database of a table, by the database's id (for the enriched
envelope's ``source``); the caller reads the catalog, the encoder does no I/O."""


def _no_database(database_id: int) -> str:
    return ""


def make_encoder(
    options: ChangefeedOptions,
    *,
    source: FeedSource = UNKNOWN_SOURCE,
    databases: DatabaseNames = _no_database,
) -> Encoder:
    """The encoder for ``options.format``; csv and parquet are file formats written by
    the file sink from :class:`~feedkv.changefeed.rows.RowEvent` objects directly, and
    use the JSON encoder for their keys. ``source`` and ``databases``: what the enriched
    envelope's ``source`` carries (:mod:`feedkv.changefeed.enriched_source`)."""
    if options.format == "avro":
        from feedkv.changefeed.avro import AvroEncoder

        return AvroEncoder(options, source=source, databases=databases)
    if options.format == "protobuf":
        from feedkv.changefeed.protobuf import ProtobufEncoder

        return ProtobufEncoder(options, source=source, databases=databases)
    return JSONEncoder(options, source=source, databases=databases)


def _json_float(value: float) -> str:
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    return repr(value)


def _json_float_datum(value: float) -> str:
    """A FLOAT datum as CockroachDB's changefeeds write it: the decimal of its shortest
    digits (apd's SetFloat64) in the General Decimal Arithmetic's scientific form
    (apd's String, which Python's Decimal shares): ``1.5``, ``1E+2`` for 100.0,
    ``1.5E+300``, ``1E-7``. NB: not for a JSONB number, which keeps the text it had."""
    if math.isnan(value) or math.isinf(value):
        return _json_float(value)
    return str(decimal.Decimal(repr(value)).normalize())


def _json_decimal(value: decimal.Decimal) -> str:
    if value.is_nan():
        return '"NaN"'
    if value.is_infinite():
        return '"Infinity"' if value > 0 else '"-Infinity"'
    return str(value)


def _iso(value: datetime.date) -> str:
    """ISO 8601 with no trailing zeros in the fraction of a second (Go's ``.999999``)."""
    text = value.isoformat()
    # a fraction is written only when there are microseconds, so it never strips to "."
    return text.rstrip("0") if getattr(value, "microsecond", 0) else text


def _json_timestamp(value: datetime.datetime) -> str:
    infinity = infinity_of(value)
    if infinity is not None:
        return f'"{infinity}"'
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    return '"' + _iso(value) + '"'


def _json_timestamptz(value: datetime.datetime) -> str:
    if infinity_of(value) is not None:
        return _json_timestamp(value)
    return '"' + _iso(value.astimezone(datetime.UTC).replace(tzinfo=None)) + 'Z"'


_ESCAPES = {c: f"\\u{c:04x}" for c in range(0x20)} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


_SLOW_ESCAPES = re.compile("[\b\f\u2028\u2029]").search


def json_string(text: str) -> str:
    """``text`` as a JSON string, as CockroachDB writes one: raw UTF-8, with ``"``,
    ``\\``, control characters (``\\n``, ``\\r``, ``\\t``, else ``\\u00XX``) and
    U+2028/U+2029 escaped."""
    # NB: the json module's C escaper is the same but for \b, \f (which Go writes as
    # \u0008, \u000c) and U+2028/9 (which it leaves raw): only those go the slow way
    if _SLOW_ESCAPES(text) is None:
        return _encode_basestring(text)
    return '"' + text.translate(_ESCAPES) + '"'


def _jsonb(value: Any) -> str:
    """A JSONB value as CockroachDB prints it: keys sorted, ``", "`` and ``": "``."""
    if value is None or value is JSON_NULL:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, decimal.Decimal):
        return _json_decimal(value)
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ", ".join(json_string(k) + ": " + _jsonb(v) for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_jsonb(v) for v in value) + "]"
    return json_any(value)  # a SQL value inside (a tuple's column): its JSON form


def resolved_json(ts: Timestamp, envelope: str = "wrapped") -> bytes:
    """A resolved marker's JSON, as CockroachDB writes it: ``{"resolved":"<ts>"}`` in
    the wrapped and enriched envelopes, ``{"__crdb__":{"resolved":"<ts>"}}`` in the
    others."""
    if envelope in ("wrapped", "enriched"):
        return f'{{"resolved":"{ts}"}}'.encode()
    return f'{{"__crdb__":{{"resolved":"{ts}"}}}}'.encode()


_BY_KIND: dict[Kind, Callable[[Any], str]] = {
    Kind.INT: str,
    Kind.FLOAT: _json_float_datum,
    Kind.DECIMAL: _json_decimal,
    Kind.STRING: json_string,
    Kind.BYTES: lambda v: '"\\\\x' + v.hex() + '"',
    Kind.BOOL: lambda v: "true" if v else "false",
    Kind.DATE: lambda v: '"' + v.isoformat() + '"',
    Kind.TIMESTAMP: _json_timestamp,
    Kind.TIMESTAMPTZ: _json_timestamptz,
    Kind.UUID: lambda v: '"' + str(v) + '"',
    Kind.JSONB: _jsonb,
    # As CockroachDB: strings in their SQL text form.
    Kind.TIME: lambda v: json_string(format_value(v)),
    Kind.INTERVAL: lambda v: json_string(str(v)),
    Kind.INET: lambda v: json_string(str(v)),
    Kind.BIT: lambda v: json_string(str(v)),
    Kind.VARBIT: lambda v: json_string(str(v)),
    Kind.ENUM: lambda v: json_string(str(v)),
    Kind.ARRAY: lambda v: "[" + ", ".join(json_value(v.element.kind, x) for x in v.values) + "]",
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
        return _json_float_datum(value)
    if isinstance(value, decimal.Decimal):
        return _json_decimal(value)
    if isinstance(value, bytes):
        return _BY_KIND[Kind.BYTES](value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return _json_timestamptz(value)
        return _json_timestamp(value)
    if isinstance(value, datetime.date):
        return '"' + value.isoformat() + '"'
    if isinstance(value, datetime.time):
        return _BY_KIND[Kind.TIME](value)
    if isinstance(value, Array):
        return _BY_KIND[Kind.ARRAY](value)
    if is_json(value):
        return _jsonb(value)
    return json_string(str(value))


JSON_NULL_OBJECT = '{"__crdb_json_null__": true}'


def _jsonb_null_as_object(value: Any) -> str:
    """A JSONB column's value with ``encode_json_value_null_as_object``: a JSON null
    (not SQL NULL, which stays ``null``) as ``{"__crdb_json_null__": true}``."""
    return JSON_NULL_OBJECT if value is JSON_NULL else _jsonb(value)


def _any_null_as_object(value: Any) -> str:
    return JSON_NULL_OBJECT if value is JSON_NULL else json_any(value)


META = "__crdb__"  # the key of the bare envelope's metadata object


class RowFormat:
    """How one descriptor version's rows become JSON objects: the ``"name": `` prefix
    and value formatter of every column, worked out once. Keys are sorted, as in
    CockroachDB's JSON (a JSONB object)."""

    def __init__(self, desc: TableDescriptor, *, json_null_as_object: bool = False) -> None:
        columns = desc.columns
        by_kind = dict(_BY_KIND)
        self._any = json_any
        if json_null_as_object:
            by_kind[Kind.JSONB] = _jsonb_null_as_object
            self._any = _any_null_as_object
        self.columns = {c.name: (json_string(c.name) + ": ", by_kind[c.type.kind]) for c in columns}
        self.names = {c.name for c in columns}
        self.key = [by_kind[c.type.kind] for c in desc.key_columns]
        self.key_names = [c.name for c in desc.key_columns]
        self._order = sorted(range(len(columns)), key=lambda i: columns[i].name)
        self._formats = [by_kind[columns[i].type.kind] for i in self._order]
        self._sorted = [(columns[i].name, by_kind[columns[i].type.kind]) for i in self._order]
        prefixes = [self.columns[columns[i].name][0].replace("%", "%%") for i in self._order]
        self._template = "{" + ", ".join(prefix + "%s" for prefix in prefixes) + "}"
        # with the bare envelope's metadata in its sorted place
        names = sorted([*(c.name for c in columns), META])
        self._meta_at = names.index(META)
        meta_prefixes = list(prefixes)
        meta_prefixes.insert(self._meta_at, json_string(META) + ": ")
        self._meta_template = "{" + ", ".join(prefix + "%s" for prefix in meta_prefixes) + "}"

    def row(self, row: dict[str, Any], meta: str | None = None) -> str:
        """``row`` as a JSON object (with ``meta`` under ``__crdb__`` when given)."""
        if len(row) == len(self._sorted) and row.keys() == self.names:  # the table's row
            texts = ["null" if (v := row[n]) is None else f(v) for n, f in self._sorted]
            if meta is None:
                return self._template % tuple(texts)
            texts.insert(self._meta_at, meta)
            return self._meta_template % tuple(texts)
        parts = []
        columns = self.columns
        for name, value in row.items():
            found = columns.get(name)
            if found is None:  # a CDC query's computed column
                parts.append((name, json_string(name) + ": " + self._any(value)))
                continue
            prefix, fmt = found
            parts.append((name, prefix + ("null" if value is None else fmt(value))))
        if meta is not None:
            parts.append((META, json_string(META) + ": " + meta))
        parts.sort()
        return "{" + ", ".join(text for _name, text in parts) + "}"

    def values(self, values: Sequence[Any], meta: str | None = None) -> str:
        """:meth:`row` for every column's value in column order (as many as the
        descriptor has: one format per version)."""
        formats = self._formats
        # NB: one format per descriptor version, so formats and order are equally long
        texts = [
            "null" if (v := values[i]) is None else f(v)
            for f, i in zip(formats, self._order, strict=False)
        ]
        if meta is None:
            return self._template % tuple(texts)
        texts.insert(self._meta_at, meta)
        return self._meta_template % tuple(texts)

    def deleted(self, key: tuple[Any, ...], names: Sequence[str] | None = None) -> dict[str, Any]:
        """A deleted row as the bare envelope shows it: its key columns set, the others
        (of ``names``, by default the table's columns) null."""
        row: dict[str, Any] = dict.fromkeys(self.columns if names is None else names)
        row.update(zip(self.key_names, key, strict=True))
        return row

    def key_array(self, key: tuple[Any, ...]) -> str:
        # NB: one format per descriptor version, so key and formats are equally long.
        parts = ["null" if v is None else f(v) for f, v in zip(self.key, key, strict=False)]
        return "[" + ", ".join(parts) + "]"


class RowFormats:
    """The :class:`RowFormat` of each descriptor version, built on first use."""

    def __init__(self, *, json_null_as_object: bool = False) -> None:
        self._formats: dict[tuple[int, int], RowFormat] = {}
        self._json_null_as_object = json_null_as_object

    def __call__(self, desc: TableDescriptor) -> RowFormat:
        found = self._formats.get((desc.id, desc.version))
        if found is None:
            found = self._formats[(desc.id, desc.version)] = RowFormat(
                desc, json_null_as_object=self._json_null_as_object
            )
        return found


class JSONEncoder:
    """``clock``: the wall clock in ns, for the enriched envelope's ``ts_ns``;
    ``source`` and ``databases``: for its ``source`` (see :func:`make_encoder`)."""

    def __init__(
        self,
        options: ChangefeedOptions,
        *,
        clock: Callable[[], int] = time.time_ns,
        source: FeedSource = UNKNOWN_SOURCE,
        databases: DatabaseNames = _no_database,
    ) -> None:
        self._o = options
        self._format = RowFormats(json_null_as_object=options.encode_json_value_null_as_object)
        self._clock = clock
        self._source = source
        self._databases = databases
        self._schemas: dict[tuple[int, int], str] = {}  # enriched_properties=schema's
        # a descriptor version's source fields as JSON text, around job_id's place
        self._source_texts: dict[tuple[int, int], tuple[str, str]] = {}

    def encode_key(self, event: RowEvent, topic: str) -> bytes:
        name = self._o.key_column
        if name is not None:  # the message is keyed by that column (message_key)
            column = key_column_of(event.table, name)
            return (
                "[" + json_value(column.type.kind, key_column_value(event, name)) + "]"
            ).encode()
        return self._format(event.table).key_array(event.key).encode()

    def encode_value(self, event: RowEvent, topic: str) -> bytes | None:
        o = self._o
        if o.envelope == "key_only":
            return None
        fmt = self._format(event.table)
        if o.envelope == "enriched":
            return self._enriched(event, fmt)
        key = fmt.key_array(event.key) if o.key_in_value else ""
        if o.envelope == "wrapped":
            return self._wrapped(
                None if event.after is None else fmt.row(event.after),
                None if event.before is None else fmt.row(event.before),
                key,
                topic,
                event.updated,
                event.mvcc_ts,
            )
        row = event.after
        if row is None:
            if o.envelope != "bare":
                return None  # envelope=row: a tombstone
            row = event.deleted
            if row is None:
                names = None
                if event.family is not None:  # that family's columns (and the key's)
                    wanted = {*event.table.primary_key, *event.family.column_ids}
                    names = [c.name for c in event.table.columns if c.id in wanted]
                row = fmt.deleted(event.key, names)
        meta = self._meta(key, topic, event.updated, event.mvcc_ts)
        return fmt.row(row, meta).encode()

    def scan_encoder(
        self, desc: TableDescriptor, topic: str, updated: Timestamp
    ) -> ScanEncoder | None:
        o = self._o
        if o.envelope == "enriched" or o.key_column is not None:
            return None  # each row as an event (its op and processing time; its key)
        fmt = self._format(desc)
        wrapped = self._wrapped
        meta = self._meta

        def encode(
            key: tuple[Any, ...], values: Sequence[Any], mvcc_ts: Timestamp
        ) -> tuple[bytes, bytes | None]:
            key_json = fmt.key_array(key)
            if o.envelope == "wrapped":
                return key_json.encode(), wrapped(
                    fmt.values(values), None, key_json, topic, updated, mvcc_ts
                )
            if o.envelope == "key_only":
                return key_json.encode(), None
            return key_json.encode(), fmt.values(
                values, meta(key_json, topic, updated, mvcc_ts)
            ).encode()

        return encode

    def _enriched(self, event: RowEvent, fmt: RowFormat) -> bytes:
        """The enriched envelope (:mod:`feedkv.changefeed.enriched`)."""
        o = self._o
        parts = ['"after": ' + ("null" if event.after is None else fmt.row(event.after))]
        if o.diff:
            parts.append('"before": ' + ("null" if event.before is None else fmt.row(event.before)))
        if o.key_in_value:
            parts.append('"key": ' + fmt.row(dict(zip(fmt.key_names, event.key, strict=True))))
        parts.append(f'"op": "{op_of(event)}"')
        if "source" in o.enriched_properties:
            parts.append('"source": ' + self._source_json(event))
        parts.append(f'"ts_ns": {self._clock()}')
        payload = "{" + ", ".join(parts) + "}"
        if "schema" not in o.enriched_properties:
            return payload.encode()
        desc = event.table
        schema = self._schemas.get((desc.id, desc.version))
        if schema is None:
            projected = (
                tuple((name, kind) for name, kind, _ in event.columns)
                if event.columns is not None
                else None
            )
            schema = _jsonb(connect_schema(desc, o, projected))
            self._schemas[(desc.id, desc.version)] = schema
        return ('{"payload": ' + payload + ', "schema": ' + schema + "}").encode()

    def _source_json(self, event: RowEvent) -> str:
        """:meth:`source_of` as JSON text: the fields fixed for a descriptor version
        written once (``_jsonb`` of the whole object per message cost 3/4 of the
        enriched envelope's time), the timestamps spliced in their sorted places."""
        desc, o = event.table, self._o
        found = self._source_texts.get((desc.id, desc.version))
        if found is None:
            fixed = source_object(
                self._source, desc, self._databases(desc.database_id), mvcc_ts=None, updated=None
            )
            items = [json_string(k) + ": " + _jsonb(v) for k, v in sorted(fixed.items())]
            cut = sorted(fixed).index("job_id") + 1  # mvcc_timestamp sorts after it
            found = (", ".join(items[:cut]), ", ".join(items[cut:]))
            self._source_texts[(desc.id, desc.version)] = found
        head, tail = found
        text = "{" + head
        if o.mvcc_timestamp:
            text += f', "mvcc_timestamp": "{event.mvcc_ts}"'
        text += ", " + tail
        if o.updated:
            text += f', "ts_hlc": "{event.updated}", "ts_ns": {event.updated.wall}'
        return text + "}"

    def source_of(self, event: RowEvent) -> dict[str, Any]:
        """The enriched envelope's ``source`` object for ``event``."""
        o = self._o
        desc = event.table
        return source_object(
            self._source,
            desc,
            self._databases(desc.database_id),
            mvcc_ts=event.mvcc_ts if o.mvcc_timestamp else None,
            updated=event.updated if o.updated else None,
        )

    def _wrapped(
        self,
        after: str | None,
        before: str | None,
        key: str,
        topic: str,
        updated: Timestamp,
        mvcc_ts: Timestamp,
    ) -> bytes:
        """The wrapped envelope from its parts as JSON text (``key`` is needed only with
        ``key_in_value``); keys in CockroachDB's (sorted) order."""
        o = self._o
        parts = ['"after": ' + ("null" if after is None else after)]
        if o.diff:
            parts.append('"before": ' + ("null" if before is None else before))
        parts += self._fields(key, topic, updated, mvcc_ts)
        return ("{" + ", ".join(parts) + "}").encode()

    def _meta(self, key: str, topic: str, updated: Timestamp, mvcc_ts: Timestamp) -> str | None:
        """The bare or row envelope's ``__crdb__`` object, or ``None`` when nothing is
        asked for (the row envelope is refused ``key_in_value`` and ``topic_in_value``,
        so it carries at most the timestamps)."""
        if self._o.envelope not in ("bare", "row"):
            return None
        fields = self._fields(key, topic, updated, mvcc_ts)
        return "{" + ", ".join(fields) + "}" if fields else None

    def _fields(self, key: str, topic: str, updated: Timestamp, mvcc_ts: Timestamp) -> list[str]:
        """The ``key``, ``mvcc_timestamp``, ``topic`` and ``updated`` fields asked for,
        in that (sorted) order."""
        o = self._o
        fields = []
        if o.key_in_value:
            fields.append('"key": ' + key)
        if o.mvcc_timestamp:
            fields.append(f'"mvcc_timestamp": "{mvcc_ts}"')
        if o.topic_in_value:
            fields.append('"topic": ' + json_string(topic))
        if o.updated:
            fields.append(f'"updated": "{updated}"')
        return fields

    def encode_resolved(self, ts: Timestamp, topic: str | None) -> bytes:
        return resolved_json(ts, self._o.envelope)
