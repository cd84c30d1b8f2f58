"""``envelope=enriched``: CockroachDB's envelope for Debezium-style and Kafka Connect
consumers (JSON here; Avro's in :mod:`feedkv.changefeed.avro`).

A value is ``{"after": row | null, "op": "c" | "u" | "d", "ts_ns": <ns>}``, with
``"before"`` (``diff``) and ``"key"`` (``key_in_value``; an object of the key columns, not
the wrapped envelope's array). ``op`` is ``c`` for a row that did not exist before the
change (an insert, or a row of an initial scan), ``u`` for an update and ``d`` for a
delete; ``ts_ns`` is when the changefeed processed the change (wall clock, ns), not when
it committed. Keys are sorted as in every CockroachDB JSON message.

``enriched_properties=schema`` wraps that payload as ``{"payload": ..., "schema": ...}``
with a Kafka Connect schema of it: a struct ``cockroachdb.envelope`` whose fields are
``before`` (``<table>.before.value``, optional), ``after`` (``<table>.after.value``),
``key`` (``<table>.key``), ``ts_ns`` (int64) and ``op`` (string), each column a field
that is optional when the column is nullable. Column types: INT int64, FLOAT float64,
DECIMAL float64 named ``decimal`` (with its precision and scale as parameters), BOOL
boolean, BYTES bytes, TIMESTAMP a string named ``timestamp``; the others strings
(TIMESTAMPTZ named ``timestamptz``, DATE ``date``, JSONB ``json``, UUID plain).

``enriched_properties=source`` adds ``source`` (the job, cluster, node and table the
change came through: :mod:`feedkv.changefeed.enriched_source`), with ``mvcc_timestamp``
and ``updated`` inside it rather than beside ``after``; its schema is the struct
``cockroachdb.source``, placed after ``after`` (and before ``key``).

Pure: :func:`connect_schema` builds the schema from a descriptor; :func:`op_of` names a
change.
"""

from __future__ import annotations

from typing import Any

from feedkv.changefeed.enriched_source import connect_source_schema
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.rows import RowEvent
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.types import Kind

__all__ = ["connect_schema", "op_of"]

_TYPES: dict[Kind, dict[str, Any]] = {
    Kind.INT: {"type": "int64"},
    Kind.FLOAT: {"type": "float64"},
    Kind.BOOL: {"type": "boolean"},
    Kind.BYTES: {"type": "bytes"},
    Kind.STRING: {"type": "string"},
    Kind.UUID: {"type": "string"},
    Kind.TIMESTAMP: {"name": "timestamp", "type": "string"},
    Kind.TIMESTAMPTZ: {"name": "timestamptz", "type": "string"},
    Kind.DATE: {"name": "date", "type": "string"},
    Kind.JSONB: {"name": "json", "type": "string"},
}


def op_of(event: RowEvent) -> str:
    """``c``, ``u`` or ``d``: what the change did to its row."""
    if event.after is None:
        return "d"
    return "u" if event.had_before else "c"


def _field(column: Column) -> dict[str, Any]:
    kind = column.type.kind
    if kind is Kind.DECIMAL:
        field: dict[str, Any] = {"name": "decimal", "type": "float64"}
        if column.type.precision:
            field["parameters"] = {
                "precision": str(column.type.precision),
                "scale": str(column.type.scale or 0),
            }
    else:
        field = dict(_TYPES.get(kind, {"type": "string"}))
    return {"field": column.name, "optional": column.nullable, **field}


def _computed(name: str, kind: Kind | None) -> dict[str, Any]:
    """A CDC query's column: its kind when it reads one as is, else a string."""
    found = _TYPES.get(kind, {"type": "string"}) if kind is not None else {"type": "string"}
    if kind is Kind.DECIMAL:
        found = {"name": "decimal", "type": "float64"}
    return {"field": name, "optional": True, **found}


def _struct(field: str, name: str, fields: list[dict[str, Any]], optional: bool) -> dict[str, Any]:
    return {"field": field, "fields": fields, "name": name, "optional": optional, "type": "struct"}


def connect_schema(
    desc: TableDescriptor,
    options: ChangefeedOptions,
    projected: tuple[tuple[str, Kind | None], ...] | None = None,
) -> dict[str, Any]:
    """The Kafka Connect schema of ``desc``'s enriched payload; ``projected``: the
    ``(name, kind)`` of a CDC query's columns, which ``after`` holds instead."""
    table = [_field(c) for c in desc.columns]
    after = table if projected is None else [_computed(n, k) for n, k in projected]
    fields = []
    if options.diff:
        fields.append(_struct("before", f"{desc.name}.before.value", table, True))
    fields.append(_struct("after", f"{desc.name}.after.value", after, False))
    if "source" in options.enriched_properties:
        fields.append(connect_source_schema())
    if options.key_in_value:
        key = [_field(c) for c in desc.key_columns]
        fields.append(_struct("key", f"{desc.name}.key", key, False))
    fields.append({"field": "ts_ns", "optional": False, "type": "int64"})
    fields.append({"field": "op", "optional": False, "type": "string"})
    return {"fields": fields, "name": "cockroachdb.envelope", "optional": False, "type": "struct"}
