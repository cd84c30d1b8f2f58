"""The node's changefeed buffer budgets, shared by every process that holds its records.

A node's limits (``--max-changefeed-memory``, ``--max-disk-changefeed-storage``) cover
the records *all* its changefeeds hold for their sinks. On the thread runner those sinks
live in the node process; on the Spark runner they live in Spark's Python workers,
other processes on the same machine (local Spark), each task writing its part of a
micro-batch through a sink of its own. So the budgets cannot be counters in one
process's memory: they are a :class:`BufferLedger`, a small file in the node's store
(``STORE/changefeed-spill/ledger``) that every holder updates under an exclusive
``flock``.

The file is a header (the peaks ever held) and a table of slots, one per process that
holds bytes: its pid, its start time (so a reused pid is not mistaken for it), and the
bytes it holds in memory and on disk. What the node holds is the sum of the slots of
processes still alive: a Spark worker killed with its task (Spark destroys a worker
whose task does not stop) holds nothing once it is gone, so a crash never leaks budget.

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

__all__ = ["DISK", "MEMORY", "BufferLedger", "SharedByteBudget"]

MEMORY = 0  # the ledger's columns
DISK = 1

_MAGIC = b"FKVLEDG1"
_HEADER = struct.Struct("<8sqq")  # magic, peak memory, peak disk
_SLOT = struct.Struct("<qqqq")  # pid, start time, memory bytes, disk bytes
SLOTS = 512  # processes that may hold bytes at once (a node's workers: a few dozen)
_SIZE = _HEADER.size + SLOTS * _SLOT.size


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
        part.write_bytes(_HEADER.pack(_MAGIC, 0, 0) + bytes(SLOTS * _SLOT.size))
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

    # Holding.

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
            pid, start, memory, disk = table.slots[index]
            held = [memory, disk]
            held[column] += n
            self._write_slot(index, (pid, start, held[0], held[1]))
            if used + n > table.peaks[column]:
                peaks = list(table.peaks)
                peaks[column] = used + n
                os.pwrite(self._fd, _HEADER.pack(_MAGIC, *peaks), 0)
            return True

    def release(self, column: int, n: int) -> None:
        """Give back ``n`` bytes of ``column`` this process holds."""
        with self._locked() as table:
            index = self._own_slot(table)
            pid, start, memory, disk = table.slots[index]
            held = [memory, disk]
            if n > held[column]:
                raise InvariantViolation(
                    f"changefeed buffer ledger {self.path}: releasing {n} bytes of column "
                    f"{column} but this process holds {held[column]}"
                )
            held[column] -= n
            self._write_slot(index, (pid, start, held[0], held[1]))

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
        _, *peaks = _HEADER.unpack_from(data)
        slots = list(_SLOT.iter_unpack(data[_HEADER.size :]))
        return _Table((peaks[0], peaks[1]), slots)

    def _write_slot(self, index: int, slot: tuple[int, int, int, int]) -> None:
        os.pwrite(self._fd, _SLOT.pack(*slot), _HEADER.size + index * _SLOT.size)

    def _live(self, table: _Table) -> list[tuple[int, int, int, int]]:
        """The slots of processes alive; a dead process's slot is emptied (its bytes
        went with it)."""
        live = []
        for index, slot in enumerate(table.slots):
            pid, start = slot[0], slot[1]
            if pid in (0, self._pid) or _alive(pid, start):
                live.append(slot)
            else:
                empty = (0, 0, 0, 0)
                self._write_slot(index, empty)
                table.slots[index] = empty
        return live

    def _own_slot(self, table: _Table) -> int:
        """This process's slot, claimed on first use (a free one, or a dead process's)."""
        if self._slot is not None:
            return self._slot
        for index, (pid, start, _, _) in enumerate(table.slots):
            if pid == self._pid and start == self._start:
                self._slot = index
                return index
        self._live(table)
        for index, (pid, _, _, _) in enumerate(table.slots):
            if pid == 0:
                self._write_slot(index, (self._pid, self._start, 0, 0))
                table.slots[index] = (self._pid, self._start, 0, 0)
                self._slot = index
                return index
        raise ExternalError(
            f"changefeed buffer ledger {self.path}: all {SLOTS} slots are held by live processes"
        )


@dataclass
class _Table:
    """The ledger file as read: the peaks, and each slot (pid, start, memory, disk)."""

    peaks: tuple[int, int]
    slots: list[tuple[int, int, int, int]]


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
