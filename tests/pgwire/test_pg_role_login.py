"""ALTER ROLE | USER ... LOGIN | NOLOGIN through a real client (psycopg): a role without
login is refused when it connects (28000, as CockroachDB's), and may connect again
once given LOGIN; a session it already had goes on."""

from __future__ import annotations

import re

import psycopg
import pytest


def _as(pg_url: str, user: str, password: str) -> str:
    """``pg_url`` (root's, with its client certificate) for ``user`` by password."""
    url = pg_url.replace("postgresql://root@", f"postgresql://{user}:{password}@", 1)
    return re.sub(r"&sslcert=[^&]*|&sslkey=[^&]*", "", url)


def test_nologin_refuses_new_connections_and_login_lets_them_in(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as root:
        root.execute("CREATE USER clerk WITH PASSWORD 'pw'")
        with psycopg.connect(_as(pg_url, "clerk", "pw"), autocommit=True) as clerk:
            root.execute("ALTER ROLE clerk WITH NOLOGIN")
            options = dict(
                (name, option) for name, option, _ in root.execute("SHOW USERS").fetchall()
            )
            assert options["clerk"] == "NOLOGIN"
            with pytest.raises(psycopg.OperationalError, match="does not have login privilege"):
                psycopg.connect(_as(pg_url, "clerk", "pw"))
            assert clerk.execute("SELECT 1").fetchone() == (1,)  # an open session goes on
        root.execute("ALTER USER clerk LOGIN")
        with psycopg.connect(_as(pg_url, "clerk", "pw")) as clerk:
            assert clerk.execute("SELECT current_user").fetchone() == ("clerk",)
