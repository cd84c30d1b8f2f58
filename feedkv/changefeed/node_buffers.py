"""Node-wide limits on what changefeeds buffer: memory, then disk, then ``stalled``.

The CDC design bounds what a node's changefeeds hold for sinks that are slower than
their feeds (``feedkv start --max-changefeed-memory 512MiB
--max-disk-changefeed-storage 4GiB``): records waiting for their sink, across every
changefeed of the node, stay within the memory limit; past it they spill to files on disk,
up to the disk limit; past that, a changefeed whose sink cannot take more waits a little
(:attr:`NodeBuffers.stall_after_s`) and then *stalls*: it tears down its feed (which
frees the rangefeed's buffers and stops reading), shows ``stalled`` in its job's
``running_status`` and in ``changefeed_stalled``, and restarts from its high-water mark
once its sink's backlog has cleared. Nothing is lost: everything after the high-water
mark is read again.

:class:`ByteBudget` is one limit (memory or disk) shared by the sinks of a node
(:class:`~feedkv.changefeed.sink.BatchingSink` takes from it as it seals a batch, gives
back as the batch is delivered or dropped). A sealed batch's bytes are taken on one
thread and given back on the sender's, so there is no context manager: the sink ties
each acquisition to its batch. :class:`NodeBuffers` holds the node's two budgets and
where spilled batches go.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from feedkv.errors import InvariantViolation

__all__ = [
    "DEFAULT_DISK",
    "DEFAULT_MEMORY",
    "STALL_AFTER_S",
    "BufferCounts",
    "ByteBudget",
    "NodeBuffers",
]

DEFAULT_MEMORY = 512 << 20  # --max-changefeed-memory, as the design's example
DEFAULT_DISK = 4 << 30  # --max-disk-changefeed-storage
STALL_AFTER_S = 5.0  # how long a full sink waits for room before its changefeed stalls


class ByteBudget:
    """``limit`` bytes shared by many holders; thread-safe."""

    def __init__(self, name: str, limit: int) -> None:
        if limit < 0:
            raise InvariantViolation(f"a {name} budget cannot be negative: {limit}")
        self.name = name
        self.limit = limit
        self._used = 0
        self._peak = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    @property
    def peak(self) -> int:
        """The most ever held at once."""
        return self._peak

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes if they fit; never waits."""
        with self._lock:
            if self._used + n > self.limit:
                return False
            self._used += n
            self._peak = max(self._peak, self._used)
            return True

    def release(self, n: int) -> None:
        with self._lock:
            if n > self._used:
                raise InvariantViolation(
                    f"{self.name} budget: releasing {n} bytes but only {self._used} are held"
                )
            self._used -= n


class BufferCounts:
    """Totals of what went through the node's changefeed buffers, for the metrics
    CockroachDB operators know (``changefeed.buffer_entries.in`` ...): entries in (taken
    by a sink), out (handed to the sink's wire), released (their buffer given back,
    delivered or dropped), and the memory bytes acquired and released. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries_in = 0
        self.entries_out = 0
        self.entries_released = 0
        self.mem_acquired = 0
        self.mem_released = 0

    def add(
        self,
        *,
        entries_in: int = 0,
        entries_out: int = 0,
        entries_released: int = 0,
        mem_acquired: int = 0,
        mem_released: int = 0,
    ) -> None:
        with self._lock:
            self.entries_in += entries_in
            self.entries_out += entries_out
            self.entries_released += entries_released
            self.mem_acquired += mem_acquired
            self.mem_released += mem_released


@dataclass
class NodeBuffers:
    """A node's changefeed buffer limits: ``memory`` and ``disk`` budgets shared by its
    sinks, spilled batches under ``spill_dir`` (``None``: the system's temporary
    directory), and ``stall_after_s``, how long a sink with no room waits before its
    changefeed stalls."""

    memory: ByteBudget
    disk: ByteBudget
    spill_dir: Path | None = None
    stall_after_s: float = STALL_AFTER_S
    counts: BufferCounts = field(default_factory=BufferCounts)
    _made: bool = field(default=False, repr=False)

    @classmethod
    def of(
        cls,
        memory: int = DEFAULT_MEMORY,
        disk: int = DEFAULT_DISK,
        *,
        spill_dir: Path | None = None,
        stall_after_s: float = STALL_AFTER_S,
    ) -> NodeBuffers:
        return cls(
            ByteBudget("changefeed memory", memory),
            ByteBudget("changefeed disk", disk),
            spill_dir,
            stall_after_s,
        )

    def spill_path(self) -> str | None:
        """The directory spilled batches go to, made on first use."""
        if self.spill_dir is None:
            return None
        if not self._made:
            self.spill_dir.mkdir(parents=True, exist_ok=True)
            self._made = True
        return str(self.spill_dir)
