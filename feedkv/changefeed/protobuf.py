"""``format=protobuf``: messages as Protocol Buffers, in the wire shape of CockroachDB
26.1's changefeeds (its ``changefeedpb`` messages; feedkv's own ``.proto`` with the same
field numbers is :file:`proto/changefeed.proto`), for Kafka consumers that read
protobuf.

- A key is a ``Key``: the primary key columns by name.
- A value is a ``Message`` holding one envelope: ``wrapped`` (``after``, unset for a
  deletion; ``before`` with ``diff``; ``updated``, ``mvcc_timestamp``, ``key`` with
  ``key_in_value``, ``topic`` with ``topic_in_value``), ``bare`` (the columns, a
  deletion's key columns only, and the metadata under ``__crdb__``) or ``enriched``
  (``after``, ``before`` with ``diff``, ``op``, ``ts_ns`` and, with
  ``enriched_properties=source``, ``source``). ``key_only`` has no value; ``row`` is
  refused when the changefeed is created, as CockroachDB's protobuf has no such envelope.
- A resolved marker is ``Message.resolved`` (``Message.bareResolved`` under ``bare``).

Column values (``Value``; no member set is NULL): BOOL ``bool_value``, INT
``int64_value``, FLOAT ``double_value``, STRING, ENUM, INET, BIT and JSONB (its JSON text)
``string_value``, DECIMAL ``decimal_value`` (exact text), BYTES ``bytes_value``,
TIMESTAMP/TIMESTAMPTZ ``timestamp_value`` (``infinity`` and ``-infinity`` as CockroachDB's
sentinel instants, :data:`~feedkv.sql.time_zone.COCKROACH_INFINITY`), DATE
``date_value`` (``2006-01-02``), INTERVAL ``interval_value`` and TIME ``time_value``
(their SQL text), UUID ``uuid_value``, ARRAY ``array_value``. Bytes are deterministic
(map entries sorted).
"""

from __future__ import annotations

import datetime
import decimal
import time
import uuid
from collections.abc import Callable
from typing import Any

from feedkv.changefeed.enriched import op_of
from feedkv.changefeed.enriched_source import UNKNOWN_SOURCE, FeedSource, source_object
from feedkv.changefeed.message_key import key_column_of, key_column_value
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.proto import changefeed_pb2 as pb
from feedkv.changefeed.rows import RowEvent
from feedkv.sql import jsonb
from feedkv.sql.arrays import Array
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.interval import Interval
from feedkv.sql.time_zone import COCKROACH_INFINITY, infinity_of
from feedkv.sql.types import Kind, format_value
from feedkv.util.hlc import Timestamp

__all__ = ["ProtobufEncoder", "set_value"]

_OPS = {"c": pb.OP_CREATE, "u": pb.OP_UPDATE, "d": pb.OP_DELETE}


def set_value(out: Any, value: Any) -> None:
    """Fill the ``Value`` message ``out`` with a column value (by its Python type, as a
    CDC query's computed columns have no declared type); ``None`` leaves it empty."""
    if value is None:
        return
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int64_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, datetime.datetime):
        infinity = infinity_of(value)
        if infinity is not None:  # NB: CockroachDB's sentinel instant, past a datetime's range
            out.timestamp_value.seconds, out.timestamp_value.nanos = COCKROACH_INFINITY[infinity]
            return
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        out.timestamp_value.FromDatetime(value)
    elif isinstance(value, datetime.date):
        out.date_value = value.isoformat()
    elif isinstance(value, datetime.time):
        out.time_value = format_value(value)
    elif jsonb.is_json(value):
        out.string_value = jsonb.dumps(value, spaced=True)
    else:
        _set_typed(out, value)


def _set_typed(out: Any, value: Any) -> None:
    """The SQL types that are no plain Python value."""
    if isinstance(value, decimal.Decimal):
        out.decimal_value.value = format_value(value)
    elif isinstance(value, uuid.UUID):
        out.uuid_value = str(value)
    elif isinstance(value, Interval):
        out.interval_value = str(value)
    elif isinstance(value, Array):
        for item in value.values:
            set_value(out.array_value.values.add(), item)
    else:  # INET, ENUM, BIT: their SQL text
        out.string_value = str(value)


def _set_column(out: Any, kind: Kind, value: Any) -> None:
    """A column value whose kind is known (JSONB's ``null`` and strings stay JSON)."""
    if value is not None and kind is Kind.JSONB:
        out.string_value = jsonb.dumps(value, spaced=True)
        return
    set_value(out, value)


def _fill(fields: Any, desc: TableDescriptor, row: dict[str, Any]) -> None:
    """A ``map<string, Value>`` of ``row``'s columns."""
    kinds = {c.name: c.type.kind for c in desc.columns}
    for name, value in row.items():
        kind = kinds.get(name)
        if kind is None:
            set_value(fields[name], value)
        else:
            _set_column(fields[name], kind, value)


class ProtobufEncoder:
    """``clock``: the wall clock in ns, for the enriched envelope's ``ts_ns``;
    ``source`` and ``databases``: for its ``source``."""

    def __init__(
        self,
        options: ChangefeedOptions,
        *,
        clock: Callable[[], int] = time.time_ns,
        source: FeedSource = UNKNOWN_SOURCE,
        databases: Callable[[int], str] = lambda database_id: "",
    ) -> None:
        self._o = options
        self._clock = clock
        self._source = source
        self._databases = databases

    def _key(self, out: Any, event: RowEvent) -> None:
        desc = event.table
        _fill(out.key, desc, dict(zip((c.name for c in desc.key_columns), event.key, strict=True)))

    def encode_key(self, event: RowEvent, topic: str) -> bytes:
        key = pb.Key()
        name = self._o.key_column
        if name is not None:  # the message is keyed by that column (message_key)
            column = key_column_of(event.table, name)
            _set_column(key.key[name], column.type.kind, key_column_value(event, name))
        else:
            self._key(key, event)
        return key.SerializeToString(deterministic=True)

    def encode_value(self, event: RowEvent, topic: str) -> bytes | None:
        o = self._o
        if o.envelope == "key_only":
            return None
        message = pb.Message()
        desc = event.table
        if o.envelope == "bare":
            bare = message.bare
            row = event.after
            if row is None:
                row = event.deleted or dict(
                    zip((c.name for c in desc.key_columns), event.key, strict=True)
                )
            _fill(bare.values, desc, row)
            meta = self._metadata(event, topic)
            if meta is not None:
                getattr(bare, "__crdb__").CopyFrom(meta)  # noqa: B009
        elif o.envelope == "enriched":
            enriched = message.enriched
            if event.after is not None:
                _fill(enriched.after.values, desc, event.after)
            if o.diff and event.before is not None:
                _fill(enriched.before.values, desc, event.before)
            enriched.op = _OPS[op_of(event)]
            enriched.ts_ns = self._clock()
            if "source" in o.enriched_properties:
                found = source_object(
                    self._source,
                    desc,
                    self._databases(desc.database_id),
                    mvcc_ts=event.mvcc_ts if o.mvcc_timestamp else None,
                    updated=event.updated if o.updated else None,
                )
                for name, value in found.items():
                    if name == "primary_keys":
                        enriched.source.primary_keys.extend(value)
                    elif name != "crdb_internal_table_id":  # not in the message
                        setattr(enriched.source, name, value)
        else:
            wrapped = message.wrapped
            # NB: a deletion without diff sets no field of the envelope; it must still
            # be the oneof's member (``\n\x00``, as CockroachDB's Go encoder writes it),
            # not an empty value a consumer cannot tell from a Kafka tombstone.
            wrapped.SetInParent()
            if event.after is not None:
                _fill(wrapped.after.values, desc, event.after)
            if o.diff and event.before is not None:
                _fill(wrapped.before.values, desc, event.before)
            if o.updated:
                wrapped.updated = str(event.updated)
            if o.mvcc_timestamp:
                wrapped.mvcc_timestamp = str(event.mvcc_ts)
            if o.key_in_value:
                self._key(wrapped.key, event)
            if o.topic_in_value:
                wrapped.topic = topic
        return message.SerializeToString(deterministic=True)

    def _metadata(self, event: RowEvent, topic: str) -> Any:
        """The bare envelope's ``__crdb__`` (``None``: nothing asked for)."""
        o = self._o
        if not (o.updated or o.mvcc_timestamp or o.key_in_value or o.topic_in_value):
            return None
        meta = pb.Metadata()
        if o.updated:
            meta.updated = str(event.updated)
        if o.mvcc_timestamp:
            meta.mvcc_timestamp = str(event.mvcc_ts)
        if o.key_in_value:
            self._key(meta.key, event)
        if o.topic_in_value:
            meta.topic = topic
        return meta

    def scan_encoder(self, desc: TableDescriptor, topic: str, updated: Timestamp) -> None:
        return None  # scanned rows go through encode_key and encode_value

    def encode_resolved(self, ts: Timestamp, topic: str | None) -> bytes:
        message = pb.Message()
        if self._o.envelope == "bare":
            getattr(message.bareResolved, "__crdb__").resolved = str(ts)  # noqa: B009
        else:
            message.resolved.resolved = str(ts)
        return message.SerializeToString(deterministic=True)
