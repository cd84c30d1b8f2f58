"""A real local Spark session, shared by the whole test session (it takes seconds to
start), and a listening node on a real store for Spark's workers to reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.testing.node_process import NodeProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from feedkv.spark.session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture
def db(spark: Any, tmp_path: Path) -> Iterator[DB]:
    """An embedded store that serves gRPC on loopback for Spark, closing 200 ms behind.
    Its Spark jobs run on the shared session (``spark``), which puts its tests on the
    Spark worker (tests/conftest.py): one JVM in the run's workers, not one in each
    worker that runs one of them."""
    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    database = feedkv.connect(tmp_path / "store", config=config)
    database.serving_url()
    yield database
    database.close()


@pytest.fixture
def nodes() -> Iterator[list[NodeProcess]]:
    """The test's node processes; any still running at the end are killed, with what
    they started."""
    started: list[NodeProcess] = []
    yield started
    for node in started:
        if node.process.poll() is None:
            node.kill_all()
