"""Fixtures for the SQL port: an embedded node on a real store serving PostgreSQL
clients on an ephemeral loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.pgwire.server import PGServer


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    """An embedded node (fast side loops, no fsync) serving SQL on a loopback port."""
    config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
    database = feedkv.connect(tmp_path / "store", config=config, changefeed_runner="thread")
    yield database
    database.close()


@pytest.fixture
def pg_url(db: DB) -> str:
    """``postgresql://root@127.0.0.1:PORT/defaultdb?sslmode=disable``."""
    return db.serve_sql()


@pytest.fixture
def pg_server(db: DB, pg_url: str) -> PGServer:
    node = db.node
    assert node is not None and node.sql_server is not None
    return node.sql_server
