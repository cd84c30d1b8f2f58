"""Fixtures for the KV layer: a real store on disk, a manual clock, and a way to wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.db import LocalTransport
from feedkv.kv.store import Store, StoreConfig
from feedkv.util.hlc import ManualClock

DEADLINE_S = 10.0


def wait_until(predicate: Callable[[], bool], timeout: float = DEADLINE_S) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; returns its last
    answer so callers can ``assert wait_until(...)``."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return predicate()
        pause.wait(0.01)


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., bool]:
    """:func:`wait_until`, handed to test modules (conftest modules are not importable)."""
    return wait_until


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def config() -> StoreConfig:
    """Fast side loops, no fsync; tests that need other knobs override this fixture."""
    return StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)


@pytest.fixture
def db(tmp_path: Path, clock: ManualClock, config: StoreConfig) -> Iterator[DB]:
    """An embedded node on a real LMDB store in ``tmp_path``, driven by a manual clock."""
    database = feedkv.connect(tmp_path / "store", clock=clock, config=config)
    yield database
    database.close()


@pytest.fixture
def store(db: DB) -> Store:
    """The store inside the embedded ``db``."""
    transport = db.transport
    assert isinstance(transport, LocalTransport)
    return transport.store
