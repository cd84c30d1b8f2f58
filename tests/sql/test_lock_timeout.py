"""lock_timeout (CockroachDB's session setting) through an embedded session: a wait for
another transaction's row lock ends with 55P03 however the statements were sent (alone,
several together in one implicit transaction, or inside BEGIN), and a value past
PostgreSQL's bound is refused (it would not fit a batch's header)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def held(db: DB) -> DB:
    """Table t with row 1 locked by another session's open transaction."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 0), (2, 0)")
    holder = db.session()
    holder.execute("BEGIN")
    holder.execute("SELECT v FROM t WHERE k = 1 FOR UPDATE")
    return db


@pytest.mark.parametrize(
    "statements",
    [
        "UPDATE t SET v = 1 WHERE k = 1",
        "UPDATE t SET v = 1 WHERE k = 2; UPDATE t SET v = 1 WHERE k = 1",
        "BEGIN; UPDATE t SET v = 1 WHERE k = 1",
    ],
    ids=["alone", "together", "in a transaction"],
)
def test_a_wait_past_lock_timeout_is_55p03(held: DB, statements: str) -> None:
    session = held.session()
    session.execute("SET lock_timeout = '50ms'")
    with pytest.raises(SQLError) as caught:
        session.execute_all(statements)
    assert caught.value.code == "55P03"
    assert "lock timeout" in caught.value.message
    if "BEGIN" in statements:
        session.execute("ROLLBACK")
    assert held.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, 0), (2, 0)]


def test_a_lock_timeout_past_postgresqls_bound_is_refused(db: DB) -> None:
    session = db.session()
    with pytest.raises(SQLError) as caught:
        session.execute("SET lock_timeout = '1200h'")
    assert caught.value.code == "22023"
    assert "outside the valid range" in caught.value.message
    assert session.execute("SHOW lock_timeout").rows == [("0",)]
