"""The node's changefeed buffer budgets, shared by every process that holds its records.

A node's limits (``--max-changefeed-memory``, ``--max-disk-changefeed-storage``) cover
the records *all* its changefeeds hold for their sinks. On the thread runner those sinks
live in the node process; on the Spark runner they live in Spark's Python workers,
other processes on the same machine (local Spark), each task writing its part of a
micro-batch through a sink of its own. So the budgets cannot be counters in one
process's memory: they are a :class:`BufferLedger`, a small file in the node's store
(``STORE/changefeed-spill/ledger``), mapped shared into every holder's memory, that they
update under an exclusive ``flock``.

The file is 64-bit cells: a header (the peaks ever held, and the totals of processes
gone) and a table of slots, one per process that holds bytes: its pid, its start time
(so a reused pid is not mistaken for it), the bytes it holds in memory and on disk, and
its totals of what went through its buffers (:data:`COUNTS`, the metrics CockroachDB
names ``changefeed.buffer_entries.in`` ...). What the node holds is the sum of the slots
of processes still alive: a Spark worker killed with its task (Spark destroys a worker
whose task does not stop) holds nothing once it is gone, so a crash never leaks budget.
Its totals move to the header's when its slot is emptied, so the node's counters never
go back.

**Totals are counted in place** (:meth:`BufferLedger.add_count`): a process adds to
the cells of its own slot in the shared mapping, in the step that changes its buffers,
without the file lock (it alone writes them; every cell is an aligned 8-byte word, read
and written whole). A write to a shared mapping is the file's page at once, not a copy
in the process, so a worker killed with SIGKILL at any point has counted everything it
buffered: nothing is held back to be published later.

**Spill files** carry their owner in their name (:func:`spill_prefix`: pid and start
time), in the ledger's directory. When a dead process's slot is emptied its files are
removed with it, and a node that starts removes every file whose owner is gone
(:func:`sweep_spills`): a killed worker's spilled batches never fill the disk.

Cost: an acquisition or release is a lock, a read of the table (36 KiB), and a write
of one cell: tens of microseconds, paid once per sealed batch (hundreds of rows), not
per row. Counting is a thread lock and a cell's add, a few hundred nanoseconds, paid
per row.

:class:`SharedByteBudget` is one column of the ledger (memory or disk) with the
interface of :class:`~feedkv.changefeed.node_buffers.ByteBudget`, so a sink takes from
either without knowing which.
"""

from __future__ import annotations

import fcntl
import mmap
import os
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

# The file is native 64-bit cells (it never leaves the machine):
# header: magic, peak memory, peak disk, the totals of processes gone
# slot: pid, start time, memory bytes, disk bytes, its totals (COUNTS)
_MAGIC = int.from_bytes(b"FKVLEDG3", "little")
_HEADER = 3 + len(COUNTS)
_RETIRED = 3  # the header's first total
_SLOT = 4 + len(COUNTS)
_HELD = 2  # a slot's memory cell (its disk cell follows)
_TOTALS = 4  # a slot's first total
_EMPTY = (0,) * _SLOT
SLOTS = 512  # processes that may hold bytes at once (a node's workers: a few dozen)
_CELLS = _HEADER + SLOTS * _SLOT
_SIZE = 8 * _CELLS
# NB: every ledger object of the process counts under one lock (two of the same file
# share the process's slot); a child of a fork starts with its own, and knows it forked
# without asking for its pid on every count
_COUNTING = threading.Lock()  # this process's totals (no flock: see BufferLedger.add_count)
_FORKS = 0


def _forked() -> None:
    global _COUNTING, _FORKS
    _COUNTING = threading.Lock()
    _FORKS += 1


os.register_at_fork(after_in_child=_forked)
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
        self._lock = threading.Lock()  # the table's, with the file's flock
        self._totals_at = -1  # the cell of this process's first total (-1: no slot yet)
        self._forks = _FORKS  # the forks the slot was claimed after
        self._fd = -1
        self._map: mmap.mmap | None = None
        self._cells: memoryview | None = None  # the mapping as 64-bit cells
        self._pid = 0
        self._start = 0
        self._slot: int | None = None

    @classmethod
    def create(cls, path: Path) -> BufferLedger:
        """A new, empty ledger at ``path`` (the node's, when it starts: whatever an
        earlier run left is gone with its processes)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}")
        header = memoryview(bytearray(_SIZE)).cast("q")
        header[0] = _MAGIC
        part.write_bytes(header.tobytes())
        part.replace(path)
        return cls(path)

    # Reading.

    def used(self, column: int) -> int:
        """The bytes held in ``column`` by processes alive now."""
        with self._locked() as table:
            return sum(table.held(index, column) for index in self._live(table))

    def peak(self, column: int) -> int:
        """The most ever held in ``column`` at once."""
        with self._locked() as table:
            return table.peaks[column]

    def reap(self) -> None:
        """Empty the slots of processes gone (their bytes, their spill files): what
        every full read of the ledger does, for a holder that reads none."""
        with self._locked() as table:
            self._live(table)

    def counted(self) -> tuple[int, ...]:
        """The totals (:data:`COUNTS`) every process counted here (:meth:`add_count`),
        alive or gone, as they are now. (A process whose totals are its own, the node's,
        counts none here.)"""
        with self._locked() as table:
            self._live(table)  # NB: the dead's totals move to the header
            totals = list(table.retired)
            for index in table.occupied():
                totals = [a + b for a, b in zip(totals, table.totals(index), strict=True)]
            return tuple(totals)

    def own_counts(self) -> tuple[int, ...]:
        """This process's totals (:data:`COUNTS`), as :meth:`add_count` left them."""
        with _COUNTING:
            at, cells = self._totals_at, self._cells
            if at < 0 or self._forks != _FORKS or cells is None:
                return _NO_COUNTS
            return tuple(cells[at : at + len(COUNTS)].tolist())

    # Holding.

    def add_count(self, total: int, n: int) -> None:
        """Add ``n`` to this process's total ``total`` (an index of :data:`COUNTS`), in
        place in the shared file: once this returns, the node reads it, whatever becomes
        of this process. Thread-safe; takes the file's lock only to claim the slot, once.

        NB: paid per row a sink takes: a thread lock and a cell's add, no system call."""
        with _COUNTING:
            at, cells = self._totals_at, self._cells
            if at < 0 or self._forks != _FORKS or cells is None:
                at, cells = self._claim_totals()
            # NB: only this process writes its slot's totals, each cell one aligned
            # word: a reader under the flock sees the old value or the new, never half
            cells[at + total] += n

    def _claim_totals(self) -> tuple[int, memoryview]:
        """The cells and the index of this process's first total there, its slot
        claimed if it was not (under _COUNTING)."""
        with self._locked() as table:
            index = self._own_slot(table)
        cells = self._cells
        if cells is None:
            raise InvariantViolation(f"{self.path} is not open")
        self._totals_at, self._forks = _HEADER + index * _SLOT + _TOTALS, _FORKS
        return self._totals_at, cells

    def try_acquire(self, column: int, n: int, limit: int) -> bool:
        """Take ``n`` bytes of ``column`` for this process if every process's holdings
        and ``n`` fit in ``limit``; never waits (beyond the file's lock)."""
        with self._locked() as table:
            used = table.used(column)
            if used + n > limit:
                used = sum(table.held(index, column) for index in self._live(table))
                if used + n > limit:
                    return False
            index = self._own_slot(table)
            held = table.held(index, column)
            self._write(_HEADER + index * _SLOT + _HELD + column, held + n)
            if used + n > table.peaks[column]:
                peaks = list(table.peaks)
                peaks[column] = used + n
                table.peaks = (peaks[0], peaks[1])
                self._write(1 + column, used + n)
            return True

    def release(self, column: int, n: int) -> None:
        """Give back ``n`` bytes of ``column`` this process holds."""
        with self._locked() as table:
            index = self._own_slot(table)
            held = table.held(index, column)
            if n > held:
                raise InvariantViolation(
                    f"changefeed buffer ledger {self.path}: releasing {n} bytes of column "
                    f"{column} but this process holds {held}"
                )
            self._write(_HEADER + index * _SLOT + _HELD + column, held - n)

    def close(self) -> None:
        with _COUNTING, self._lock:
            if self._cells is not None:
                self._cells.release()
                self._cells = None
            if self._map is not None:
                self._map.close()
                self._map = None
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._slot, self._totals_at = None, -1

    # The file.

    def _locked(self) -> _Locked:
        return _Locked(self)

    def _open(self) -> None:
        """Open and map the file (again, in a child after a fork: an inherited
        descriptor would share the parent's lock, an inherited slot is the parent's)."""
        pid = os.getpid()
        if self._fd >= 0 and self._pid == pid:
            return
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            raise ExternalError(
                f"cannot open the node's changefeed buffer ledger {self.path}: {exc}"
            ) from exc
        try:
            if os.fstat(fd).st_size != _SIZE:
                raise InvariantViolation(f"{self.path} is not a changefeed buffer ledger")
            mapped = mmap.mmap(fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        # NB: a parent's mapping inherited through a fork is left as it is (the parent
        # still uses it); the child works through its own
        self._fd, self._map, self._cells = fd, mapped, memoryview(mapped).cast("q")
        self._pid, self._start, self._slot = pid, _start_time(pid), None

    def _read(self) -> _Table:
        cells = self._cells
        if cells is None or cells[0] != _MAGIC:
            raise InvariantViolation(f"{self.path} is not a changefeed buffer ledger")
        # NB: tolist reads each cell as one aligned word (a total counted meanwhile is
        # its old or its new value, never half of each)
        values = cells.tolist()
        return _Table((values[1], values[2]), tuple(values[_RETIRED:_HEADER]), values)

    def _write(self, cell: int, value: int) -> None:
        if self._cells is None:
            raise InvariantViolation(f"{self.path} is not open")
        self._cells[cell] = value

    def _live(self, table: _Table) -> list[int]:
        """The slots (indexes) of processes alive; a dead process's slot is emptied (its
        bytes went with it), its totals added to the header's and its spill files
        removed."""
        live = []
        for index in table.occupied():
            pid, start = table.owner(index)
            if pid == self._pid or _alive(pid, start):
                live.append(index)
                continue
            # NB: the totals move first: a crash between the writes counts them twice
            # (a counter that jumps) rather than never (one that goes back)
            table.retired = tuple(
                a + b for a, b in zip(table.retired, table.totals(index), strict=True)
            )
            for i, total in enumerate(table.retired):
                self._write(_RETIRED + i, total)
            for i in range(_SLOT):
                self._write(_HEADER + index * _SLOT + i, 0)
            table.set(index, _EMPTY)
            sweep_spills(self.path.parent, (pid, start))
        return live

    def _own_slot(self, table: _Table) -> int:
        """This process's slot, claimed on first use (a free one, or a dead process's)."""
        if self._slot is not None:
            return self._slot
        for index in table.occupied():
            if table.owner(index) == (self._pid, self._start):
                self._slot = index
                return index
        self._live(table)
        for index in range(SLOTS):
            if table.owner(index)[0] == 0:
                at = _HEADER + index * _SLOT
                self._write(at + 1, self._start)
                self._write(at, self._pid)
                table.set(index, (self._pid, self._start, *_EMPTY[2:]))
                self._slot = index
                return index
        raise ExternalError(
            f"changefeed buffer ledger {self.path}: all {SLOTS} slots are held by live processes"
        )


@dataclass
class _Table:
    """The ledger file as read: the peaks, the totals of processes gone, and every cell
    (``values``: its slots are read from there, see the layout above)."""

    peaks: tuple[int, int]
    retired: tuple[int, ...]
    values: list[int]

    def occupied(self) -> list[int]:
        """The slots a process holds."""
        return [i for i, pid in enumerate(self.values[_HEADER::_SLOT]) if pid]

    def owner(self, index: int) -> tuple[int, int]:
        at = _HEADER + index * _SLOT
        return self.values[at], self.values[at + 1]

    def held(self, index: int, column: int) -> int:
        return self.values[_HEADER + index * _SLOT + _HELD + column]

    def used(self, column: int) -> int:
        """What every slot holds in ``column`` (the dead's included)."""
        return sum(self.values[_HEADER + _HELD + column :: _SLOT])

    def totals(self, index: int) -> tuple[int, ...]:
        at = _HEADER + index * _SLOT + _TOTALS
        return tuple(self.values[at : at + len(COUNTS)])

    def set(self, index: int, slot: tuple[int, ...]) -> None:
        at = _HEADER + index * _SLOT
        self.values[at : at + _SLOT] = slot


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
