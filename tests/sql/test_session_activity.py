"""SHOW SESSIONS, SHOW QUERIES (SHOW STATEMENTS), CANCEL QUERY and CANCEL SESSION over
a node's own sessions, as CockroachDB has them: ids of 32 hex digits, a user sees and
cancels their own, an admin everyone's."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session
from feedkv.sql.session_activity import QUERIES_COLUMNS, SESSIONS_COLUMNS
from feedkv.testing.waiting import wait_until

DEADLINE_S = 30.0


@pytest.fixture
def sleeper(db: DB) -> Iterator[tuple[Session, list[BaseException]]]:
    """A session of user root running ``pg_sleep(60)`` in a thread until cancelled."""
    session = db.session()
    session.execute("SET application_name = 'sleepy'")
    failures: list[BaseException] = []

    def sleep() -> None:
        try:
            session.execute("SELECT pg_sleep(60)")
        except BaseException as exc:  # handed to the test
            failures.append(exc)

    thread = threading.Thread(target=sleep, daemon=True)
    thread.start()
    yield session, failures
    session.interrupt.cancel()
    thread.join(DEADLINE_S)
    session.close()


def running_sleep(db: DB) -> tuple[str, ...]:
    def found() -> tuple[str, ...] | None:
        rows = db.sql(
            "SELECT query_id, session_id, query, application_name FROM [SHOW QUERIES] "
            "WHERE query LIKE '%pg_sleep(60)%' AND query NOT LIKE '%SHOW%'"
        ).rows
        return rows[0] if rows else None

    row = wait_until(found, timeout_s=DEADLINE_S, what="the pg_sleep query")
    assert row is not None
    return row


def test_show_sessions_lists_each_open_session_and_its_query(db: DB, sleeper: object) -> None:
    query_id, session_id, text, application = running_sleep(db)
    assert len(query_id) == len(session_id) == 32 and int(query_id, 16) and int(session_id, 16)
    assert (text, application) == ("SELECT pg_sleep(60)", "sleepy")
    result = db.sql("SHOW SESSIONS")
    assert result.columns == SESSIONS_COLUMNS
    mine = [row for row in result.rows if row[1] == session_id]
    assert [(r[2], r[3], r[5], r[6], r[7]) for r in mine] == [
        ("ACTIVE", "root", "sleepy", "SELECT pg_sleep(60)", "SET application_name = 'sleepy'")
    ]
    assert db.sql("SHOW CLUSTER QUERIES").columns == QUERIES_COLUMNS
    assert db.sql("SHOW LOCAL STATEMENTS").columns == QUERIES_COLUMNS


def test_cancel_query_stops_the_query_with_57014(
    db: DB, sleeper: tuple[Session, list[BaseException]]
) -> None:
    session, failures = sleeper
    query_id, *_ = running_sleep(db)
    db.sql(f"CANCEL QUERY '{query_id}'")
    wait_until(lambda: failures, timeout_s=DEADLINE_S, what="the cancelled query's error")
    assert isinstance(failures[0], SQLError) and failures[0].code == "57014"
    # the session goes on, and the cancel was for that query only (pg_sleep looks)
    assert session.execute("SELECT pg_sleep(0)").rows == [(True,)]


def test_cancel_session_ends_the_session(
    db: DB, sleeper: tuple[Session, list[BaseException]]
) -> None:
    session, failures = sleeper
    _query, session_id, *_ = running_sleep(db)
    db.sql(f"CANCEL SESSION '{session_id}'")
    wait_until(lambda: failures, timeout_s=DEADLINE_S, what="the cancelled query's error")
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT 1")
    assert caught.value.code == "57P01"


def test_cancel_queries_takes_the_ids_a_query_gives(
    db: DB, sleeper: tuple[Session, list[BaseException]]
) -> None:
    _session, failures = sleeper
    running_sleep(db)
    db.sql("CANCEL QUERIES (SELECT query_id FROM [SHOW QUERIES] WHERE application_name = 'sleepy')")
    wait_until(lambda: failures, timeout_s=DEADLINE_S, what="the cancelled query's error")
    assert isinstance(failures[0], SQLError) and failures[0].code == "57014"


def test_an_unknown_id_is_42704_unless_if_exists(db: DB) -> None:
    with pytest.raises(SQLError, match="query ID 00ff not found") as caught:
        db.sql("CANCEL QUERY '00ff'")
    assert caught.value.code == "42704"
    with pytest.raises(SQLError, match="session ID 00ff not found"):
        db.sql("CANCEL SESSION '00ff'")
    db.sql("CANCEL QUERY IF EXISTS '00ff'")
    db.sql("CANCEL SESSION IF EXISTS '00ff'")
    with pytest.raises(SQLError) as caught:
        db.sql("CANCEL QUERY 1")
    assert caught.value.code == "42804"


def test_an_id_of_a_node_not_in_the_cluster_is_not_found(db: DB) -> None:
    """An id's last 32 bits name its node (tests/server/test_cluster_sessions.py cancels
    on another node): on a node alone, an id of node n2 is no session's."""
    other = "18a0a6d2a6f1f5e4" + "00000005" + "00000002"
    with pytest.raises(SQLError) as caught:
        db.sql(f"CANCEL QUERY '{other}'")
    assert caught.value.code == "42704"
    assert str(caught.value) == f"query ID {other} not found"


def test_a_user_sees_and_cancels_only_their_own(db: DB, sleeper: object) -> None:
    db.sql("CREATE USER bob")
    bob = db.session(user="bob")
    try:
        query_id, session_id, *_ = running_sleep(db)
        assert [row[3] for row in bob.execute("SHOW SESSIONS").rows] == ["bob"]
        assert all(row[3] == "bob" for row in bob.execute("SHOW QUERIES").rows)
        for statement in (f"CANCEL QUERY '{query_id}'", f"CANCEL SESSION '{session_id}'"):
            with pytest.raises(SQLError) as caught:
                bob.execute(statement)
            assert caught.value.code == "42501"
    finally:
        bob.close()


def test_a_closed_session_leaves_the_list(db: DB) -> None:
    session = db.session()
    session.execute("SET application_name = 'brief'")
    assert [r[5] for r in db.sql("SHOW SESSIONS").rows].count("brief") == 1
    session.close()
    assert [r[5] for r in db.sql("SHOW SESSIONS").rows].count("brief") == 0


def test_a_session_nobody_holds_leaves_the_list(db: DB) -> None:
    session = db.session()
    session.execute("SET application_name = 'forgotten'")
    assert [r[5] for r in db.sql("SHOW SESSIONS").rows].count("forgotten") == 1
    del session
    gc.collect()
    assert [r[5] for r in db.sql("SHOW SESSIONS").rows].count("forgotten") == 0


def test_a_query_shows_as_written(db: DB) -> None:
    text = "SELECT query FROM [SHOW QUERIES] WHERE query LIKE '%[SHOW%'"
    assert db.sql(text).rows == [(text,)]
