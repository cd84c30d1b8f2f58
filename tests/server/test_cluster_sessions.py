"""SHOW SESSIONS, SHOW QUERIES and CANCEL QUERY | SESSION across the nodes of a cluster,
as CockroachDB has them: from any node's SQL port a user sees the sessions of every
node (``LOCAL``: this node's only) and cancels a query or session another node runs;
a node that cannot answer is a row naming it and the error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import in_thread, wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0
SLEEP = "SELECT pg_sleep(60)"


def _rows(conn: psycopg.Connection[Any], query: str) -> list[dict[str, Any]]:
    cursor = conn.execute(query)
    names = [c.name for c in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _sleep_query(conn: psycopg.Connection[Any], show: str) -> dict[str, Any] | None:
    found = [r for r in _rows(conn, show) if r["query"] == SLEEP]
    return found[0] if found else None


@pytest.mark.slow(30)
def test_sessions_and_queries_of_every_node_are_seen_and_cancelled_from_any(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path / "c", 2, insecure=True) as cluster:
        urls = [p.sql_url for p in cluster.processes if p is not None]
        here = psycopg.connect(urls[0], autocommit=True)
        here.execute("CREATE USER alice")
        alice = psycopg.connect(urls[0], autocommit=True, user="alice")
        there = psycopg.connect(urls[1], autocommit=True, application_name="sleepy")
        outcome: list[BaseException] = []
        thread = in_thread(lambda: there.execute(SLEEP), outcome)

        query = wait_until(
            lambda: _sleep_query(here, "SHOW QUERIES"),
            timeout_s=DEADLINE_S,
            what="the other node's query in SHOW QUERIES",
        )
        assert query["node_id"] == 2 and query["user_name"] == "root"
        assert query["application_name"] == "sleepy"
        assert _sleep_query(here, "SHOW CLUSTER QUERIES") is not None
        assert _sleep_query(here, "SHOW LOCAL QUERIES") is None
        sessions = _rows(here, "SHOW SESSIONS")
        assert {s["node_id"] for s in sessions} == {1, 2}
        assert {s["node_id"] for s in _rows(here, "SHOW LOCAL SESSIONS")} == {1}
        [sleepy] = [s for s in sessions if s["application_name"] == "sleepy"]
        assert sleepy["status"] == "ACTIVE" and sleepy["active_queries"] == SLEEP

        # another user sees none of root's, and may not cancel them
        assert _sleep_query(alice, "SHOW QUERIES") is None
        with pytest.raises(errors.InsufficientPrivilege):
            alice.execute(f"CANCEL QUERY '{query['query_id']}'")
        assert thread.is_alive()

        here.execute(f"CANCEL QUERY '{query['query_id']}'")
        thread.join(DEADLINE_S)
        assert len(outcome) == 1 and isinstance(outcome[0], errors.QueryCanceled)
        with pytest.raises(errors.UndefinedObject):
            here.execute(f"CANCEL QUERY '{query['query_id']}'")
        here.execute(f"CANCEL QUERY IF EXISTS '{query['query_id']}'")

        here.execute(f"CANCEL SESSION '{sleepy['session_id']}'")
        with pytest.raises(psycopg.OperationalError):
            there.execute("SELECT 1")

        cluster.kill(1)
        rows = wait_until(
            lambda: [r for r in _rows(here, "SHOW SESSIONS") if r["node_id"] == 2] or None,
            timeout_s=DEADLINE_S,
            what="a row for the killed node",
        )
        assert len(rows) == 1 and rows[0]["session_id"] is None
        assert rows[0]["active_queries"].startswith("-- node n2 ")
        with pytest.raises(psycopg.Error) as unreachable:
            here.execute(f"CANCEL SESSION '{sleepy['session_id']}'")
        assert unreachable.value.sqlstate == "58000"
        assert "its node n2 did not answer" in str(unreachable.value)
        for conn in (here, alice, there):
            conn.close()
