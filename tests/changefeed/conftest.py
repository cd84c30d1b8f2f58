"""Fixtures for changefeeds: a real node on disk with fast closed timestamps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig


@pytest.fixture
def store_config() -> StoreConfig:
    """Fast side loops (checkpoints every few ms), no fsync."""
    return StoreConfig(
        closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
    )


@pytest.fixture
def db(tmp_path: Path, store_config: StoreConfig) -> Iterator[DB]:
    """An embedded node on a real LMDB store in ``tmp_path``."""
    database = feedkv.connect(tmp_path / "store", config=store_config, changefeed_runner="thread")
    yield database
    database.close()
