"""CockroachDB's type annotation ``e:::T``: an assertion that ``e`` is of type ``T``,
not a cast. A constant takes the type when it can be one of ``T`` (``1:::INT``,
``'a':::STRING``, ``'7':::INT``); an expression of another type is refused (42804)."""

from __future__ import annotations

import decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, x FLOAT, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 1.5, 'one'), (2, 2.5, 'two')")
    return db


def test_constants_take_the_annotated_type(t: DB) -> None:
    assert t.sql("SELECT 1:::INT, 1.5:::DECIMAL, 2:::FLOAT, 'a':::STRING, NULL:::INT").rows == [
        (1, decimal.Decimal("1.5"), 2.0, "a", None)
    ]


def test_an_expression_of_the_annotated_type_passes_unchanged(t: DB) -> None:
    rows = t.sql("SELECT k:::INT, x:::FLOAT, (k + 1):::INT8, s:::STRING FROM t ORDER BY k").rows
    assert rows == [(1, 1.5, 2, "one"), (2, 2.5, 3, "two")]
    assert t.sql("SELECT k FROM t WHERE k:::INT > 1").rows == [(2,)]
    assert t.sql("SELECT sum(k):::DECIMAL FROM t").rows == [(decimal.Decimal(3),)]


def test_a_string_that_is_no_value_of_the_type_is_an_error(t: DB) -> None:
    with pytest.raises(SQLError) as caught:
        t.sql("SELECT 'a':::INT")
    assert caught.value.code == "22P02"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1.5:::INT", "incompatible type annotation for 1.5 as int8, found type: decimal"),
        ("1:::STRING", "incompatible type annotation for 1 as string, found type: int"),
        ("x:::INT FROM t", "incompatible type annotation for x as int8, found type: float8"),
        ("s:::INT FROM t", "incompatible type annotation for s as int8, found type: string"),
    ],
)
def test_an_annotation_converts_nothing(t: DB, expression: str, message: str) -> None:
    with pytest.raises(SQLError) as caught:
        t.sql(f"SELECT {expression}")
    assert (caught.value.code, caught.value.message) == ("42804", message)


def test_a_cast_still_converts(t: DB) -> None:
    assert t.sql("SELECT x::INT, k::STRING FROM t WHERE k = 2").rows == [(2, "2")]
