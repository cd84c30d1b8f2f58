from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import MVCC_DATABASES


@pytest.fixture
def mvcc_engine(tmp_path: Path) -> Iterator[LMDBEngine]:
    """A real LMDB engine on disk holding the MVCC sub-databases."""
    engine = LMDBEngine(tmp_path / "store", databases=MVCC_DATABASES)
    yield engine
    engine.close()
