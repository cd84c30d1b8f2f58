"""JSON operators and ``jsonb_build_object`` in SQL expressions, as CockroachDB (and
PostgreSQL) evaluate them: ``->`` a JSON value by key or index (negative from the end),
``->>`` its text, NULL for what is not there."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def docs(db: DB) -> DB:
    db.sql("CREATE TABLE d (k INT PRIMARY KEY, j JSONB)")
    db.sql("""INSERT INTO d VALUES (1, '{"a": {"b": [10, 20, 30]}, "s": "x", "n": 1.5}')""")
    return db


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("j->'a'->'b'->0", 10),
        ("j->'a'->'b'->-1", 30),
        ("j->'a'->'b'->5", None),
        ("j->'nope'->'b'", None),
        ("j->'s'", "x"),
        ("j->>'s'", "x"),
        ("j->'a'->>'b'", "[10, 20, 30]"),
        ("j->>'n'", "1.5"),
        ("j->'a'->'b'->(k - 2)", 30),
    ],
)
def test_json_operators(docs: DB, expression: str, value: object) -> None:
    [(found,)] = docs.sql(f"SELECT {expression} FROM d").rows
    assert found == value


def test_jsonb_build_object_builds_an_object_from_pairs(docs: DB) -> None:
    [(found,)] = docs.sql(
        "SELECT jsonb_build_object('k', k, 's', j->>'s', 'none', NULL) FROM d"
    ).rows
    assert found == {"k": 1, "s": "x", "none": None}


@pytest.mark.parametrize(
    ("sql", "code", "message"),
    [
        ("SELECT jsonb_build_object('a', 1, 'b') FROM d", "22023", "even number"),
        ("SELECT jsonb_build_object(NULL, 1) FROM d", "22004", "a key is null"),
    ],
)
def test_bad_jsonb_build_object_calls_are_refused(
    docs: DB, sql: str, code: str, message: str
) -> None:
    with pytest.raises(SQLError, match=message) as raised:
        docs.sql(sql)
    assert raised.value.code == code
