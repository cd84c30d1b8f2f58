"""``format=avro``: schemas derived from descriptors, registered with a Confluent
schema registry, messages in the Confluent wire format, all shaped as CockroachDB's so
its consumers (and the schemas already in their registry) carry over.

Each message is ``0x00 | schema id (4 bytes, big-endian) | Avro binary`` (fastavro), the
framing every Confluent deserializer reads.

Schemas, as CockroachDB writes them (``P`` is ``avro_schema_prefix``, empty by default;
names are escaped as Avro names, ``_u0020_`` for a space):

- The key, under subject ``P<topic>-key``: a record named ``P<table>`` of the primary
  key columns.
- The value, under ``P<topic>-value``: a record named ``P<topic>_envelope``. ``wrapped``
  has the fields ``before`` (with ``diff``; a record ``<table>_before``), ``after`` (a
  record ``<table>``), then ``updated`` and ``mvcc_timestamp`` when asked for;
  ``enriched`` has ``before`` and ``after``, with ``enriched_properties=source`` the
  record ``source`` (:mod:`feedkv.changefeed.enriched_source`; ``updated`` and
  ``mvcc_timestamp`` go there), then ``ts_ns`` (long) and ``op`` (string); ``bare``
  has ``record`` (the row, a record ``<table>``) instead of ``before`` and ``after``;
  ``key_only`` has no value.
- A resolved marker is that envelope record with the one field ``resolved``, registered
  under the same ``<topic>-value`` subject: every envelope field is optional, so the
  registry's default ``BACKWARD`` rule accepts it after the row schemas and them after it.
- Every field is a union with ``null`` and ``"default": null``, whatever the column's
  nullability: after ``ALTER TABLE ... ADD COLUMN`` the new schema still reads the
  older data, as the registry's ``BACKWARD`` rule asks. With a prefix, every record is
  in the Avro namespace ``P``.

A deleted row under ``bare`` is the row with only its key columns set. A new descriptor
version gives new schemas, registered the first time a row of that version is encoded.

Column types: INT long, FLOAT double, DECIMAL(p,s) the ``decimal`` logical type over
bytes or, for NaN and the infinities, a string (a DECIMAL without a precision is a
string), STRING/UUID/JSONB string, BYTES bytes, BOOL boolean, DATE the ``date`` logical
type, TIMESTAMP/TIMESTAMPTZ ``timestamp-micros`` (``infinity`` and ``-infinity`` as
CockroachDB's sentinel instants, :func:`_sentinel_micros`), TIME ``time-micros``, ARRAY an Avro
array of its element's type (each element a union with null), ENUM, INTERVAL and INET
strings in their SQL text (the Avro types table of CockroachDB's changefeed messages
docs). BIT and VARBIT are an Avro array of longs, CockroachDB's packed form of a bit
string (:func:`bit_longs`).
"""

from __future__ import annotations

import io
import json
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import fastavro
import httpx

from feedkv.changefeed.enriched import op_of
from feedkv.changefeed.enriched_source import (
    UNKNOWN_SOURCE,
    FeedSource,
    avro_source_record,
    avro_source_schema,
    source_object,
)
from feedkv.changefeed.message_key import key_column_of, key_column_value
from feedkv.changefeed.names import avro_name, kafka_name
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import SinkError
from feedkv.sql import jsonb
from feedkv.sql.descriptor import Column, Family, TableDescriptor
from feedkv.sql.time_zone import COCKROACH_INFINITY, infinity_of
from feedkv.sql.types import ColumnType, Kind, format_value
from feedkv.util.hlc import Timestamp

__all__ = [
    "AvroEncoder",
    "SchemaRegistry",
    "bit_longs",
    "column_schema",
    "envelope_schema",
    "resolved_schema",
    "row_schema",
]

MAGIC = b"\x00"


class SchemaRegistry:
    """A client of a Confluent-compatible schema registry's REST API; each schema is
    registered once per subject and its id remembered."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout)
        self._ids: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        with self._lock:
            found = self._ids.get((subject, text))
            if found is not None:
                return found
        try:
            response = self._client.post(
                f"{self.url}/subjects/{subject}/versions",
                json={"schema": text},
                headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            )
        except httpx.HTTPError as exc:
            raise SinkError(f"schema registry {self.url} is unreachable: {exc}") from exc
        if response.status_code >= 300:
            raise SinkError(
                f"schema registry {self.url} refused the schema of {subject}: "
                f"HTTP {response.status_code} {response.text[:200]}"
            )
        schema_id = int(response.json()["id"])
        with self._lock:
            self._ids[(subject, text)] = schema_id
        return schema_id

    def close(self) -> None:
        self._client.close()


def column_schema(column: Column) -> Any:
    return _type_schema(column.type)


def _type_schema(ctype: ColumnType) -> Any:
    kind = ctype.kind
    schema: Any
    if kind is Kind.INT:
        schema = "long"
    elif kind is Kind.FLOAT:
        schema = "double"
    elif kind is Kind.DECIMAL and ctype.precision:
        # NB: with a string for NaN and the infinities, which have no decimal form (as
        # CockroachDB's union of decimal and string)
        schema = [
            {
                "type": "bytes",
                "logicalType": "decimal",
                "precision": ctype.precision,
                "scale": ctype.scale or 0,
            },
            "string",
        ]
    elif kind is Kind.BYTES:
        schema = "bytes"
    elif kind is Kind.BOOL:
        schema = "boolean"
    elif kind is Kind.DATE:
        schema = {"type": "int", "logicalType": "date"}
    elif kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        schema = {"type": "long", "logicalType": "timestamp-micros"}
    elif kind is Kind.TIME:
        schema = {"type": "long", "logicalType": "time-micros"}
    elif kind in (Kind.BIT, Kind.VARBIT):
        schema = {"type": "array", "items": "long"}
    elif kind is Kind.ARRAY:
        # NB: elements may be NULL, so each is a union with null, as CockroachDB's
        element = _type_schema(ctype.element or ColumnType(Kind.STRING))
        branches = element if isinstance(element, list) else [element]
        schema = {"type": "array", "items": ["null", *branches]}
    else:
        schema = "string"
    return schema


def _optional(name: str, schema: Any) -> dict[str, Any]:
    """A field that may be null and is null when absent: what keeps every schema of a
    table compatible with the others (a union gains a null branch first)."""
    branches = schema if isinstance(schema, list) else [schema]
    return {"type": ["null", *branches], "name": name, "default": None}


def row_schema(name: str, columns: tuple[Column, ...], namespace: str = "") -> dict[str, Any]:
    """A record named ``name`` (already an Avro name) with a field per column."""
    record: dict[str, Any] = {
        "type": "record",
        "name": name,
        "fields": [_optional(avro_name(c.name), column_schema(c)) for c in columns],
    }
    if namespace:
        record["namespace"] = namespace
    return record


def envelope_schema(name: str, fields: list[dict[str, Any]], namespace: str = "") -> dict[str, Any]:
    record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
    if namespace:
        record["namespace"] = namespace
    return record


def resolved_schema(topic: str, prefix: str = "") -> dict[str, Any]:
    """The envelope of a resolved marker on ``topic``: the same record name as the
    topic's row envelope, with only an optional ``resolved`` field."""
    return envelope_schema(
        avro_name(prefix + topic) + "_envelope", [_optional("resolved", "string")], prefix
    )


def bit_longs(bits: str) -> list[int]:
    """A bit string as CockroachDB writes it in Avro: the number of bits used in the last
    64-bit word (64 when it is full, 0 for no bits), then the words, each holding the
    next 64 bits from its most significant bit down (the last padded with zeros on the
    right), as signed longs."""
    words = []
    for at in range(0, len(bits), 64):
        word = int(bits[at : at + 64].ljust(64, "0"), 2)
        words.append(word - (1 << 64) if word >> 63 else word)
    return [len(bits) % 64 or (64 if bits else 0), *words]


def _avro_value(column: Column, value: Any) -> Any:
    return _avro_typed(column.type, value)


def _avro_typed(ctype: ColumnType, value: Any) -> Any:
    if value is None:
        return None
    kind = ctype.kind
    if kind is Kind.JSONB:
        return jsonb.dumps(value, spaced=True)
    if kind is Kind.UUID or (kind is Kind.DECIMAL and not ctype.precision):
        return str(value)
    if kind is Kind.ARRAY:
        element = ctype.element or ColumnType(Kind.STRING)
        return [_avro_typed(element, v) for v in value.values]
    if kind in (Kind.BIT, Kind.VARBIT):
        return bit_longs(value.bits)
    if kind in (Kind.INTERVAL, Kind.INET, Kind.ENUM):
        return format_value(value)
    if kind is Kind.DECIMAL and not value.is_finite():
        return str(value)  # "NaN", "Infinity", "-Infinity": the string branch
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        infinity = infinity_of(value)
        if infinity is not None:
            return _sentinel_micros(infinity)
        if kind is Kind.TIMESTAMP and value.tzinfo is not None:
            return value.replace(tzinfo=None)
    return value


_UINT64 = (1 << 64) - 1


def _sentinel_micros(infinity: str) -> int:
    """``infinity`` or ``-infinity`` as CockroachDB's Avro writes it: its sentinel
    instant (:data:`~feedkv.sql.time_zone.COCKROACH_INFINITY`) in microseconds, counted
    as its Avro library counts them, ``seconds * 10**6 + nanoseconds // 1000`` in
    64-bit two's complement. NB: ``infinity``'s does not fit in a long and wraps to a
    negative count, as CockroachDB's does; ``-infinity``'s is exact."""
    seconds, nanos = COCKROACH_INFINITY[infinity]
    micros = (seconds * 1_000_000 + nanos // 1000) & _UINT64
    return micros - (1 << 64) if micros >> 63 else micros


def _columns(
    desc: TableDescriptor, family: Family | None, leave_out: str | None
) -> tuple[Column, ...]:
    """The columns of a value: the family's (with the key), but the headers column."""
    wanted = set(desc.primary_key) | set(family.column_ids) if family is not None else None
    return tuple(
        c for c in desc.columns if (wanted is None or c.id in wanted) and c.name != leave_out
    )


class _Schemas:
    """The schemas (and their registry ids) of one descriptor version on one topic."""

    def __init__(
        self, desc: TableDescriptor, family: Family | None, topic: str, options: ChangefeedOptions
    ) -> None:
        prefix = options.avro_schema_prefix or ""
        self.desc = desc
        self.columns = _columns(desc, family, options.headers_json_column_name)
        # key_column: the message key is that one column (feedkv.changefeed.message_key)
        self.key_columns = (
            (key_column_of(desc, options.key_column),)
            if options.key_column is not None
            else desc.key_columns
        )
        self.key = row_schema(avro_name(prefix + desc.name), self.key_columns, prefix)
        table = desc.name if family is None else f"{desc.name}.{family.name}"
        row = row_schema(avro_name(table), self.columns, prefix)
        self.value: dict[str, Any] | None
        fields: list[dict[str, Any]] = []
        if options.envelope == "key_only":
            self.value = None
        else:
            if options.envelope in ("wrapped", "enriched"):
                if options.diff:
                    before = row_schema(avro_name(table) + "_before", self.columns, prefix)
                    fields.append(_optional("before", before))
                fields.append(_optional("after", row))
            else:  # bare: the row in "record"
                fields.append(_optional("record", row))
            if options.envelope == "enriched":
                # NB: updated and mvcc_timestamp live in source there (options.py
                # refuses them without enriched_properties=source)
                if "source" in options.enriched_properties:
                    fields.append(_optional("source", avro_source_schema(prefix)))
                fields += [_optional("ts_ns", "long"), _optional("op", "string")]
            else:
                fields += [
                    _optional(name, "string")
                    for name in ("updated", "mvcc_timestamp")
                    if getattr(options, name)
                ]
            self.value = envelope_schema(avro_name(prefix + topic) + "_envelope", fields, prefix)
        self.parsed_key = fastavro.parse_schema(self.key)
        self.parsed_value = fastavro.parse_schema(self.value) if self.value else None
        self.key_id: int | None = None
        self.value_id: int | None = None

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {avro_name(c.name): _avro_value(c, row.get(c.name)) for c in self.columns}


class AvroEncoder:
    """``clock``: the wall clock in ns, for the enriched envelope's ``ts_ns``;
    ``source`` and ``databases``: for its ``source`` record (the job and node, and the
    name of a table's database by its id)."""

    def __init__(
        self,
        options: ChangefeedOptions,
        registry: SchemaRegistry | None = None,
        *,
        clock: Callable[[], int] = time.time_ns,
        source: FeedSource = UNKNOWN_SOURCE,
        databases: Callable[[int], str] = lambda database_id: "",
    ) -> None:
        self._clock = clock
        self._source = source
        self._databases = databases
        if options.confluent_schema_registry is None and registry is None:
            raise SinkError("format=avro needs confluent_schema_registry")
        self._o = options
        self._prefix = options.avro_schema_prefix or ""
        self._registry = registry or SchemaRegistry(options.confluent_schema_registry or "")
        self._schemas: dict[tuple[int, int, str], _Schemas] = {}
        self._resolved: dict[str, tuple[int, Any]] = {}

    def _for(self, event: RowEvent, topic: str) -> _Schemas:
        desc = event.table
        found = self._schemas.get((desc.id, desc.version, topic))
        if found is None:
            found = _Schemas(desc, event.family, topic, self._o)
            self._schemas[(desc.id, desc.version, topic)] = found
        return found

    def _subject(self, topic: str, suffix: str) -> str:
        # NB: escaped as a Kafka topic is, so the subject is the topic's (TopicNameStrategy)
        return kafka_name(self._prefix + topic) + suffix

    @staticmethod
    def _frame(schema_id: int, schema: Any, record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        out.write(MAGIC + struct.pack(">I", schema_id))
        fastavro.schemaless_writer(out, schema, record)
        return out.getvalue()

    def encode_key(self, event: RowEvent, topic: str) -> bytes:
        schemas = self._for(event, topic)
        if schemas.key_id is None:
            schemas.key_id = self._registry.register(self._subject(topic, "-key"), schemas.key)
        name = self._o.key_column
        values = (key_column_value(event, name),) if name is not None else event.key
        record = {
            avro_name(c.name): _avro_value(c, v)
            for c, v in zip(schemas.key_columns, values, strict=True)
        }
        return self._frame(schemas.key_id, schemas.parsed_key, record)

    def encode_value(self, event: RowEvent, topic: str) -> bytes | None:
        schemas = self._for(event, topic)
        if schemas.value is None:
            return None
        if schemas.value_id is None:
            schemas.value_id = self._registry.register(
                self._subject(topic, "-value"), schemas.value
            )
        o = self._o
        record: dict[str, Any] = {}
        if o.envelope in ("wrapped", "enriched"):
            if o.diff:
                record["before"] = None if event.before is None else schemas.row(event.before)
            record["after"] = None if event.after is None else schemas.row(event.after)
            if o.envelope == "enriched":
                if "source" in o.enriched_properties:
                    record["source"] = avro_source_record(
                        source_object(
                            self._source,
                            event.table,
                            self._databases(event.table.database_id),
                            mvcc_ts=event.mvcc_ts if o.mvcc_timestamp else None,
                            updated=event.updated if o.updated else None,
                        )
                    )
                record["ts_ns"] = self._clock()
                record["op"] = op_of(event)
        elif event.after is not None:
            record["record"] = schemas.row(event.after)
        else:  # a deletion: the row with only its key set
            names = (c.name for c in schemas.desc.key_columns)
            record["record"] = schemas.row(dict(zip(names, event.key, strict=True)))
        if o.envelope != "enriched":
            if o.updated:
                record["updated"] = str(event.updated)
            if o.mvcc_timestamp:
                record["mvcc_timestamp"] = str(event.mvcc_ts)
        return self._frame(schemas.value_id, schemas.parsed_value, record)

    def scan_encoder(self, desc: TableDescriptor, topic: str, updated: Timestamp) -> None:
        return None  # scanned rows go through encode_key and encode_value

    def encode_resolved(self, ts: Timestamp, topic: str | None) -> bytes:
        name = topic or "resolved"
        found = self._resolved.get(name)
        if found is None:
            schema = resolved_schema(name, self._prefix)
            schema_id = self._registry.register(self._subject(name, "-value"), schema)
            found = self._resolved[name] = (schema_id, fastavro.parse_schema(schema))
        return self._frame(found[0], found[1], {"resolved": str(ts)})
