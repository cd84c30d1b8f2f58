"""SHOW SESSIONS and CANCEL SESSION over the SQL port: a connection's session shows its
client's address and application name, and CANCEL SESSION closes the connection."""

from __future__ import annotations

import psycopg
import pytest

from feedkv.testing.waiting import wait_until


def test_cancel_session_closes_the_connection(pg_url: str) -> None:
    with (
        psycopg.connect(pg_url, autocommit=True, application_name="victim") as victim,
        psycopg.connect(pg_url, autocommit=True) as admin,
    ):
        [(session_id, address)] = admin.execute(
            "SELECT session_id, client_address FROM [SHOW SESSIONS] "
            "WHERE application_name = 'victim'"
        ).fetchall()
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        admin.execute(f"CANCEL SESSION '{session_id}'")
        with pytest.raises(psycopg.OperationalError):
            victim.execute("SELECT 1")

        def gone() -> bool:
            rows = admin.execute(
                "SELECT count(*) FROM [SHOW SESSIONS] WHERE application_name = 'victim'"
            ).fetchall()
            return rows == [(0,)]

        wait_until(gone, timeout_s=30.0, what="the cancelled session to leave SHOW SESSIONS")
