"""The LMDB storage engine: named sub-databases, snapshots and group commit.

One commit thread owns LMDB's single write transaction. Callers ``submit`` functions;
the thread drains everything queued, runs each function in one group transaction,
commits the group with one fsync, runs the ``on_applied`` callbacks in order under
``apply_lock``, and completes the futures.

A failing function must leave no trace, yet a nested transaction per function costs two
LMDB calls more. So a group runs its functions directly in
the group transaction; when one fails, the group is thrown away and run again with each
function in a nested transaction of its own (and so are the next few groups: failures
come in runs, under contention).

A group's futures are completed once the next group is evaluated, just before its
fsync (or at once when nothing else is queued, before a group of reads, or once the
next group's evaluation has taken ``ACK_DELAY_S``): the woken callers then run while the
fsync has the GIL free, not beside an evaluation, which they made three times slower.
The next group takes what is queued, without waiting for more. NB: a policy that
completed a group as soon as it was durable and had the next one wait for those callers
to come back (up to 5 ms) made bigger groups (30 commits to an fsync against 16) but
cost the callers three times the CPU a commit at 32 clients: embedded kv0 with fsync,
42.7k commits in 4 s against 52.0k with this one (callers 29 against 14 us a commit),
and pgbench kv0 2,702-2,905 TPS against 3,014-3,056, on this 2-core machine.
NB: a completer thread that woke the callers during the fsync, the commit thread handing
it each group's outcomes (one wake) instead of waking each caller itself with the GIL
held (a third of its GIL time, py-spy --gil --native), was tried and taken out: it made
the callers and itself pay more than the commit thread saved. 32 embedded sessions of
durable single-row INSERTs, three alternating pairs at load 2: 13.0-13.9k commits/s at
83-88 us of process CPU a commit with it, 17.0-17.3k at 71-72 us without (UPDATEs
11.8-11.9k against 13.7-15.3k); ``feedkv bench pgwire`` kv0 showed no difference beyond
its noise (4.7-6.2k TPS both ways, three pairs).
NB: evaluating the next group while the last one commits was tried (a prototype, 2026-12-01):
each command evaluated against a read transaction with the groups not yet committed on top
(``feedkv.storage.overlay``, as a replicated range's leaseholder evaluates), and a second
thread writing the evaluated batches and committing them. It cost more than the fsync it
hid: embedded kv0 at 32 clients spent 115-128 us of process CPU a commit against 70-74
without it (two alternating pairs, 6.8-7.1k commits/s against 8.5-12.8k), as every read
through the overlay's Python layers costs several times an LMDB get, and the evaluation
shares the GIL with the callers.
NB: py-lmdb 3.0 lets the GIL go around every get, put and cursor step, not only in a
commit (its fsync), and its ``enable_drop_gil()`` does nothing; but those calls are so
short that the thread nearly always takes the GIL back before a woken waiter does: 50k
gets beside three busy threads cost the getting thread 3,014 voluntary switches (50k
Python calls: 4) and 1.1 us of CPU a get against 0.46 alone. A commit beside a busy
thread waited a switch interval each. So an evaluation loses the GIL to woken callers
mostly at the interpreter's forced switches, and an LMDB call saved also saves a
waiter's wake.

The memory map starts at ``map_size`` and doubles when full. Remapping is only safe
with no read transaction open in this process, so snapshots are counted and growth
waits for them to close (new snapshots wait for growth to finish). NB: a thread that
holds a snapshot while it waits for its own write can stall growth until
``GROWTH_WAIT_SECONDS`` pass and that write fails; close snapshots before writing. The
default map is large (virtual address space only) so growth is rare.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import queue
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice, takewhile
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from feedkv.errors import (
    ExternalError,
    FeedKVError,
    InvariantViolation,
    StorageError,
    StoreLockedError,
)
from feedkv.storage.engine import Completion, ReadWriter

__all__ = ["DEFAULT_MAP_SIZE", "EngineStats", "LMDBEngine", "LMDBSnapshot"]

T = TypeVar("T")

log = logging.getLogger(__name__)

DEFAULT_MAP_SIZE = 64 << 30  # virtual address space only; the file grows with the data
MAX_GROUP_JOBS = 4096
ACK_DELAY_S = 0.002  # evaluating the next group this long completes a durable group's futures
GROWTH_WAIT_SECONDS = 30.0
_COUNT_CHUNK = 4096  # keys a count reads at once
ISOLATED_GROUPS = 16  # groups run with nested transactions after one that had a failure


class _View:
    """Reads and writes through one LMDB transaction."""

    __slots__ = ("_cursors", "_dbs", "_txn")

    def __init__(self, txn: Any, dbs: dict[str, Any]) -> None:
        self._txn = txn
        self._dbs = dbs
        self._cursors: dict[str, Any] = {}

    def _cursor(self, db: str) -> Any:
        cursor = self._cursors.get(db)
        if cursor is None:
            cursor = self._cursors[db] = self._txn.cursor(db=self._dbs[db])
        return cursor

    def get(self, db: str, key: bytes) -> bytes | None:
        value: bytes | None = self._txn.get(key, db=self._dbs[db])
        return value

    def seek(self, db: str, key: bytes) -> tuple[bytes, bytes] | None:
        cursor = self._cursor(db)
        if cursor.set_range(key):
            item: tuple[bytes, bytes] = cursor.item()
            return item
        return None

    def seek_before(self, db: str, key: bytes) -> tuple[bytes, bytes] | None:
        cursor = self._cursor(db)
        found = cursor.prev() if cursor.set_range(key) else cursor.last()
        if found:
            item: tuple[bytes, bytes] = cursor.item()
            return item
        return None

    def scan(
        self, db: str, start: bytes, end: bytes | None = None, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        cursor = self._txn.cursor(db=self._dbs[db])
        if not reverse:
            if not cursor.set_range(start):
                return
            if end is None:
                yield from cursor.iternext()
                return
            for key, value in cursor.iternext():
                if key >= end:
                    return
                yield key, value
            return
        if end is None:
            found = cursor.last()
        else:
            found = cursor.prev() if cursor.set_range(end) else cursor.last()
        if not found:
            return
        for key, value in cursor.iterprev():
            if key < start:
                return
            yield key, value

    def count(self, db: str, start: bytes, end: bytes | None, limit: int) -> int:
        cursor = self._cursor(db)  # NB: read to the count within this call, as seek is
        if limit < 1 or not cursor.set_range(start):
            return 0
        keys = cursor.iternext(values=False)
        counted = 0
        while counted < limit:
            chunk = list(islice(keys, min(limit - counted, _COUNT_CHUNK)))
            if end is not None and chunk and chunk[-1] >= end:
                return counted + bisect_left(chunk, end)
            counted += len(chunk)
            if len(chunk) < _COUNT_CHUNK:
                break
        return counted

    def entries(self, db: str) -> int:
        entries: int = self._txn.stat(self._dbs[db])["entries"]
        return entries

    def put(self, db: str, key: bytes, value: bytes) -> None:
        self._txn.put(key, value, db=self._dbs[db])

    def put_many(
        self, db: str, items: Iterable[tuple[bytes, bytes]], *, append: bool = False
    ) -> None:
        # NB: MDB_APPEND only when the caller knows the keys lie past the last: py-lmdb
        # then skips a key that is not past it without an error, so the count is checked.
        # It saves the search per key (0.03 us of 0.14 per put here) and fills pages
        # whole instead of splitting them.
        consumed, added = self._txn.cursor(db=self._dbs[db]).putmulti(items, append=append)
        if append and added != consumed:
            raise InvariantViolation(
                f"an appending write to {db} met {consumed - added} keys not past its last"
            )

    def delete(self, db: str, key: bytes) -> bool:
        deleted: bool = self._txn.delete(key, db=self._dbs[db])
        return deleted

    def delete_many(self, db: str, keys: Iterable[bytes]) -> None:
        # NB: py-lmdb has no bulk delete; a C-level map calls it with no Python frame
        deque(map(functools.partial(self._txn.delete, db=self._dbs[db]), keys), maxlen=0)


class LMDBSnapshot(_View):
    """A read transaction: the state at the moment it was opened."""

    __slots__ = ("_engine",)

    def __init__(self, engine: LMDBEngine, txn: Any) -> None:
        super().__init__(txn, engine._dbs)
        self._engine: LMDBEngine | None = engine

    def scan(
        self, db: str, start: bytes, end: bytes | None = None, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """:meth:`_View.scan`, as LMDB's own iterator, its cursor placed now: a snapshot
        never changes, so this reads what placing it at the first read would, without a
        generator's resume per entry (a catch-up scan reads the time index, or a span's
        versions backward, this way). A bound is checked in C too: a pair sorts below
        ``(end,)`` exactly when its key is below ``end``, and at or above ``(start,)``
        exactly when its key is at or above ``start``."""
        cursor = self._txn.cursor(db=self._dbs[db])
        entries: Iterator[tuple[bytes, bytes]]
        if reverse:
            found = cursor.last() if end is None or not cursor.set_range(end) else cursor.prev()
            if not found:
                return iter(())
            entries = cursor.iterprev()
            return takewhile((start,).__le__, entries) if start else entries
        if not cursor.set_range(start):
            return iter(())
        entries = cursor.iternext()
        return entries if end is None else takewhile((end,).__gt__, entries)

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            self._cursors.clear()
            self._txn.abort()
            engine._snapshot_closed()

    def __enter__(self) -> LMDBSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class EngineStats:
    groups: int = 0
    jobs: int = 0
    reruns: int = 0  # groups run again, each job nested, after a job failed
    map_growths: int = 0


@dataclass(slots=True)
class _Job:
    fn: Callable[[ReadWriter], Any]
    on_applied: Callable[[Any], None] | None
    future: Completion[Any]
    read_only: bool = False


_STOP = object()


class LMDBEngine:
    """An LMDB environment holding the sub-databases named in ``databases``.

    ``sync=False`` skips the fsync at commit (benchmarks that say so); a process crash
    still loses nothing committed, a machine crash may.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        databases: Sequence[str],
        sync: bool = True,
        map_size: int = DEFAULT_MAP_SIZE,
    ) -> None:
        self.path = Path(path)
        self.sync = sync
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create store directory {self.path}: {exc}") from exc
        self._lock_file = _lock_store(self.path)
        try:
            self._env = lmdb.open(
                str(self.path),
                map_size=map_size,
                max_dbs=len(databases) + 1,
                sync=sync,
                metasync=sync,
                readahead=False,
                max_readers=1024,
                max_spare_txns=16,
            )
            self._dbs = {name: self._env.open_db(name.encode()) for name in databases}
        except lmdb.Error as exc:
            self._lock_file.close()
            raise StorageError(f"cannot open store at {self.path}: {exc}") from exc
        self.apply_lock = threading.RLock()
        self.eval_lock = threading.Lock()
        self._group_hooks: list[Callable[[], None]] = []
        self._isolate_groups = 0  # the next this many groups nest each job (_run_group)
        self.stats = EngineStats()
        # Told how long each group's commit took (seconds: the write transaction's commit
        # with its fsync), on the commit thread; a node's metrics set it.
        self.on_commit: Callable[[float], None] | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._durable: list[tuple[_Job, tuple[bool, Any]]] = []  # outcomes to complete
        self._last_commit_s = 0.0  # how long the last group's commit (its fsync) took
        self._guard = threading.Condition()
        self._open_snapshots = 0
        self._growing = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._committer = threading.Thread(target=self._commit_loop, name="feedkv-commit")
        self._committer.daemon = True
        self._committer.start()

    @property
    def map_size(self) -> int:
        size: int = self._env.info()["map_size"]
        return size

    @property
    def used_bytes(self) -> int:
        """The bytes of the memory map in use (LMDB's highest page in use, whole)."""
        pages: int = self._env.info()["last_pgno"] + 1
        page_size: int = self._env.stat()["psize"]
        return pages * page_size

    @property
    def open_snapshots(self) -> int:
        """The snapshots (read transactions) open now: each pins the pages it reads, and
        the map grows only once none is open."""
        with self._guard:
            return self._open_snapshots

    def databases(self) -> list[str]:
        return list(self._dbs)

    def on_group_applied(self, hook: Callable[[], None]) -> None:
        self._group_hooks.append(hook)

    def snapshot(self) -> LMDBSnapshot:
        with self._guard:
            while self._growing:
                self._guard.wait()
            if self._closed:
                raise StorageError(f"the store at {self.path} is closed")
            self._open_snapshots += 1
        try:
            txn = self._env.begin(write=False, buffers=False)
        except lmdb.Error as exc:
            self._snapshot_closed()
            raise StorageError(f"cannot open a snapshot: {exc}") from exc
        return LMDBSnapshot(self, txn)

    def _snapshot_closed(self) -> None:
        with self._guard:
            self._open_snapshots -= 1
            if self._open_snapshots == 0:
                self._guard.notify_all()

    def submit(
        self,
        fn: Callable[[ReadWriter], T],
        on_applied: Callable[[T], None] | None = None,
        *,
        read_only: bool = False,
    ) -> Completion[T]:
        future: Completion[T] = Completion()
        with self._close_lock:
            # NB: the check and the put happen under the lock close() takes before it
            # queues the stop marker, so no job can land behind it and hang.
            if self._closed:
                raise StorageError(f"the store at {self.path} is closed")
            self._queue.put(_Job(fn, on_applied, future, read_only))
        return future

    def read_now(self, fn: Callable[[ReadWriter], T]) -> T:
        """Run the read-only ``fn`` on this thread, against the committed state, while no
        write is being evaluated (``eval_lock``): not queued behind a group commit."""
        with self.eval_lock:
            txn = self._env.begin(write=False)
            try:
                return fn(_View(txn, self._dbs))
            except lmdb.Error as exc:
                raise StorageError(f"read failed in {self.path}: {exc}") from exc
            finally:
                txn.abort()

    def write(self, fn: Callable[[ReadWriter], T]) -> T:
        if threading.current_thread() is self._committer:
            raise InvariantViolation("engine.write called from the commit thread would deadlock")
        return self.submit(fn).result()

    def close(self) -> None:
        if threading.current_thread() is self._committer:
            raise InvariantViolation("engine.close called from the commit thread would deadlock")
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._committer.join()
        with self._guard:
            self._guard.notify_all()
        self._env.close()
        self._lock_file.close()

    def __enter__(self) -> LMDBEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The commit thread.

    def _commit_loop(self) -> None:
        while True:
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                self._complete_durable()
                first = self._queue.get()
            if first is _STOP:
                self._complete_durable()
                return
            jobs, stop = self._gather(first)
            self._commit_group(jobs)
            if stop:
                self._complete_durable()
                return

    def _gather(self, first: Any) -> tuple[list[Any], bool]:
        """The group that starts with ``first``: every job queued now; whether the stop
        marker came."""
        jobs = [first]
        while len(jobs) < MAX_GROUP_JOBS:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            jobs.append(job)
        return jobs, False

    def _complete_durable(self) -> None:
        durable, self._durable = self._durable, []
        _complete(durable)

    def _commit_group(self, jobs: list[_Job]) -> None:
        reads = [job for job in jobs if job.read_only]
        if reads:
            self._complete_durable()  # a group of reads has no fsync to complete them in
            # NB: reads run before the group's writes, against the committed state, so
            # they can be answered now; the queue gave no order among these jobs.
            self._run_reads(reads)
            jobs = [job for job in jobs if not job.read_only]
            if not jobs:
                return
        while True:
            try:
                outcomes = self._run_group(jobs)
                break
            except lmdb.MapFullError:
                # NB: their callers may hold the snapshots growth waits for
                self._complete_durable()
                try:
                    self._grow_map()
                except FeedKVError as exc:
                    for job in jobs:
                        job.future.set_exception(exc)
                    return
            except lmdb.Error as exc:
                error = StorageError(f"commit failed in {self.path}: {exc}")
                error.__cause__ = exc
                for job in jobs:
                    job.future.set_exception(error)
                return
        self.stats.groups += 1
        self.stats.jobs += len(jobs)
        self._durable.extend(zip(jobs, outcomes, strict=True))

    def _run_reads(self, jobs: list[_Job]) -> None:
        with self.apply_lock:
            txn = self._env.begin(write=False)
            try:
                for job in jobs:
                    try:
                        result = job.fn(_View(txn, self._dbs))
                        if job.on_applied is not None:
                            job.on_applied(result)
                    except lmdb.Error as exc:
                        error = StorageError(f"read failed in {self.path}: {exc}")
                        error.__cause__ = exc
                        job.future.set_exception(error)
                    except BaseException as exc:
                        job.future.set_exception(_answer(exc))
                    else:
                        job.future.set_result(result)
            finally:
                txn.abort()
        self.stats.jobs += len(jobs)

    def _run_group(self, jobs: list[_Job]) -> list[tuple[bool, Any]]:
        ack_by = time.perf_counter() + ACK_DELAY_S
        with self.apply_lock:
            txn = self._env.begin(write=True)
            try:
                if self._isolate_groups:
                    self._isolate_groups -= 1
                    outcomes = self._evaluate_isolated(txn, jobs, ack_by)
                else:
                    together = self._evaluate_together(txn, jobs, ack_by)
                    if together is None:  # a job failed: the whole group runs again, nested
                        txn.abort()
                        txn = self._env.begin(write=True)
                        self.stats.reruns += 1
                        self._isolate_groups = ISOLATED_GROUPS
                    outcomes = (
                        together
                        if together is not None
                        else self._evaluate_isolated(txn, jobs, ack_by)
                    )
                self._complete_durable()
                committing = time.perf_counter()
                txn.commit()
                self._last_commit_s = time.perf_counter() - committing
                if self.on_commit is not None:
                    self.on_commit(self._last_commit_s)
            except BaseException:
                txn.abort()
                raise
            for index, (job, (ok, result)) in enumerate(zip(jobs, outcomes, strict=True)):
                if ok and job.on_applied is not None:
                    try:
                        job.on_applied(result)
                    except BaseException as exc:
                        violation = InvariantViolation(
                            f"on_applied callback failed after a durable commit: {exc!r}"
                        )
                        violation.__cause__ = exc
                        outcomes[index] = (False, violation)
            for hook in self._group_hooks:
                try:
                    hook()
                except Exception:
                    log.exception("a group hook failed after a durable commit")
        return outcomes

    def _evaluate_together(
        self, txn: Any, jobs: list[_Job], ack_by: float
    ) -> list[tuple[bool, Any]] | None:
        """Each job in ``txn`` itself; ``None`` as soon as one fails (``txn`` then holds
        its partial writes and must be aborted)."""
        outcomes: list[tuple[bool, Any]] = []
        view = _View(txn, self._dbs)
        for job in jobs:
            if self._durable and time.perf_counter() > ack_by:
                self._complete_durable()
            # NB: eval_lock is taken per job, not per group, so a read_now waits for one
            # evaluation at most, not for the whole group's.
            with self.eval_lock:
                try:
                    result = job.fn(view)
                except lmdb.MapFullError:
                    raise
                except BaseException:
                    return None
            outcomes.append((True, result))
        return outcomes

    def _evaluate_isolated(
        self, txn: Any, jobs: list[_Job], ack_by: float
    ) -> list[tuple[bool, Any]]:
        """Each job in a transaction nested in ``txn``: a failing one leaves no trace."""
        outcomes: list[tuple[bool, Any]] = []
        for job in jobs:
            if self._durable and time.perf_counter() > ack_by:
                self._complete_durable()
            with self.eval_lock:
                child = self._env.begin(write=True, parent=txn)
                try:
                    result = job.fn(_View(child, self._dbs))
                except lmdb.MapFullError:
                    child.abort()
                    raise
                except lmdb.Error as exc:
                    child.abort()
                    error = StorageError(f"write failed in {self.path}: {exc}")
                    error.__cause__ = exc
                    outcomes.append((False, error))
                    continue
                except BaseException as exc:
                    child.abort()
                    outcomes.append((False, _answer(exc)))
                    continue
                child.commit()
            outcomes.append((True, result))
        return outcomes

    def _grow_map(self) -> None:
        new_size = self.map_size * 2
        with self._guard:
            self._growing = True
            try:
                if not self._guard.wait_for(
                    lambda: self._open_snapshots == 0, timeout=GROWTH_WAIT_SECONDS
                ):
                    raise StorageError(
                        f"the store at {self.path} is full ({self.map_size} bytes mapped) and "
                        f"{self._open_snapshots} snapshot(s) stayed open for "
                        f"{GROWTH_WAIT_SECONDS:.0f}s, so the map could not grow"
                    )
                with self.eval_lock:  # no read_now transaction is open
                    self._env.set_mapsize(new_size)
                self.stats.map_growths += 1
            finally:
                self._growing = False
                self._guard.notify_all()


def _complete(durable: list[tuple[_Job, tuple[bool, Any]]]) -> None:
    """Complete each durable outcome's future, in order."""
    for job, (ok, value) in durable:
        try:
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)
        except BaseException:  # NB: a done callback's: the others must still hear
            log.exception("a done callback of a committed write failed")


def _answer(exc: BaseException) -> BaseException:
    """A job's exception as its caller gets it. A feedkv error is an answer (a failed
    condition, a conflict, a retry), so it goes without the commit thread's frames: their
    locals hold the group's outcomes, which hold the error, and every conflict would leave
    that cycle to the cyclic GC. A fault (a broken invariant, a disk or network error)
    and anything else keep their traceback: they are rare, and worth debugging."""
    if isinstance(exc, FeedKVError) and not isinstance(exc, InvariantViolation | ExternalError):
        exc.__traceback__ = None
    return exc


def _lock_store(path: Path) -> Any:
    """Take the store's lock file, or raise :class:`StoreLockedError` naming the owner."""
    lock_path = path / "feedkv.lock"
    handle = open(lock_path, "a+")  # noqa: SIM115 - held open for the engine's life
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "unknown"
        handle.close()
        raise StoreLockedError(
            f"the store at {path} is in use by process {owner}; stop that process or "
            "open a different store directory"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    with contextlib.suppress(OSError):
        os.fsync(handle.fileno())
    return handle
