"""ORDER BY a name that several result columns have: the same column or expression
each time (``SELECT a, t.a``) orders by it; different ones (``SELECT a, b AS a``) are
ambiguous, an error, as in PostgreSQL and CockroachDB. feedkv ordered by the table's
column ``a`` there."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    s = db.session()
    s.execute("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
    s.execute("INSERT INTO t VALUES (1, 9), (2, 8), (3, 7)")
    return s


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a, b AS a FROM t ORDER BY a",
        "SELECT b AS a, a FROM t ORDER BY a",
        "SELECT a AS x, b AS x FROM t ORDER BY x",
        "SELECT a + 1 AS c, a + 2 AS c FROM t ORDER BY c",
    ],
)
def test_a_name_of_different_result_columns_is_ambiguous(session: Session, query: str) -> None:
    with pytest.raises(SQLError) as caught:
        session.execute(query)
    assert "is ambiguous" in str(caught.value)


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("SELECT a, a FROM t ORDER BY a DESC", (3, 3)),
        ("SELECT a, t.a FROM t ORDER BY a DESC", (3, 3)),
        ("SELECT a + 1 AS c, a + 1 AS c FROM t ORDER BY c DESC", (4, 4)),
        ("SELECT b AS a FROM t ORDER BY a", (7,)),  # the result column before the table's
    ],
)
def test_a_name_of_the_same_expression_orders_by_it(
    session: Session, query: str, first: tuple[int, ...]
) -> None:
    assert session.execute(query).rows[0] == first


def test_select_distinct_orders_by_a_selected_expression_in_parentheses(
    session: Session,
) -> None:
    rows = session.execute("SELECT DISTINCT a + b FROM t ORDER BY (a + b)").rows
    assert rows == [(10,)]
    rows = session.execute("SELECT DISTINCT (a % 2) FROM t ORDER BY a % 2 DESC").rows
    assert rows == [(1,), (0,)]
