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

**Across processes.** On the Spark runner the sinks run in Spark's Python workers, not
in the node process, so a node shares its buffers (:meth:`NodeBuffers.share`, done when
it starts): both budgets become columns of a
:class:`~feedkv.changefeed.buffer_ledger.BufferLedger` under the spill directory, which
the node's own sinks and every Spark task's sink take from alike.
:meth:`NodeBuffers.limits` is what a Spark job hands its tasks (a small picklable
:class:`BufferLimits`); :meth:`NodeBuffers.attach` opens the same buffers in a worker. A
task whose sink stalls reports it here (:meth:`NodeBuffers.report_stall`, a small file
per job under ``stalls/``) so the job on the driver shows ``stalled`` while the task
waits for its sink's backlog (see :mod:`feedkv.spark.changefeed_job`).

NB: the records a Spark job reads are not buffered on the driver: its source follows
only the resolved timestamp (a rangefeed with no values), and each micro-batch's tasks
read their window from the store and stream it to the sink a block at a time. So the
sinks' sealed batches, in the workers, are where a slow sink's records pile up, and
where the node's limits are kept.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from feedkv.changefeed.buffer_ledger import (
    COUNTS,
    DISK,
    MEMORY,
    BufferLedger,
    SharedByteBudget,
    sweep_spills,
)
from feedkv.errors import InvalidArgumentError, InvariantViolation

__all__ = [
    "DEFAULT_DISK",
    "DEFAULT_MEMORY",
    "REAP_S",
    "ROOM_SHARE",
    "STALL_AFTER_S",
    "Budget",
    "BufferCounts",
    "BufferLimits",
    "ByteBudget",
    "NodeBuffers",
    "Stalled",
]

DEFAULT_MEMORY = 512 << 20  # --max-changefeed-memory, as the design's example
DEFAULT_DISK = 4 << 30  # --max-disk-changefeed-storage
STALL_AFTER_S = 5.0  # how long a full sink waits for room before its changefeed stalls
ROOM_SHARE = 16  # a stalled changefeed starts again once this part of a budget is free
REAP_S = 1.0  # how often a running Spark job gives back what its dead workers held


class Budget(Protocol):
    """``limit`` bytes shared by many holders: in one process (:class:`ByteBudget`) or
    across the node's processes (:class:`~feedkv.changefeed.buffer_ledger.SharedByteBudget`)."""

    name: str
    limit: int

    @property
    def used(self) -> int: ...

    @property
    def peak(self) -> int: ...

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes if they fit; never waits."""
        ...

    def release(self, n: int) -> None: ...


class ByteBudget:
    """``limit`` bytes shared by many holders of one process; thread-safe."""

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
    """Totals of what went through one process's changefeed buffers, for the metrics
    CockroachDB operators know (``changefeed.buffer_entries.in`` ...): entries in (taken
    by a sink), out (handed to the sink's wire), released (their buffer given back,
    delivered or dropped), and the memory bytes acquired and released. Thread-safe.

    In another process of the node (a Spark worker, :meth:`NodeBuffers.attach`) the
    totals live in that process's slot of the node's ledger and :meth:`add` counts them
    there, in place (:meth:`~feedkv.changefeed.buffer_ledger.BufferLedger.add_count`):
    the node's metrics read every worker's totals as they are, and a worker killed at
    any point has left every record it buffered counted."""

    def __init__(self, ledger: BufferLedger | None = None) -> None:
        self._lock = threading.Lock()
        self._totals = [0] * len(COUNTS)
        self._ledger = ledger

    def add(
        self,
        *,
        entries_in: int = 0,
        entries_out: int = 0,
        entries_released: int = 0,
        mem_acquired: int = 0,
        mem_released: int = 0,
    ) -> None:
        ledger = self._ledger
        if ledger is None:
            with self._lock:
                totals = self._totals
                totals[0] += entries_in
                totals[1] += entries_out
                totals[2] += entries_released
                totals[3] += mem_acquired
                totals[4] += mem_released
            return
        # NB: a sink counts each row it takes: one cell's add per total that moves
        if entries_in:
            ledger.add_count(0, entries_in)
        if entries_out:
            ledger.add_count(1, entries_out)
        if entries_released:
            ledger.add_count(2, entries_released)
        if mem_acquired:
            ledger.add_count(3, mem_acquired)
        if mem_released:
            ledger.add_count(4, mem_released)

    @property
    def shared(self) -> bool:
        """Whether the totals are counted in the node's ledger (not in this object)."""
        return self._ledger is not None

    def totals(self) -> tuple[int, ...]:
        """Every total, in the order of :data:`~feedkv.changefeed.buffer_ledger.COUNTS`."""
        if self._ledger is not None:
            return self._ledger.own_counts()
        with self._lock:
            return tuple(self._totals)

    @property
    def entries_in(self) -> int:
        return self.totals()[0]

    @property
    def entries_out(self) -> int:
        return self.totals()[1]

    @property
    def entries_released(self) -> int:
        return self.totals()[2]

    @property
    def mem_acquired(self) -> int:
        return self.totals()[3]

    @property
    def mem_released(self) -> int:
        return self.totals()[4]


@dataclass
class NodeBuffers:
    """A node's changefeed buffer limits: ``memory`` and ``disk`` budgets shared by its
    sinks, spilled batches under ``spill_dir`` (``None``: the system's temporary
    directory), and ``stall_after_s``, how long a sink with no room waits before its
    changefeed stalls."""

    memory: Budget
    disk: Budget
    spill_dir: Path | None = None
    stall_after_s: float = STALL_AFTER_S
    counts: BufferCounts = field(default_factory=BufferCounts)
    _made: bool = field(default=False, repr=False)
    _ledger: BufferLedger | None = field(default=None, repr=False)
    _reaped_at: float = field(default=-REAP_S, repr=False)  # monotonic seconds

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

    def count(self, name: str) -> int:
        """One of the totals of what went through the node's buffers
        (:class:`BufferCounts`): this process's, and when they are shared, every other
        process's as counted in the ledger (a worker killed meanwhile included)."""
        if name not in COUNTS:
            raise InvariantViolation(f"no changefeed buffer total {name!r}")
        return self.totals()[COUNTS.index(name)]

    def totals(self) -> tuple[int, ...]:
        """Every total of :meth:`count`, in the order of
        :data:`~feedkv.changefeed.buffer_ledger.COUNTS`, from one read of the ledger."""
        if self._ledger is None:
            return self.counts.totals()
        counted = self._ledger.counted()
        if self.counts.shared:
            return counted
        return tuple(a + b for a, b in zip(counted, self.counts.totals(), strict=True))

    def reap(self) -> None:
        """Give back what processes of the node that are gone held, and remove their
        spill files (see :mod:`~feedkv.changefeed.buffer_ledger`), at most every
        :data:`REAP_S` seconds; nothing to do when the buffers are not shared. A job
        whose workers may be killed calls it as it runs."""
        now = time.monotonic()
        if self._ledger is None or now - self._reaped_at < REAP_S:
            return
        self._reaped_at = now
        self._ledger.reap()

    def has_room(self, needed: int = 0) -> bool:
        """Whether ``needed`` bytes, and at least a sixteenth of the memory or of the
        disk, are free in one of them: room enough for a stalled changefeed to start
        again (less, and it would stall again at once)."""
        return any(
            budget.limit > 0
            and budget.limit - budget.used >= max(needed, budget.limit // ROOM_SHARE)
            for budget in (self.memory, self.disk)
        )

    # Shared with the node's other processes.

    def share(self, spill_dir: Path) -> None:
        """Make the two budgets the node's across its processes (a new ledger under
        ``spill_dir``, which becomes the spill directory unless one was set). Done once,
        when the node starts, before anything is held."""
        if self._ledger is not None:
            return
        if self.memory.used or self.disk.used:
            raise InvariantViolation("the node's changefeed buffers are shared before use")
        if self.spill_dir is None:
            self.spill_dir = spill_dir
        directory = Path(self.spill_dir)
        ledger = BufferLedger.create(directory / "ledger")
        self._ledger = ledger
        self.memory = SharedByteBudget(self.memory.name, ledger, MEMORY, self.memory.limit)
        self.disk = SharedByteBudget(self.disk.name, ledger, DISK, self.disk.limit)
        for stale in (directory / "stalls").glob("*.json"):
            stale.unlink(missing_ok=True)
        sweep_spills(directory)  # an earlier run's, or its killed workers'

    def limits(self) -> BufferLimits | None:
        """What another process of the node needs to hold records within these buffers
        (``None``: they are not shared, see :meth:`share`)."""
        if self._ledger is None or self.spill_dir is None:
            return None
        return BufferLimits(
            str(self.spill_dir), self.memory.limit, self.disk.limit, self.stall_after_s
        )

    @classmethod
    def attach(cls, limits: BufferLimits) -> NodeBuffers:
        """The node's shared buffers, opened in another of its processes (a Spark
        worker); one per process and directory, so every task of a worker shares it.
        Its totals are counted in the ledger, for the node's metrics."""
        # NB: keyed by pid too: a worker forked from a process that attached counts
        # its own totals, not its parent's
        key = (os.getpid(), limits)
        with _ATTACHED_LOCK:
            found = _ATTACHED.get(key)
            if found is None:
                directory = Path(limits.directory)
                ledger = BufferLedger(directory / "ledger")
                found = _ATTACHED[key] = cls(
                    SharedByteBudget("changefeed memory", ledger, MEMORY, limits.memory),
                    SharedByteBudget("changefeed disk", ledger, DISK, limits.disk),
                    directory,
                    limits.stall_after_s,
                    BufferCounts(ledger),
                    _ledger=ledger,
                )
            return found

    # Stalls of jobs whose sinks run in other processes.

    def report_stall(self, job_id: int, why: str, since_ns: int | None = None) -> None:
        """Record that job ``job_id``'s sink stalled (from the process it runs in), for
        the job's status on the node. Written whole, then renamed: a reader never sees
        half of it."""
        folder = self._stalls()
        report = Stalled(why, since_ns if since_ns is not None else time.time_ns())
        part = folder / f"{job_id}.json.{os.getpid()}.{threading.get_ident()}"
        part.write_text(json.dumps(asdict(report)))
        part.replace(folder / f"{job_id}.json")

    def stall_of(self, job_id: int) -> Stalled | None:
        """The stall reported for job ``job_id`` (``None``: none is)."""
        if self._ledger is None:
            return None
        try:
            data = json.loads((self._stalls() / f"{job_id}.json").read_text())
        except FileNotFoundError:
            return None
        return Stalled(str(data["why"]), int(data["since_ns"]))

    def clear_stall(self, job_id: int) -> None:
        if self._ledger is not None:
            (self._stalls() / f"{job_id}.json").unlink(missing_ok=True)

    def _stalls(self) -> Path:
        if self.spill_dir is None:
            raise InvariantViolation("the node's changefeed buffers are not shared")
        folder = Path(self.spill_dir) / "stalls"
        folder.mkdir(parents=True, exist_ok=True)
        return folder


@dataclass(frozen=True, slots=True)
class Stalled:
    """Why a feed stalled (the sink's full buffers) and since when (wall nanoseconds)."""

    why: str
    since_ns: int

    def status(self) -> str:
        """The job's ``running_status`` while it is stalled."""
        when = datetime.datetime.fromtimestamp(self.since_ns / 1e9, tz=datetime.UTC)
        return (
            f"stalled since {when:%Y-%m-%d %H:%M:%S} UTC: {self.why}; its feed is torn "
            "down until the sink's backlog clears, then it restarts from its high-water mark"
        )


@dataclass(frozen=True)
class BufferLimits:
    """The node's shared buffers as another of its processes opens them
    (:meth:`NodeBuffers.attach`): the spill ``directory`` (which holds the ledger), the
    two limits and how long a sink with no room waits before its changefeed stalls."""

    directory: str
    memory: int
    disk: int
    stall_after_s: float = STALL_AFTER_S

    def to_json(self) -> str:
        return json.dumps(
            {
                "directory": self.directory,
                "memory": self.memory,
                "disk": self.disk,
                "stall_after_s": self.stall_after_s,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> BufferLimits:
        try:
            data = json.loads(text)
            limits = cls(
                str(data["directory"]),
                int(data["memory"]),
                int(data["disk"]),
                float(data["stall_after_s"]),
            )
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            raise InvalidArgumentError(f"bad changefeed buffer limits {text!r}: {exc}") from None
        if min(limits.memory, limits.disk, limits.stall_after_s) < 0:
            raise InvalidArgumentError(f"bad changefeed buffer limits {text!r}: a negative limit")
        return limits


_ATTACHED: dict[tuple[int, BufferLimits], NodeBuffers] = {}
_ATTACHED_LOCK = threading.Lock()
