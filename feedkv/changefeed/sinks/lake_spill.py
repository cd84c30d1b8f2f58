"""The rows a lake sink holds until their window is committed: in memory up to a budget,
then in Parquet files on local disk.

A window may be far larger than memory (an initial scan's window holds the whole
table; a feed catching up after a pause holds everything since). Once the rows held in
memory pass ``memory_limit`` bytes, they are written out, one Parquet file per topic
and schema (the schema's metadata, which says the rows' primary key and descriptor
version, goes with them), and only the files' names stay. :meth:`SpilledRows.take`
reads them back in the order they came. The files live in a private temporary
directory that :meth:`SpilledRows.close` removes; nothing in them outlives the sink (a
restarted changefeed emits the rows again).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

from feedkv.changefeed.sink import SinkError

__all__ = ["DEFAULT_MEMORY_LIMIT", "SpilledRows"]

DEFAULT_MEMORY_LIMIT = 256 << 20


class SpilledRows:
    """Record batches by topic, in arrival order, spilled to disk past ``memory_limit``
    bytes. One thread at a time (the sink's)."""

    def __init__(self, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        self.memory_limit = memory_limit
        # Per topic, in order: a batch in memory, or the path of a file of spilled ones.
        self._items: dict[str, list[pa.RecordBatch | str]] = {}
        self._in_memory = 0
        self._dir: str | None = None
        self._files = 0

    @property
    def in_memory(self) -> int:
        """The bytes of the batches held in memory."""
        return self._in_memory

    @property
    def spilled_files(self) -> int:
        """How many files on disk hold rows not taken yet."""
        return sum(isinstance(i, str) for items in self._items.values() for i in items)

    def __bool__(self) -> bool:
        return any(self._items.values())

    def add(self, topic: str, batch: pa.RecordBatch) -> None:
        """Hold ``batch``; write every batch held in memory to disk when they pass the
        limit. Raises :class:`SinkError` when the disk refuses them."""
        self._items.setdefault(topic, []).append(batch)
        self._in_memory += batch.nbytes
        if self._in_memory > self.memory_limit:
            self._spill()

    def take(self) -> dict[str, list[pa.RecordBatch]]:
        """Every batch held, by topic, in arrival order (read back from disk); holds
        none afterwards."""
        taken: dict[str, list[pa.RecordBatch]] = {}
        try:
            for topic, items in self._items.items():
                batches = taken.setdefault(topic, [])
                for item in items:
                    if isinstance(item, str):
                        batches.extend(pq.read_table(item).to_batches())
                    else:
                        batches.append(item)
        except OSError as exc:
            raise SinkError(f"cannot read the lake rows spilled to {self._dir}: {exc}") from exc
        self.clear()
        return taken

    def clear(self) -> None:
        """Drop every row held (and the files)."""
        for items in self._items.values():
            for item in items:
                if isinstance(item, str):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(item)
        self._items.clear()
        self._in_memory = 0

    def close(self) -> None:
        self.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _spill(self) -> None:
        """Each topic's batches in memory as Parquet files (one per run of batches of
        one schema), each in its batches' place in the order."""
        try:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="feedkv-lake-spill-")
            for topic, items in self._items.items():
                kept: list[pa.RecordBatch | str] = []
                run: list[pa.RecordBatch] = []
                for item in items:
                    if isinstance(item, str):
                        if run:
                            kept.append(self._write(self._dir, run))
                            run = []
                        kept.append(item)
                    elif run and not item.schema.equals(run[0].schema, check_metadata=True):
                        kept.append(self._write(self._dir, run))
                        run = [item]
                    else:
                        run.append(item)
                if run:
                    kept.append(self._write(self._dir, run))
                self._items[topic] = kept
        except OSError as exc:
            raise SinkError(f"cannot spill lake rows to {self._dir}: {exc}") from exc
        self._in_memory = 0

    def _write(self, folder: str, batches: list[pa.RecordBatch]) -> str:
        path = os.path.join(folder, f"{self._files:08d}.parquet")
        self._files += 1
        pq.write_table(pa.Table.from_batches(batches), path)
        return path
