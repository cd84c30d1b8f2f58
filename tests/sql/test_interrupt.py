"""A statement looks at its session's interrupt where stopping loses nothing: between a
scan's pages and while pg_sleep waits; a cancelled statement fails with 57014 and the
session goes on."""

from __future__ import annotations

import threading

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.interrupt import Interrupt, QueryCanceled


def test_a_scan_of_many_pages_stops_at_a_page_boundary_when_cancelled(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    for start in range(0, 5000, 1000):
        rows = ", ".join(f"({k}, 'v')" for k in range(start, start + 1000))
        db.sql(f"INSERT INTO t VALUES {rows}")
    session = db.session()
    session.interrupt.cancel()
    with pytest.raises(QueryCanceled) as caught:
        session.execute("SELECT count(*) FROM t")
    assert caught.value.code == "57014"
    session.interrupt.reset()  # as the server does before each query
    assert session.execute("SELECT count(*) FROM t").rows == [(5000,)]


def test_a_cancelled_update_writes_nothing(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    rows = ", ".join(f"({k}, 0)" for k in range(3000))
    db.sql(f"INSERT INTO t VALUES {rows}")
    session = db.session()
    session.interrupt.cancel()
    with pytest.raises(QueryCanceled):
        session.execute("UPDATE t SET v = 1")
    assert db.sql("SELECT count(*) FROM t WHERE v = 1").rows == [(0,)]


def test_pg_sleep_waits_and_a_cancel_from_another_thread_ends_it(db: DB) -> None:
    session = db.session()
    assert session.execute("SELECT pg_sleep(0.01)").rows == [(True,)]
    threading.Timer(0.05, session.interrupt.cancel).start()
    with pytest.raises(QueryCanceled):
        session.execute("SELECT pg_sleep(60)")
    session.interrupt.reset()
    assert session.execute("SELECT pg_sleep(0)").rows == [(True,)]


def test_pg_sleep_in_a_transaction_fails_it_when_cancelled(db: DB) -> None:
    session = db.session()
    session.execute("BEGIN")
    session.interrupt.cancel()
    with pytest.raises(QueryCanceled):
        session.execute("SELECT pg_sleep(60)")
    assert session.failed
    session.execute("ROLLBACK")


@pytest.mark.parametrize("text", ["SELECT pg_sleep()", "SELECT pg_sleep('x')"])
def test_pg_sleep_takes_one_number(db: DB, text: str) -> None:
    with pytest.raises(SQLError) as caught:
        db.sql(text)
    assert caught.value.code == "42883"


def test_an_interrupt_is_spent_by_a_reset() -> None:
    interrupt = Interrupt()
    interrupt.check()
    interrupt.cancel()
    assert interrupt.cancelled
    with pytest.raises(QueryCanceled):
        interrupt.check()
    interrupt.reset()
    interrupt.sleep(0)
