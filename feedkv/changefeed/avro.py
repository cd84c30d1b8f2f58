"""``format=avro``: schemas derived from descriptors, registered with a Confluent
schema registry, messages in the Confluent wire format.

Each message is ``0x00 | schema id (4 bytes, big-endian) | Avro binary`` (fastavro), the
framing every Confluent deserializer reads. Keys use a record of the primary key
columns (subject ``<topic>-key``); values a record of the envelope (subject
``<topic>-value``): ``wrapped`` is ``{"after": row | null, "before": row | null
(diff), "updated": string | null, "mvcc_timestamp": string | null}``; ``bare`` is the
row with a ``__crdb__`` record; ``key_only`` has no value. A new descriptor version
gives new schemas, registered the first time a row of that version is encoded.

Column types: INT long, FLOAT double, DECIMAL(p,s) the ``decimal`` logical type over
bytes (a DECIMAL without a precision is a string), STRING/UUID/JSONB string, BYTES
bytes, BOOL boolean, DATE the ``date`` logical type, TIMESTAMP/TIMESTAMPTZ
``timestamp-micros``. Every nullable column is a union with ``null``.
"""

from __future__ import annotations

import io
import json
import re
import struct
import threading
from typing import Any

import fastavro
import httpx

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import SinkError
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.types import Kind, format_value
from feedkv.util.hlc import Timestamp

__all__ = ["AvroEncoder", "SchemaRegistry", "column_schema", "row_schema"]

MAGIC = b"\x00"
RESOLVED_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "resolved",
    "fields": [{"name": "resolved", "type": "string"}],
}


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


def _name(text: str) -> str:
    """An Avro name: letters, digits and ``_``, not starting with a digit."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return cleaned if cleaned and not cleaned[0].isdigit() else "_" + cleaned


def column_schema(column: Column) -> Any:
    kind = column.type.kind
    schema: Any
    if kind is Kind.INT:
        schema = "long"
    elif kind is Kind.FLOAT:
        schema = "double"
    elif kind is Kind.DECIMAL and column.type.precision:
        schema = {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": column.type.precision,
            "scale": column.type.scale or 0,
        }
    elif kind is Kind.BYTES:
        schema = "bytes"
    elif kind is Kind.BOOL:
        schema = "boolean"
    elif kind is Kind.DATE:
        schema = {"type": "int", "logicalType": "date"}
    elif kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        schema = {"type": "long", "logicalType": "timestamp-micros"}
    else:
        schema = "string"
    return ["null", schema] if column.nullable else schema


def row_schema(
    desc: TableDescriptor, columns: tuple[Column, ...], suffix: str = ""
) -> dict[str, Any]:
    return {
        "type": "record",
        "name": _name(desc.name + suffix),
        "fields": [{"name": _name(c.name), "type": column_schema(c)} for c in columns],
    }


def _avro_value(column: Column, value: Any) -> Any:
    if value is None:
        return None
    kind = column.type.kind
    if kind is Kind.JSONB:
        return json.dumps(value, sort_keys=True)
    if kind is Kind.UUID or (kind is Kind.DECIMAL and not column.type.precision):
        return str(value)
    if kind in (Kind.TIME, Kind.INTERVAL, Kind.INET, Kind.ENUM, Kind.ARRAY):
        return format_value(value)
    if kind is Kind.TIMESTAMP and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    return value


class _Schemas:
    """The schemas (and their registry ids) of one descriptor version."""

    def __init__(self, desc: TableDescriptor, options: ChangefeedOptions) -> None:
        self.desc = desc
        self.key_columns = desc.key_columns
        self.key = row_schema(desc, self.key_columns, "_key")
        row = row_schema(desc, desc.columns)
        self.value: dict[str, Any] | None
        if options.envelope == "key_only":
            self.value = None
        elif options.envelope == "wrapped":
            fields: list[dict[str, Any]] = [
                {"name": "after", "type": ["null", row], "default": None}
            ]
            if options.diff:
                fields.append({"name": "before", "type": ["null", row["name"]], "default": None})
            for name in ("updated", "mvcc_timestamp"):
                if getattr(options, name):
                    fields.append({"name": name, "type": ["null", "string"], "default": None})
            self.value = {
                "type": "record",
                "name": _name(desc.name + "_envelope"),
                "fields": fields,
            }
        else:  # bare
            meta = [
                {"name": n, "type": ["null", "string"], "default": None}
                for n in ("updated", "mvcc_timestamp")
                if getattr(options, n)
            ]
            self.value = dict(row)
            if meta:
                crdb = {"type": "record", "name": _name(desc.name + "_crdb"), "fields": meta}
                self.value["fields"] = [
                    *row["fields"],
                    {"name": "__crdb__", "type": ["null", crdb], "default": None},
                ]
        self.parsed_key = fastavro.parse_schema(self.key)
        self.parsed_value = fastavro.parse_schema(self.value) if self.value else None
        self.key_id: int | None = None
        self.value_id: int | None = None

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        return {_name(c.name): _avro_value(c, row.get(c.name)) for c in self.desc.columns}


class AvroEncoder:
    def __init__(self, options: ChangefeedOptions, registry: SchemaRegistry | None = None) -> None:
        if options.confluent_schema_registry is None and registry is None:
            raise SinkError("format=avro needs confluent_schema_registry")
        self._o = options
        self._registry = registry or SchemaRegistry(options.confluent_schema_registry or "")
        self._schemas: dict[tuple[int, int], _Schemas] = {}
        self._resolved = fastavro.parse_schema(RESOLVED_SCHEMA)

    def _for(self, desc: TableDescriptor) -> _Schemas:
        found = self._schemas.get((desc.id, desc.version))
        if found is None:
            found = self._schemas[(desc.id, desc.version)] = _Schemas(desc, self._o)
        return found

    @staticmethod
    def _frame(schema_id: int, schema: Any, record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        out.write(MAGIC + struct.pack(">I", schema_id))
        fastavro.schemaless_writer(out, schema, record)
        return out.getvalue()

    def encode_key(self, event: RowEvent, topic: str) -> bytes:
        schemas = self._for(event.table)
        if schemas.key_id is None:
            schemas.key_id = self._registry.register(f"{topic}-key", schemas.key)
        record = {
            _name(c.name): _avro_value(c, v)
            for c, v in zip(schemas.key_columns, event.key, strict=True)
        }
        return self._frame(schemas.key_id, schemas.parsed_key, record)

    def encode_value(self, event: RowEvent, topic: str) -> bytes | None:
        schemas = self._for(event.table)
        if schemas.value is None:
            return None
        if schemas.value_id is None:
            schemas.value_id = self._registry.register(f"{topic}-value", schemas.value)
        o = self._o
        meta = {}
        if o.updated:
            meta["updated"] = str(event.updated)
        if o.mvcc_timestamp:
            meta["mvcc_timestamp"] = str(event.mvcc_ts)
        if o.envelope == "wrapped":
            record: dict[str, Any] = {
                "after": None if event.after is None else schemas.row(event.after)
            }
            if o.diff:
                record["before"] = None if event.before is None else schemas.row(event.before)
            record.update(meta)
        else:
            if event.after is None:
                return None
            record = schemas.row(event.after)
            if meta:
                record["__crdb__"] = meta
        return self._frame(schemas.value_id, schemas.parsed_value, record)

    def scan_encoder(self, desc: TableDescriptor, topic: str, updated: Timestamp) -> None:
        return None  # scanned rows go through encode_key and encode_value

    def encode_resolved(self, ts: Timestamp, topic: str | None) -> bytes:
        schema_id = self._registry.register(f"{topic or 'resolved'}-value", RESOLVED_SCHEMA)
        return self._frame(schema_id, self._resolved, {"resolved": str(ts)})
