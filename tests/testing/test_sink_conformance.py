"""The sink conformance kit itself: a sink that keeps every promise passes, and a sink
broken in one way fails naming the contract it broke."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterable, Mapping, Sequence

import pytest

from feedkv.changefeed.sink import Message, SinkError
from feedkv.testing.sink_conformance import (
    SinkContractViolation,
    check_sink,
    kit_message,
)
from feedkv.util.hlc import Timestamp


class Destination:
    """Where the fake sinks deliver: one stream per topic, resolved markers on each."""

    def __init__(self) -> None:
        self.streams: dict[str, list[bytes]] = {}
        self.down = False

    def append(self, topic: str, payload: bytes) -> None:
        if self.down:
            raise SinkError("the destination is down")
        self.streams.setdefault(topic, []).append(payload)

    def read(self) -> Mapping[str, Sequence[bytes]]:
        return {stream: list(payloads) for stream, payloads in self.streams.items()}


class GoodSink:
    """Buffers rows until flush; keeps every promise."""

    def __init__(self, destination: Destination) -> None:
        self.destination = destination
        self.buffer: list[Message] = []
        self.closed = False

    def emit_row(self, message: Message) -> None:
        if self.closed:
            raise SinkError("the sink is closed")
        self.buffer.append(message)

    def flush(self) -> None:
        if self.closed:
            raise SinkError("the sink is closed")
        for message in self.buffer:
            assert message.value is not None
            self.destination.append(message.topic, message.value)
        self.buffer.clear()

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        for topic in sorted(set(topics)):
            self.destination.append(topic, f'{{"resolved": "{ts}"}}'.encode())

    def close(self) -> None:
        self.closed = True
        self.buffer.clear()

    def reset(self) -> None:
        self.buffer.clear()


class DroppingSink(GoodSink):
    """Loses every fifth row."""

    def emit_row(self, message: Message) -> None:
        self.emitted = getattr(self, "emitted", 0) + 1
        if self.emitted % 5:
            super().emit_row(message)


class LazySink(GoodSink):
    """Flush returns before the rows are delivered: they go out with the next marker."""

    def flush(self) -> None:
        pass

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        super().emit_resolved(ts, topics)
        super().flush()


class MarkerFirstSink(GoodSink):
    """Writes a resolved marker ahead of the rows it covers."""

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        for topic in sorted(set(topics)):
            stream = self.destination.streams.setdefault(topic, [])
            stream.insert(len(stream) // 2, f'{{"resolved": "{ts}"}}'.encode())


class ReorderingSink(GoodSink):
    """Delivers each flush's rows newest first."""

    def flush(self) -> None:
        self.buffer.reverse()
        super().flush()


class InventingSink(GoodSink):
    """Delivers a row nobody emitted."""

    def flush(self) -> None:
        made_up = kit_message("t", 99, Timestamp(1, 0))
        self.buffer.append(made_up)
        super().flush()


class CarelessCloseSink(GoodSink):
    """Takes rows after close and drops them silently."""

    def emit_row(self, message: Message) -> None:
        if not self.closed:
            super().emit_row(message)


class ForgetfulCloseSink(GoodSink):
    """Deletes what it delivered when closed."""

    def close(self) -> None:
        super().close()
        self.destination.streams.clear()


class HangingCloseSink(GoodSink):
    """A second close waits for ever (until the test lets it go)."""

    release = threading.Event()

    def close(self) -> None:
        if self.closed:
            self.release.wait()
        super().close()


class SilentFailureSink(GoodSink):
    """Swallows the failures of its destination: flush returns as if all were durable."""

    def flush(self) -> None:
        try:
            super().flush()
        except SinkError:
            self.buffer.clear()

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        with contextlib.suppress(SinkError):
            super().emit_resolved(ts, topics)


class HangingFailureSink(GoodSink):
    """Waits for its destination to come back instead of failing."""

    release = threading.Event()

    def flush(self) -> None:
        if self.destination.down:
            self.release.wait()
        super().flush()


class StickyFailureSink(GoodSink):
    """Keeps failing after reset, though its destination is back."""

    failed = False

    def flush(self) -> None:
        if self.failed:
            raise SinkError("the destination was down")
        try:
            super().flush()
        except SinkError:
            self.failed = True
            raise


def run_kit(sink_class: type[GoodSink], *, deadline_s: float = 30.0) -> None:
    destination = Destination()
    down = Destination()
    down.down = True

    def recover() -> None:
        down.down = False

    check_sink(
        lambda: sink_class(destination),
        destination.read,
        failing=lambda: sink_class(down),
        recover=recover,
        deadline_s=deadline_s,
    )


def test_a_sink_that_keeps_every_promise_passes() -> None:
    run_kit(GoodSink)


def test_a_sink_that_keeps_nothing_is_checked_for_its_calls_alone() -> None:
    down = Destination()
    down.down = True
    check_sink(lambda: GoodSink(Destination()), None, failing=lambda: GoodSink(down))


@pytest.mark.parametrize(
    ("sink_class", "contract", "detail"),
    [
        (DroppingSink, "delivery", "rows emitted before flush returned are not readable"),
        (LazySink, "delivery", "rows emitted before flush returned are not readable"),
        (InventingSink, "delivery", "t[99]@1.0000000000, never emitted"),
        (ReorderingSink, "order", "after the newer version"),
        (MarkerFirstSink, "resolved", "first read after the resolved marker"),
        (CarelessCloseSink, "closed", "emit_row after close returned"),
        (ForgetfulCloseSink, "close", "flushed rows are gone after close"),
        (SilentFailureSink, "failure", "returned though the destination is down"),
        (StickyFailureSink, "reset", "the sink still fails after reset"),
    ],
)
def test_a_broken_sink_fails_naming_the_contract_it_broke(
    sink_class: type[GoodSink], contract: str, detail: str
) -> None:
    with pytest.raises(
        SinkContractViolation, match=f"^{contract}: .*{re.escape(detail)}"
    ) as raised:
        run_kit(sink_class)
    assert raised.value.contract == contract


@pytest.mark.parametrize(
    ("sink_class", "contract", "call"),
    [
        (HangingCloseSink, "close", "a second close"),
        (HangingFailureSink, "failure", "emitting, flushing and resolving into a failed"),
    ],
)
def test_a_call_that_hangs_fails_its_contract_within_the_deadline(
    sink_class: type[HangingCloseSink | HangingFailureSink], contract: str, call: str
) -> None:
    try:
        with pytest.raises(SinkContractViolation, match=f"^{contract}: {call}.* within 0.2 s"):
            run_kit(sink_class, deadline_s=0.2)
    finally:
        sink_class.release.set()  # the hung call's thread ends
