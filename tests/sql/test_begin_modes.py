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
    for text in ("BEGIN DEFERRABLE", "BEGIN AS OF SYSTEM TIME '-1s'"):
        with pytest.raises(SQLError) as raised:
            db.session().execute(text)
        assert raised.value.code == "0A000"
