"""CDC queries as CockroachDB runs them: the previous row with ``diff``, ``cdc_prev``
as a tuple, the change's functions, JSON operators; on sinkless changefeeds."""

from __future__ import annotations

import decimal
import json
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, item STRING, qty INT, doc JSONB)")
    db.sql("""INSERT INTO t VALUES (1, 'bolt', 5, '{"size": {"mm": [6, 8]}, "maker": "Acmé"}')""")
    return db


def query(db: DB, text: str, options: str = "") -> FeedResult:
    with_ = f"WITH {options} " if options else ""
    result = db.sql(f"EXPERIMENTAL CHANGEFEED {with_}AS {text}")
    assert isinstance(result, FeedResult)
    return result


def take(result: FeedResult, n: int) -> list[dict[str, Any]]:
    values: list[dict[str, Any]] = []
    while len(values) < n:
        row = result.poll(DEADLINE)
        assert row is not None, "the changefeed ended"
        if row[0] is not None:
            values.append(json.loads(row[2], parse_float=decimal.Decimal))
    return values


def test_wrapped_diff_carries_the_previous_row_as_before(table: DB) -> None:
    """With ``envelope=wrapped, diff`` a CDC query's UPDATE has ``before``: CockroachDB
    encodes it as the whole previous row (encoder_json.go: "When using wrapped envelope,
    `before` field will always be an entire row instead of projection"), and a DELETE
    has ``after: null`` and the row it deleted."""
    result = query(table, "SELECT k, qty * 2 AS dbl FROM t", "envelope=wrapped, diff")
    try:
        [scanned] = take(result, 1)
        table.sql("UPDATE t SET qty = 7 WHERE k = 1")
        [updated] = take(result, 1)
        table.sql("DELETE FROM t WHERE k = 1")
        [deleted] = take(result, 1)
    finally:
        result.close()

    previous = {"doc": {"maker": "Acmé", "size": {"mm": [6, 8]}}, "item": "bolt", "k": 1, "qty": 5}
    assert scanned == {"after": {"dbl": 10, "k": 1}, "before": None}
    assert updated == {"after": {"dbl": 14, "k": 1}, "before": previous}
    assert deleted == {"after": None, "before": previous | {"qty": 7}}


def test_cdc_prev_is_a_tuple_of_the_previous_row(table: DB) -> None:
    """CDC queries docs, "Emit the previous state of a row": ``SELECT cdc_prev`` gives
    the previous row (NULL for an insert), encoded as a JSON object; ``(cdc_prev).qty``
    and ``cdc_prev.qty`` one of its columns (cockroachdb/cockroach#101391)."""
    result = query(
        table, "SELECT k, cdc_prev, (cdc_prev).qty AS was, cdc_prev.item AS item_was FROM t"
    )
    try:
        [inserted] = take(result, 1)
        table.sql("UPDATE t SET qty = 9, item = 'nut' WHERE k = 1")
        [updated] = take(result, 1)
    finally:
        result.close()

    assert inserted == {"cdc_prev": None, "item_was": None, "k": 1, "was": None}
    assert updated["was"] == 5
    assert updated["item_was"] == "bolt"
    assert updated["cdc_prev"] == {
        "doc": {"maker": "Acmé", "size": {"mm": [6, 8]}},
        "item": "bolt",
        "k": 1,
        "qty": 5,
    }


def test_cdc_prev_writes_arrays_and_times_as_their_columns_do(db: DB) -> None:
    """``cdc_prev`` as a JSON object holds each column as the row's JSON would: an ARRAY
    a JSON array, a TIME its SQL text (not Python's text of the value)."""
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, tags STRING[], at TIME, n INT)")
    db.sql("INSERT INTO a VALUES (1, ARRAY['x', 'y z'], '12:30:45.5', 1)")
    result = query(db, "SELECT k, cdc_prev FROM a")
    try:
        take(result, 1)
        db.sql("UPDATE a SET n = 2 WHERE k = 1")
        [updated] = take(result, 1)
    finally:
        result.close()
    assert updated["cdc_prev"] == {"at": "12:30:45.5", "k": 1, "n": 1, "tags": ["x", "y z"]}


def test_deletes_emit_the_projection_with_only_the_key_set(table: DB) -> None:
    """cockroachdb/cockroach#101391: under a CDC query a deleted row is emitted with its
    primary key columns and every other column NULL; ``event_op()`` says ``delete`` and
    ``cdc_is_delete()`` is true. ``WHERE NOT cdc_is_delete()`` filters deletes out."""
    result = query(
        table,
        "SELECT k, item, event_op() AS op, cdc_is_delete() AS gone, cdc_prev.qty AS qty FROM t",
    )
    filtered = query(table, "SELECT k FROM t WHERE NOT cdc_is_delete()")
    try:
        take(result, 1)
        take(filtered, 1)
        table.sql("DELETE FROM t WHERE k = 1")
        table.sql("INSERT INTO t VALUES (2, 'nut', 1, NULL)")
        [deleted, inserted] = take(result, 2)
        [after_delete] = take(filtered, 1)
    finally:
        result.close()
        filtered.close()

    assert deleted == {"gone": True, "item": None, "k": 1, "op": "delete", "qty": 5}
    assert inserted == {"gone": False, "item": "nut", "k": 2, "op": "insert", "qty": None}
    assert after_delete == {"k": 2}  # the delete of k=1 was filtered out


def test_event_op_is_upsert_without_the_previous_row(table: DB) -> None:
    """CockroachDB 26.1's CDC queries docs, ``event_op()``: with ``diff`` it returns
    ``'insert'``, ``'update'`` or ``'delete'``; without it "it is not possible to
    determine an update from an insert, so event_op() returns 'upsert' or 'delete'". A
    query that reads ``cdc_prev`` has the previous row, so it tells them apart."""
    plain = query(table, "SELECT k, event_op() AS op FROM t")
    with_diff = query(table, "SELECT k, event_op() AS op FROM t", "diff")
    with_prev = query(table, "SELECT k, event_op() AS op, (cdc_prev).qty AS was FROM t")
    try:
        scans = [take(r, 1) for r in (plain, with_diff, with_prev)]
        table.sql("UPDATE t SET qty = 6 WHERE k = 1")
        table.sql("DELETE FROM t WHERE k = 1")
        changes = [take(r, 2) for r in (plain, with_diff, with_prev)]
    finally:
        for r in (plain, with_diff, with_prev):
            r.close()

    assert [[m["op"] for m in s + c] for s, c in zip(scans, changes, strict=True)] == [
        ["upsert", "upsert", "delete"],
        ["insert", "update", "delete"],
        ["insert", "update", "delete"],
    ]


def test_mvcc_schema_and_creation_timestamps(table: DB) -> None:
    """``crdb_internal_mvcc_timestamp`` is the change's MVCC timestamp (CDC queries docs,
    "Determine the age of a row"); ``event_schema_timestamp()`` when the row's schema
    version was written; ``changefeed_creation_timestamp()`` when the changefeed
    started. Each is an HLC DECIMAL, the preferred overload of CockroachDB's builtins
    (cdceval/functions.go)."""
    low = table.now()
    result = query(
        table,
        "SELECT k, crdb_internal_mvcc_timestamp AS ts, event_schema_timestamp() AS schema, "
        "changefeed_creation_timestamp() AS created FROM t",
        "initial_scan='no'",
    )
    try:
        table.sql("UPDATE t SET qty = 1 WHERE k = 1")
        [first] = take(result, 1)
        altered = table.now()
        table.sql("ALTER TABLE t ADD COLUMN note STRING")
        table.sql("UPDATE t SET qty = 2 WHERE k = 1")
        [second] = take(result, 1)
    finally:
        result.close()
    high = table.now()

    def hlc(value: Any) -> Timestamp:
        assert isinstance(value, decimal.Decimal), value
        return Timestamp.parse(str(value))

    assert low < hlc(first["ts"]) < hlc(second["ts"]) < high
    assert hlc(first["created"]) == hlc(second["created"])
    assert hlc(first["created"]) < hlc(first["ts"])
    assert hlc(first["schema"]) < low  # the table's schema from its CREATE
    assert altered < hlc(second["schema"]) < hlc(second["ts"])  # the ADD COLUMN's


def test_json_operators_and_jsonb_build_object(table: DB) -> None:
    """CDC queries accept CockroachDB's JSON operators and functions: ``->`` a JSON
    value, ``->>`` its text, ``jsonb_build_object`` a new object (CDC query function
    support: the immutable functions)."""
    result = query(
        table,
        "SELECT k, doc->'size'->'mm'->-1 AS last, doc->>'maker' AS maker, "
        "doc->'size'->>'mm' AS mm, doc->'nope' AS nope, "
        "jsonb_build_object('item', item, 'n', qty) AS obj FROM t WHERE doc->>'maker' = 'Acmé'",
        "initial_scan='only'",
    )
    rows = [json.loads(v) for _t, _k, v in result]
    assert rows == [
        {
            "k": 1,
            "last": 8,
            "maker": "Acmé",
            "mm": "[6, 8]",
            "nope": None,
            "obj": {"item": "bolt", "n": 5},
        }
    ]


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("SELECT jsonb_build_object('a') FROM t", "22023", "even number"),
        ("SELECT cdc_is_delete(1) FROM t", "42883", "takes no arguments"),
        ("SELECT changefeed_creation_timestamp(k) FROM t", "42883", "takes no arguments"),
        ("SELECT (cdc_prev).nope FROM t", "42703", "nope"),
    ],
)
def test_bad_uses_are_refused_at_creation(table: DB, text: str, code: str, message: str) -> None:
    with pytest.raises(SQLError, match=message) as raised:
        query(table, text)
    assert raised.value.code == code
