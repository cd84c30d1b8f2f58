"""Computed columns in changefeeds, as CockroachDB's (create-changefeed docs, option
``virtual_columns``): a STORED computed column is emitted like any other column; a
VIRTUAL one is left out by default (``'omitted'``) and emitted as NULL with
``virtual_columns='null'``; a CDC query computes it. Schemas (Avro) follow the
columns the messages carry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.testing.schema_registry import SchemaRegistryServer

DEADLINE = 30.0


@pytest.fixture
def table(db: DB) -> DB:
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a INT, s STRING, "
        "b INT AS (a * 2) STORED, c STRING AS (lower(s)) VIRTUAL)"
    )
    db.sql("INSERT INTO t (k, a, s) VALUES (1, 10, 'ABC')")
    return db


def take(result: FeedResult, n: int) -> list[Any]:
    rows = []
    while len(rows) < n:
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended after {len(rows)} of {n} rows"
        if row[0] is not None:  # not a resolved marker
            rows.append(json.loads(row[2]) if row[2] is not None else None)
    return rows


def file_rows(db: DB, out: Path, options: str) -> list[dict[str, Any]]:
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{out}?partition_format=flat' "
        f"WITH initial_scan='only'{', ' + options if options else ''}"
    ).rows
    assert db.changefeeds.wait(job_id, timeout=DEADLINE)
    return [json.loads(line) for path in sorted(out.glob("*.ndjson")) for line in path.open()]


def test_stored_columns_are_emitted_and_virtual_ones_left_out_by_default(
    table: DB, tmp_path: Path
) -> None:
    """The default, ``virtual_columns='omitted'``: ``c`` is not in the message."""
    assert file_rows(table, tmp_path / "out", "") == [
        {"after": {"k": 1, "a": 10, "s": "ABC", "b": 20}, "key": [1]}
    ]


def test_virtual_columns_null_emits_them_as_null(table: DB, tmp_path: Path) -> None:
    """``virtual_columns='null'``: ``c`` is in the message, NULL (nothing of it is
    stored for a changefeed to read), as CockroachDB emits it."""
    assert file_rows(table, tmp_path / "out", "virtual_columns='null'") == [
        {"after": {"k": 1, "a": 10, "s": "ABC", "b": 20, "c": None}, "key": [1]}
    ]


def test_live_writes_carry_the_recomputed_stored_column(table: DB) -> None:
    """Every write recomputes ``b``; the changefeed sees each new value, and ``diff``
    shows the old one in ``before``."""
    result = table.sql("EXPERIMENTAL CHANGEFEED FOR t WITH diff, initial_scan='no'")
    assert isinstance(result, FeedResult)
    try:
        table.sql("UPDATE t SET a = 11 WHERE k = 1")
        table.sql("UPSERT INTO t (k, a, s) VALUES (2, 5, 'Q')")
        update, insert = take(result, 2)
    finally:
        result.close()
    assert update == {
        "after": {"k": 1, "a": 11, "s": "ABC", "b": 22},
        "before": {"k": 1, "a": 10, "s": "ABC", "b": 20},
    }
    assert insert == {"after": {"k": 2, "a": 5, "s": "Q", "b": 10}, "before": None}


def test_a_cdc_query_computes_virtual_columns(table: DB) -> None:
    """A CDC query reads a VIRTUAL column as SQL does: computed from the row."""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED WITH initial_scan='only' AS SELECT k, c, upper(c) AS u FROM t"
    )
    assert [json.loads(v) for _t, _k, v in result] == [{"c": "abc", "k": 1, "u": "ABC"}]
    star = table.sql("EXPERIMENTAL CHANGEFEED WITH initial_scan='only' AS SELECT * FROM t")
    assert [json.loads(v) for _t, _k, v in star] == [
        {"a": 10, "b": 20, "c": "abc", "k": 1, "s": "ABC"}
    ]


def test_adding_a_stored_computed_column_backfills_the_changefeed(table: DB) -> None:
    """``ALTER TABLE ... ADD COLUMN ... STORED`` rewrites every row (a backfill), which
    a changefeed emits again under the default schema change policy; a VIRTUAL one
    rewrites nothing."""
    result = table.sql("EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan='no'")
    assert isinstance(result, FeedResult)
    try:
        table.sql("ALTER TABLE t ADD COLUMN v2 INT AS (a + 1) VIRTUAL")
        table.sql("ALTER TABLE t ADD COLUMN a3 INT AS (a * 3) STORED")
        table.sql("INSERT INTO t (k, a, s) VALUES (3, 1, 'x')")
        rows = take(result, 2)
    finally:
        result.close()
    assert rows == [
        {"after": {"k": 1, "a": 10, "s": "ABC", "b": 20, "a3": 30}},
        {"after": {"k": 3, "a": 1, "s": "x", "b": 2, "a3": 3}},
    ]


@pytest.fixture
def registry() -> Iterator[SchemaRegistryServer]:
    with SchemaRegistryServer() as server:
        yield server


@pytest.mark.parametrize(
    ("option", "fields"), [("", ["k", "a", "s", "b"]), ("null", ["k", "a", "s", "b", "c"])]
)
def test_avro_schemas_hold_the_columns_the_messages_carry(
    table: DB, registry: SchemaRegistryServer, option: str, fields: list[str]
) -> None:
    """Avro: the value schema has the stored column, and the virtual one only with
    ``virtual_columns='null'`` (a nullable field, as every field)."""
    extra = f", virtual_columns='{option}'" if option else ""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED FOR t WITH format=avro, initial_scan='only', "
        f"confluent_schema_registry='{registry.url}'{extra}"
    )
    assert isinstance(result, FeedResult)
    assert len(list(result)) == 1
    schema = json.loads(registry.subjects()["t-value"][-1].schema)
    after = schema["fields"][0]["type"][1]
    assert [f["name"] for f in after["fields"]] == fields
    assert all(f["type"][0] == "null" for f in after["fields"])


@pytest.mark.parametrize(
    ("option", "columns"),
    [("", ["k", "a", "s", "b"]), ("null", ["k", "a", "s", "b", "c"])],
)
def test_parquet_files_hold_the_columns_the_messages_carry(
    table: DB, tmp_path: Path, option: str, columns: list[str]
) -> None:
    """Parquet: a column per emitted column, the virtual one (all NULL, of its declared
    type) only with ``virtual_columns='null'``."""
    out = tmp_path / "out"
    extra = f", virtual_columns='{option}'" if option else ""
    [(job_id,)] = table.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{out}?partition_format=flat' "
        f"WITH format=parquet, initial_scan='only'{extra}"
    ).rows
    assert table.changefeeds.wait(job_id, timeout=DEADLINE)
    [path] = sorted(out.glob("*.parquet"))
    read = pq.read_table(path)
    assert read.schema.names == [*columns, "__crdb__event_type"]
    row = read.to_pylist()[0]
    assert (row["b"], row.get("c")) == (20, None)
    if option:
        assert read.schema.field("c").type == pa.string()


@pytest.mark.parametrize(
    ("option", "fields"), [("", ["k", "a", "s", "b"]), ("null", ["k", "a", "s", "b", "c"])]
)
def test_the_enriched_envelopes_kafka_connect_schema_follows_the_option(
    table: DB, option: str, fields: list[str]
) -> None:
    """``envelope=enriched, enriched_properties='schema'``: the Kafka Connect schema of
    ``after`` lists the virtual column only with ``virtual_columns='null'``, optional."""
    extra = f", virtual_columns='{option}'" if option else ""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED FOR t WITH envelope=enriched, "
        f"enriched_properties='schema', initial_scan='only'{extra}"
    )
    [message] = [json.loads(v) for _t, _k, v in result]
    after = next(f for f in message["schema"]["fields"] if f["field"] == "after")
    assert [f["field"] for f in after["fields"]] == fields
    assert message["payload"]["after"]["b"] == 20
    if option:
        assert message["payload"]["after"]["c"] is None
        assert after["fields"][-1]["optional"] is True


def test_a_cdc_querys_previous_row_has_its_virtual_columns_computed(table: DB) -> None:
    """``cdc_prev`` (the tuple, and one column of it) carries the VIRTUAL column as the
    row before the change computes it."""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED WITH initial_scan='no' "
        "AS SELECT k, c, cdc_prev.c AS old_c, cdc_prev AS prev FROM t"
    )
    assert isinstance(result, FeedResult)
    try:
        table.sql("UPDATE t SET s = 'XYZ' WHERE k = 1")
        [change] = take(result, 1)
    finally:
        result.close()
    assert (change["c"], change["old_c"]) == ("xyz", "abc")
    assert change["prev"]["c"] == "abc"


def test_virtual_columns_come_and_go_without_a_backfill(table: DB) -> None:
    """With ``virtual_columns='null'`` the virtual columns are in the messages, but
    adding or dropping one rewrites no row, so nothing is emitted again."""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan='no', virtual_columns='null'"
    )
    assert isinstance(result, FeedResult)
    try:
        table.sql("ALTER TABLE t ADD COLUMN v2 INT NOT NULL AS (k + 1) VIRTUAL")
        table.sql("ALTER TABLE t DROP COLUMN c")
        table.sql("INSERT INTO t (k, a, s) VALUES (3, 1, 'x')")
        [row] = take(result, 1)
    finally:
        result.close()
    assert row == {"after": {"k": 3, "a": 1, "s": "x", "b": 2, "v2": None}}
