"""The generic batching sink: batches, order, retries, spilling and backpressure."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import (
    BatchingSink,
    FlushConfig,
    Message,
    RetryConfig,
    SinkError,
    parse_sink_uri,
)
from feedkv.errors import SQLError
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

TS = Timestamp(1_700_000_000_000_000_000, 0)


def message(i: int, topic: str = "t", size: int = 10) -> Message:
    return Message(topic, f"[{i}]".encode(), b"x" * size, TS, TS)


class RecordingClient:
    """A sink client that records batches; it can fail a number of sends, or block
    until released."""

    def __init__(self, failures: int = 0) -> None:
        self.batches: list[tuple[str, list[bytes]]] = []
        self.resolved: list[Timestamp] = []
        self.failures = failures
        self.gate = threading.Event()
        self.gate.set()
        self.closed = False

    def send(self, topic: str, batch: list[Message]) -> None:
        self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise SinkError("the sink is down")
        self.batches.append((topic, [m.key for m in batch]))

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        self.resolved.append(ts)

    def close(self) -> None:
        self.closed = True


def no_sleep(_seconds: float) -> None:
    pass


def test_batches_are_sealed_by_count_and_delivered_in_order() -> None:
    client = RecordingClient()
    sink = BatchingSink(client, flush=FlushConfig(messages=3))
    for i in range(7):
        sink.emit_row(message(i))
    sink.flush()
    sink.close()
    assert [keys for _t, keys in client.batches] == [
        [b"[0]", b"[1]", b"[2]"],
        [b"[3]", b"[4]", b"[5]"],
        [b"[6]"],
    ]
    assert client.closed


def test_each_topic_has_its_own_batch() -> None:
    client = RecordingClient()
    sink = BatchingSink(client)
    sink.emit_row(message(1, "a"))
    sink.emit_row(message(2, "b"))
    sink.emit_row(message(3, "a"))
    sink.flush()
    sink.close()
    assert sorted(client.batches) == [("a", [b"[1]", b"[3]"]), ("b", [b"[2]"])]


def test_a_failing_delivery_is_retried_then_succeeds() -> None:
    client = RecordingClient(failures=2)
    sink = BatchingSink(client, retry=RetryConfig(max=3, backoff=0.001), sleep=no_sleep)
    sink.emit_row(message(1))
    sink.flush()
    sink.close()
    assert client.batches == [("t", [b"[1]"])]
    assert sink.stats["retries"] == 2


def test_a_delivery_that_keeps_failing_fails_the_flush_and_later_emits() -> None:
    client = RecordingClient(failures=100)
    sink = BatchingSink(client, retry=RetryConfig(max=2, backoff=0.001), sleep=no_sleep)
    sink.emit_row(message(1))
    with pytest.raises(SinkError, match="down"):
        sink.flush()
    with pytest.raises(SinkError):
        sink.emit_row(message(2))
    sink.close()
    assert client.batches == []


class BrokenClient(RecordingClient):
    """Fails its first send with an error that is not a SinkError (a bug, bad data)."""

    def send(self, topic: str, batch: list[Message]) -> None:
        if not self.batches and self.failures:
            self.failures = 0
            raise ValueError("a column changed type")
        super().send(topic, batch)


def test_a_client_error_that_is_not_a_sink_error_fails_the_flush_instead_of_the_sender() -> None:
    client = BrokenClient(failures=1)
    sink = BatchingSink(client, retry=RetryConfig(max=0))
    sink.emit_row(message(1))
    raised: list[BaseException] = []

    def flush() -> None:
        try:
            sink.flush()
        except SinkError as exc:
            raised.append(exc)

    flushing = threading.Thread(target=flush)
    flushing.start()
    flushing.join(timeout=30)
    assert not flushing.is_alive(), "the flush is waiting on a sender that died"
    assert [str(e) for e in raised] == [
        "the sink could not take a batch: ValueError: a column changed type"
    ]
    sink.reset()  # the sender still runs: rows go through again
    sink.emit_row(message(2))
    sink.flush()
    sink.close()
    assert client.batches == [("t", [b"[2]"])]


def test_reset_after_a_failure_drops_what_was_not_sent_and_takes_rows_again() -> None:
    client = RecordingClient(failures=3)
    sink = BatchingSink(
        client,
        flush=FlushConfig(messages=1),
        retry=RetryConfig(max=2, backoff=0.001),
        sleep=no_sleep,
    )
    sink.emit_row(message(1))  # its batch fails three times: past its retries
    with pytest.raises(SinkError, match="down"):
        sink.flush()
    sink.reset()
    sink.emit_row(message(1))  # the changefeed emits again from its resolved timestamp
    sink.emit_row(message(2))
    sink.flush()
    sink.close()
    assert client.batches == [("t", [b"[1]"]), ("t", [b"[2]"])]


def test_resolved_is_delivered_after_the_rows_it_follows() -> None:
    client = RecordingClient()
    sink = BatchingSink(client)
    sink.emit_row(message(1))
    sink.flush()
    sink.emit_resolved(TS, ["t"])
    sink.close()
    assert client.batches == [("t", [b"[1]"])] and client.resolved == [TS]


def test_batches_past_the_memory_budget_spill_to_disk_and_still_arrive(tmp_path: Path) -> None:
    client = RecordingClient()
    client.gate.clear()  # the sink is slow: nothing is delivered yet
    sink = BatchingSink(
        client,
        flush=FlushConfig(messages=1),
        memory_budget=200,
        spill_dir=str(tmp_path),
    )
    for i in range(10):
        sink.emit_row(message(i, size=100))
    assert sink.stats["spilled"] > 0
    assert list(tmp_path.iterdir())
    client.gate.set()
    sink.flush()
    sink.close()
    assert [keys[0] for _t, keys in client.batches] == [f"[{i}]".encode() for i in range(10)]
    assert not list(tmp_path.iterdir())  # spill files are removed once delivered


def test_a_full_disk_budget_stalls_emit_until_the_sink_catches_up(tmp_path: Path) -> None:
    client = RecordingClient()
    client.gate.clear()
    sink = BatchingSink(
        client,
        flush=FlushConfig(messages=1),
        memory_budget=150,
        disk_budget=150,
        spill_dir=str(tmp_path),
    )
    emitted = threading.Event()

    def emit_many() -> None:
        for i in range(10):
            sink.emit_row(message(i, size=100))
        emitted.set()

    writer = threading.Thread(target=emit_many)
    writer.start()
    assert not emitted.wait(0.3)  # wait-ok: proving the writer stays blocked
    client.gate.set()
    assert emitted.wait(30)
    writer.join()
    sink.flush()
    sink.close()
    assert len(client.batches) == 10


def test_age_seals_a_batch_without_a_flush() -> None:
    client = RecordingClient()
    sink = BatchingSink(client, flush=FlushConfig(messages=100, frequency=0.01))
    sink.emit_row(message(1))
    wait_until(lambda: client.batches, timeout_s=30, what="the aged batch")
    sink.close()
    assert client.batches == [("t", [b"[1]"])]


def test_sink_uri_parameters_and_options_are_checked_against_the_sink() -> None:
    now = TS
    json_options = parse_options([], now=now)
    uri = parse_sink_uri("file:///tmp/x?file_size=1MiB&partition_format=hourly", json_options)
    assert uri.size_param("file_size", 0) == 1 << 20
    with pytest.raises(SQLError, match="more than once"):
        parse_sink_uri("file:///tmp/x?file_size=1&file_size=2", json_options)
    with pytest.raises(SQLError, match="not a size"):
        parse_sink_uri("file:///tmp/x?file_size=big", json_options).size_param("file_size", 0)
    gzip = parse_options([("compression", "gzip")], now=now)
    with pytest.raises(SQLError, match="compression is not usable with the kafka sink"):
        parse_sink_uri("kafka://h:1", gzip)
