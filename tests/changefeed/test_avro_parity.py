"""Avro as CockroachDB writes it, against the test registry enforcing Confluent's
compatibility rules: schemas a registry accepts as a table changes, CockroachDB's record
names and subjects, resolved markers that share the value subject, and
``avro_schema_prefix``."""

from __future__ import annotations

import decimal
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from feedkv import DB
from feedkv.changefeed.avro import AvroEncoder, SchemaRegistry
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.testing.schema_registry import SchemaRegistryServer
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0


@pytest.fixture
def registry() -> Iterator[SchemaRegistryServer]:
    with SchemaRegistryServer() as server:
        yield server


def take(result: FeedResult, n: int) -> list[tuple[str, bytes, bytes | None]]:
    rows: list[tuple[str, bytes, bytes | None]] = []
    while len(rows) < n:
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended after {len(rows)} of {n} rows"
        if row[0] is not None:
            rows.append(row)
    return rows


def avro_feed(db: DB, registry: SchemaRegistryServer, options: str = "") -> FeedResult:
    result = db.sql(
        "EXPERIMENTAL CHANGEFEED FOR t WITH format=avro, "
        f"confluent_schema_registry='{registry.url}'{', ' + options if options else ''}"
    )
    assert isinstance(result, FeedResult)
    return result


def latest(registry: SchemaRegistryServer, subject: str) -> dict[str, Any]:
    return dict(json.loads(registry.subjects()[subject][-1].schema))


def test_schema_changes_register_schemas_a_full_transitive_registry_accepts(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """CockroachDB makes every Avro field a union with null and ``"default": null``,
    whatever the column's nullability, so that all the schemas of a table are backward
    and forward compatible (pkg/ccl/changefeedccl/avro: "Make every field optional").
    Here the value subject is held to FULL_TRANSITIVE, stricter than the registry's
    BACKWARD default, and ADD COLUMN ... NOT NULL then DROP COLUMN still register."""
    client = SchemaRegistryClient({"url": registry.url})
    client.set_compatibility("t-value", "FULL_TRANSITIVE")
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING NOT NULL)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    result = avro_feed(db, registry, "diff, updated")
    try:
        take(result, 1)
        db.sql("ALTER TABLE t ADD COLUMN qty INT NOT NULL DEFAULT 7")
        take(result, 1)  # the row rewritten with qty
        db.sql("ALTER TABLE t DROP COLUMN s")
        take(result, 1)
        db.sql("INSERT INTO t VALUES (2, 8)")
        [(_topic, _key, value)] = take(result, 1)
    finally:
        result.close()

    assert client.get_versions("t-value") == [1, 2, 3]
    assert all(r.status != 409 for r in registry.requests)
    deserializer = AvroDeserializer(client)
    decoded = deserializer(value, SerializationContext("t", MessageField.VALUE))
    assert decoded is not None
    assert decoded["after"] == {"id": 2, "qty": 8}
    for field in latest(registry, "t-value")["fields"][1]["type"][1]["fields"]:
        assert field["type"][0] == "null"
        assert field["default"] is None


def test_records_are_named_as_cockroachdb_names_them(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """CockroachDB's Avro names: the key record is named for the table; the value is a
    record ``<topic>_envelope`` with ``before`` (a record ``<table>_before``) ahead of
    ``after`` (a record ``<table>``), then ``updated`` and ``mvcc_timestamp``; subjects
    are ``<topic>-key`` and ``<topic>-value``."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    result = avro_feed(db, registry, "diff, updated, mvcc_timestamp")
    try:
        take(result, 1)
    finally:
        result.close()

    key = latest(registry, "t-key")
    assert key["name"] == "t"
    assert key["fields"] == [{"type": ["null", "long"], "name": "id", "default": None}]
    value = latest(registry, "t-value")
    assert value["name"] == "t_envelope"
    assert [f["name"] for f in value["fields"]] == ["before", "after", "updated", "mvcc_timestamp"]
    before, after = (f["type"][1] for f in value["fields"][:2])
    assert (before["name"], after["name"]) == ("t_before", "t")
    assert [f["name"] for f in after["fields"]] == ["id", "s"]
    assert all(f["default"] is None for f in value["fields"])


def table_event(db: DB) -> RowEvent:
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    ts = db.now()
    return RowEvent(desc, None, (1,), {"id": 1, "s": "a"}, None, ts, ts)


def test_resolved_markers_share_the_value_subject_without_breaking_it(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """CockroachDB encodes an Avro resolved marker as the topic's envelope record with
    only a ``resolved`` field, registered under ``<topic>-value`` (encoder_avro.go
    EncodeResolvedTimestamp): since every envelope field is optional, the registry
    accepts it after the row schema and the row schema after it, at FULL_TRANSITIVE."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    client = SchemaRegistryClient({"url": registry.url})
    client.set_compatibility("t-value", "FULL_TRANSITIVE")
    options = parse_options(
        [("format", "avro"), ("confluent_schema_registry", registry.url), ("updated", None)],
        now=db.now(),
    )
    event = table_event(db)
    rows, markers = SchemaRegistry(registry.url), SchemaRegistry(registry.url)
    try:
        # Two encoders, as the Kafka sink has (rows, and resolved markers).
        row_encoder, marker_encoder = AvroEncoder(options, rows), AvroEncoder(options, markers)
        marker = marker_encoder.encode_resolved(Timestamp(1700000000000000000, 3), "t")
        value = row_encoder.encode_value(event, "t")
    finally:
        rows.close()
        markers.close()

    assert client.get_versions("t-value") == [1, 2]
    assert latest(registry, "t-value")["name"] == "t_envelope"
    assert json.loads(registry.subjects()["t-value"][0].schema) == {
        "type": "record",
        "name": "t_envelope",
        "fields": [{"type": ["null", "string"], "name": "resolved", "default": None}],
    }
    deserializer = AvroDeserializer(client)
    context = SerializationContext("t", MessageField.VALUE)
    assert deserializer(marker, context) == {"resolved": "1700000000000000000.0000000003"}
    assert value is not None
    decoded = deserializer(value, context)
    assert decoded is not None
    assert decoded["after"] == {"id": 1, "s": "a"}


def test_avro_schema_prefix_prefixes_subjects_and_names_and_sets_the_namespace(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """CREATE CHANGEFEED docs, ``avro_schema_prefix``: ``avro_schema_prefix='super'``
    registers subjects ``superfoo-key`` and ``superfoo-value`` with the namespace
    ``super``."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1)")
    result = avro_feed(db, registry, "avro_schema_prefix='super'")
    try:
        [(topic, key, _value)] = take(result, 1)
    finally:
        result.close()

    assert set(registry.subjects()) == {"supert-key", "supert-value"}
    key_schema, value_schema = latest(registry, "supert-key"), latest(registry, "supert-value")
    assert (key_schema["name"], key_schema["namespace"]) == ("supert", "super")
    assert (value_schema["name"], value_schema["namespace"]) == ("supert_envelope", "super")
    client = SchemaRegistryClient({"url": registry.url})
    assert AvroDeserializer(client)(key, SerializationContext(topic, MessageField.KEY)) == {"id": 1}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("avro_schema_prefix='9lives'", "is not an Avro namespace"),
        ("avro_schema_prefix='a-b'", "is not an Avro namespace"),
    ],
)
def test_a_bad_avro_schema_prefix_is_refused(
    db: DB, registry: SchemaRegistryServer, options: str, message: str
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(SQLError, match=message) as raised:
        avro_feed(db, registry, options)
    assert raised.value.code == "22023"


def test_avro_schema_prefix_needs_format_avro(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(SQLError, match="only usable with format=avro"):
        db.sql("EXPERIMENTAL CHANGEFEED FOR t WITH avro_schema_prefix='super'")


def test_names_are_escaped_as_cockroachdb_escapes_them(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """CockroachDB escapes characters an Avro name cannot hold as ``_u<hex>_``
    (``SQLNameToAvroName``), and a subject as the Kafka topic is escaped."""
    db.sql('CREATE TABLE "my-t" ("1st col" INT PRIMARY KEY)')
    db.sql('INSERT INTO "my-t" VALUES (1)')
    result = db.sql(
        'EXPERIMENTAL CHANGEFEED FOR "my-t" WITH format=avro, '
        f"confluent_schema_registry='{registry.url}'"
    )
    assert isinstance(result, FeedResult)
    try:
        take(result, 1)
    finally:
        result.close()
    assert set(registry.subjects()) == {"my-t-key", "my-t-value"}
    key = latest(registry, "my-t-key")
    assert key["name"] == "my_u002d_t"
    assert key["fields"][0]["name"] == "_u0031_st_u0020_col"
    assert latest(registry, "my-t-value")["name"] == "my_u002d_t_envelope"


def test_the_headers_column_is_left_out_of_the_avro_value(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """With ``headers_json_column_name`` (Kafka headers) the column is not in the value's
    schema, as it is not in CockroachDB's payload."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING, meta JSONB)")
    options = parse_options(
        [
            ("format", "avro"),
            ("confluent_schema_registry", registry.url),
            ("headers_json_column_name", "meta"),
        ],
        now=db.now(),
    )
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    ts = db.now()
    event = RowEvent(desc, None, (1,), {"id": 1, "s": "a"}, None, ts, ts)
    client = SchemaRegistry(registry.url)
    try:
        value = AvroEncoder(options, client).encode_value(event, "t")
    finally:
        client.close()
    after = latest(registry, "t-value")["fields"][0]["type"][1]
    assert [f["name"] for f in after["fields"]] == ["id", "s"]
    assert value is not None
    decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
        value, SerializationContext("t", MessageField.VALUE)
    )
    assert decoded == {"after": {"id": 1, "s": "a"}}


def test_decimal_is_a_union_of_the_decimal_type_and_a_string(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """CockroachDB's Avro DECIMAL is a union of the decimal logical type and a string
    (changefeed messages docs, Avro types: "The DECIMAL type is a union between Avro
    STRING and Avro DECIMAL types"), the string for NaN and the infinities (which
    feedkv's DECIMAL does not store); a consumer's schema is the same."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, d DECIMAL(6, 2))")
    db.sql("INSERT INTO t VALUES (1, 1.25)")
    result = avro_feed(db, registry)
    try:
        [(topic, _key, value)] = take(result, 1)
    finally:
        result.close()
    field = latest(registry, "t-value")["fields"][0]["type"][1]["fields"][1]
    assert field["type"] == [
        "null",
        {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
        "string",
    ]
    decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
        value, SerializationContext(topic, MessageField.VALUE)
    )
    assert decoded == {"after": {"id": 1, "d": decimal.Decimal("1.25")}}


def test_enriched_envelope_in_avro(db: DB, registry: SchemaRegistryServer) -> None:
    """CockroachDB's Avro enriched envelope: the ``<topic>_envelope`` record with
    ``before`` (diff), ``after``, then ``ts_ns`` and ``op``, every field optional
    (changefeed message envelopes docs: enriched is supported in JSON and Avro)."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    low = time.time_ns()
    result = avro_feed(db, registry, "envelope=enriched, diff")
    try:
        take(result, 1)
        db.sql("UPDATE t SET s = 'b' WHERE id = 1")
        [(topic, _key, value)] = take(result, 1)
    finally:
        result.close()
    high = time.time_ns()

    schema = latest(registry, "t-value")
    assert schema["name"] == "t_envelope"
    assert [f["name"] for f in schema["fields"]] == ["before", "after", "ts_ns", "op"]
    decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
        value, SerializationContext(topic, MessageField.VALUE)
    )
    assert decoded is not None
    assert (decoded["before"], decoded["after"], decoded["op"]) == (
        {"id": 1, "s": "a"},
        {"id": 1, "s": "b"},
        "u",
    )
    assert low <= decoded["ts_ns"] <= high
