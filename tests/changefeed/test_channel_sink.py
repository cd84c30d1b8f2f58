"""The sinkless changefeed's channel: rows in order, a bounded buffer that holds the
changefeed back, the end or the error after the rows, and a reader that can leave."""

from __future__ import annotations

import threading

import pytest

from feedkv.changefeed.sink import Message, SinkError
from feedkv.changefeed.sinkless import ChannelSink
from feedkv.testing.sink_conformance import SinkSetup
from feedkv.util.hlc import Timestamp

TS = Timestamp(10, 0)


def message(i: int) -> Message:
    return Message("t", b"[%d]" % i, b'{"after": {"k": %d}}' % i, TS, TS)


def test_rows_arrive_in_order_and_the_iteration_ends_with_the_feed() -> None:
    channel = ChannelSink()
    for i in range(1000):
        channel.emit_row(message(i))
    channel.end()
    rows = list(channel.take())
    assert [key for _topic, key, _value in rows] == [f"[{i}]" for i in range(1000)]
    assert rows[0] == ("t", "[0]", '{"after": {"k": 0}}')


def test_bytes_stay_bytes_for_avro() -> None:
    channel = ChannelSink(text=False)
    channel.emit_row(message(1))
    channel.end()
    assert list(channel.take()) == [("t", b"[1]", b'{"after": {"k": 1}}')]


def test_the_changefeeds_error_is_raised_after_its_rows() -> None:
    channel = ChannelSink()
    channel.emit_row(message(1))
    channel.end(RuntimeError("the sink broke"))
    rows = channel.take()
    assert next(rows)[1] == "[1]"
    with pytest.raises(RuntimeError, match="the sink broke"):
        next(rows)
    assert channel.poll(0) is None  # ended: nothing more, no error twice


def test_poll_waits_for_a_row_from_another_thread() -> None:
    channel = ChannelSink()
    writer = threading.Thread(target=lambda: channel.emit_row(message(7)))
    writer.start()
    assert channel.poll(10) == ("t", "[7]", '{"after": {"k": 7}}')
    writer.join()


def test_poll_raises_timeout_when_no_row_comes() -> None:
    with pytest.raises(TimeoutError, match="no changefeed row"):
        ChannelSink().poll(0.01)


def test_a_full_buffer_holds_the_changefeed_back_until_the_reader_takes() -> None:
    channel = ChannelSink(capacity=2)
    done = [threading.Event() for _ in range(3)]

    def write() -> None:
        for i, event in enumerate(done):
            channel.emit_row(message(i))
            event.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert done[1].wait(10)
    assert not done[2].wait(0.2)  # wait-ok: the third row has no room
    assert channel.poll(10) is not None
    assert done[2].wait(10)
    writer.join()
    assert [channel.poll(10), channel.poll(10)] == [
        ("t", "[1]", '{"after": {"k": 1}}'),
        ("t", "[2]", '{"after": {"k": 2}}'),
    ]


def test_a_reader_that_leaves_fails_a_blocked_changefeed_and_loses_nothing_it_took() -> None:
    channel = ChannelSink(capacity=1)
    channel.emit_row(message(0))
    failed: list[BaseException] = []

    def write() -> None:
        try:
            channel.emit_row(message(1))
        except SinkError as exc:
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    channel.close()
    writer.join(10)
    assert not writer.is_alive()
    assert len(failed) == 1 and "reader went away" in str(failed[0])
    with pytest.raises(SinkError):
        channel.emit_row(message(2))


def test_close_ends_a_waiting_reader() -> None:
    channel = ChannelSink()
    rows: list[tuple[object, ...]] = []
    reader = threading.Thread(target=lambda: rows.extend(channel.take()))
    reader.start()
    channel.close()
    reader.join(10)
    assert not reader.is_alive()
    assert rows == []


# The sink contract.


def gone(channel: ChannelSink) -> ChannelSink:
    """``channel`` once its reader went away: the channel's destination failing."""
    channel.close()
    return channel


@pytest.fixture(params=[True, False], ids=["text", "bytes"])
def channel_setup(request: pytest.FixtureRequest) -> SinkSetup:
    """A channel, read as a client of a sinkless changefeed reads it (polling without
    waiting: what is buffered is what was delivered)."""
    text: bool = request.param
    channel = ChannelSink(text=text)
    read: list[bytes] = []

    def reader() -> dict[str, list[bytes]]:
        while True:
            try:
                item = channel.poll(0)
            except TimeoutError:
                break
            if item is None:
                break
            value = item[2]
            read.append(value.encode() if isinstance(value, str) else value)
        return {"": list(read)}

    return SinkSetup(lambda: channel, reader, failing=lambda: gone(ChannelSink(text=text)))


def test_the_channel_keeps_the_sink_contract(channel_setup: SinkSetup) -> None:
    channel_setup.check()
