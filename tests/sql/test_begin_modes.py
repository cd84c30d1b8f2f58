"""BEGIN's transaction modes, as CockroachDB's grammar takes them: each at most once
(42601 names the mode given twice, and no transaction starts), with or without commas
between them."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.session import prepare


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("BEGIN PRIORITY LOW, PRIORITY HIGH", "user priority specified multiple times"),
        ("BEGIN TRANSACTION PRIORITY LOW PRIORITY LOW", "user priority specified multiple times"),
        ("BEGIN READ WRITE, READ ONLY", "read mode specified multiple times"),
        (
            "BEGIN ISOLATION LEVEL SERIALIZABLE, ISOLATION LEVEL SERIALIZABLE",
            "isolation level specified multiple times",
        ),
        (
            "START TRANSACTION NOT DEFERRABLE, NOT DEFERRABLE",
            "deferrable mode specified multiple times",
        ),
    ],
)
def test_a_mode_given_twice_is_refused_and_starts_no_transaction(
    db: DB, text: str, message: str
) -> None:
    session = db.session()
    with pytest.raises(SQLError) as raised:
        session.execute(text)
    assert raised.value.code == "42601"
    assert raised.value.message == message
    with pytest.raises(SQLError) as rollback:
        session.execute("ROLLBACK")
    assert rollback.value.code == "25P01"


@pytest.mark.parametrize(
    ("text", "priority", "isolation", "read_only"),
    [
        ("BEGIN", None, None, None),
        ("BEGIN TRANSACTION", None, None, None),
        ("START TRANSACTION PRIORITY HIGH", "HIGH", None, None),
        ("BEGIN PRIORITY LOW, ISOLATION LEVEL SNAPSHOT", "LOW", "snapshot", None),
        (
            "BEGIN TRANSACTION ISOLATION LEVEL READ COMMITTED PRIORITY NORMAL",
            "NORMAL",
            "read committed",
            None,
        ),
        ("BEGIN READ WRITE, NOT DEFERRABLE", None, None, False),
        ("BEGIN READ ONLY", None, None, True),
    ],
)
def test_modes_are_read(
    text: str, priority: str | None, isolation: str | None, read_only: bool | None
) -> None:
    ((statement, _placeholders),) = prepare(text)
    assert statement == st.Begin(text, priority, isolation, read_only)


@pytest.mark.parametrize("priority", ["LOW", "NORMAL", "HIGH"])
def test_a_transaction_of_any_priority_commits(db: DB, priority: str) -> None:
    db.sql("CREATE TABLE IF NOT EXISTS t (k INT PRIMARY KEY)")
    session = db.session()
    session.execute(f"BEGIN PRIORITY {priority}")
    session.execute("INSERT INTO t VALUES (1)")
    session.execute("COMMIT")
    assert db.sql("SELECT k FROM t").rows == [(1,)]


def test_modes_feedkv_does_not_run_are_refused(db: DB) -> None:
    for text in ("BEGIN DEFERRABLE", "BEGIN READ WRITE, AS OF SYSTEM TIME '-1s'"):
        with pytest.raises(SQLError) as raised:
            db.session().execute(text)
        assert raised.value.code == "0A000"


def test_a_transaction_as_of_system_time_reads_then_and_writes_nothing(db: DB) -> None:
    """``BEGIN AS OF SYSTEM TIME`` (or SET TRANSACTION's, before any statement), as
    CockroachDB's: every read of the transaction at that time, now() and
    cluster_logical_timestamp() that time, and no write (25006)."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 10)")
    [(then,)] = db.sql("SELECT cluster_logical_timestamp()").rows
    [(instant,)] = db.sql(f"SELECT now() FROM t AS OF SYSTEM TIME {then}").rows
    db.sql("UPDATE t SET v = 20 WHERE k = 1")
    session = db.session()
    for begin in (
        f"BEGIN AS OF SYSTEM TIME {then}",
        f"BEGIN; SET TRANSACTION AS OF SYSTEM TIME {then}",
    ):
        session.execute_all(begin)
        assert session.execute("SELECT v FROM t").rows == [(10,)]
        assert session.execute("SELECT now(), cluster_logical_timestamp()").rows == [
            (instant, then)
        ]
        assert session.execute("SHOW transaction_read_only").rows == [("on",)]
        with pytest.raises(SQLError) as raised:
            session.execute("UPDATE t SET v = 30 WHERE k = 1")
        assert raised.value.code == "25006"
        session.execute("ROLLBACK")
    assert session.execute("SELECT v FROM t").rows == [(20,)]  # the next reads now
    session.execute_all(f"BEGIN AS OF SYSTEM TIME {then}; SAVEPOINT cockroach_restart")
    session.execute("ROLLBACK TO SAVEPOINT cockroach_restart")  # a restart reads then too
    assert session.execute("SELECT v FROM t").rows == [(10,)]
    session.execute("ROLLBACK")
    session.execute("BEGIN")
    session.execute("SELECT 1")
    with pytest.raises(SQLError) as raised:
        session.execute(f"SET TRANSACTION AS OF SYSTEM TIME {then}")
    assert raised.value.code == "25001"
    session.execute("ROLLBACK")
    with pytest.raises(SQLError) as raised:
        session.execute("BEGIN AS OF SYSTEM TIME '+1h'")
    assert raised.value.code == "22007"
    assert session.execute("SHOW transaction_status").rows == [("NoTxn",)]
