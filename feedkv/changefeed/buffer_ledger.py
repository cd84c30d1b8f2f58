"""The node's changefeed buffer budgets, shared by every process that holds its records.

A node's limits (``--max-changefeed-memory``, ``--max-disk-changefeed-storage``) cover
the records *all* its changefeeds hold for their sinks. On the thread runner those sinks
live in the node process; on the Spark runner they live in Spark's Python workers,
other processes on the same machine (local Spark), each task writing its part of a
micro-batch through a sink of its own. So the budgets cannot be counters in one
process's memory: they are a :class:`BufferLedger`, a small file in the node's store
(``STORE/changefeed-spill/ledger``) that every holder updates under an exclusive
``flock``.

The file is a header (the peaks ever held, and the totals of processes gone) and a
table of slots, one per process that holds bytes: its pid, its start time (so a reused
pid is not mistaken for it), the bytes it holds in memory and on disk, and its totals of
what went through its buffers (:data:`COUNTS`, the metrics CockroachDB names
``changefeed.buffer_entries.in`` ...). What the node holds is the sum of the slots of
processes still alive: a Spark worker killed with its task (Spark destroys a worker
whose task does not stop) holds nothing once it is gone, so a crash never leaks budget.
Its totals move to the header's when its slot is emptied, so the node's counters never
go back.

**Spill files** carry their owner in their name (:func:`spill_prefix`: pid and start
time), in the ledger's directory. When a dead process's slot is emptied its files are
removed with it, and a node that starts removes every file whose owner is gone
(:func:`sweep_spills`): a killed worker's spilled batches never fill the disk.

Cost: an acquisition or release is a lock, a read of the table (16 KiB), and a write
of one slot: tens of microseconds, paid once per sealed batch (hundreds of rows), not
per row.

:class:`SharedByteBudget` is one column of the ledger (memory or disk) with the
interface of :class:`~feedkv.changefeed.node_buffers.ByteBudget`, so a sink takes from
either without knowing which.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from feedkv.errors import ExternalError, InvariantViolation

__all__ = [
    "COUNTS",
    "DISK",
    "MEMORY",
    "BufferLedger",
    "SharedByteBudget",
    "spill_prefix",
    "sweep_spills",
]

MEMORY = 0  # the ledger's columns
DISK = 1
# the totals each process keeps (feedkv.changefeed.node_buffers.BufferCounts), in order
COUNTS = ("entries_in", "entries_out", "entries_released", "mem_acquired", "mem_released")
_NO_COUNTS = (0,) * len(COUNTS)

_MAGIC = b"FKVLEDG2"
_HEADER = struct.Struct("<8sqq5q")  # magic, peak memory, peak disk, totals of the dead
_SLOT = struct.Struct("<qqqq5q")  # pid, start time, memory bytes, disk bytes, its totals
_EMPTY = (0,) * 9
SLOTS = 512  # processes that may hold bytes at once (a node's workers: a few dozen)
_SIZE = _HEADER.size + SLOTS * _SLOT.size
_SPILL = "feedkv-sink-"  # a spill file's name: _SPILL, pid, ".", start time, "-", random


def spill_prefix() -> str:
    """The start of the name of a spill file this process writes: names its owner, so
    the file is removed when the owner dies (see the module docstring)."""
    pid = os.getpid()
    return f"{_SPILL}{pid}.{_start_time(pid)}-"


def sweep_spills(directory: Path, owner: tuple[int, int] | None = None) -> int:
    """Remove the spill files in ``directory`` of ``owner`` (pid, start time), or with no
    owner given, of every process gone; how many were removed. A file whose name names
    no owner is left alone."""
    removed = 0
    pattern = f"{_SPILL}{owner[0]}.{owner[1]}-*" if owner is not None else f"{_SPILL}*"
    for path in directory.glob(pattern):
        if owner is None:
            found = _owner(path.name)
            if found is None or _alive(*found):
                continue
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def _owner(name: str) -> tuple[int, int] | None:
    pid, dot, rest = name.removeprefix(_SPILL).partition(".")
    start, dash, _ = rest.partition("-")
    if not (dot and dash and pid.isdigit() and start.isdigit()):
        return None
    return int(pid), int(start)


def _start_time(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (0: not known here), so a
    slot of a dead process whose pid was reused is not taken for the new one's."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # NB: the command name (field 2) may hold spaces and parentheses; count after it.
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else 0


def _alive(pid: int, start: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start == 0 or _start_time(pid) in (0, start)


class BufferLedger:
    """The bytes each process holds in a node's changefeed buffers, in the file at
    ``path`` (see the module docstring). Thread-safe, and safe across processes; a
    ledger opened before a ``fork`` reopens its file in the child."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd = -1
        self._pid = 0
        self._start = 0
        self._slot: int | None = None

    @classmethod
    def create(cls, path: Path) -> BufferLedger:
        """A new, empty ledger at ``path`` (the node's, when it starts: whatever an
        earlier run left is gone with its processes)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}")
        part.write_bytes(_HEADER.pack(_MAGIC, 0, 0, *_NO_COUNTS) + bytes(SLOTS * _SLOT.size))
        part.replace(path)
        return cls(path)

    # Reading.

    def used(self, column: int) -> int:
        """The bytes held in ``column`` by processes alive now."""
        with self._locked() as table:
            return sum(slot[2 + column] for slot in self._live(table))

    def peak(self, column: int) -> int:
        """The most ever held in ``column`` at once."""
        with self._locked() as table:
            return table.peaks[column]

    def reap(self) -> None:
        """Empty the slots of processes gone (their bytes, their spill files): what
        every full read of the ledger does, for a holder that reads none."""
        with self._locked() as table:
            self._live(table)

    def counts_elsewhere(self) -> tuple[int, ...]:
        """The totals (:data:`COUNTS`) of every other process that held bytes, alive or
        gone, as they last published them (:meth:`publish`)."""
        with self._locked() as table:
            self._live(table)  # NB: the dead's totals move to the header
            own = (self._pid, self._start)
            totals = list(table.retired)
            for slot in table.slots:
                if slot[0] and (slot[0], slot[1]) != own:
                    totals = [a + b for a, b in zip(totals, slot[4:], strict=True)]
            return tuple(totals)

    # Holding.

    def publish(self, counts: tuple[int, ...]) -> None:
        """Record this process's totals (:data:`COUNTS`, what went through its buffers
        since it opened them) for the node's metrics."""
        if len(counts) != len(COUNTS):
            raise InvariantViolation(f"{len(COUNTS)} totals are published, not {len(counts)}")
        with self._locked() as table:
            index = self._own_slot(table)
            self._write_slot(index, (*table.slots[index][:4], *counts))

    def try_acquire(self, column: int, n: int, limit: int) -> bool:
        """Take ``n`` bytes of ``column`` for this process if every process's holdings
        and ``n`` fit in ``limit``; never waits (beyond the file's lock)."""
        with self._locked() as table:
            used = sum(slot[2 + column] for slot in table.slots)
            if used + n > limit:
                used = sum(slot[2 + column] for slot in self._live(table))
                if used + n > limit:
                    return False
            index = self._own_slot(table)
            pid, start, memory, disk, *counts = table.slots[index]
            held = [memory, disk]
            held[column] += n
            self._write_slot(index, (pid, start, held[0], held[1], *counts))
            if used + n > table.peaks[column]:
                peaks = list(table.peaks)
                peaks[column] = used + n
                table.peaks = (peaks[0], peaks[1])
                self._write_header(table)
            return True

    def release(self, column: int, n: int) -> None:
        """Give back ``n`` bytes of ``column`` this process holds."""
        with self._locked() as table:
            index = self._own_slot(table)
            pid, start, memory, disk, *counts = table.slots[index]
            held = [memory, disk]
            if n > held[column]:
                raise InvariantViolation(
                    f"changefeed buffer ledger {self.path}: releasing {n} bytes of column "
                    f"{column} but this process holds {held[column]}"
                )
            held[column] -= n
            self._write_slot(index, (pid, start, held[0], held[1], *counts))

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    # The file.

    def _locked(self) -> _Locked:
        return _Locked(self)

    def _open(self) -> None:
        """Open the file (again, in a child after a fork: an inherited descriptor would
        share the parent's lock)."""
        pid = os.getpid()
        if self._fd >= 0 and self._pid == pid:
            return
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            raise ExternalError(
                f"cannot open the node's changefeed buffer ledger {self.path}: {exc}"
            ) from exc
        self._fd, self._pid, self._start, self._slot = fd, pid, _start_time(pid), None

    def _read(self) -> _Table:
        data = os.pread(self._fd, _SIZE, 0)
        if len(data) != _SIZE or data[:8] != _MAGIC:
            raise InvariantViolation(f"{self.path} is not a changefeed buffer ledger")
        _, memory, disk, *retired = _HEADER.unpack_from(data)
        slots = [tuple(slot) for slot in _SLOT.iter_unpack(data[_HEADER.size :])]
        return _Table((memory, disk), tuple(retired), slots)

    def _write_slot(self, index: int, slot: tuple[int, ...]) -> None:
        os.pwrite(self._fd, _SLOT.pack(*slot), _HEADER.size + index * _SLOT.size)

    def _write_header(self, table: _Table) -> None:
        os.pwrite(self._fd, _HEADER.pack(_MAGIC, *table.peaks, *table.retired), 0)

    def _live(self, table: _Table) -> list[tuple[int, ...]]:
        """The slots of processes alive; a dead process's slot is emptied (its bytes
        went with it), its totals added to the header's and its spill files removed."""
        live = []
        for index, slot in enumerate(table.slots):
            pid, start = slot[0], slot[1]
            if pid in (0, self._pid) or _alive(pid, start):
                live.append(slot)
                continue
            # NB: the totals move first: a crash between the writes counts them twice
            # (a counter that jumps) rather than never (one that goes back)
            table.retired = tuple(a + b for a, b in zip(table.retired, slot[4:], strict=True))
            self._write_header(table)
            self._write_slot(index, _EMPTY)
            table.slots[index] = _EMPTY
            sweep_spills(self.path.parent, (pid, start))
        return live

    def _own_slot(self, table: _Table) -> int:
        """This process's slot, claimed on first use (a free one, or a dead process's)."""
        if self._slot is not None:
            return self._slot
        for index, (pid, start, *_) in enumerate(table.slots):
            if pid == self._pid and start == self._start:
                self._slot = index
                return index
        self._live(table)
        for index, (pid, *_) in enumerate(table.slots):
            if pid == 0:
                slot = (self._pid, self._start, *_EMPTY[2:])
                self._write_slot(index, slot)
                table.slots[index] = slot
                self._slot = index
                return index
        raise ExternalError(
            f"changefeed buffer ledger {self.path}: all {SLOTS} slots are held by live processes"
        )


@dataclass
class _Table:
    """The ledger file as read: the peaks, the totals of processes gone, and each slot
    (pid, start, memory, disk, its totals)."""

    peaks: tuple[int, int]
    retired: tuple[int, ...]
    slots: list[tuple[int, ...]]


class _Locked:
    """The ledger's table under its thread lock and the file's exclusive lock."""

    def __init__(self, ledger: BufferLedger) -> None:
        self._ledger = ledger

    def __enter__(self) -> _Table:
        ledger = self._ledger
        ledger._lock.acquire()
        try:
            ledger._open()
            fcntl.flock(ledger._fd, fcntl.LOCK_EX)
        except BaseException:
            ledger._lock.release()
            raise
        try:
            return ledger._read()
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *_: object) -> None:
        ledger = self._ledger
        try:
            fcntl.flock(ledger._fd, fcntl.LOCK_UN)
        finally:
            ledger._lock.release()


class SharedByteBudget:
    """``limit`` bytes of one column of a :class:`BufferLedger`, shared by every process
    of the node: the interface of :class:`~feedkv.changefeed.node_buffers.ByteBudget`."""

    def __init__(self, name: str, ledger: BufferLedger, column: int, limit: int) -> None:
        if limit < 0:
            raise InvariantViolation(f"a {name} budget cannot be negative: {limit}")
        self.name = name
        self.limit = limit
        self._ledger = ledger
        self._column = column

    @property
    def used(self) -> int:
        return self._ledger.used(self._column)

    @property
    def peak(self) -> int:
        return self._ledger.peak(self._column)

    def try_acquire(self, n: int) -> bool:
        return self._ledger.try_acquire(self._column, n, self.limit)

    def release(self, n: int) -> None:
        self._ledger.release(self._column, n)
