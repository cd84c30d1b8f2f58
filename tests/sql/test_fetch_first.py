"""The standard's ``FETCH FIRST | NEXT [n] ROW | ROWS ONLY`` limits as ``LIMIT n`` does
(n is 1 when left out), as PostgreSQL and CockroachDB read it; it was ignored, and
every row came back. ``LIMIT ALL`` and ``LIMIT NULL`` limit nothing."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    s = db.session()
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    s.execute("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50), (6, 60)")
    return s


def keys(session: Session, query: str) -> list[int]:
    return [k for (k,) in session.execute(query).rows]


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ("FETCH FIRST 2 ROWS ONLY", [1, 2]),
        ("FETCH NEXT 2 ROWS ONLY", [1, 2]),
        ("FETCH FIRST ROW ONLY", [1]),
        ("FETCH FIRST 1 ROW ONLY", [1]),
        ("FETCH FIRST (1 + 1) ROWS ONLY", [1, 2]),
        ("OFFSET 3 ROWS FETCH NEXT ROW ONLY", [4]),
        ("OFFSET 4 ROWS FETCH NEXT 5 ROWS ONLY", [5, 6]),
        ("FETCH FIRST 0 ROWS ONLY", []),
        ("LIMIT ALL", [1, 2, 3, 4, 5, 6]),
        ("LIMIT NULL", [1, 2, 3, 4, 5, 6]),
        ("LIMIT ALL OFFSET 4", [5, 6]),
    ],
)
def test_fetch_first_limits_the_rows(session: Session, tail: str, expected: list[int]) -> None:
    assert keys(session, f"SELECT k FROM t ORDER BY k {tail}") == expected


def test_fetch_first_in_a_subquery_and_a_set_operation(session: Session) -> None:
    query = "SELECT k FROM (SELECT k FROM t ORDER BY k DESC FETCH FIRST 2 ROWS ONLY) AS s"
    query += " ORDER BY k"
    assert keys(session, query) == [5, 6]
    query = "SELECT k FROM t UNION ALL SELECT k FROM t ORDER BY k FETCH FIRST 3 ROWS ONLY"
    assert keys(session, query) == [1, 1, 2]
    query = "SELECT k FROM t WHERE k IN (SELECT k FROM t ORDER BY v DESC FETCH FIRST ROW ONLY)"
    assert keys(session, query) == [6]


def test_fetch_with_ties_or_percent_is_refused(session: Session) -> None:
    for tail in ("FETCH FIRST 2 ROWS WITH TIES", "FETCH FIRST 50 PERCENT ROWS ONLY"):
        with pytest.raises(SQLError) as caught:
            session.execute(f"SELECT k FROM t ORDER BY k {tail}")
        assert caught.value.code == "0A000"
