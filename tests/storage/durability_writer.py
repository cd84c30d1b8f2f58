"""A writer process for the durability test: group-committed batches until killed.

Run as ``python tests/storage/durability_writer.py STORE_DIR [FIRST_BATCH_ID]``. It opens
the store with ``sync=True``, prints ``READY``, then runs :data:`THREADS` writer threads.
Each batch is one ``engine.submit`` job that puts between :data:`MIN_KEYS` and
:data:`MAX_KEYS` keys at one timestamp; once its future completes (the group holding it
is durable), the thread prints ``ACK <batch_id> <n_keys>``. Each thread keeps
:data:`WINDOW` batches in flight so that groups hold many jobs. It never exits on its
own: the test ends it with SIGKILL. Any failure prints a traceback to stderr and exits
with status 1, which the test reports.

Layout (shared with ``test_durability.py``): key ``b/<batch id, 8 digits>/<index, 3 digits>``,
value ``batch=<batch id> keys=<n_keys> index=<index>``, so a checker can tell a partial
batch from the store alone.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from feedkv.storage import mvcc
from feedkv.storage.engine import ReadWriter
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import Clock

THREADS = 4
WINDOW = 8
MIN_KEYS = 5
MAX_KEYS = 20


def batch_key(batch_id: int, index: int) -> bytes:
    return b"b/%08d/%03d" % (batch_id, index)


def batch_value(batch_id: int, n_keys: int, index: int) -> bytes:
    return b"batch=%d keys=%d index=%d" % (batch_id, n_keys, index)


class _BatchIds:
    """Hands out consecutive batch ids to the writer threads."""

    def __init__(self, first: int) -> None:
        self._next = first
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            batch_id = self._next
            self._next += 1
            return batch_id


class _Acks:
    """Prints whole ``ACK`` lines; the lock keeps lines from different threads apart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()


def _put_batch(clock: Clock, batch_id: int, n_keys: int) -> Callable[[ReadWriter], None]:
    """One job: every key of the batch, at one timestamp."""
    ts = clock.now()

    def fn(rw: ReadWriter) -> None:
        for index in range(n_keys):
            mvcc.put(rw, batch_key(batch_id, index), ts, batch_value(batch_id, n_keys, index))

    return fn


def _writer(
    engine: LMDBEngine, clock: Clock, ids: _BatchIds, acks: _Acks, rng: random.Random
) -> None:
    try:
        in_flight: deque[tuple[int, int, Future[None]]] = deque()
        while True:
            while len(in_flight) < WINDOW:
                batch_id = ids.take()
                n_keys = rng.randint(MIN_KEYS, MAX_KEYS)
                future = engine.submit(_put_batch(clock, batch_id, n_keys))
                in_flight.append((batch_id, n_keys, future))
            batch_id, n_keys, future = in_flight.popleft()
            future.result()  # raises if the batch did not commit: it is never acknowledged
            acks.line(f"ACK {batch_id} {n_keys}")
    except BaseException:
        # NB: a writer that stops must take the process down, or the test would wait for
        # acknowledgements that never come; exit status 1 and the traceback tell it why.
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3):
        sys.exit(f"usage: {Path(argv[0]).name} STORE_DIR [FIRST_BATCH_ID]")
    store = Path(argv[1])
    first_batch_id = int(argv[2]) if len(argv) == 3 else 0
    engine = LMDBEngine(store, databases=MVCC_DATABASES, sync=True)
    clock = Clock()
    ids = _BatchIds(first_batch_id)
    acks = _Acks()
    acks.line("READY")
    threads = [
        threading.Thread(
            target=_writer,
            args=(engine, clock, ids, acks, random.Random(first_batch_id + n)),
            name=f"durability-writer-{n}",
            daemon=True,
        )
        for n in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(sys.argv)
