"""Writes proposed and not yet applied, seen by the commands evaluated after them.

A replicated range's leaseholder evaluates a command into a write batch, proposes the
batch to the range's Raft log, and every replica applies it once it commits (the
CockroachDB design's proposer-evaluated KV). Commands are evaluated one after another on
the store's commit thread while earlier ones are still in flight, so each must read the
applied state *with every earlier proposal's writes on top*, or a pipelined second write
to a key would miss the first.

- :class:`Overlay` holds the writes of the proposals in flight, each tagged with its log
  index, and forgets them as their entries apply (the engine then holds them) or all at
  once when the leaseholder loses its lease (the proposals' fates are then unknown).
- :class:`OverlayView` is the :class:`~feedkv.storage.engine.ReadWriter` one command is
  evaluated against: reads see an engine reader, the overlay on top, and the command's
  own writes on top of that; writes go to the view's :class:`WriteBatch` only.

A key's value ``None`` in a layer is a deletion: it hides the key beneath it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator

from feedkv.storage.engine import Reader, WriteBatch

__all__ = ["Overlay", "OverlayView"]


class _Layer:
    """Puts and deletes by sub-database, with each database's keys kept sorted."""

    __slots__ = ("_keys", "_values")

    def __init__(self) -> None:
        self._values: dict[str, dict[bytes, bytes | None]] = {}
        self._keys: dict[str, list[bytes]] = {}

    def set(self, db: str, key: bytes, value: bytes | None) -> None:
        values = self._values.setdefault(db, {})
        if key not in values:
            bisect.insort(self._keys.setdefault(db, []), key)
        values[key] = value

    def remove(self, db: str, key: bytes) -> None:
        values = self._values.get(db)
        if values is None or key not in values:
            return
        del values[key]
        keys = self._keys[db]
        del keys[bisect.bisect_left(keys, key)]

    def lookup(self, db: str, key: bytes) -> tuple[bool, bytes | None]:
        """``(True, value)`` when this layer decides ``key`` (``None``: deleted)."""
        values = self._values.get(db)
        if values is None or key not in values:
            return False, None
        return True, values[key]

    def over(
        self,
        db: str,
        below: Iterator[tuple[bytes, bytes]],
        start: bytes,
        end: bytes | None,
        reverse: bool,
    ) -> Iterator[tuple[bytes, bytes]]:
        """The entries of ``below`` in ``[start, end)`` with this layer on top, in the
        same order as ``below``."""
        keys = self._keys.get(db)
        if not keys:
            yield from below
            return
        values = self._values[db]
        lo = bisect.bisect_left(keys, start)
        hi = len(keys) if end is None else bisect.bisect_left(keys, end)
        mine = reversed(keys[lo:hi]) if reverse else iter(keys[lo:hi])

        def before(a: bytes, b: bytes) -> bool:
            return a > b if reverse else a < b

        upper = next(mine, None)
        for key, value in below:
            while upper is not None and before(upper, key):
                if (written := values[upper]) is not None:
                    yield upper, written
                upper = next(mine, None)
            if upper == key:
                if (written := values[upper]) is not None:
                    yield upper, written
                upper = next(mine, None)
                continue
            yield key, value
        while upper is not None:
            if (written := values[upper]) is not None:
                yield upper, written
            upper = next(mine, None)


class Overlay:
    """The writes of one range's proposals in flight, by log index (see the module)."""

    __slots__ = ("_by_index", "_layer", "_writer")

    def __init__(self) -> None:
        self._layer = _Layer()
        self._writer: dict[tuple[str, bytes], int] = {}  # the newest index writing a key
        self._by_index: dict[int, list[tuple[str, bytes]]] = {}

    def __len__(self) -> int:
        """How many proposals' writes it holds."""
        return len(self._by_index)

    def add(self, index: int, batch: WriteBatch) -> None:
        """The writes of the proposal at log ``index``, in flight from now on."""
        written = self._by_index.setdefault(index, [])
        for db, key, value in batch:
            self._layer.set(db, key, value)
            self._writer[db, key] = index
            written.append((db, key))

    def applied(self, index: int) -> None:
        """Every entry up to ``index`` is applied: forget their writes (a key written
        again by a later proposal keeps that proposal's value)."""
        for done in [i for i in self._by_index if i <= index]:
            for db, key in self._by_index.pop(done):
                if self._writer.get((db, key)) == done:
                    del self._writer[db, key]
                    self._layer.remove(db, key)

    def clear(self) -> None:
        """Forget every proposal (the lease is gone; their entries apply, or not, through
        the log as on any other replica)."""
        self._layer = _Layer()
        self._writer.clear()
        self._by_index.clear()


class OverlayView:
    """One command's :class:`~feedkv.storage.engine.ReadWriter`: ``base`` under
    ``overlay`` under the command's own writes, which :attr:`batch` collects."""

    __slots__ = ("_base", "_mine", "_overlay", "batch")

    def __init__(self, base: Reader, overlay: Overlay) -> None:
        self._base = base
        self._overlay = overlay._layer
        self._mine = _Layer()
        self.batch = WriteBatch()

    def get(self, db: str, key: bytes) -> bytes | None:
        for layer in (self._mine, self._overlay):
            found, value = layer.lookup(db, key)
            if found:
                return value
        return self._base.get(db, key)

    def scan(
        self, db: str, start: bytes, end: bytes | None = None, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        entries = self._base.scan(db, start, end, reverse=reverse)
        entries = self._overlay.over(db, entries, start, end, reverse)
        return self._mine.over(db, entries, start, end, reverse)

    def seek(self, db: str, key: bytes) -> tuple[bytes, bytes] | None:
        return next(self.scan(db, key), None)

    def seek_before(self, db: str, key: bytes) -> tuple[bytes, bytes] | None:
        return next(self.scan(db, b"", key, reverse=True), None)

    def count(self, db: str, start: bytes, end: bytes | None, limit: int) -> int:
        return sum(1 for _ in itertools.islice(self.scan(db, start, end), limit))

    def entries(self, db: str) -> int:
        """The base's count: an estimate that leaves the writes in flight out."""
        return self._base.entries(db)

    def put(self, db: str, key: bytes, value: bytes) -> None:
        self._mine.set(db, key, value)
        self.batch.put(db, key, value)

    def put_many(
        self, db: str, items: Iterable[tuple[bytes, bytes]], *, append: bool = False
    ) -> None:
        items = list(items)  # NB: read twice
        for key, value in items:
            self._mine.set(db, key, value)
        self.batch.put_many(db, items)

    def delete(self, db: str, key: bytes) -> bool:
        existed = self.get(db, key) is not None
        self._mine.set(db, key, None)
        self.batch.delete(db, key)
        return existed

    def delete_many(self, db: str, keys: Iterable[bytes]) -> None:
        keys = list(keys)  # NB: read twice
        for key in keys:
            self._mine.set(db, key, None)
        self.batch.delete_many(db, keys)
