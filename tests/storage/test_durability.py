"""Durability of group commit when the writing process dies by SIGKILL.

A subprocess (``durability_writer.py``) writes batches through ``engine.submit`` with
``sync=True`` and prints ``ACK <batch id> <n keys>`` once each batch's future completes.
The test kills it with SIGKILL after a chosen number of acknowledgements, while other
batches are still in flight, then reopens the store and checks that every acknowledged
batch is there in full and that no batch, acknowledged or not, is there in part.

All runs share one store, so every run after the first also reopens a store left behind
by a killed process, and the checks cover the batches of every earlier run.

NB: SIGKILL ends the process, not the machine: the page cache survives, so this tests
that a future completes only after its group committed and that a group lands whole; it
cannot test that the fsync happened.
"""

from __future__ import annotations

import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from feedkv.storage import mvcc
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import Span, prefix_end

WRITER = Path(__file__).with_name("durability_writer.py")

# Acknowledged batches after which each run is killed, in order, on one store.
_rng = random.Random(20240611)
KILL_POINTS = (1, 10, 50, 200, 1000, 3000, *(_rng.randint(2, 2000) for _ in range(3)))
IDS_PER_RUN = 1_000_000  # run r writes batch ids [r * IDS_PER_RUN, (r + 1) * IDS_PER_RUN)
RUN_DEADLINE_SECONDS = 20.0

BATCH_PREFIX = b"b/"
KEY_PATTERN = re.compile(rb"b/(\d{8})/(\d{3})")
VALUE_PATTERN = re.compile(rb"batch=(\d+) keys=(\d+) index=(\d+)")
ACK_PATTERN = re.compile(r"ACK (\d+) (\d+)")


@dataclass(frozen=True, slots=True)
class StoredKey:
    index: int
    value: bytes
    ts: Timestamp


class _Lines:
    """The writer's stdout, line by line, with a deadline (a thread drains the pipe)."""

    def __init__(self, pipe: IO[str]) -> None:
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self._thread.start()

    def _drain(self, pipe: IO[str]) -> None:
        for line in pipe:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def next(self, deadline: float) -> str | None:
        """The next line, ``None`` at end of stream; raises ``queue.Empty`` at the deadline."""
        return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))

    def join(self, timeout: float) -> None:
        """Wait for end of stream (the writer has exited, so it comes at once)."""
        self._thread.join(timeout)


def _write_until_killed(
    store: Path, first_batch_id: int, kill_after: int, log: Path
) -> dict[int, int]:
    """Run the writer until it has acknowledged ``kill_after`` batches, then SIGKILL it.

    Returns the acknowledged batches, ``{batch id: number of keys}``.
    """
    acked: dict[int, int] = {}
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(store), str(first_batch_id)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert proc.stdout is not None
    lines = _Lines(proc.stdout)
    deadline = time.monotonic() + RUN_DEADLINE_SECONDS
    try:
        ready = lines.next(deadline)
        while ready == "READY" and len(acked) < kill_after:
            line = lines.next(deadline)
            if line is None:
                break
            match = ACK_PATTERN.fullmatch(line)
            if match is None:
                pytest.fail(f"unexpected line from the writer: {line!r}")
            acked[int(match[1])] = int(match[2])
    except queue.Empty:
        pytest.fail(
            f"the writer acknowledged only {len(acked)} of {kill_after} batches in "
            f"{RUN_DEADLINE_SECONDS:.0f}s; stderr:\n{log.read_text()}"
        )
    finally:
        proc.kill()
        returncode = proc.wait(timeout=RUN_DEADLINE_SECONDS)
        lines.join(timeout=RUN_DEADLINE_SECONDS)
        proc.stdout.close()
    if ready != "READY" or returncode != -signal.SIGKILL:
        pytest.fail(
            f"the writer stopped on its own (first line {ready!r}, exit status {returncode}) "
            f"after {len(acked)} acknowledgements; stderr:\n{log.read_text()}"
        )
    return acked


def _stored_batches(store: Path) -> dict[int, list[StoredKey]]:
    """Every batch key in the store, grouped by batch id."""
    batches: dict[int, list[StoredKey]] = defaultdict(list)
    with (
        LMDBEngine(store, databases=MVCC_DATABASES, sync=True) as engine,
        engine.snapshot() as snapshot,
    ):
        span = Span(BATCH_PREFIX, prefix_end(BATCH_PREFIX))
        for row in mvcc.scan(snapshot, span, MAX_TIMESTAMP).rows:
            match = KEY_PATTERN.fullmatch(row.key)
            assert match is not None, f"unexpected key {row.key!r} in the store"
            batches[int(match[1])].append(StoredKey(int(match[2]), row.value, row.ts))
    return batches


def _batch_problems(batch_id: int, keys: list[StoredKey], expected_keys: int | None) -> list[str]:
    """What is wrong with one stored batch: missing or extra keys, bad values, mixed times.

    ``expected_keys`` is the key count the writer acknowledged, or ``None`` for a batch that
    committed without being acknowledged (its values still say how many keys it has).
    """
    problems = []
    counts = set()
    for key in keys:
        match = VALUE_PATTERN.fullmatch(key.value)
        if match is None or int(match[1]) != batch_id or int(match[3]) != key.index:
            problems.append(f"batch {batch_id}: key {key.index} holds {key.value!r}")
            continue
        counts.add(int(match[2]))
    if expected_keys is not None:
        counts.add(expected_keys)
    if len(counts) != 1:
        return [*problems, f"batch {batch_id}: conflicting key counts {sorted(counts)}"]
    (n_keys,) = counts
    indexes = sorted(key.index for key in keys)
    if indexes != list(range(n_keys)):
        missing = sorted(set(range(n_keys)) - set(indexes))
        problems.append(
            f"batch {batch_id} is partial: has keys {indexes} of {n_keys}, missing {missing}"
        )
    if len({key.ts for key in keys}) > 1:
        problems.append(f"batch {batch_id}: keys at different timestamps")
    return problems


@pytest.mark.slow(15)
@pytest.mark.timeout(90)
def test_every_acknowledged_batch_survives_sigkill(tmp_path: Path) -> None:
    """Every acknowledged batch is durable and whole; no batch is ever partly stored."""
    store = tmp_path / "store"
    acked: dict[int, int] = {}
    for run, kill_after in enumerate(KILL_POINTS):
        first_batch_id = run * IDS_PER_RUN
        log = tmp_path / f"writer-{run}.stderr"
        acked |= _write_until_killed(store, first_batch_id, kill_after, log)
        stored = _stored_batches(store)

        where = f"after run {run} (killed after {kill_after} acknowledgements)"
        lost = sorted(set(acked) - set(stored))
        assert not lost, f"{where}: {len(lost)} acknowledged batches lost, first {lost[:10]}"
        foreign = [batch_id for batch_id in stored if batch_id >= (run + 1) * IDS_PER_RUN]
        assert not foreign, f"{where}: batches from no run: {foreign[:10]}"
        problems = [
            problem
            for batch_id, keys in sorted(stored.items())
            for problem in _batch_problems(batch_id, keys, acked.get(batch_id))
        ]
        assert not problems, f"{where}: {len(problems)} problems:\n" + "\n".join(problems[:20])
