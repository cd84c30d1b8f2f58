"""Fixtures for the SQL port: an embedded node on a real store serving PostgreSQL
clients on an ephemeral loopback port.

The node is secure, as a CockroachDB user's would be: TLS, and ``pg_url`` logs in as
root with its client certificate (``sslmode=verify-full``), so every driver test also
runs its driver's TLS. Tests marked ``insecure`` get a plaintext node instead: the
raw-protocol tests (``RawClient``: hand-made startup packets, garbage, cancel requests),
which test the message layer beneath the TLS step (tested on its own in
``test_tls_step.py`` and ``tests/security``), and the tests of what an insecure node
answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.pgwire.server import PGServer
from feedkv.testing.certs import shared_certs_dir


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DB]:
    """An embedded node (fast side loops, no fsync) serving SQL on a loopback port;
    secure unless the test is marked ``insecure``."""
    config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
    insecure = request.node.get_closest_marker("insecure") is not None
    database = feedkv.connect(
        tmp_path / "store",
        config=config,
        changefeed_runner="thread",
        certs_dir=None if insecure else shared_certs_dir(),
    )
    yield database
    database.close()


@pytest.fixture
def pg_url(db: DB) -> str:
    """``postgresql://root@127.0.0.1:PORT/defaultdb?sslmode=verify-full&...`` with
    root's client certificate (``?sslmode=disable`` when ``insecure``)."""
    return db.serve_sql()


@pytest.fixture
def pg_server(db: DB, pg_url: str) -> PGServer:
    node = db.node
    assert node is not None and node.sql_server is not None
    return node.sql_server
