"""The node's changefeed buffers shared across its processes
(:mod:`feedkv.changefeed.buffer_ledger`, :meth:`NodeBuffers.share` / :meth:`NodeBuffers.attach`):
one limit for the node process and the Spark workers together, a dead holder's bytes
given back, stall reports a job's driver reads, and the limits a job hands its tasks.

Other processes are real ones (``python -c``), killed with SIGKILL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedkv.changefeed.buffer_ledger import DISK, MEMORY, BufferLedger
from feedkv.changefeed.node_buffers import BufferLimits, NodeBuffers
from feedkv.errors import InvalidArgumentError, InvariantViolation

# A holder in another process: attaches to the node's buffers, takes what it is told,
# says how it went, then waits to be killed (or for stdin to close).
HOLDER = """
import sys
from feedkv.changefeed.node_buffers import BufferLimits, NodeBuffers
buffers = NodeBuffers.attach(BufferLimits.from_json(sys.argv[1]))
memory, disk = int(sys.argv[2]), int(sys.argv[3])
took = buffers.memory.try_acquire(memory) and buffers.disk.try_acquire(disk)
print("took" if took else "refused", flush=True)
sys.stdin.read()
"""

# A Spark worker's part, in another process: a sink attached to the node's buffers
# writes rows to a client that takes them (``take``) or holds every send (``hold``,
# once its sender holds the first batch), in batches of ``argv[4]`` rows (default 1),
# then prints how many spill files it has and waits to be killed (or for stdin to close).
SINK_WORKER = """
import sys, threading
from feedkv.changefeed.buffer_ledger import spill_prefix
from feedkv.changefeed.node_buffers import BufferLimits, NodeBuffers
from feedkv.changefeed.sink import BatchingSink, FlushConfig, Message
from feedkv.util.hlc import Timestamp

holding = threading.Event()

class Client:
    def send(self, topic, batch):
        if sys.argv[2] == "hold":
            holding.set()
            threading.Event().wait()
    def send_resolved(self, ts, topics):
        pass
    def close(self):
        pass

buffers = NodeBuffers.attach(BufferLimits.from_json(sys.argv[1]))
per_batch = int(sys.argv[4]) if len(sys.argv) > 4 else 1
sink = BatchingSink(Client(), flush=FlushConfig(messages=per_batch), buffers=buffers)
ts = Timestamp(1, 0)
for i in range(int(sys.argv[3])):
    sink.emit_row(Message("t", b"[%d]" % i, b"x" * 100, ts, ts))
if sys.argv[2] == "take":
    sink.flush()
else:
    holding.wait()
print(len(list(buffers.spill_dir.glob(spill_prefix() + "*"))), flush=True)
sys.stdin.read()
"""


class Holder:
    """A process holding bytes of the node's buffers."""

    def __init__(self, limits: BufferLimits, memory: int, disk: int = 0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, limits.to_json(), str(memory), str(disk)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.answer = self.process.stdout.readline().strip()

    @classmethod
    def sink(cls, limits: BufferLimits, mode: str, rows: int, per_batch: int = 1) -> Holder:
        """A process whose sink wrote ``rows`` into the node's buffers, ``per_batch`` to
        a batch (see SINK_WORKER); its answer: how many spill files it left."""
        holder = cls.__new__(cls)
        holder.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SINK_WORKER,
                limits.to_json(),
                mode,
                str(rows),
                str(per_batch),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.process.stdout is not None
        holder.answer = holder.process.stdout.readline().strip()
        return holder

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture
def buffers(tmp_path: Path) -> Iterator[NodeBuffers]:
    shared = NodeBuffers.of(memory=1000, disk=500)
    shared.share(tmp_path / "spill")
    yield shared


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for holder in made:
        holder.kill()


def test_the_node_and_its_workers_share_one_limit(
    buffers: NodeBuffers, holders: list[Holder]
) -> None:
    limits = buffers.limits()
    assert limits is not None
    assert buffers.memory.try_acquire(600)
    holders.append(Holder(limits, 300, 200))
    assert holders[0].answer == "took"
    assert (buffers.memory.used, buffers.disk.used) == (900, 200)
    holders.append(Holder(limits, 101))  # 900 + 101 > 1000, wherever it is asked
    assert holders[1].answer == "refused"
    assert not buffers.memory.try_acquire(101)
    assert buffers.memory.try_acquire(100)
    assert buffers.memory.peak == 1000
    buffers.memory.release(700)
    assert buffers.memory.used == 300


def test_a_killed_holder_leaves_nothing_held(buffers: NodeBuffers, holders: list[Holder]) -> None:
    limits = buffers.limits()
    assert limits is not None
    holders.append(Holder(limits, 1000, 500))
    assert holders[0].answer == "took"
    assert not buffers.memory.try_acquire(1)
    holders[0].kill()
    assert (buffers.memory.used, buffers.disk.used) == (0, 0)
    assert buffers.memory.try_acquire(1000) and buffers.disk.try_acquire(500)
    assert buffers.memory.peak == 1000


def test_a_process_cannot_release_what_it_does_not_hold(tmp_path: Path) -> None:
    ledger = BufferLedger.create(tmp_path / "ledger")
    assert ledger.try_acquire(MEMORY, 10, 100)
    with pytest.raises(InvariantViolation, match="releasing 11 bytes of column 0"):
        ledger.release(MEMORY, 11)
    with pytest.raises(InvariantViolation, match="releasing 1 bytes of column 1"):
        ledger.release(DISK, 1)
    ledger.release(MEMORY, 10)
    assert ledger.used(MEMORY) == 0


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    path.write_bytes(b"not a ledger")
    with pytest.raises(InvariantViolation, match="is not a changefeed buffer ledger"):
        BufferLedger(path).used(MEMORY)


def test_a_new_node_starts_its_ledger_and_its_stall_reports_afresh(tmp_path: Path) -> None:
    first = NodeBuffers.of(memory=100, disk=100)
    first.share(tmp_path / "spill")
    assert first.memory.try_acquire(100)
    first.report_stall(7, "the buffers are full")
    again = NodeBuffers.of(memory=100, disk=100)  # the node restarted
    again.share(tmp_path / "spill")
    assert again.memory.used == 0 and again.stall_of(7) is None


def test_a_stall_reported_in_a_worker_is_read_by_the_job_until_cleared(
    buffers: NodeBuffers,
) -> None:
    limits = buffers.limits()
    assert limits is not None
    assert buffers.stall_of(3) is None
    NodeBuffers.attach(limits).report_stall(3, "no room", since_ns=1_700_000_000_000_000_000)
    stalled = buffers.stall_of(3)
    assert stalled is not None and stalled.why == "no room"
    assert stalled.status().startswith("stalled since 2023-11-14 22:13:20 UTC: no room;")
    assert buffers.stall_of(4) is None
    buffers.clear_stall(3)
    assert buffers.stall_of(3) is None


def test_buffers_not_shared_have_no_limits_to_hand_out() -> None:
    buffers = NodeBuffers.of()
    assert buffers.limits() is None and buffers.stall_of(1) is None


def test_limits_travel_as_json(buffers: NodeBuffers) -> None:
    limits = buffers.limits()
    assert limits is not None
    assert BufferLimits.from_json(limits.to_json()) == limits
    assert json.loads(limits.to_json())["memory"] == 1000


@given(st.text(max_size=80) | st.dictionaries(st.text(max_size=12), st.integers()).map(json.dumps))
def test_bad_limits_are_a_clear_error(text: str) -> None:
    try:
        BufferLimits.from_json(text)
    except InvalidArgumentError as exc:
        assert "bad changefeed buffer limits" in str(exc)


def test_a_negative_limit_is_refused() -> None:
    text = json.dumps({"directory": "/x", "memory": -1, "disk": 0, "stall_after_s": 1})
    with pytest.raises(InvalidArgumentError, match="a negative limit"):
        BufferLimits.from_json(text)


def test_a_workers_buffer_totals_reach_the_node_and_outlive_the_worker(
    buffers: NodeBuffers, holders: list[Holder]
) -> None:
    """CockroachDB's ``changefeed.buffer_entries.*`` count every sink of the node: a
    Spark worker's too, and what it counted stays counted once it is gone."""
    limits = buffers.limits()
    assert limits is not None
    assert buffers.count("entries_in") == 0
    holders.append(Holder.sink(limits, "take", 4))
    assert holders[0].answer == "0"
    # 4 messages of 167 bytes, each in memory, sent and released
    expected = {"in": 4, "out": 4, "released": 4, "mem_acquired": 668, "mem_released": 668}
    for name, total in expected.items():
        name = name if name.startswith("mem") else f"entries_{name}"
        assert buffers.count(name) == total, name
    buffers.counts.add(entries_in=1)  # the node's own sinks count beside
    holders[0].kill()
    assert buffers.count("entries_in") == 5 and buffers.count("mem_released") == 668
    holders.append(Holder.sink(limits, "take", 2))
    assert buffers.count("entries_out") == 6
    with pytest.raises(InvariantViolation, match="no changefeed buffer total 'entries'"):
        buffers.count("entries")


def test_a_killed_workers_totals_are_exactly_what_it_buffered(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """A worker counts each row in the shared ledger as its sink takes it, not later: the
    node's totals equal what the worker buffered while it runs and once it has been
    SIGKILLed with its rows still held (nothing was waiting in its memory to be
    published)."""
    buffers = NodeBuffers.of(memory=100_000, disk=0)
    buffers.share(tmp_path / "spill")
    limits = buffers.limits()
    assert limits is not None
    # 55 rows, 10 to a batch: 5 sealed batches (each taken from the node's memory) and
    # 5 rows in the open one; the sender holds the first batch. Row i's message is 164
    # bytes and its key b"[i]".
    sealed = sum(164 + len(b"[%d]" % i) for i in range(50))
    holders.append(Holder.sink(limits, "hold", 55, per_batch=10))
    assert holders[0].answer == "0"
    expected = {
        "entries_in": 55,
        "entries_out": 10,
        "entries_released": 0,
        "mem_acquired": sealed,
        "mem_released": 0,
    }
    assert {name: buffers.count(name) for name in expected} == expected
    assert buffers.memory.used == sealed
    holders[0].kill()
    assert {name: buffers.count(name) for name in expected} == expected
    assert buffers.memory.used == 0
    holders.append(Holder.sink(limits, "hold", 13, per_batch=10))  # a new worker adds on
    assert buffers.count("entries_in") == 68 and buffers.count("entries_out") == 20


def test_a_forked_worker_counts_in_a_slot_of_its_own(buffers: NodeBuffers) -> None:
    """A worker forked from one that already counted (Spark forks its Python workers)
    counts apart from its parent, and its totals stay counted after it exits."""
    limits = buffers.limits()
    assert limits is not None
    parent = NodeBuffers.attach(limits)
    parent.counts.add(entries_in=2)
    pid = os.fork()
    if pid == 0:  # the child: counts, then leaves at once (no cleanup, as a kill)
        code = 1
        try:
            child = NodeBuffers.attach(limits)
            child.counts.add(entries_in=5, entries_out=1)
            code = 0 if child.counts.entries_in == 5 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent.counts.entries_in == 2
    # NB: the test process is the node (its totals its own) and the parent worker (its
    # totals in the ledger) at once: the node counts both, and the child's
    buffers.counts.add(entries_in=10)
    assert buffers.count("entries_in") == 10 + 2 + 5 and buffers.count("entries_out") == 1
    assert parent.count("entries_in") == 2 + 5  # a worker's own are in the ledger: once


@pytest.mark.parametrize("noticed_by", ["reading the buffers", "a job's reap", "a node restart"])
def test_a_killed_workers_spill_files_are_removed(
    tmp_path: Path, holders: list[Holder], noticed_by: str
) -> None:
    """A worker killed with SIGKILL while its sink's batches wait on disk: its files no
    longer count toward the disk limit, and they are removed, when the node next reads
    its buffers, when a running Spark job reaps them, or when the node starts again."""
    buffers = NodeBuffers.of(memory=0, disk=10_000)  # every sealed batch spills
    buffers.share(tmp_path / "spill")
    limits = buffers.limits()
    assert limits is not None
    spill = tmp_path / "spill"
    mine = spill / "feedkv-sink-local.spill"  # a file not named for an owner stays
    mine.write_bytes(b"")
    holders.append(Holder.sink(limits, "hold", 3))
    worker = holders[0].process.pid
    assert holders[0].answer == "3"  # the sender holds the first, each still on disk
    owned = [p for p in spill.glob("*.spill") if p.name.startswith(f"feedkv-sink-{worker}.")]
    assert len(owned) == 3
    assert buffers.disk.used == 3 * 167
    holders[0].kill()
    if noticed_by == "a node restart":
        again = NodeBuffers.of(memory=0, disk=10_000)
        again.share(spill)
        assert again.disk.used == 0
    elif noticed_by == "a job's reap":
        buffers.reap()  # a running Spark job's, reading nothing else
    else:
        assert buffers.disk.used == 0
    assert sorted(spill.glob("*.spill")) == [mine]
    assert buffers.disk.used == 0
