"""ARRAY, ENUM (``CREATE TYPE``), INTERVAL, TIME and INET through a changefeed in each
format as CockroachDB 26.1 encodes them (changefeed messages docs: the Avro types
table; JSON as its JSONB text; CSV as EXPORT writes it). Parquet's are in
test_parquet_parity.py, protobuf's in test_protobuf_format.py."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.testing.schema_registry import SchemaRegistryServer

DEADLINE = 30.0


@pytest.fixture
def typed(db: DB) -> DB:
    db.sql("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, at TIME, span INTERVAL, addr INET, m mood, "
        "xs INT[], tags STRING[])"
    )
    db.sql(
        "INSERT INTO t VALUES (1, '12:30:45.5', '1 day 2 hours', '10.0.0.0/8', 'happy', "
        "ARRAY[1, NULL, 3], ARRAY['a', 'b c'])"
    )
    return db


def first_row(result: FeedResult) -> tuple[str, Any, Any]:
    try:
        while True:
            row = result.poll(DEADLINE)
            assert row is not None, "the changefeed ended"
            if row[0] is not None:
                return row
    finally:
        result.close()


def test_they_are_stored_and_queried(typed: DB) -> None:
    [row] = typed.sql("SELECT at, span::STRING, addr::STRING, m::STRING, xs, tags FROM t").rows
    assert row[0] == datetime.time(12, 30, 45, 500000)
    assert row[1:4] == ("1 day 02:00:00", "10.0.0.0/8", "happy")
    assert typed.sql("SELECT k FROM t WHERE m = 'happy' AND 3 = ANY(xs)").rows == [(1,)]


def test_json_writes_sql_text_and_json_arrays(typed: DB) -> None:
    """JSON: TIME, INTERVAL, INET and ENUM as their SQL text; arrays as JSON arrays
    with CockroachDB's ``", "`` separators."""
    result = typed.sql("EXPERIMENTAL CHANGEFEED FOR t")
    assert isinstance(result, FeedResult)
    _table, _key, value = first_row(result)
    assert value == (
        '{"after": {"addr": "10.0.0.0/8", "at": "12:30:45.5", "k": 1, "m": "happy", '
        '"span": "1 day 02:00:00", "tags": ["a", "b c"], "xs": [1, null, 3]}}'
    )


def test_avro_types_follow_cockroachdbs_table(typed: DB) -> None:
    """Avro: TIME a long ``time-micros``, ARRAY an Avro array (elements nullable),
    ENUM, INTERVAL and INET strings; the registry's deserializer reads them back."""
    with SchemaRegistryServer() as registry:
        result = typed.sql(
            "EXPERIMENTAL CHANGEFEED FOR t WITH format=avro, "
            f"confluent_schema_registry='{registry.url}'"
        )
        assert isinstance(result, FeedResult)
        topic, _key, value = first_row(result)
        schema = json.loads(registry.subjects()["t-value"][-1].schema)
        decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
            value, SerializationContext(topic, MessageField.VALUE)
        )
    after = schema["fields"][0]["type"][1]
    types = {f["name"]: f["type"][1] for f in after["fields"]}
    assert types["at"] == {"type": "long", "logicalType": "time-micros"}
    assert types["xs"] == {"type": "array", "items": ["null", "long"]}
    assert types["tags"] == {"type": "array", "items": ["null", "string"]}
    assert (types["span"], types["addr"], types["m"]) == ("string", "string", "string")
    assert decoded is not None
    row = decoded["after"]
    assert row["at"] == datetime.time(12, 30, 45, 500000)
    assert (row["xs"], row["tags"]) == ([1, None, 3], ["a", "b c"])
    assert (row["span"], row["addr"], row["m"]) == ("1 day 02:00:00", "10.0.0.0/8", "happy")


def test_csv_writes_the_sql_text(typed: DB, tmp_path: Path) -> None:
    """CSV (EXPORT's format): each value in its SQL text, arrays as PostgreSQL's."""
    out = tmp_path / "csv"
    [(job_id,)] = typed.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{out}?partition_format=flat' "
        "WITH format=csv, initial_scan='only'"
    ).rows
    assert typed.changefeeds.wait(job_id, timeout=DEADLINE)
    [path] = sorted(out.glob("*.csv"))
    assert path.read_text() == (
        '1,12:30:45.5,1 day 02:00:00,10.0.0.0/8,happy,"{1,NULL,3}","{a,""b c""}"\n'
    )


def test_avro_key_column_keys_by_that_column(typed: DB) -> None:
    """``key_column`` in Avro: the key record holds that one column."""
    with SchemaRegistryServer() as registry:
        result = typed.sql(
            "EXPERIMENTAL CHANGEFEED FOR t WITH format=avro, "
            f"confluent_schema_registry='{registry.url}', key_column='m', unordered"
        )
        assert isinstance(result, FeedResult)
        topic, key, _value = first_row(result)
        schema = json.loads(registry.subjects()["t-key"][-1].schema)
        decoded = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(
            key, SerializationContext(topic, MessageField.KEY)
        )
    assert [f["name"] for f in schema["fields"]] == ["m"]
    assert decoded == {"m": "happy"}
