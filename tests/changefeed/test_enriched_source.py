"""``envelope=enriched, enriched_properties=source`` as CockroachDB 26.1 writes it
(changefeed message envelopes docs, v26.1, "Preserve the origin of data", "Enable
full-fidelity message envelopes" and the field reference of ``"source"``): a ``source``
object with the job, sink, cluster, node and table the change came through, with
``mvcc_timestamp`` and, with ``updated``, ``ts_hlc`` and ``ts_ns`` inside it; its Kafka
Connect schema ``cockroachdb.source``; the Avro record ``source``."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from feedkv import DB
from feedkv.changefeed.encoder import JSONEncoder, json_any
from feedkv.changefeed.enriched_source import SOURCE_FIELDS, FeedSource
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sinkless import FeedResult
from feedkv.sql import catalog
from feedkv.testing.schema_registry import SchemaRegistryServer

DEADLINE = 30.0
QUIET = logging.getLogger("tests.enriched_source")

# The fields the docs' field reference lists (and the table id CockroachDB adds).
ALWAYS = {
    "changefeed_sink",
    "cluster_id",
    "cluster_name",
    "crdb_internal_table_id",
    "database_name",
    "db_version",
    "job_id",
    "node_id",
    "node_name",
    "origin",
    "primary_keys",
    "schema_name",
    "source_node_locality",
    "table_name",
}


@pytest.fixture
def orders(db: DB) -> DB:
    db.sql("CREATE TABLE orders (region STRING, id INT, qty INT, PRIMARY KEY (region, id))")
    db.sql("INSERT INTO orders VALUES ('eu', 1, 5)")
    return db


def feed(db: DB, options: str) -> FeedResult:
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR orders WITH envelope=enriched, {options}")
    assert isinstance(result, FeedResult)
    return result


def take(result: FeedResult, n: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while len(found) < n:
        row = result.poll(DEADLINE)
        assert row is not None, "the changefeed ended"
        if row[0] is not None:
            found.append(json.loads(row[2]))
    return found


def table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    return catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), name).id


def test_source_names_the_job_sink_node_and_table_of_each_change(orders: DB) -> None:
    """``enriched_properties=source``: ``source`` carries the fields of the docs'
    field reference, keys sorted; ``origin`` is always ``cockroachdb``; a sinkless
    changefeed's sink is ``sinkless buffer``; ``primary_keys`` lists the key columns
    in key order; without ``updated`` and ``mvcc_timestamp`` their fields are absent."""
    result = feed(orders, "enriched_properties='source'")
    try:
        [message] = take(result, 1)
    finally:
        result.close()

    assert list(message) == ["after", "op", "source", "ts_ns"]
    source = message["source"]
    assert list(source) == sorted(ALWAYS)
    assert source["origin"] == "cockroachdb"
    assert source["changefeed_sink"] == "sinkless buffer"
    assert (source["database_name"], source["schema_name"], source["table_name"]) == (
        "defaultdb",
        "public",
        "orders",
    )
    assert source["primary_keys"] == ["region", "id"]
    assert source["crdb_internal_table_id"] == table_id(orders, "orders")
    assert source["job_id"] == "0"  # a sinkless changefeed is no job
    assert source["db_version"].startswith("v")
    # the embedded node says who it is: a cluster of one
    assert source["node_id"] == "1" and source["cluster_id"]


def test_updated_and_mvcc_timestamp_go_inside_source(orders: DB) -> None:
    """With ``updated``, ``source`` gains ``ts_hlc`` (the commit time as an HLC
    string) and ``ts_ns`` (its wall time); with ``mvcc_timestamp``, ``mvcc_timestamp``;
    neither appears beside ``after``, as in the docs' full-fidelity example."""
    result = feed(orders, "enriched_properties='source', updated, mvcc_timestamp, diff")
    try:
        take(result, 1)  # the initial scan's row
        orders.sql("UPDATE orders SET qty = 6 WHERE region = 'eu' AND id = 1")
        [message] = take(result, 1)
    finally:
        result.close()

    assert list(message) == ["after", "before", "op", "source", "ts_ns"]
    source = message["source"]
    assert set(source) == ALWAYS | {"mvcc_timestamp", "ts_hlc", "ts_ns"}
    # a change's commit time is its MVCC timestamp
    assert source["ts_hlc"] == source["mvcc_timestamp"]
    wall, logical = source["ts_hlc"].split(".")
    assert source["ts_ns"] == int(wall) and len(logical) == 10
    assert message["op"] == "u" and message["before"]["qty"] == 5


def test_source_schema_is_cockroachdb_source(orders: DB) -> None:
    """``enriched_properties='source,schema'``: the payload's schema has the optional
    struct ``cockroachdb.source`` after ``after``, with a field per source field (the
    option-dependent ones optional, ``primary_keys`` an array of strings, the table id
    int32, ``ts_ns`` int64)."""
    result = feed(orders, "enriched_properties='source,schema'")
    try:
        [message] = take(result, 1)
    finally:
        result.close()

    schema = message["schema"]
    assert [f["field"] for f in schema["fields"]] == ["after", "source", "ts_ns", "op"]
    source = schema["fields"][1]
    assert (source["name"], source["optional"], source["type"]) == (
        "cockroachdb.source",
        True,
        "struct",
    )
    by_name = {f["field"]: f for f in source["fields"]}
    assert set(by_name) == ALWAYS | {"mvcc_timestamp", "ts_hlc", "ts_ns"}
    assert by_name["primary_keys"] == {
        "field": "primary_keys",
        "items": {"optional": False, "type": "string"},
        "optional": False,
        "type": "array",
    }
    assert by_name["ts_ns"] == {"field": "ts_ns", "optional": True, "type": "int64"}
    assert by_name["crdb_internal_table_id"]["type"] == "int32"
    assert by_name["job_id"] == {"field": "job_id", "optional": False, "type": "string"}
    assert set(message["payload"]["source"]) <= set(by_name)


def read_one(bootstrap: str, topic: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "source", "logger": QUIET})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
    deadline = time.monotonic() + DEADLINE
    try:
        while True:
            assert time.monotonic() < deadline, f"nothing came on {topic}"
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                value = message.value()
                assert isinstance(value, bytes)
                return value
    finally:
        consumer.close()


def test_a_job_into_kafka_names_its_job_and_sink(orders: DB, bootstrap: str) -> None:
    """A changefeed job's messages carry its job id (as a string, as in the docs'
    examples) and ``changefeed_sink`` ``kafka``."""
    [(job_id,)] = orders.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'kafka://{bootstrap}' "
        "WITH envelope=enriched, enriched_properties='source'"
    ).rows
    try:
        message = json.loads(read_one(bootstrap, "orders"))
    finally:
        orders.sql(f"CANCEL JOB {job_id}")
    assert message["source"]["job_id"] == str(job_id)
    assert message["source"]["changefeed_sink"] == "kafka"
    assert message["source"]["table_name"] == "orders"


def test_avro_enriched_source_is_a_source_record(db: DB) -> None:
    """In Avro, ``source`` is a record named ``source`` whose fields are unions with
    null; the fields off by options are null (CockroachDB keeps them in the schema)."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    with SchemaRegistryServer() as registry:
        result = db.sql(
            "EXPERIMENTAL CHANGEFEED FOR t WITH format=avro, "
            f"confluent_schema_registry='{registry.url}', envelope=enriched, "
            "enriched_properties='source', mvcc_timestamp"
        )
        assert isinstance(result, FeedResult)
        try:
            while (row := result.poll(DEADLINE)) is not None and row[0] is None:
                pass
        finally:
            result.close()
        assert row is not None
        schema = json.loads(registry.subjects()["t-value"][-1].schema)
        decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
            row[2], SerializationContext(row[0], MessageField.VALUE)
        )
    assert [f["name"] for f in schema["fields"]] == ["after", "source", "ts_ns", "op"]
    record = schema["fields"][1]["type"][1]
    assert (record["type"], record["name"]) == ("record", "source")
    assert [f["name"] for f in record["fields"]] == [name for name, _t, _o in SOURCE_FIELDS]
    assert all(f["type"][0] == "null" for f in record["fields"])
    assert decoded is not None
    source = decoded["source"]
    assert (source["table_name"], source["primary_keys"], source["origin"]) == (
        "t",
        ["id"],
        "cockroachdb",
    )
    assert source["mvcc_timestamp"] is not None
    assert (source["ts_hlc"], source["ts_ns"]) == (None, None)  # no updated


@pytest.mark.parametrize(
    "options",
    [
        [],
        [("mvcc_timestamp", None)],
        [("updated", None)],
        [("updated", None), ("mvcc_timestamp", None)],
    ],
)
def test_source_text_is_the_source_object_in_cockroachdbs_json(
    orders: DB, options: list[tuple[str, str | None]]
) -> None:
    """The encoder writes ``source`` from text cached per table version: byte for byte
    the JSON of :func:`source_object` (keys sorted, ``", "`` and ``": "``)."""
    snapshot = catalog.Snapshot(orders, orders.now())
    desc = catalog.table_by_name(
        snapshot, catalog.database_by_name(snapshot, "defaultdb"), "orders"
    )
    given = [("envelope", "enriched"), ("enriched_properties", "source"), *options]
    now = orders.now()
    encoder = JSONEncoder(
        parse_options(given, now=now),
        source=FeedSource(job_id="7", cluster_id="c", node_id="1", node_name="h"),
        databases=lambda database_id: "defaultdb",
    )
    event = RowEvent(desc, None, ("eu", 1), {"region": "eu", "id": 1, "qty": 5}, None, now, now)
    value = encoder.encode_value(event, "orders")
    assert value is not None
    text = value.decode()
    start = text.index('"source": ') + len('"source": ')
    written = text[start : text.rindex(', "ts_ns": ')]  # the last ts_ns is the envelope's
    assert written == json_any(encoder.source_of(event))
