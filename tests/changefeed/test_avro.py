"""``format=avro`` end to end: sinkless changefeeds whose keys and values are decoded by
confluent-kafka's own Avro deserializer, against a real (test) schema registry."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import struct
import uuid
from collections.abc import Iterator
from typing import Any, cast

import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from feedkv import DB
from feedkv.changefeed.avro import AvroEncoder, SchemaRegistry
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import SinkError
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.testing.schema_registry import SchemaRegistryServer
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0  # seconds a row may take to arrive before the test fails
CLOSE_DEADLINE = 5.0  # seconds a closed changefeed may take to end its rows
UTC = datetime.UTC

ALL_TYPES = """CREATE TABLE t (
    id INT PRIMARY KEY, f FLOAT, d DECIMAL(10, 2), dn DECIMAL, s STRING, b BYTES, ok BOOL,
    day DATE, ts TIMESTAMP, tz TIMESTAMPTZ, u UUID, j JSONB
)"""
INSERT = "INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"

ROW_1: dict[str, Any] = {
    "id": 1,
    "f": 1.5,
    "d": decimal.Decimal("12345678.91"),
    "dn": decimal.Decimal("-0.000123"),
    "s": "héllo",
    "b": b"\x00\xff",
    "ok": True,
    "day": datetime.date(2024, 2, 29),
    "ts": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901),
    "tz": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    "u": uuid.UUID(int=42),
    "j": {"a": [1, 2], "b": None},
}
ROW_NEGATIVE: dict[str, Any] = {  # before the epoch, below zero, empty
    "id": -7,
    "f": -2.25e-10,
    "d": decimal.Decimal("-0.05"),
    "dn": decimal.Decimal("123456789012345678901234567890.5"),
    "s": "",
    "b": b"",
    "ok": False,
    "day": datetime.date(1969, 12, 31),
    "ts": datetime.datetime(1960, 6, 1, 0, 0, 0, 1),
    "tz": datetime.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    "u": uuid.UUID(int=(1 << 128) - 1),
    "j": [1, "x", None],
}
ROW_NULLS: dict[str, Any] = {name: None for name in ROW_1} | {"id": 2}


def as_decoded(row: dict[str, Any]) -> dict[str, Any]:
    """What an Avro reader gets back for a row written to ``t`` (the mapping documented
    in :mod:`feedkv.changefeed.avro`): DECIMAL without precision and UUID as strings,
    TIMESTAMP as ``timestamp-micros`` (read back as UTC). JSONB is compared parsed (see
    :func:`normalized`)."""
    out = dict(row)
    for name in ("dn", "u"):
        if row[name] is not None:
            out[name] = str(row[name])
    if row["ts"] is not None:
        out["ts"] = row["ts"].replace(tzinfo=UTC)
    return out


def normalized(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A decoded row with its JSONB text parsed."""
    if record is None or record.get("j") is None:
        return record
    return record | {"j": json.loads(record["j"])}


@pytest.fixture
def registry() -> Iterator[SchemaRegistryServer]:
    with SchemaRegistryServer() as server:
        yield server


class AvroFeed:
    """A sinkless Avro changefeed on ``t`` and confluent-kafka's deserializers for it."""

    def __init__(self, db: DB, registry: SchemaRegistryServer, options: str = "") -> None:
        result = db.sql(
            "EXPERIMENTAL CHANGEFEED FOR t WITH format=avro, "
            f"confluent_schema_registry='{registry.url}'{', ' + options if options else ''}"
        )
        assert isinstance(result, FeedResult)
        self.result = result
        client = SchemaRegistryClient({"url": registry.url})
        self._keys = AvroDeserializer(client)
        self._values = AvroDeserializer(client)

    def take(self, n: int) -> list[tuple[str, bytes, bytes | None]]:
        """The next ``n`` row messages (resolved markers skipped)."""
        rows: list[tuple[str, bytes, bytes | None]] = []
        while len(rows) < n:
            row = self.result.poll(DEADLINE)
            assert row is not None, f"the changefeed ended after {len(rows)} of {n} rows"
            if row[0] is not None:
                rows.append(row)
        return rows

    def decode(
        self, message: tuple[str, bytes, bytes | None]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        topic, key, value = message
        decoded_key = self._keys(key, SerializationContext(topic, MessageField.KEY))
        decoded_value = self._values(value, SerializationContext(topic, MessageField.VALUE))
        return cast(dict[str, Any], decoded_key), cast("dict[str, Any] | None", decoded_value)

    def take_decoded(self, n: int) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        return [self.decode(m) for m in self.take(n)]

    def close(self) -> None:
        self.result.close()


@pytest.fixture
def all_types(db: DB) -> DB:
    """``t`` with a column of every type and three rows: ordinary, edge and NULL values."""
    db.sql(ALL_TYPES)
    for row in (ROW_NEGATIVE, ROW_1, ROW_NULLS):
        db.sql(INSERT, *row.values())
    return db


def updated_of(value: dict[str, Any]) -> Timestamp:
    return Timestamp.parse(value["updated"])


def by_key(
    decoded: list[tuple[dict[str, Any], dict[str, Any] | None]],
) -> dict[int, list[dict[str, Any] | None]]:
    """Each key's values in arrival order (a changefeed orders changes per key only)."""
    out: dict[int, list[dict[str, Any] | None]] = {}
    for key, value in decoded:
        out.setdefault(key["id"], []).append(value)
    return out


def schema_id_of(message: bytes) -> int:
    assert message[:1] == b"\x00", f"no Confluent magic byte: {message[:5]!r}"
    return int(struct.unpack(">I", message[1:5])[0])


# Envelopes.


def test_wrapped_envelope_with_diff_and_updated_decodes_every_column_type(
    all_types: DB, registry: SchemaRegistryServer
) -> None:
    db = all_types
    scan_low = db.now()
    feed = AvroFeed(db, registry, "diff, updated")
    scan_high = db.now()
    try:
        scanned = feed.take_decoded(3)
        assert [key for key, _ in scanned] == [{"id": -7}, {"id": 1}, {"id": 2}]
        for (_key, value), row in zip(scanned, (ROW_NEGATIVE, ROW_1, ROW_NULLS), strict=True):
            assert value is not None
            assert normalized(value["after"]) == as_decoded(row)
            assert value["before"] is None
            assert scan_low < updated_of(value) < scan_high
        assert len({v["updated"] for _, v in scanned if v is not None}) == 1

        low = db.now()
        db.sql("UPDATE t SET s = 'changed', j = '{\"z\": true}' WHERE id = 1")
        db.sql("DELETE FROM t WHERE id = 2")
        high = db.now()
        changes = by_key(feed.take_decoded(2))
    finally:
        feed.close()

    [update] = changes[1]
    assert update is not None
    assert normalized(update["after"]) == as_decoded(ROW_1 | {"s": "changed", "j": {"z": True}})
    assert normalized(update["before"]) == as_decoded(ROW_1)
    [delete] = changes[2]
    assert delete is not None
    assert delete["after"] is None
    assert normalized(delete["before"]) == as_decoded(ROW_NULLS)
    assert low < updated_of(update) < updated_of(delete) < high


def test_bare_envelope_puts_the_row_in_record_and_a_deletion_keeps_its_key(
    all_types: DB, registry: SchemaRegistryServer
) -> None:
    """CockroachDB's ``envelope=bare`` with ``format=avro``: ``record`` replaces
    ``after`` (CREATE CHANGEFEED docs, option ``envelope``), ``updated`` and
    ``mvcc_timestamp`` are top-level fields, and a deleted row is the row with only its
    key columns set (the bare envelope emits deletes as rows, not tombstones)."""
    db = all_types
    scan_low = db.now()
    feed = AvroFeed(db, registry, "envelope=bare, updated, mvcc_timestamp")
    scan_high = db.now()
    try:
        scanned = feed.take_decoded(3)
        db.sql("DELETE FROM t WHERE id = -7")
        [(key, deleted)] = feed.take_decoded(1)
    finally:
        feed.close()

    for (_key, value), row in zip(scanned, (ROW_NEGATIVE, ROW_1, ROW_NULLS), strict=True):
        assert value is not None
        assert set(value) == {"record", "updated", "mvcc_timestamp"}
        assert normalized(value["record"]) == as_decoded(row)
        assert scan_low < updated_of(value) < scan_high
        assert Timestamp.parse(value["mvcc_timestamp"]) < scan_low  # written before the scan
    assert key == {"id": -7}
    assert deleted is not None
    assert deleted["record"] == {name: None for name in ROW_1} | {"id": -7}


def test_key_only_envelope_has_keys_and_no_values(
    all_types: DB, registry: SchemaRegistryServer
) -> None:
    db = all_types
    feed = AvroFeed(db, registry, "envelope=key_only")
    try:
        scanned = feed.take(3)
        db.sql("UPDATE t SET ok = true WHERE id = 2")
        changed = feed.take(1)
    finally:
        feed.close()

    assert [value for _topic, _key, value in scanned + changed] == [None] * 4
    assert [feed.decode(m)[0] for m in scanned + changed] == [
        {"id": -7},
        {"id": 1},
        {"id": 2},
        {"id": 2},
    ]
    assert set(registry.subjects()) == {"t-key"}  # no value schema to register


# Wire format and registration.


def test_messages_carry_magic_byte_and_the_schema_id_the_registry_assigned(
    all_types: DB, registry: SchemaRegistryServer
) -> None:
    db = all_types
    feed = AvroFeed(db, registry)
    try:
        messages = feed.take(3)
    finally:
        feed.close()

    subjects = registry.subjects()
    [key_schema] = subjects["t-key"]
    [value_schema] = subjects["t-value"]
    assert key_schema.id != value_schema.id
    for _topic, key, value in messages:
        assert schema_id_of(key) == key_schema.id
        assert value is not None
        assert schema_id_of(value) == value_schema.id
    # Each schema was registered once, not once per row.
    posts = [r.path for r in registry.requests if r.method == "POST"]
    assert posts == ["/subjects/t-key/versions", "/subjects/t-value/versions"]
    # The registered value schema is the wrapped envelope of a record of every column.
    value_fields = json.loads(value_schema.schema)["fields"]
    assert [f["name"] for f in value_fields] == ["after"]
    row_fields = value_fields[0]["type"][1]["fields"]
    assert [f["name"] for f in row_fields] == list(ROW_1)


def without_logical_types(schema: Any) -> Any:
    """An Avro schema with its logical types left out: their values read as the raw
    longs and ints they are written as."""
    if isinstance(schema, dict):
        return {k: without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [without_logical_types(item) for item in schema]
    return schema


def test_infinite_timestamps_are_cockroachdbs_sentinel_instants(
    db: DB, registry: SchemaRegistryServer
) -> None:
    """As CockroachDB's Avro writes its sentinel instants: ``-infinity`` is late 4715 BC
    in microseconds; ``infinity`` (294277-01-01 23:59:59.999999) overflows a long and
    wraps, as its Avro library's 64-bit count does."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP, tz TIMESTAMPTZ)")
    db.sql("INSERT INTO t VALUES (1, 'infinity', '-infinity'), (2, '-infinity', 'infinity')")
    db.sql("INSERT INTO t VALUES (3, '9999-12-31 23:59:59.999999', '0001-01-01 00:00:00+00')")
    feed = AvroFeed(db, registry)
    try:
        messages = feed.take(3)
    finally:
        feed.close()
    [value_schema] = registry.subjects()["t-value"]
    schema = fastavro.parse_schema(without_logical_types(json.loads(value_schema.schema)))
    rows = {}
    for _topic, _key, value in messages:
        assert value is not None
        after = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema, None)["after"]
        rows[after["id"]] = (after["ts"], after["tz"])
    positive, negative = -9_222_425_971_309_551_617, -210_898_425_600_000_000
    assert rows == {
        1: (positive, negative),
        2: (negative, positive),
        3: (253_402_300_799_999_999, -62_135_596_800_000_000),  # real ones, exact
    }


def test_adding_a_column_registers_a_new_value_schema_version(
    db: DB, registry: SchemaRegistryServer
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    feed = AvroFeed(db, registry)
    try:
        before = feed.take(2)
        db.sql("ALTER TABLE t ADD COLUMN x INT DEFAULT 7")
        backfilled = feed.take(2)  # the rows the change rewrote
        db.sql("INSERT INTO t VALUES (3, 'c', 8)")
        inserted = feed.take(1)
    finally:
        feed.close()

    assert [feed.decode(m)[1] for m in before] == [
        {"after": {"id": 1, "s": "a"}},
        {"after": {"id": 2, "s": "b"}},
    ]
    assert [feed.decode(m)[1] for m in backfilled + inserted] == [
        {"after": {"id": 1, "s": "a", "x": 7}},
        {"after": {"id": 2, "s": "b", "x": 7}},
        {"after": {"id": 3, "s": "c", "x": 8}},
    ]
    client = SchemaRegistryClient({"url": registry.url})
    assert client.get_versions("t-value") == [1, 2]
    assert client.get_versions("t-key") == [1]  # the key columns did not change
    old, new = (client.get_version("t-value", v).schema_id for v in (1, 2))
    assert {schema_id_of(m[2] or b"") for m in before} == {old}
    assert {schema_id_of(m[2] or b"") for m in backfilled + inserted} == {new}
    assert client.get_latest_version("t-value").schema_id == new


# The registry failing.


def table_descriptor(db: DB, name: str) -> TableDescriptor:
    snapshot = catalog.Snapshot(db, db.now())
    return catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), name)


@pytest.fixture
def row_event(db: DB) -> RowEvent:
    """A row of ``t (id INT PRIMARY KEY, s STRING)`` as the changefeed would see it."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    ts = db.now()
    return RowEvent(table_descriptor(db, "t"), None, (1,), {"id": 1, "s": "a"}, None, ts, ts)


def avro_encoder(url: str, registry: SchemaRegistry, now: Timestamp) -> AvroEncoder:
    options = parse_options([("format", "avro"), ("confluent_schema_registry", url)], now=now)
    return AvroEncoder(options, registry)


def test_registry_error_raises_sink_error_and_a_later_encode_registers_again(
    db: DB, registry: SchemaRegistryServer, row_event: RowEvent
) -> None:
    client = SchemaRegistry(registry.url)
    try:
        encoder = avro_encoder(registry.url, client, db.now())
        registry.fail_next(1)
        with pytest.raises(SinkError) as raised:
            encoder.encode_key(row_event, "t")
        message = str(raised.value)
        assert registry.url in message
        assert "t-key" in message
        assert "HTTP 500" in message

        # The registry is back: nothing of the failure was remembered.
        key = encoder.encode_key(row_event, "t")
        value = encoder.encode_value(row_event, "t")
    finally:
        client.close()

    assert [r.status for r in registry.requests] == [500, 200, 200]
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert deserializer(key, SerializationContext("t", MessageField.KEY)) == {"id": 1}
    assert deserializer(value, SerializationContext("t", MessageField.VALUE)) == {
        "after": {"id": 1, "s": "a"}
    }


def test_unreachable_registry_raises_sink_error(db: DB, row_event: RowEvent) -> None:
    with SchemaRegistryServer() as gone:
        url = gone.url
    client = SchemaRegistry(url, timeout=5.0)
    try:
        encoder = avro_encoder(url, client, db.now())
        with pytest.raises(SinkError, match="unreachable") as raised:
            encoder.encode_value(row_event, "t")
    finally:
        client.close()
    assert url in str(raised.value)


def test_changefeed_rides_out_a_registry_outage(db: DB, registry: SchemaRegistryServer) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    registry.fail_next(2)  # the first two attempts of the changefeed fail
    feed = AvroFeed(db, registry)
    try:
        rows = feed.take_decoded(2)
    finally:
        feed.close()

    assert rows == [
        ({"id": 1}, {"after": {"id": 1, "s": "a"}}),
        ({"id": 2}, {"after": {"id": 2, "s": "b"}}),
    ]
    statuses = [r.status for r in registry.requests if r.path == "/subjects/t-key/versions"]
    assert statuses == [500, 500, 200]


def test_closing_the_feed_ends_a_reader_waiting_for_rows(
    db: DB, registry: SchemaRegistryServer
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    feed = AvroFeed(db, registry)
    [(_key, value)] = feed.take_decoded(1)
    assert value == {"after": {"id": 1, "s": "a"}}
    feed.close()
    # FeedResult promises that close() ends the iteration; a reader blocked in it (a SQL
    # client streaming the feed) must not wait for ever.
    try:
        ended = feed.result.poll(CLOSE_DEADLINE)
    except TimeoutError:
        pytest.fail(f"the closed changefeed did not end its rows within {CLOSE_DEADLINE} s")
    assert ended is None


# Validation.


def test_avro_without_a_schema_registry_is_rejected(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql("EXPERIMENTAL CHANGEFEED FOR t WITH format=avro")
    assert raised.value.code == "22023"
    assert "confluent_schema_registry" in raised.value.message
