"""``envelope=enriched`` as CockroachDB writes it (changefeed message envelopes docs,
v25.2+): the operation, the processing time and, with ``enriched_properties=schema``, a
Kafka Connect schema; on sinkless changefeeds."""

from __future__ import annotations

import decimal
import json
import time
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError

DEADLINE = 30.0


@pytest.fixture
def products(db: DB) -> DB:
    db.sql(
        "CREATE TABLE products (id INT PRIMARY KEY, name STRING NOT NULL, "
        "price DECIMAL(10,2) NOT NULL, in_stock BOOL, created_at TIMESTAMP)"
    )
    db.sql("INSERT INTO products VALUES (1, 'mug', 12.50, true, '2025-04-01 17:55:46.812942')")
    return db


def feed(db: DB, options: str) -> FeedResult:
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR products WITH envelope=enriched{options}")
    assert isinstance(result, FeedResult)
    return result


def take(result: FeedResult) -> dict[str, Any]:
    while True:
        row = result.poll(DEADLINE)
        assert row is not None, "the changefeed ended"
        if row[0] is not None:
            return dict(json.loads(row[2], parse_float=decimal.Decimal))


MUG = {
    "created_at": "2025-04-01T17:55:46.812942",
    "id": 1,
    "in_stock": True,
    "name": "mug",
    "price": decimal.Decimal("12.50"),
}


def test_enriched_carries_the_operation_and_the_processing_time(products: DB) -> None:
    """``envelope=enriched``: ``after``, ``op`` (``c`` insert, ``u`` update, ``d``
    delete) and ``ts_ns``, the time the changefeed processed the change; with ``diff``,
    ``before``; with ``key_in_value``, ``key`` as an object of the key columns."""
    low = time.time_ns()
    result = feed(products, ", diff, key_in_value")
    try:
        scanned = take(result)
        products.sql("UPDATE products SET price = 13 WHERE id = 1")
        updated = take(result)
        products.sql("DELETE FROM products WHERE id = 1")
        deleted = take(result)
    finally:
        result.close()
    high = time.time_ns()

    assert [list(m) for m in (scanned, updated, deleted)] == [
        ["after", "before", "key", "op", "ts_ns"]
    ] * 3  # keys sorted, as in every CockroachDB JSON message
    assert (scanned["after"], scanned["before"], scanned["op"]) == (MUG, None, "c")
    assert updated["after"] == MUG | {"price": decimal.Decimal("13.00")}
    assert (updated["before"], updated["op"]) == (MUG, "u")
    assert (deleted["after"], deleted["op"]) == (None, "d")
    assert deleted["before"] == updated["after"]
    assert {m["key"]["id"] for m in (scanned, updated, deleted)} == {1}
    stamps = [m["ts_ns"] for m in (scanned, updated, deleted)]
    assert low <= stamps[0] <= stamps[1] <= stamps[2] <= high


def test_enriched_properties_schema_adds_a_kafka_connect_schema(products: DB) -> None:
    """``enriched_properties=schema``: ``{"payload": ..., "schema": ...}`` with the
    struct ``cockroachdb.envelope`` of ``<table>.after.value`` (a field per column,
    optional when nullable; DECIMAL a float64 named decimal with its precision and
    scale, TIMESTAMP a string named timestamp), ``ts_ns`` and ``op``."""
    result = feed(products, ", enriched_properties='schema'")
    try:
        message = take(result)
    finally:
        result.close()

    assert list(message) == ["payload", "schema"]
    assert list(message["payload"]) == ["after", "op", "ts_ns"]
    assert message["payload"]["after"] == MUG
    assert message["schema"] == {
        "fields": [
            {
                "field": "after",
                "fields": [
                    {"field": "id", "optional": False, "type": "int64"},
                    {"field": "name", "optional": False, "type": "string"},
                    {
                        "field": "price",
                        "name": "decimal",
                        "optional": False,
                        "parameters": {"precision": "10", "scale": "2"},
                        "type": "float64",
                    },
                    {"field": "in_stock", "optional": True, "type": "boolean"},
                    {
                        "field": "created_at",
                        "name": "timestamp",
                        "optional": True,
                        "type": "string",
                    },
                ],
                "name": "products.after.value",
                "optional": False,
                "type": "struct",
            },
            {"field": "ts_ns", "optional": False, "type": "int64"},
            {"field": "op", "optional": False, "type": "string"},
        ],
        "name": "cockroachdb.envelope",
        "optional": False,
        "type": "struct",
    }


def test_enriched_resolved_messages_are_plain(products: DB) -> None:
    """Resolved messages of the enriched envelope are ``{"resolved":"<ts>"}``, as the
    wrapped envelope's (encoder_json.go)."""
    result = feed(products, ", resolved='0s', min_checkpoint_frequency='0s'")
    try:
        while True:
            row = result.poll(DEADLINE)
            assert row is not None
            if row[0] is None:
                break
    finally:
        result.close()
    assert row[2].startswith('{"resolved":"')


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CREATE CHANGEFEED FOR products INTO 'file:///tmp/x' WITH envelope=enriched",
            "envelope=enriched is only usable with the Kafka and webhook sinks",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR products WITH enriched_properties='schema'",
            "enriched_properties is only usable with envelope=enriched",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR products WITH envelope=enriched, "
            "enriched_properties='shema'",
            "did you mean 'schema'",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR products WITH envelope=enriched, "
            "enriched_properties='source,source'",
            "names a property more than once",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR products WITH envelope=enriched, mvcc_timestamp",
            "mvcc_timestamp with envelope=enriched needs enriched_properties=source",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR products WITH envelope=enriched, updated",
            "updated with envelope=enriched needs enriched_properties=source",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR products WITH envelope=enriched, topic_in_value",
            "topic_in_value is only usable with envelope=wrapped or bare",
        ),
    ],
)
def test_enriched_options_are_checked_at_creation(products: DB, sql: str, message: str) -> None:
    """Changefeed message envelopes docs, option reference: ``enriched`` is for Kafka,
    webhook, Pub/Sub and sinkless changefeeds; ``enriched_properties`` only with it;
    ``updated`` with it needs ``enriched_properties=source``."""
    with pytest.raises(SQLError, match=message) as raised:
        products.sql(sql)
    assert raised.value.code == "22023"
