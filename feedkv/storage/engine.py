"""The storage engine contract.

An engine is an ordered byte store with named sub-databases, snapshot reads and
atomic, durable writes. feedkv has one implementation (:mod:`feedkv.storage.lmdb_engine`);
everything above talks to it through the protocols here.

Writes are *functions*, not byte lists: a caller submits ``fn(rw)`` and the engine runs
it inside its single write transaction, so ``fn`` reads its own writes and everything
committed before it. Many callers' functions share one transaction and one fsync (group
commit); each function is isolated (if it raises, none of its writes land and the others
in the group are unaffected). The returned future completes only once the writes are
durable. A function may be re-run if the group has to be retried (for instance after
the map grew), so it must depend only on what it reads through ``rw``.

A function submitted with ``read_only=True`` promises not to write. It runs on the commit
thread, in order with the writes (so it sees everything submitted before its group), but
against the last committed state before the writes of its group, and completes as soon
as it has run: a read never waits for an fsync, and a group of reads commits nothing.
``read_now`` runs a read on the caller's thread instead, not queued at all (the store
uses it when no write the read overlaps is between evaluation and commit).

``on_applied`` callbacks run on the engine's commit thread, after the group is durable,
in commit order, while ``apply_lock`` is held; then the hooks given to
``on_group_applied``, once per group (to act once on what many callbacks noted). A
reader that takes ``apply_lock`` and then opens a snapshot sees exactly the writes whose
callbacks have run: this is how a rangefeed registers with no gap and no double.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Completion", "Engine", "ReadWriter", "Reader", "Snapshot", "WriteBatch"]

T = TypeVar("T")


class Completion(Generic[T]):
    """The outcome of a submitted write, set once by the commit thread.

    Like ``concurrent.futures.Future`` but built on one lock: completing it is a single
    C-level release, which matters when the commit thread completes tens of thousands
    of them a second.
    """

    __slots__ = ("_callbacks", "_done", "_failed", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._done = False
        self._failed = False
        self._value: Any = None
        self._callbacks: list[Callable[[], None]] = []

    @classmethod
    def failed(cls, exc: BaseException) -> Completion[Any]:
        """A completion that has already failed with ``exc``."""
        done: Completion[Any] = cls()
        done.set_exception(exc)
        return done

    @classmethod
    def of(cls, value: T) -> Completion[T]:
        """A completion that already holds ``value``."""
        done: Completion[T] = cls()
        done.set_result(value)
        return done

    def set_result(self, value: T) -> None:
        self._value = value
        self._done = True
        self._lock.release()
        if self._callbacks:
            self._fire()

    def set_exception(self, exc: BaseException) -> None:
        self._value = exc
        self._failed = True
        self._done = True
        self._lock.release()
        if self._callbacks:
            self._fire()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once this completes: at once if it has, else on the thread that
        completes it (the commit thread: ``fn`` must be quick and must not raise)."""
        self._callbacks.append(fn)
        if self._done:
            self._fire()

    def _fire(self) -> None:
        # The completing thread and add_done_callback may both get here; list.pop is
        # atomic, so each callback runs once, and in the order they were added.
        callbacks = self._callbacks
        while True:
            try:
                fn = callbacks.pop(0)
            except IndexError:
                return
            fn()

    def done(self) -> bool:
        return self._done

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the outcome; the function's exception, or ``None`` if it succeeded."""
        if not self._done:
            self._wait(timeout)
        return self._value if self._failed else None

    def result(self, timeout: float | None = None) -> T:
        """Wait for the outcome; raise the function's exception if it failed."""
        if not self._done:  # NB: here, not in a call: a server's replies ask done ones
            self._wait(timeout)
        if self._failed:
            try:
                raise self._value
            finally:
                # NB: the raise puts this frame, whose ``self`` holds the exception, in
                # the exception's traceback: a cycle for the cyclic GC, unless cut here.
                del self
        result: T = self._value
        return result

    def _wait(self, timeout: float | None) -> None:
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError("the write is not durable yet")
        self._lock.release()  # let any other waiter through


class Reader(Protocol):
    """Reads of one consistent state. Not thread-safe: one thread uses a reader at a time."""

    def get(self, db: str, key: bytes) -> bytes | None:
        """The value at ``key`` in sub-database ``db``, or ``None``."""
        ...

    def seek(self, db: str, key: bytes) -> tuple[bytes, bytes] | None:
        """The first entry with a key ``>= key``, or ``None``."""
        ...

    def seek_before(self, db: str, key: bytes) -> tuple[bytes, bytes] | None:
        """The last entry with a key ``< key``, or ``None``."""
        ...

    def scan(
        self, db: str, start: bytes, end: bytes | None = None, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``start <= key < end`` (``end=None``: to the last key).

        Ascending, or descending with ``reverse=True``. The iterator is lazy and valid
        only while the reader is.
        """
        ...

    def count(self, db: str, start: bytes, end: bytes | None, limit: int) -> int:
        """How many keys ``start <= key < end`` holds (``end=None``: to the last key),
        counting no further than ``limit``: cheaper than scanning them, as no value is
        read."""
        ...

    def entries(self, db: str) -> int:
        """How many entries ``db`` holds in all, from the engine's own count (no scan)."""
        ...


class ReadWriter(Reader, Protocol):
    """A reader that can also write; reads see its own writes."""

    def put(self, db: str, key: bytes, value: bytes) -> None: ...

    def put_many(
        self, db: str, items: Iterable[tuple[bytes, bytes]], *, append: bool = False
    ) -> None:
        """``put`` each ``(key, value)`` in order (a bulk load's batch: one engine call,
        not one per key). ``items`` is read once, and no pair is kept: a ``zip`` of two
        columns costs no tuple per pair. ``append``: the caller knows the keys ascend
        and lie past every key of ``db`` (an engine may then skip the search for each;
        one that finds otherwise raises :class:`~feedkv.errors.InvariantViolation`)."""
        ...

    def delete(self, db: str, key: bytes) -> bool:
        """Delete ``key``; returns whether it existed."""
        ...

    def delete_many(self, db: str, keys: Iterable[bytes]) -> None:
        """``delete`` each of ``keys`` (a bulk resolution's intents: one engine call, not
        one per key)."""
        ...


class Snapshot(Reader, Protocol):
    """A reader of the state at the moment it was opened; close it promptly."""

    def close(self) -> None: ...

    def __enter__(self) -> Snapshot: ...

    def __exit__(self, *exc: object) -> None: ...


class Engine(Protocol):
    apply_lock: threading.RLock

    def snapshot(self) -> Snapshot:
        """A consistent read-only view; never blocks writers."""
        ...

    def submit(
        self,
        fn: Callable[[ReadWriter], T],
        on_applied: Callable[[T], None] | None = None,
        *,
        read_only: bool = False,
    ) -> Completion[T]:
        """Queue ``fn`` for the next group commit; the completion is set once durable
        (a ``read_only`` function's as soon as it has run). ``fn`` may be run more than
        once (its writes count once): outside the ``ReadWriter`` it may only do what is
        safe to repeat."""
        ...

    def read_now(self, fn: Callable[[ReadWriter], T]) -> T:
        """Run the read-only ``fn`` on the calling thread against the committed state,
        while no write function runs; the caller must know that no write it would have
        to see is evaluated and not yet committed."""
        ...

    def on_group_applied(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` on the commit thread after each group's ``on_applied``
        callbacks, under ``apply_lock``."""
        ...

    def write(self, fn: Callable[[ReadWriter], T]) -> T:
        """``submit(fn).result()``: run ``fn`` atomically and wait until it is durable."""
        ...

    def close(self) -> None:
        """Commit what is queued, then release the store. Idempotent."""
        ...


class WriteBatch:
    """Raw puts and deletes applied atomically: ``engine.write(batch.apply)``."""

    __slots__ = ("_ops",)

    def __init__(self) -> None:
        self._ops: list[tuple[str, bytes, bytes | None]] = []

    def put(self, db: str, key: bytes, value: bytes) -> None:
        self._ops.append((db, key, value))

    def put_many(
        self, db: str, items: Iterable[tuple[bytes, bytes]], *, append: bool = False
    ) -> None:
        self._ops.extend([(db, key, value) for key, value in items])

    def delete(self, db: str, key: bytes) -> None:
        self._ops.append((db, key, None))

    def delete_many(self, db: str, keys: Iterable[bytes]) -> None:
        self._ops.extend([(db, key, None) for key in keys])

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[tuple[str, bytes, bytes | None]]:
        """The writes in order: ``(db, key, value)``, ``value=None`` a deletion."""
        return iter(self._ops)

    def apply(self, rw: ReadWriter) -> None:
        for db, key, value in self._ops:
            if value is None:
                rw.delete(db, key)
            else:
                rw.put(db, key, value)
