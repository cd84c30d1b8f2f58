"""``a IS [NOT] DISTINCT FROM b`` as PostgreSQL and CockroachDB define it: ``=`` where
NULL equals NULL and no answer is NULL. The operator's FROM starts no clause (it was
refused as a syntax error, whatever the operand), and a constant on one side is typed
from the other side as ``=`` types it."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    s = db.session()
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, i INT, f FLOAT, r REAL, d DECIMAL, s STRING)")
    s.execute("INSERT INTO t VALUES (1, 1, 0.1, 0.7, 0.1, 'a'), (2, NULL, NULL, NULL, NULL, NULL)")
    return s


@pytest.mark.parametrize(
    ("condition", "distinct", "not_distinct"),
    [
        ("i IS %s FROM 1", [2], [1]),
        ("i IS %s FROM -1", [1, 2], []),
        ("f IS %s FROM 0.1", [2], [1]),
        ("r IS %s FROM 0.7", [2], [1]),  # 0.7 is typed FLOAT4 beside a REAL
        ("d IS %s FROM 0.10", [2], [1]),
        ("d IS %s FROM 1e-1", [2], [1]),
        ("d IS %s FROM (0.1)", [2], [1]),
        ("s IS %s FROM 'a'", [2], [1]),
        ("d IS %s FROM NULL", [1], [2]),
        ("d IS %s FROM f", [], [1, 2]),  # 0.1::DECIMAL and 0.1::FLOAT are equal
    ],
)
def test_is_distinct_from_compares_as_equals_with_null_equal_to_null(
    session: Session, condition: str, distinct: list[int], not_distinct: list[int]
) -> None:
    for word, expected in (("DISTINCT", distinct), ("NOT DISTINCT", not_distinct)):
        query = f"SELECT k FROM t WHERE {condition % word} ORDER BY k"
        assert [k for (k,) in session.execute(query).rows] == expected, query


def test_is_distinct_from_is_never_null_in_a_select_list(session: Session) -> None:
    rows = session.execute(
        "SELECT k, i IS DISTINCT FROM 1, d IS NOT DISTINCT FROM 0.1, NULL IS DISTINCT FROM NULL "
        "FROM t ORDER BY k"
    ).rows
    assert rows == [(1, False, True, False), (2, True, False, False)]
    assert session.execute("SELECT 1.5 IS NOT DISTINCT FROM 1.50, 2 IS DISTINCT FROM 2.5").rows == [
        (True, True)
    ]
    rows = session.execute("SELECT DISTINCT i IS DISTINCT FROM 1 AS x FROM t ORDER BY x").rows
    assert rows == [(False,), (True,)]


def test_values_that_do_not_compare_are_an_error_as_for_equals(session: Session) -> None:
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT 1 IS DISTINCT FROM 'a'")
    assert caught.value.code == "22P02"
