"""An aggregate where none may stand is refused with CockroachDB's 42803 naming the
call and the clause: ``sum(): aggregate functions are not allowed in ORDER BY in
DELETE``. An aggregate inside a subquery there is the subquery's, and allowed."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def kv(db: DB) -> DB:
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO kv VALUES (1, 2), (3, 4)")
    return db


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT k FROM kv WHERE avg(k) > 1",
            "avg(): aggregate functions are not allowed in WHERE",
        ),
        (
            "INSERT INTO kv (k, v) VALUES (99, count(1))",
            "count(): aggregate functions are not allowed in VALUES",
        ),
        (
            "UPDATE kv SET v = count(*)",
            "count(): aggregate functions are not allowed in UPDATE SET",
        ),
        (
            "UPDATE kv SET v = 1 ORDER BY max(k) LIMIT 1",
            "max(): aggregate functions are not allowed in ORDER BY in UPDATE",
        ),
        (
            "DELETE FROM kv ORDER BY COALESCE(sum(k), 1) LIMIT 1",
            "sum(): aggregate functions are not allowed in ORDER BY in DELETE",
        ),
        ("DELETE FROM kv WHERE sum(k) > 0", "sum(): aggregate functions are not allowed in WHERE"),
    ],
)
def test_a_misplaced_aggregate_is_refused_naming_its_clause(kv: DB, sql: str, message: str) -> None:
    with pytest.raises(SQLError) as caught:
        kv.sql(sql)
    assert (caught.value.code, caught.value.message) == ("42803", message)
    assert kv.sql("SELECT k, v FROM kv ORDER BY k").rows == [(1, 2), (3, 4)]


def test_an_aggregate_in_a_subquery_or_a_window_is_allowed(kv: DB) -> None:
    assert kv.sql("SELECT k FROM kv WHERE k IN (SELECT max(k) FROM kv)").rows == [(3,)]
    kv.sql("UPDATE kv SET v = (SELECT count(*) FROM kv) WHERE k = 1")
    assert kv.sql("SELECT v FROM kv WHERE k = 1").rows == [(2,)]
    assert kv.sql("SELECT k, sum(v) OVER () FROM kv ORDER BY k LIMIT 1").rows[0][0] == 1
