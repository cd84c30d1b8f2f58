"""Fixtures for the SQL layer: a real node on disk, reached in-process or over gRPC."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import Store, StoreConfig
from feedkv.server.node import Node
from feedkv.testing.certs import shared_certs_dir


@pytest.fixture
def store_config() -> StoreConfig:
    """Fast side loops, no fsync."""
    return StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)


@pytest.fixture
def db(tmp_path: Path, store_config: StoreConfig) -> Iterator[DB]:
    """An embedded node on a real LMDB store in ``tmp_path``, running its changefeed jobs
    on threads."""
    # NB: on the default (Spark) runner a job's first batch waits for the JVM and Spark to
    # start: seconds of CPU, so 30-60 s on two cores loaded by other test workers, which
    # outran the deadlines of the changefeeds these tests make (and a job made only to
    # check a privilege held its node's close until Spark was up). Both runners read the
    # same spans (``Target.span``); tests/spark runs the Spark runner on a shared session.
    database = feedkv.connect(tmp_path / "store", config=store_config, changefeed_runner="thread")
    yield database
    database.close()


@pytest.fixture(params=["embedded", "grpc"])
def any_db_and_store(
    request: pytest.FixtureRequest, tmp_path: Path, store_config: StoreConfig
) -> Iterator[tuple[DB, Store]]:
    """The same store reached in-process, or over gRPC on loopback from a node in this
    process (secure: TLS, the client as root with its certificate): SQL must behave the
    same either way. With the store itself, to look at (its lock table)."""
    if request.param == "embedded":
        database = feedkv.connect(tmp_path / "store", config=store_config)
        assert database.node is not None
        yield database, database.node.store
        database.close()
        return
    certs = shared_certs_dir()
    with Node(
        tmp_path / "store", listen="127.0.0.1:0", config=store_config, certs_dir=certs
    ) as node:
        database = feedkv.connect(node.url, certs_dir=certs)
        yield database, node.store
        database.close()


@pytest.fixture
def any_db(any_db_and_store: tuple[DB, Store]) -> DB:
    """:func:`any_db_and_store`'s client."""
    return any_db_and_store[0]


@pytest.fixture
def count_batches() -> Callable[[DB], list[int]]:
    """``count_batches(db)`` counts the batches ``db`` sends from then on (the real
    transport still sends them): ``[count]``."""

    def start(db: DB) -> list[int]:
        count = [0]
        # NB: a client of a server sends through its gateway node's transport (every
        # range of a single node is there)
        transport = getattr(db.transport, "gateway", db.transport)
        send = transport.send

        def counting(batch):  # type: ignore[no-untyped-def]
            count[0] += 1
            return send(batch)

        transport.send = counting  # type: ignore[method-assign]
        return count

    return start
