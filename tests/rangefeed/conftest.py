"""Fixtures for rangefeeds: an embedded node with fast closed timestamps and pusher.
Helpers the tests import are in ``feed_helpers``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.server.node import Node
from feedkv.testing.certs import shared_certs_dir


@pytest.fixture
def store_config() -> StoreConfig:
    """Closed timestamps 20 ms behind now, closed every 10 ms; txns expire after 200 ms."""
    return StoreConfig(
        closed_ts_target_ns=20_000_000,
        closed_ts_interval_s=0.01,
        txn_liveness_ns=200_000_000,
        push_poll_s=0.01,
        sync=False,
    )


@pytest.fixture
def feed_config() -> FeedConfig:
    """Transactions older than 100 ms are pushed every 20 ms."""
    return FeedConfig(push_age_ns=100_000_000, push_interval_s=0.02)


@pytest.fixture(params=["embedded", "grpc"])
def node_and_db(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    store_config: StoreConfig,
    feed_config: FeedConfig,
) -> Iterator[tuple[Node, DB]]:
    """A node and a client of it: in-process, or over gRPC on loopback (secure: TLS,
    the client as root with its certificate)."""
    if request.param == "embedded":
        database = feedkv.connect(tmp_path / "store", config=store_config, feed_config=feed_config)
        assert database.node is not None
        yield database.node, database
        database.close()
        return
    certs = shared_certs_dir()
    with Node(
        tmp_path / "store",
        listen="127.0.0.1:0",
        config=store_config,
        feed_config=feed_config,
        certs_dir=certs,
    ) as node:
        database = feedkv.connect(node.url, certs_dir=certs)
        yield node, database
        database.close()


@pytest.fixture
def db(node_and_db: tuple[Node, DB]) -> DB:
    return node_and_db[1]


@pytest.fixture
def store(node_and_db: tuple[Node, DB]) -> Store:
    return node_and_db[0].store


@pytest.fixture
def feeds(node_and_db: tuple[Node, DB]) -> StoreFeeds:
    return node_and_db[0].feeds
