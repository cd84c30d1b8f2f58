"""ORDER BY, LIMIT and OFFSET written after a query in parentheses apply to it, as in
CockroachDB and PostgreSQL: ``((SELECT a FROM t)) ORDER BY a DESC LIMIT 2``; a clause the
query already has is 42601 (``multiple LIMIT clauses not allowed``). feedkv refused all
of them (ORDER is not supported in SUBQUERY)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (a INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1), (2), (3), (4), (5)")
    return db


@pytest.mark.parametrize(
    ("sql", "values"),
    [
        ("(((SELECT a FROM t))) ORDER BY a DESC LIMIT 4", [5, 4, 3, 2]),
        ("((SELECT a FROM t ORDER BY a DESC)) LIMIT 2", [5, 4]),
        ("(SELECT a FROM t) ORDER BY a OFFSET 3", [4, 5]),
        ("SELECT * FROM ((SELECT a FROM t) ORDER BY a DESC LIMIT 1) AS s", [5]),
    ],
)
def test_clauses_after_parentheses_apply_to_the_query(t: DB, sql: str, values: list[int]) -> None:
    assert [a for (a,) in t.sql(sql).rows] == values


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("((SELECT a FROM t ORDER BY a)) ORDER BY a", "multiple ORDER BY clauses not allowed"),
        ("((SELECT a FROM t LIMIT 1)) LIMIT 1", "multiple LIMIT clauses not allowed"),
    ],
)
def test_a_clause_given_twice_is_refused(t: DB, sql: str, message: str) -> None:
    with pytest.raises(SQLError) as caught:
        t.sql(sql)
    assert (caught.value.code, caught.value.message) == ("42601", message)
