"""Deleting what a removed replica kept, off the thread that drives the store's replicas.

A replica its range removed leaves the store in two steps:

1. on the replica loop, one small engine transaction (its cost does not grow with the
   range): the replica's tombstone (no replica of the range with an older id is made
   here again), its Raft state and descriptor go, and a *collection record*
   (``collecting/<range id>`` -> the span whose data is still here) is written;
2. on the :class:`ReplicaCollector`'s thread: the range's data in that span goes, a page
   of entries per engine transaction (the replica loop's writes go between them), then
   the record.

Until the record goes the store installs no snapshot of that range (the loop refuses
it: :attr:`~feedkv.kv.replica_refusal.Refusal.COLLECTING`) nor of any range whose span
overlaps the record's, as the next page would delete what it installed. A crash between
the steps, or in the middle of step 2, leaves the record: the store finishes the
deletion when it starts again (:meth:`ReplicaCollector.collect` of each of
:func:`records`).
"""

from __future__ import annotations

import logging
import queue
import threading

import msgpack

from feedkv.errors import NodeUnavailableError
from feedkv.kv.range_descriptor import META
from feedkv.kv.range_move import clear_range
from feedkv.storage.engine import Completion, Engine, Reader, ReadWriter
from feedkv.util.keys import Span

__all__ = ["ReplicaCollector", "records", "write_record"]

log = logging.getLogger(__name__)

_RECORD = b"collecting/"
PAGE_ENTRIES = 4096  # entries one transaction of a collection deletes, at most


def _key(range_id: int) -> bytes:
    return _RECORD + range_id.to_bytes(8, "big")


def write_record(rw: ReadWriter, range_id: int, span: Span) -> None:
    """Note that the data in ``span`` of the removed replica of ``range_id`` is still to
    be deleted (step 1, with the replica's tombstone)."""
    rw.put(META, _key(range_id), msgpack.packb([span.start, span.end]))


def records(reader: Reader) -> dict[int, Span]:
    """The collections not finished: range id -> the span still to delete."""
    found = {}
    for key, value in reader.scan(META, _RECORD, _RECORD + b"\xff" * 9):
        start, end = msgpack.unpackb(value)
        found[int.from_bytes(key[len(_RECORD) :], "big")] = Span(start, end)
    return found


class ReplicaCollector:
    """A thread that deletes removed replicas' data, a page per transaction, one
    collection at a time, in the order asked. :meth:`pause` holds it between pages
    (for tests, and for an operator who needs the disk's writes for something else)."""

    def __init__(self, engine: Engine, node_id: int, page_entries: int = PAGE_ENTRIES) -> None:
        self._engine = engine
        self._page_entries = page_entries
        self._jobs: queue.SimpleQueue[tuple[int, Completion[None]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # orders collect() with stop()
        self._stopping = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self.pages = 0  # pages deleted so far (for tests and metrics)
        self._thread = threading.Thread(
            target=self._run, name=f"replica-gc-n{node_id}", daemon=True
        )
        self._thread.start()

    def collect(self, range_id: int) -> Completion[None]:
        """Delete the data :func:`write_record` noted for ``range_id``, then the record;
        the completion is set once the record is gone (durably), or fails with the
        engine's error, or with NodeUnavailableError when the collector stops first (the
        record stays: the next start finishes it)."""
        done: Completion[None] = Completion()
        with self._lock:  # NB: never queued behind stop's sentinel, where none would run it
            if self._stopping.is_set():
                done.set_exception(_stopped(range_id))
            else:
                self._jobs.put((range_id, done))
        return done

    def pause(self) -> None:
        """Hold the collections after the page being deleted (none are lost)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        """Stop between pages; what is not finished stays recorded."""
        with self._lock:
            self._stopping.set()
            self._jobs.put(None)
        self._running.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            range_id, done = job
            if self._stopping.is_set():
                done.set_exception(_stopped(range_id))
                continue
            try:
                finished = self._collect(range_id)
            except Exception as exc:  # NB: the record stays; the caller learns of it
                log.exception(
                    "r%d: deleting the removed replica's data failed; this store refuses the "
                    "range's snapshots until the node restarts, which deletes it again",
                    range_id,
                )
                done.set_exception(exc)
                continue
            if not finished:  # stopping: the record stays for the next start
                done.set_exception(_stopped(range_id))
                continue
            done.set_result(None)

    def _collect(self, range_id: int) -> bool:
        """Whether the collection finished (not cut short by :meth:`stop`)."""
        with self._engine.snapshot() as snap:
            span = records(snap).get(range_id)
        if span is None:
            return True  # NB: asked twice (a restart and a removal): done already
        while True:
            self._running.wait()
            if self._stopping.is_set():
                return False
            deleted = self._engine.write(lambda rw: clear_range(rw, span, self._page_entries))
            if not deleted:
                break
            self.pages += 1
        self._engine.write(lambda rw: rw.delete(META, _key(range_id)))
        return True


def _stopped(range_id: int) -> NodeUnavailableError:
    return NodeUnavailableError(
        f"the store stops: the deletion of r{range_id}'s removed replica's data is "
        "finished when it starts again"
    )
