"""A statement looks at its session's interrupt where stopping loses nothing: between a
scan's pages, between chunks of a loop over rows no scan reads (generate_series,
aggregation, a join's WHERE) and while pg_sleep waits; a cancelled statement fails with
57014 and the session goes on."""

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


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("SELECT count(*) FROM generate_series(1, 10)", 10),
        ("SELECT max(g) FROM (VALUES (1), (3)) AS v (x), generate_series(1, x) AS g", 3),
        ("SELECT count(*) FROM (VALUES (1), (2), (3)) AS v (x) WHERE x > 1", 2),
        ("SELECT count(*) FROM (SELECT x FROM (VALUES (1), (1)) AS v (x) GROUP BY x)", 1),
    ],
)
def test_a_loop_over_rows_no_scan_reads_stops_when_cancelled(
    db: DB, query: str, answer: int
) -> None:
    session = db.session()
    session.interrupt.cancel()
    with pytest.raises(QueryCanceled) as caught:
        session.execute(query)
    assert caught.value.code == "57014"
    session.interrupt.reset()
    assert session.execute(query).rows == [(answer,)]


def test_statement_timeout_ends_an_aggregation_over_generate_series(db: DB) -> None:
    """The statement runs for seconds; its timeout fires within the first chunk."""
    db.sql("SET statement_timeout = '1ms'")
    with pytest.raises(QueryCanceled) as caught:
        db.sql("SELECT count(*) FROM generate_series(1, 3000000)")
    assert str(caught.value) == "query execution canceled due to statement timeout"
    assert db.sql("SELECT 1").rows == [(1,)]


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
