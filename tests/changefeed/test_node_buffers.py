"""The node's changefeed buffer limits (:mod:`feedkv.changefeed.node_buffers`) as its
sinks share them: one byte budget, memory then disk across every sink of the node, and
:class:`~feedkv.changefeed.sink.SinkStalledError` once neither has room; a stalled
thread-runner feed restarts only once there is room again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import Changefeed, ChangefeedSpec
from feedkv.changefeed.node_buffers import ByteBudget, NodeBuffers
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import BatchingSink, FlushConfig, Message, SinkError, SinkStalledError
from feedkv.errors import InvariantViolation
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

TS = Timestamp(1_700_000_000_000_000_000, 0)


def message(i: int, topic: str = "t", size: int = 100) -> Message:
    return Message(topic, f"[{i}]".encode(), b"x" * size, TS, TS)


class HeldClient:
    """A sink client that holds every send until :attr:`gate` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.keys: list[bytes] = []

    def send(self, topic: str, batch: list[Message]) -> None:
        if not self.gate.wait(30):
            raise SinkError("held too long")
        self.keys += [m.key for m in batch]

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        pass

    def close(self) -> None:
        self.gate.set()


def test_a_budget_never_goes_past_its_limit_nor_below_zero() -> None:
    budget = ByteBudget("memory", 100)
    assert budget.try_acquire(60) and not budget.try_acquire(41) and budget.try_acquire(40)
    assert (budget.used, budget.peak) == (100, 100)
    budget.release(70)
    assert budget.used == 30 and budget.peak == 100
    with pytest.raises(InvariantViolation, match="releasing 31 bytes but only 30"):
        budget.release(31)


def test_sinks_share_the_node_budget_spill_past_it_and_stall_past_the_disk(
    tmp_path: Path,
) -> None:
    # a message is 167 bytes (key, value, 64 of overhead): three fit in memory, two on disk
    buffers = NodeBuffers.of(memory=510, disk=340, spill_dir=tmp_path / "spill", stall_after_s=0.2)
    first, second = HeldClient(), HeldClient()
    a = BatchingSink(first, flush=FlushConfig(messages=1), buffers=buffers)
    b = BatchingSink(second, flush=FlushConfig(messages=1), buffers=buffers)
    try:
        for i in range(3):  # a's sender holds the first, the next two wait in memory
            a.emit_row(message(i))
        assert (buffers.memory.used, buffers.disk.used) == (501, 0)
        for i in range(2):  # b finds the node's memory taken by a: it spills
            b.emit_row(message(i))
        assert (buffers.memory.used, buffers.disk.used) == (501, 334)
        assert len(list((tmp_path / "spill").iterdir())) == 2
        with pytest.raises(SinkStalledError, match="buffers are full"):
            b.emit_row(message(2))
        assert (buffers.memory.peak, buffers.disk.peak) == (501, 334)
        first.gate.set()
        second.gate.set()
        assert a.wait_drained(30) and b.wait_drained(30)
        assert buffers.memory.used == 0 and buffers.disk.used == 0
        assert not list((tmp_path / "spill").iterdir())
        assert first.keys == [f"[{i}]".encode() for i in range(3)]
        counts = buffers.counts  # b's third entry was dropped with the stall
        assert (counts.entries_in, counts.entries_out, counts.entries_released) == (6, 5, 6)
        assert counts.mem_acquired == counts.mem_released == 501
    finally:
        first.gate.set()
        second.gate.set()
        a.close()
        b.close()


def test_a_batch_the_sender_seals_while_its_emitter_waits_for_room_is_sealed_once() -> None:
    # The emitter waits for room to seal a full batch; the sender finds the same batch
    # aged and seals it as room appears. Whichever wins, the batch is sealed once and
    # its bytes taken once (the emitter raised KeyError when the sender won).
    for _ in range(10):
        buffers = NodeBuffers.of(memory=1000, disk=0, stall_after_s=10)
        client = HeldClient()
        client.gate.set()
        sink = BatchingSink(client, flush=FlushConfig(messages=2, frequency=0.01), buffers=buffers)
        try:
            assert buffers.memory.try_acquire(1000)  # another sink holds all of it
            sink.emit_row(message(1))
            released = threading.Timer(0.15, buffers.memory.release, (1000,))
            released.start()
            sink.emit_row(message(2))  # waits for room, races the sender's aged seal
            released.join()
            assert sink.wait_drained(30)
            assert client.keys == [b"[1]", b"[2]"]
            assert buffers.memory.used == 0
        finally:
            sink.close()


class CountedBuffers(NodeBuffers):
    """The node's buffers, counting each time a stalled feed asks whether there is room
    (so a test waits for the feed to have looked, not for time to pass)."""

    def __init__(self, memory: int) -> None:
        super().__init__(ByteBudget("changefeed memory", memory), ByteBudget("disk", 0))
        self.stall_after_s = 0.05
        self.looked = threading.Condition()
        self.looks = 0

    def has_room(self, needed: int = 0) -> bool:
        room = super().has_room(needed)
        with self.looked:
            self.looks += 1
            self.looked.notify_all()
        return room

    def wait_looks(self, n: int) -> None:
        with self.looked:
            assert self.looked.wait_for(lambda: self.looks >= n, 30), f"looked {self.looks}"


def test_a_stalled_thread_feed_with_no_backlog_waits_for_room_before_it_restarts(db: DB) -> None:
    # Another feed's sink holds all of the node's memory: this feed's sink, holding
    # nothing of its own, stalls on its first batch. It must not restart (and read and
    # stall again) until the node has room for that batch.
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    snapshot = catalog.Snapshot(db, db.now())
    table = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    now = db.now()
    spec = ChangefeedSpec((Target(table.id),), {table.id: "t"}, parse_options((), now=now), now)
    buffers = CountedBuffers(memory=1000)
    client = HeldClient()
    client.gate.set()
    sink = BatchingSink(client, flush=FlushConfig(messages=1), buffers=buffers)
    feed = Changefeed(db, spec, sink)
    assert buffers.memory.try_acquire(1000)  # the other feed's backlog
    runs = threading.Thread(target=feed.run, daemon=True)
    runs.start()
    try:
        stalled = wait_until(lambda: feed.stalled, timeout_s=30, what="the feed to stall")
        looked = buffers.looks
        buffers.wait_looks(looked + 3)  # it looked for room three times and found none
        assert feed.stalled is stalled and client.keys == []
        buffers.memory.release(1000)
        wait_until(lambda: client.keys == [b"[1]"], timeout_s=30, what="the row at the sink")
        assert feed.stalled is None
    finally:
        feed.close()
        runs.join(30)
        sink.close()
    assert not runs.is_alive()
