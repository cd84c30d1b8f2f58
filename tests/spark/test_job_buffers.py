"""A Spark changefeed job within the node's buffer limits, without Spark: the limits a
job hands its tasks, the size of what a task has in flight, a task that stalls (reports
it, waits for its sink's backlog, then fails with the stall), and when a stalled job
may start again. End to end on a node process: tests/changefeed/test_node_buffer_limits.py."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.node_buffers import BufferLimits, NodeBuffers
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import BatchingSink, FlushConfig, Message, SinkError, SinkStalledError
from feedkv.errors import InvalidArgumentError
from feedkv.spark.blocks import BLOCK_BYTES
from feedkv.spark.changefeed_job import (
    MIN_BLOCK_BYTES,
    ChangefeedStreamWriter,
    JobOptions,
    block_bytes,
    encode_spec,
)
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

TS = Timestamp(1_700_000_000_000_000_000, 0)
SPEC = ChangefeedSpec(
    targets=(),
    topics={},
    options=parse_options([], now=TS),
    start=TS,
    sink_uri="webhook-http://127.0.0.1:1/hook",
)


class HeldClient:
    """A sink client that holds every send until :attr:`gate` is set, then takes it (or
    fails it, with ``fail``)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.gate = threading.Event()
        self.fail = fail
        self.sent = 0

    def send(self, topic: str, batch: list[Message]) -> None:
        if not self.gate.wait(30):
            raise SinkError("held too long")
        if self.fail:
            raise SinkError("the endpoint refused it")
        self.sent += len(batch)

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        pass

    def close(self) -> None:
        self.gate.set()


@pytest.fixture
def buffers(tmp_path: Path) -> NodeBuffers:
    shared = NodeBuffers.of(memory=1000, disk=0, stall_after_s=0.05)
    shared.share(tmp_path / "spill")
    return shared


def test_a_task_has_a_sixteenth_of_the_memory_limit_in_flight_at_most() -> None:
    assert block_bytes(None) == BLOCK_BYTES
    assert block_bytes(BufferLimits("/x", 2 << 20, 0)) == 128 << 10
    assert block_bytes(BufferLimits("/x", 1 << 30, 0)) == BLOCK_BYTES
    assert block_bytes(BufferLimits("/x", 1000, 0)) == MIN_BLOCK_BYTES


def test_the_job_hands_its_tasks_the_node_limits(buffers: NodeBuffers) -> None:
    limits = buffers.limits()
    assert limits is not None
    options = {"url": "feedkv://127.0.0.1:1", "spec": encode_spec(SPEC)}
    assert JobOptions.from_options(options).buffers is None
    job = JobOptions.from_options({**options, "buffers": limits.to_json()})
    assert job.buffers == limits
    with pytest.raises(InvalidArgumentError, match="bad changefeed buffer limits"):
        JobOptions.from_options({**options, "buffers": "{"})


def stalled_sink(buffers: NodeBuffers, client: HeldClient) -> BatchingSink:
    """A sink whose first batch the client holds and whose second finds no room."""
    sink = BatchingSink(client, flush=FlushConfig(messages=1), buffers=buffers)
    sink.emit_row(Message("t", b"[1]", b"x" * 800, TS, TS))
    with pytest.raises(SinkStalledError) as raised:
        sink.emit_row(Message("t", b"[2]", b"x" * 800, TS, TS))
    sink.stall = raised.value  # type: ignore[attr-defined]
    return sink


def test_a_stalled_task_reports_it_and_waits_for_its_backlog(buffers: NodeBuffers) -> None:
    limits = buffers.limits()
    assert limits is not None
    writer = ChangefeedStreamWriter(JobOptions("feedkv://127.0.0.1:1", SPEC, 5, buffers=limits))
    client = HeldClient()
    sink = stalled_sink(buffers, client)
    stall = sink.stall  # type: ignore[attr-defined]
    waited = threading.Thread(target=writer._wait_out, args=(sink, stall))
    waited.start()
    stalled = wait_until(lambda: buffers.stall_of(5), timeout_s=30, what="the stall report")
    assert "buffers are full" in stalled.why
    assert waited.is_alive()  # the backlog is still held
    client.gate.set()
    waited.join(30)
    assert not waited.is_alive() and client.sent == 1
    assert buffers.memory.used == 0
    sink.close()


def test_a_stalled_task_whose_sink_gives_up_fails_with_the_sink_error(
    buffers: NodeBuffers,
) -> None:
    limits = buffers.limits()
    assert limits is not None
    writer = ChangefeedStreamWriter(JobOptions("feedkv://127.0.0.1:1", SPEC, 6, buffers=limits))
    client = HeldClient(fail=True)
    client.gate.set()
    sink = stalled_sink(buffers, client)
    with pytest.raises(SinkError, match="the endpoint refused it"):
        writer._wait_out(sink, sink.stall)  # type: ignore[attr-defined]
    sink.close()


def test_a_stalled_job_restarts_once_a_sixteenth_of_memory_or_disk_is_free() -> None:
    buffers = NodeBuffers.of(memory=1600, disk=160)
    assert buffers.memory.try_acquire(1600) and buffers.disk.try_acquire(160)
    assert not buffers.has_room()
    buffers.disk.release(9)
    assert not buffers.has_room()
    buffers.disk.release(1)
    assert buffers.has_room()
    buffers.disk.try_acquire(10)
    buffers.memory.release(100)
    assert buffers.has_room()


def test_a_stalled_task_with_no_backlog_waits_for_room_in_the_node(
    buffers: NodeBuffers,
) -> None:
    limits = buffers.limits()
    assert limits is not None
    writer = ChangefeedStreamWriter(JobOptions("feedkv://127.0.0.1:1", SPEC, 7, buffers=limits))
    client = HeldClient()
    client.gate.set()
    sink = BatchingSink(client, flush=FlushConfig(messages=1), buffers=buffers)
    assert buffers.memory.try_acquire(1000)  # another task's backlog holds it all
    with pytest.raises(SinkStalledError) as raised:
        sink.emit_row(Message("t", b"[1]", b"x" * 800, TS, TS))
    waited = threading.Thread(target=writer._wait_out, args=(sink, raised.value))
    waited.start()
    wait_until(lambda: buffers.stall_of(7), timeout_s=30, what="the stall report")
    assert waited.is_alive()  # its own sink holds nothing, but the node has no room
    buffers.memory.release(300)  # room, but not for its batch (864 bytes)
    assert buffers.has_room() and not buffers.has_room(raised.value.needed)
    assert waited.is_alive()
    buffers.memory.release(700)
    waited.join(30)
    assert not waited.is_alive()
    sink.close()
