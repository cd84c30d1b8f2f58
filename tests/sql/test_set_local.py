"""``SET LOCAL`` as in CockroachDB (and PostgreSQL): the value lasts until the
transaction ends, by COMMIT or ROLLBACK; outside a transaction it does nothing but warn;
a plain SET after it in the same transaction outlives the transaction; ROLLBACK TO
SAVEPOINT undoes the SET LOCAL changes made after the savepoint (CockroachDB's SET docs:
SET LOCAL is compatible with savepoints)."""

from __future__ import annotations

import datetime

import pytest

from feedkv import DB
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


def show(session: Session, name: str) -> str:
    [(value,)] = session.execute(f"SHOW {name}").rows
    return str(value)


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_a_local_value_lasts_until_the_transaction_ends(session: Session, end: str) -> None:
    session.execute("SET extra_float_digits = 2")
    session.execute("BEGIN")
    session.execute("SET LOCAL extra_float_digits = 3")
    assert show(session, "extra_float_digits") == "3"
    [(text,)] = session.execute("SELECT (0.1::FLOAT + 0.2::FLOAT)::STRING").rows
    assert text == "0.30000000000000004"
    session.execute(end)
    assert show(session, "extra_float_digits") == "2"


def test_outside_a_transaction_it_only_warns(session: Session) -> None:
    result = session.execute("SET LOCAL application_name = 'x'")
    assert result.notices == ("SET LOCAL can only be used in transaction blocks",)
    assert show(session, "application_name") == ""


def test_a_plain_set_after_it_outlives_the_transaction(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("SET LOCAL application_name = 'local'")
    session.execute("SET application_name = 'session'")
    session.execute("COMMIT")
    assert show(session, "application_name") == "session"


def test_rollback_to_savepoint_undoes_the_local_values_set_after_it(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("SET LOCAL application_name = 'before'")
    session.execute("SAVEPOINT s")
    session.execute("SET LOCAL application_name = 'after'")
    session.execute("SET LOCAL extra_float_digits = 3")
    session.execute("ROLLBACK TO SAVEPOINT s")
    assert show(session, "application_name") == "before"
    assert show(session, "extra_float_digits") == "0"
    session.execute("COMMIT")
    assert show(session, "application_name") == ""


def test_release_keeps_the_local_values_until_the_transaction_ends(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("SAVEPOINT s")
    session.execute("SET LOCAL application_name = 'inner'")
    session.execute("RELEASE SAVEPOINT s")
    assert show(session, "application_name") == "inner"
    session.execute("SAVEPOINT t")
    session.execute("SET LOCAL application_name = 'again'")
    session.execute("ROLLBACK TO SAVEPOINT t")
    assert show(session, "application_name") == "inner"
    session.execute("ROLLBACK")
    assert show(session, "application_name") == ""


def test_rollback_to_savepoint_keeps_a_plain_set_made_after_it(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("SAVEPOINT s")
    session.execute("SET LOCAL application_name = 'local'")
    session.execute("SET application_name = 'session'")
    session.execute("SET LOCAL application_name = 'local again'")
    session.execute("ROLLBACK TO SAVEPOINT s")
    assert show(session, "application_name") == "session"
    session.execute("COMMIT")
    assert show(session, "application_name") == "session"


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_the_zone_and_read_only_default_come_back_when_the_transaction_ends(
    session: Session, end: str
) -> None:
    """Every statement reads the session's time zone and default_transaction_read_only
    (kept by the session as the variables change): a local value is read while the
    transaction runs, and the one before once it ends."""
    session.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    noon = "SELECT '2024-01-01 12:00:00+00'::TIMESTAMPTZ"
    session.execute("BEGIN")
    session.execute("SET LOCAL timezone = 'America/New_York'")
    session.execute("SET LOCAL default_transaction_read_only = on")
    [(at,)] = session.execute(noon).rows
    assert at.utcoffset() == datetime.timedelta(hours=-5)
    session.execute(end)
    [(at,)] = session.execute(noon).rows
    assert at.utcoffset() == datetime.timedelta(0)
    assert session.execute("INSERT INTO t VALUES (1)").tag == "INSERT 0 1"
