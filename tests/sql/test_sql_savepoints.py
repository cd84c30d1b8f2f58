"""SAVEPOINT, RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT with any name, nested, as
PostgreSQL and CockroachDB run them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


def sql_error(fn: Callable[[], object]) -> SQLError:
    with pytest.raises(SQLError) as info:
        fn()
    return info.value


@pytest.fixture
def s(any_db: DB) -> Session:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'one')")
    return any_db.session()


def table(db: DB) -> list[tuple[object, ...]]:
    return db.sql("SELECT k, v FROM t ORDER BY k").rows


def test_rollback_to_savepoint_undoes_the_statements_since_and_keeps_the_rest(
    any_db: DB, s: Session
) -> None:
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (2, 'two')")
    assert s.execute("SAVEPOINT a").tag == "SAVEPOINT"
    s.execute("UPDATE t SET v = 'changed' WHERE k = 1")
    s.execute("DELETE FROM t WHERE k = 2")
    s.execute("INSERT INTO t VALUES (3, 'three')")
    assert s.execute("ROLLBACK TO SAVEPOINT a").tag == "ROLLBACK"
    assert s.execute("SELECT k, v FROM t ORDER BY k").rows == [(1, "one"), (2, "two")]
    s.execute("INSERT INTO t VALUES (4, 'four')")
    assert s.execute("RELEASE SAVEPOINT a").tag == "RELEASE"
    assert s.execute("COMMIT").tag == "COMMIT"
    assert table(any_db) == [(1, "one"), (2, "two"), (4, "four")]


def test_rollback_to_savepoint_recovers_a_transaction_after_an_error(
    any_db: DB, s: Session
) -> None:
    s.execute("BEGIN")
    s.execute("SAVEPOINT before_insert")
    s.execute("INSERT INTO t VALUES (5, 'five')")
    assert sql_error(lambda: s.execute("INSERT INTO t VALUES (1, 'dup')")).code == "23505"
    assert sql_error(lambda: s.execute("SELECT 1")).code == "25P02"
    assert sql_error(lambda: s.execute("RELEASE SAVEPOINT before_insert")).code == "25P02"
    s.execute("ROLLBACK TO SAVEPOINT before_insert")
    assert not s.failed
    s.execute("INSERT INTO t VALUES (6, 'six')")
    s.execute("COMMIT")
    assert table(any_db) == [(1, "one"), (6, "six")]


def test_nested_savepoints_and_a_reused_name(any_db: DB, s: Session) -> None:
    s.execute("BEGIN")
    s.execute("SAVEPOINT outer_sp")
    s.execute("INSERT INTO t VALUES (10, 'a')")
    s.execute("SAVEPOINT inner_sp")
    s.execute("INSERT INTO t VALUES (11, 'b')")
    s.execute("SAVEPOINT inner_sp")  # shadows the first: ROLLBACK TO goes to this one
    s.execute("INSERT INTO t VALUES (12, 'c')")
    s.execute("ROLLBACK TO inner_sp")
    assert [r[0] for r in s.execute("SELECT k FROM t ORDER BY k").rows] == [1, 10, 11]
    s.execute("RELEASE inner_sp")  # the second; the first is still held
    s.execute("ROLLBACK TO SAVEPOINT inner_sp")
    assert [r[0] for r in s.execute("SELECT k FROM t ORDER BY k").rows] == [1, 10]
    s.execute("RELEASE SAVEPOINT outer_sp")  # and every savepoint after it
    assert sql_error(lambda: s.execute("ROLLBACK TO SAVEPOINT inner_sp")).code == "3B001"
    assert s.failed  # an error in a transaction, as in PostgreSQL
    s.execute("ROLLBACK")
    assert table(any_db) == [(1, "one")]


def test_rollback_to_savepoint_then_rollback_of_the_transaction_commits_nothing(
    any_db: DB, s: Session
) -> None:
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (2, 'x')")
    s.execute("SAVEPOINT a")
    s.execute("INSERT INTO t VALUES (3, 'y')")
    s.execute("ROLLBACK TO SAVEPOINT a")
    s.execute("ROLLBACK")
    assert table(any_db) == [(1, "one")]


def test_quoted_savepoint_names_keep_their_case(s: Session) -> None:
    s.execute("BEGIN")
    s.execute('SAVEPOINT "Mixed"')
    assert sql_error(lambda: s.execute("RELEASE SAVEPOINT mixed")).code == "3B001"
    s.execute('ROLLBACK TO SAVEPOINT "Mixed"')
    s.execute('RELEASE SAVEPOINT "Mixed"')
    s.execute("COMMIT")


def test_rollback_past_a_schema_change_is_refused_as_in_cockroachdb(any_db: DB, s: Session) -> None:
    s.execute("BEGIN")
    s.execute("SAVEPOINT a")
    s.execute("CREATE TABLE u (k INT PRIMARY KEY)")
    error = sql_error(lambda: s.execute("ROLLBACK TO SAVEPOINT a"))
    assert error.code == "0A000"
    assert "DDL" in str(error)
    s.execute("ROLLBACK")
    assert sql_error(lambda: any_db.sql("SELECT * FROM u")).code == "42P01"


def test_a_savepoint_after_a_schema_change_rolls_back(any_db: DB, s: Session) -> None:
    s.execute("BEGIN")
    s.execute("CREATE TABLE u (k INT PRIMARY KEY)")
    s.execute("SAVEPOINT a")
    s.execute("INSERT INTO u VALUES (1)")
    s.execute("ROLLBACK TO SAVEPOINT a")
    s.execute("INSERT INTO u VALUES (2)")
    s.execute("COMMIT")
    assert any_db.sql("SELECT k FROM u").rows == [(2,)]


def test_a_retryable_error_rolls_back_only_to_a_savepoint_taken_first(
    any_db: DB, s: Session
) -> None:
    # A 40001 inside the transaction: a later savepoint cannot be rolled back to, one
    # taken before the first statement starts the transaction over.
    s.execute("BEGIN")
    s.execute("SAVEPOINT first")
    s.execute("SELECT * FROM t")
    s.execute("SAVEPOINT later")
    s._failed = s._retry = True  # as a statement failing with 40001 leaves it
    assert sql_error(lambda: s.execute("ROLLBACK TO SAVEPOINT later")).code == "40001"
    assert s.execute("ROLLBACK TO SAVEPOINT first").tag == "ROLLBACK"
    assert not s.failed
    s.execute("INSERT INTO t VALUES (7, 'seven')")
    assert sql_error(lambda: s.execute("RELEASE later")).code == "3B001"  # gone with the restart
    s.execute("ROLLBACK TO SAVEPOINT first")
    s.execute("INSERT INTO t VALUES (8, 'eight')")
    s.execute("RELEASE first")
    s.execute("COMMIT")
    assert table(any_db) == [(1, "one"), (8, "eight")]


def test_a_savepoint_inside_the_restart_savepoint(any_db: DB, s: Session) -> None:
    s.execute("BEGIN")
    s.execute("SAVEPOINT cockroach_restart")
    s.execute("INSERT INTO t VALUES (2, 'two')")
    s.execute("SAVEPOINT a")
    s.execute("INSERT INTO t VALUES (3, 'three')")
    s.execute("ROLLBACK TO SAVEPOINT a")
    assert s.execute("RELEASE SAVEPOINT cockroach_restart").tag == "RELEASE"
    s.execute("COMMIT")
    assert table(any_db) == [(1, "one"), (2, "two")]


@pytest.mark.parametrize(
    ("statements", "code"),
    [
        (["SAVEPOINT a"], "25P01"),
        (["RELEASE SAVEPOINT a"], "25P01"),
        (["ROLLBACK TO SAVEPOINT a"], "25P01"),
        (["BEGIN", "RELEASE SAVEPOINT a"], "3B001"),
        (["BEGIN", "ROLLBACK TO SAVEPOINT a"], "3B001"),
        (["BEGIN", "SAVEPOINT a", "RELEASE a", "RELEASE a"], "3B001"),
        (["BEGIN", "SAVEPOINT a", "SAVEPOINT cockroach_restart"], "42601"),
    ],
)
def test_savepoint_mistakes_get_postgresql_sqlstates(
    s: Session, statements: list[str], code: str
) -> None:
    *before, last = statements
    for text in before:
        s.execute(text)
    assert sql_error(lambda: s.execute(last)).code == code


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("SAVEPOINT a", "SAVEPOINT can only be used in transaction blocks"),
        ("RELEASE SAVEPOINT a", "RELEASE SAVEPOINT can only be used in transaction blocks"),
        ("ROLLBACK TO SAVEPOINT a", "ROLLBACK TO SAVEPOINT can only be used in transaction blocks"),
    ],
)
def test_a_savepoint_outside_a_transaction_says_so_as_postgresql_does(
    s: Session, statement: str, message: str
) -> None:
    assert sql_error(lambda: s.execute(statement)).message == message
