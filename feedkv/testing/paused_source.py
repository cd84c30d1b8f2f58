"""A feedkv streaming source whose first task pauses mid-read, for fault tests.

``format("feedkv_paused")`` is the ``feedkv`` source with one more option,
``pause_dir``: the first task whose first Arrow batch is full (more rows may follow),
once it has handed Spark that batch, creates ``<pause_dir>/reading-<random>`` and waits (up to
:data:`PAUSE_TIMEOUT_S`) until ``<pause_dir>/go`` exists, then reads the rest. A test so
learns that a task is in the middle of its read (its client has fetched the first
pages, not the others), does what it wants to that moment (kill a node), and lets it go
on. Tasks that start after ``go`` exists never pause. The directory must be one the
Spark workers share with the test (a local master's).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from feedkv.spark.rows import BATCH_ROWS
from feedkv.spark.source import FeedKVDataSource, SourceOptions, _StreamReader
from feedkv.sql.descriptor import TableDescriptor
from feedkv.testing.waiting import wait_until

__all__ = ["PAUSE_TIMEOUT_S", "PausedFeedKVDataSource"]

PAUSE_TIMEOUT_S = 120.0
GO = "go"


class PausedFeedKVDataSource(FeedKVDataSource):
    def __init__(self, options: dict[str, str]) -> None:
        rest = dict(options)
        self.pause_dir = Path(rest.pop("pause_dir"))
        super().__init__(rest)

    @classmethod
    def name(cls) -> str:
        return "feedkv_paused"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        super().streamReader(schema)  # the options' checks
        return _PausedStreamReader(self.feed_options, self._descriptor(), self.pause_dir)


class _PausedStreamReader(_StreamReader):
    def __init__(self, options: SourceOptions, desc: TableDescriptor, pause_dir: Path) -> None:
        super().__init__(options, desc)
        self.pause_dir = pause_dir

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        batches = iter(super().read(partition))
        first = next(batches, None)
        if first is None:
            return
        yield first
        go = self.pause_dir / GO
        # NB: Spark asks for the second batch only now: the client has not fetched it
        if first.num_rows == BATCH_ROWS and not go.exists():
            (self.pause_dir / f"reading-{uuid.uuid4().hex}").touch()
            wait_until(go.exists, timeout_s=PAUSE_TIMEOUT_S, what=f"{go} to exist")
        yield from batches
