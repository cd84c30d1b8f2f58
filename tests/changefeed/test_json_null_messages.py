"""A JSONB column holding JSON ``null`` in changefeed messages, as CockroachDB 26.1
emits it (changefeed messages docs, "JSON"): ``null`` in a JSON row object, as a SQL
NULL is, unless ``encode_json_value_null_as_object`` asks for
``{"__crdb_json_null__": true}`` (format=json only); the text ``null`` in the formats
that write JSONB as text (Avro, CSV, Parquet, protobuf), where a SQL NULL is no value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from feedkv import DB
from feedkv.changefeed.file_formats import arrow_value
from feedkv.changefeed.proto import changefeed_pb2 as pb
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.sql.jsonb import JSON_NULL
from feedkv.sql.types import ColumnType, Kind
from feedkv.testing.schema_registry import SchemaRegistryServer
from feedkv.testing.waiting import wait_until

DEADLINE = 30.0
FAST = "resolved='0s', min_checkpoint_frequency='0s'"


@pytest.fixture
def docs(db: DB) -> DB:
    db.sql("CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)")
    db.sql("INSERT INTO docs VALUES (1, NULL), (2, 'null'), (3, '{\"a\": null}')")
    return db


def take(db: DB, sql: str, n: int) -> list[tuple[str, Any, Any]]:
    result = db.sql(sql)
    assert isinstance(result, FeedResult)
    found: list[tuple[str, Any, Any]] = []
    try:
        while len(found) < n:
            row = result.poll(DEADLINE)
            assert row is not None, "the changefeed ended"
            if row[0] is not None:
                found.append(row)
    finally:
        result.close()
    return sorted(found, key=lambda row: row[1])


def test_json_writes_json_null_as_null_like_sql_null(docs: DB) -> None:
    rows = take(docs, "EXPERIMENTAL CHANGEFEED FOR docs", 3)
    assert [value for _t, _k, value in rows] == [
        '{"after": {"j": null, "k": 1}}',
        '{"after": {"j": null, "k": 2}}',
        '{"after": {"j": {"a": null}, "k": 3}}',
    ]


def test_encode_json_value_null_as_object_tells_json_null_from_sql_null(docs: DB) -> None:
    rows = take(docs, "EXPERIMENTAL CHANGEFEED FOR docs WITH encode_json_value_null_as_object", 3)
    assert [value for _t, _k, value in rows] == [
        '{"after": {"j": null, "k": 1}}',
        '{"after": {"j": {"__crdb_json_null__": true}, "k": 2}}',
        '{"after": {"j": {"a": null}, "k": 3}}',
    ]


def test_the_object_stands_for_json_null_in_before_and_the_bare_envelope(docs: DB) -> None:
    result = docs.sql(
        "EXPERIMENTAL CHANGEFEED FOR docs WITH encode_json_value_null_as_object, diff, "
        "initial_scan='no'"
    )
    assert isinstance(result, FeedResult)
    try:
        docs.sql("""UPDATE docs SET j = '{"b": 1}' WHERE k = 2""")
        row = None
        while row is None or row[0] is None:
            row = result.poll(DEADLINE)
            assert row is not None, "the changefeed ended"
    finally:
        result.close()
    assert json.loads(row[2]) == {
        "after": {"j": {"b": 1}, "k": 2},
        "before": {"j": {"__crdb_json_null__": True}, "k": 2},
    }
    bare = take(
        docs,
        "EXPERIMENTAL CHANGEFEED FOR docs WITH envelope=bare, encode_json_value_null_as_object",
        3,
    )
    assert [json.loads(value)["j"] for _t, _k, value in bare] == [
        None,
        {"b": 1},
        {"a": None},
    ]


def test_a_cdc_query_column_holding_json_null_is_the_object(docs: DB) -> None:
    rows = take(
        docs,
        "EXPERIMENTAL CHANGEFEED WITH encode_json_value_null_as_object "
        "AS SELECT k, j -> 'a' AS a FROM docs",
        3,
    )
    assert [json.loads(value) for _t, _k, value in rows] == [
        {"a": None, "k": 1},
        {"a": None, "k": 2},
        {"a": {"__crdb_json_null__": True}, "k": 3},
    ]


@pytest.mark.parametrize("fmt", ["avro", "csv", "parquet", "protobuf"])
def test_the_option_is_only_for_format_json(docs: DB, fmt: str) -> None:
    with pytest.raises(SQLError, match="only usable with format=json") as raised:
        docs.sql(
            "CREATE CHANGEFEED FOR docs INTO 'kafka://127.0.0.1:1' "
            f"WITH format={fmt}, encode_json_value_null_as_object"
        )
    assert raised.value.code == "22023"


def test_avro_writes_json_null_as_the_text_null(docs: DB) -> None:
    with SchemaRegistryServer() as registry:
        result = docs.sql(
            "EXPERIMENTAL CHANGEFEED FOR docs WITH format=avro, "
            f"confluent_schema_registry='{registry.url}'"
        )
        assert isinstance(result, FeedResult)
        decode = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
        found: dict[int, Any] = {}
        try:
            while len(found) < 3:
                row = result.poll(DEADLINE)
                assert row is not None, "the changefeed ended"
                if row[0] is None:
                    continue
                decoded = decode(row[2], SerializationContext(row[0], MessageField.VALUE))
                assert decoded is not None
                after = decoded["after"]
                found[after["k"]] = after["j"]
        finally:
            result.close()
    assert found == {1: None, 2: "null", 3: '{"a": null}'}


def test_protobuf_writes_json_null_as_the_text_null(docs: DB) -> None:
    rows = take(docs, "EXPERIMENTAL CHANGEFEED FOR docs WITH format=protobuf", 3)
    values = [pb.Message.FromString(value).wrapped.after.values["j"] for _t, _k, value in rows]
    assert [v.WhichOneof("value") for v in values] == [None, "string_value", "string_value"]
    assert [v.string_value for v in values[1:]] == ["null", '{"a": null}']


def test_csv_writes_null_for_json_null_and_nothing_for_sql_null(docs: DB, tmp_path: Path) -> None:
    out = tmp_path / "csv"
    [(job_id,)] = docs.sql(
        f"CREATE CHANGEFEED FOR docs INTO 'file://{out}?partition_format=flat' "
        "WITH format=csv, initial_scan='only'"
    ).rows
    assert docs.changefeeds.wait(job_id, timeout=DEADLINE)
    [path] = sorted(out.glob("*.csv"))
    assert path.read_text().splitlines() == ["1,", "2,null", '3,"{""a"": null}"']


def test_parquet_writes_json_null_as_the_text_null(docs: DB, tmp_path: Path) -> None:
    out = tmp_path / "files"
    docs.sql(f"CREATE CHANGEFEED FOR docs INTO 'file://{out}' WITH format=parquet, {FAST}")
    rows: list[dict[str, Any]] = []

    def three_rows() -> bool:
        rows[:] = [r for p in sorted(out.rglob("*.parquet")) for r in pq.read_table(p).to_pylist()]
        return len(rows) >= 3

    wait_until(three_rows, timeout_s=DEADLINE)
    assert {r["k"]: r["j"] for r in rows} == {1: None, 2: "null", 3: '{"a": null}'}


def test_arrow_rows_for_spark_hold_the_text_null() -> None:
    """The Spark source's and the lake sinks' Arrow columns (JSONB as JSON text)."""
    jsonb = ColumnType(Kind.JSONB)
    assert arrow_value(jsonb, JSON_NULL) == "null"
    assert arrow_value(jsonb, None) is None
    assert arrow_value(jsonb, {"a": None}) == '{"a": null}'
