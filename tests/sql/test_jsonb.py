"""A JSON ``null`` is a JSONB value, not SQL NULL (CockroachDB's JSONB docs): it is
stored, read back, compared, sorted, cast and built into documents as JSON null, while
``->>`` and ``#>>`` of a JSON null (a text) are SQL NULL."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.jsonb import JSON_NULL


@pytest.fixture
def docs(db: DB) -> DB:
    db.sql("CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)")
    db.sql(
        "INSERT INTO docs VALUES (1, 'null'), (2, NULL), "
        """(3, '{"a": null, "b": {"c": [1, null]}}'), (4, '[1, null]')"""
    )
    return db


def one(db: DB, query: str) -> object:
    [(value,)] = db.sql(query).rows
    return value


def test_a_json_null_is_not_sql_null(db: DB) -> None:
    assert one(db, "SELECT 'null'::JSONB IS NULL") is False
    assert one(db, "SELECT 'null'::JSONB IS NOT NULL") is True
    assert one(db, "SELECT NULL::JSONB IS NULL") is True
    assert one(db, "SELECT 'null'::JSONB") is JSON_NULL


def test_a_json_null_column_reads_back_as_json_null_and_sql_null_as_none(docs: DB) -> None:
    rows = docs.sql("SELECT k, j, j IS NULL FROM docs ORDER BY k").rows
    assert rows[:2] == [(1, JSON_NULL, False), (2, None, True)]
    assert docs.sql("SELECT k FROM docs WHERE j IS NULL").rows == [(2,)]
    assert docs.sql("SELECT count(j) FROM docs").rows == [(3,)]


def test_a_json_null_survives_closing_and_reopening_the_store(tmp_path: Path) -> None:
    db = feedkv.connect(tmp_path / "store")
    try:
        db.sql("CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)")
        db.sql("INSERT INTO docs VALUES (1, 'null'), (2, NULL)")
    finally:
        db.close()
    db = feedkv.connect(tmp_path / "store")
    try:
        assert db.sql("SELECT k, j FROM docs ORDER BY k").rows == [(1, JSON_NULL), (2, None)]
    finally:
        db.close()


def test_arrow_gives_json_null_and_double_arrow_gives_sql_null(docs: DB) -> None:
    assert one(docs, "SELECT j -> 'a' FROM docs WHERE k = 3") is JSON_NULL
    assert one(docs, "SELECT j ->> 'a' FROM docs WHERE k = 3") is None
    assert one(docs, "SELECT (j -> 'a') IS NULL FROM docs WHERE k = 3") is False
    assert one(docs, "SELECT (j -> 'missing') IS NULL FROM docs WHERE k = 3") is True
    assert one(docs, "SELECT j -> 1 FROM docs WHERE k = 4") is JSON_NULL
    assert one(docs, "SELECT j ->> 1 FROM docs WHERE k = 4") is None
    assert one(docs, "SELECT j ->> 0 FROM docs WHERE k = 4") == "1"
    # a step into a JSON null leads nowhere: SQL NULL
    assert one(docs, "SELECT j -> 'a' -> 'b' FROM docs WHERE k = 3") is None


def test_path_operators_follow_keys_and_indexes(docs: DB) -> None:
    assert one(docs, "SELECT j #> '{b,c,1}' FROM docs WHERE k = 3") is JSON_NULL
    assert one(docs, "SELECT j #>> '{b,c,1}' FROM docs WHERE k = 3") is None
    assert one(docs, "SELECT j #>> '{b,c,0}' FROM docs WHERE k = 3") == "1"
    assert one(docs, "SELECT j #> '{b}' FROM docs WHERE k = 3") == {"c": [1, None]}
    assert one(docs, "SELECT j #> '{b,x}' FROM docs WHERE k = 3") is None


def test_containment_sees_json_null_as_a_value(docs: DB) -> None:
    rows = docs.sql("""SELECT k, j @> '{"a": null}', j @> 'null' FROM docs ORDER BY k""").rows
    assert rows == [
        (1, False, True),
        (2, None, None),
        (3, True, False),
        (4, False, True),
    ]
    assert one(docs, """SELECT '{"a": 1}'::JSONB <@ '{"a": 1, "b": 2}'::JSONB""") is True
    assert one(docs, "SELECT '[[1]]'::JSONB @> '[1]'::JSONB") is False


def test_jsonb_typeof_names_null(docs: DB) -> None:
    rows = docs.sql("SELECT k, jsonb_typeof(j) FROM docs ORDER BY k").rows
    assert rows == [(1, "null"), (2, None), (3, "object"), (4, "array")]
    assert one(docs, "SELECT jsonb_typeof(j -> 'a') FROM docs WHERE k = 3") == "null"
    assert one(docs, "SELECT jsonb_array_length(j) FROM docs WHERE k = 4") == 2


def test_comparison_and_order_are_jsonbs(docs: DB) -> None:
    """JSONB order: null < strings < numbers < booleans < arrays < objects; SQL NULL
    first ascending."""
    assert one(docs, "SELECT 'null'::JSONB = 'null'::JSONB") is True
    assert one(docs, """SELECT 'null'::JSONB < '"a"'::JSONB""") is True
    assert docs.sql("SELECT k FROM docs WHERE j = 'null'").rows == [(1,)]
    assert [k for (k,) in docs.sql("SELECT k FROM docs ORDER BY j").rows] == [2, 1, 4, 3]
    assert [k for (k,) in docs.sql("SELECT k FROM docs ORDER BY j DESC").rows] == [3, 4, 1, 2]


def test_json_null_and_sql_null_group_apart(docs: DB) -> None:
    docs.sql("INSERT INTO docs VALUES (5, 'null'), (6, NULL)")
    groups = docs.sql("SELECT j, count(*) FROM docs WHERE k IN (1, 2, 5, 6) GROUP BY j").rows
    assert sorted(groups, key=repr) == [(JSON_NULL, 2), (None, 2)]
    distinct = docs.sql("SELECT DISTINCT j FROM docs WHERE k IN (1, 2, 5, 6)").rows
    assert sorted(distinct, key=repr) == [(JSON_NULL,), (None,)]


def test_casts_of_json_null(db: DB) -> None:
    assert one(db, "SELECT 'null'::JSONB::STRING") == "null"
    assert one(db, "SELECT NULL::JSONB::STRING") is None
    with pytest.raises(SQLError, match="cannot cast jsonb null to type") as raised:
        db.sql("SELECT 'null'::JSONB::INT")
    assert raised.value.code == "22023"


def test_documents_built_from_values_hold_json_null(docs: DB) -> None:
    assert docs.sql("SELECT jsonb_agg(j ORDER BY k) FROM docs").rows == [
        ([None, None, {"a": None, "b": {"c": [1, None]}}, [1, None]],)
    ]
    assert one(docs, "SELECT json_build_object('x', j) FROM docs WHERE k = 1") == {"x": None}
    assert one(docs, "SELECT json_build_object('x', j -> 'a') FROM docs WHERE k = 3") == {"x": None}


def test_a_json_null_pickles_as_the_one_instance() -> None:
    """Spark partitions and rows cross processes by pickle."""
    assert pickle.loads(pickle.dumps(JSON_NULL)) is JSON_NULL
    assert jsonb.JsonNull() is JSON_NULL


def test_jsonb_sort_key_orders_types_then_values() -> None:
    values = [{"a": 1}, [1, 2], [3], True, False, 2, 1.5, "b", "a", JSON_NULL]
    ordered = sorted(values, key=jsonb.sort_key)
    assert ordered == [JSON_NULL, "a", "b", 1.5, 2, False, True, [3], [1, 2], {"a": 1}]


def test_a_jsonb_cast_to_string_is_its_json_text(db: DB) -> None:
    """A JSON string keeps its quotes: CockroachDB's JSONB to STRING cast is the
    value's JSON text, as ``->>`` is not."""
    db.sql("CREATE TABLE j (k INT PRIMARY KEY, j JSONB)")
    db.sql("""INSERT INTO j VALUES (1, '"abc"'), (2, '12'), (3, '{"a": "x"}'), (4, NULL)""")
    rows = db.sql("SELECT j::STRING, (j -> 'a')::STRING, j ->> 'a' FROM j ORDER BY k").rows
    assert rows == [
        ('"abc"', None, None),
        ("12", None, None),
        ('{"a": "x"}', '"x"', "x"),
        (None, None, None),
    ]
    assert one(db, """SELECT '"abc"'::JSONB::STRING""") == '"abc"'
