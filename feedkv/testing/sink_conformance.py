"""The sink conformance kit: the promises every changefeed sink keeps, checked as one call.

A sink's test hands :func:`check_sink` a factory that makes a fresh sink and a reader
that returns what a consumer of the sink's destination can read *now*: for each stream
a consumer reads in order (a Kafka partition, the files of a directory in name order,
the requests an endpoint answered, a SQL table's rows by ``message_id``), the payloads in
that order, a row's value or a resolved marker's ``{"resolved": "<ts>"}``. The kit emits
rows of its own (JSON values that carry their topic, key and ``updated``, all above
:data:`START`), drives the sink through the :class:`~feedkv.changefeed.sink.Sink`
protocol and checks, each as a named contract:

- ``delivery`` (Sink.flush; changefeed contract 1): once ``flush`` returns, every row
  emitted before it is readable, at least once; nothing is read that was never emitted.
  ``flush`` is the barrier: the reader looks at once, it does not wait.
- ``order`` (changefeed contract 2): in each stream, once a version of a row was read,
  no older, previously unseen version of it follows.
- ``resolved`` (Sink.emit_resolved; changefeed contract 3): a marker is readable when
  ``emit_resolved`` returns ("durable on return"), in every stream that holds rows of the
  topics it names; in each stream, no previously unseen row at or below a marker
  follows it.
- ``close`` (Sink.close): ``close`` returns even with rows not flushed (they may be
  dropped), a second ``close`` is harmless (idempotent), and what was durable stays.
- ``closed``: ``emit_row`` after ``close`` raises
  :class:`~feedkv.changefeed.sink.SinkError` rather than losing the row silently. NB:
  the Sink docstring does not state this one; every sink shows it, and a changefeed
  racing its own shutdown relies on it.
- ``failure`` (Sink.flush, Sink.reset): given ``failing``, a factory of sinks whose
  destination is down, the rows emitted into one end in a
  :class:`~feedkv.changefeed.sink.SinkError` (a retryable fault outside) from
  ``emit_row``, ``flush`` or ``emit_resolved``, not in a hang, nor in another error;
  ``reset`` and ``close`` then return.
- ``reset`` (Sink.reset): given ``recover`` too, which makes that destination work
  again, the sink takes rows after ``reset``: the rows emitted again (as a changefeed
  restarting from its last resolved timestamp emits them), ``flush`` and
  ``emit_resolved`` succeed. A sink whose destination cannot come back (the sinkless
  channel, whose reader went away) is given no ``recover``.

Every call into a sink runs on one worker thread of the kit (one thread uses a sink at a
time, as a changefeed does) and must return within ``deadline_s``: a call that hangs
fails the contract it was checked for. A broken promise raises
:class:`SinkContractViolation` (an :class:`~feedkv.errors.InvariantViolation` and an
:class:`AssertionError`) whose message starts with the contract's name.
``reader=None`` is for a sink that keeps nothing (``null://``): only the calls' own
contracts (``close``, ``closed``, ``failure``) are checked.

A sink that takes rows rather than encoded values (the lake sinks) is given the kit's
rows through ``message``, which builds the message of a row (by default
:func:`kit_message`); its reader hands back the kit's JSON values all the same. A
:class:`~feedkv.changefeed.sink.WindowSink` is driven as a changefeed drives one: where
the kit flushes, it commits the window up to the newest row emitted
(``commit_window``), and the contracts that name ``flush`` hold of that call.

The Sink protocol has no memory budget of its own (``emit_row`` "may block while the sink
is full"); budgets and backpressure are the batcher's and each sink's, and their tests
check them.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import queue
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import (
    Message,
    Sink,
    SinkError,
    WindowSink,
    make_sink,
    message_options,
    parse_sink_uri,
)
from feedkv.errors import InvariantViolation
from feedkv.util.hlc import Timestamp

__all__ = [
    "CONTRACTS",
    "START",
    "MessageFactory",
    "Reader",
    "SinkContractViolation",
    "SinkFactory",
    "SinkSetup",
    "bucket_setup",
    "check_sink",
    "two_rows_published",
    "kit_message",
]

START = Timestamp(1_700_000_000_000_000_000, 0)  # every row the kit emits is above it
CONTRACTS = ("delivery", "order", "resolved", "close", "closed", "failure", "reset")

SinkFactory = Callable[[], Sink]
Reader = Callable[[], Mapping[str, Sequence[bytes]]]
MessageFactory = Callable[[str, int, Timestamp], Message]  # (topic, key, updated)

T = TypeVar("T")


class SinkContractViolation(InvariantViolation, AssertionError):
    """A sink broke ``contract`` (one of :data:`CONTRACTS`); the message says how. An
    :class:`AssertionError` too, so that pytest shows it as a failed check."""

    def __init__(self, contract: str, detail: str) -> None:
        super().__init__(f"{contract}: {detail}")
        self.contract = contract


@dataclass(frozen=True, slots=True)
class _Row:
    topic: str
    key: int
    updated: Timestamp

    def __str__(self) -> str:
        return f"{self.topic}[{self.key}]@{self.updated}"


def kit_message(topic: str, key: int, updated: Timestamp) -> Message:
    """The row message the kit emits: a wrapped JSON value that names its topic and key
    (so a consumer of a keyless sink can tell rows apart) and its ``updated``."""
    value = {"topic": topic, "key": [key], "after": {"k": key}, "updated": str(updated)}
    return Message(topic, json.dumps([key]).encode(), json.dumps(value).encode(), updated, updated)


class _Calls:
    """Runs each call into the sink on the kit's one worker thread, within a deadline.
    NB: a daemon thread, so that a call that hangs for ever does not hold the process
    up at exit."""

    def __init__(self, deadline_s: float) -> None:
        self._deadline_s = deadline_s
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="sink-kit", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (job := self._work.get()) is not None:
            job()

    def run(self, contract: str, what: str, call: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            future.set_running_or_notify_cancel()
            try:
                future.set_result(call())
            except BaseException as exc:
                future.set_exception(exc)

        self._work.put(job)
        try:
            return future.result(timeout=self._deadline_s)
        except concurrent.futures.TimeoutError:
            raise SinkContractViolation(
                contract, f"{what} did not return within {self._deadline_s:g} s"
            ) from None

    def close(self) -> None:
        self._work.put(None)  # the thread ends after the call it runs, if one hangs


class _Consumer:
    """What the reader returns, parsed, with the rules that hold over any read."""

    def __init__(self, reader: Reader, emitted: set[_Row]) -> None:
        self._reader = reader
        self._emitted = emitted

    def read(self) -> dict[str, list[_Row | Timestamp]]:
        streams: dict[str, list[_Row | Timestamp]] = {}
        for stream, payloads in self._reader().items():
            streams[stream] = [_parse(stream, i, payload) for i, payload in enumerate(payloads)]
        self._check(streams)
        return streams

    def _check(self, streams: Mapping[str, Sequence[_Row | Timestamp]]) -> None:
        for stream, items in streams.items():
            seen: set[_Row] = set()
            newest: dict[tuple[str, int], _Row] = {}
            marker: Timestamp | None = None
            for i, item in enumerate(items):
                if isinstance(item, Timestamp):
                    marker = item if marker is None else max(marker, item)
                    continue
                if item not in self._emitted:
                    raise SinkContractViolation(
                        "delivery", f"stream {stream!r} message #{i} is {item}, never emitted"
                    )
                if item in seen:
                    continue  # at least once: a redelivery may come anywhere
                last = newest.get((item.topic, item.key))
                if last is not None and item.updated < last.updated:
                    raise SinkContractViolation(
                        "order",
                        f"stream {stream!r} message #{i} is {item}, after the newer "
                        f"version {last} of the same row",
                    )
                if marker is not None and item.updated <= marker:
                    raise SinkContractViolation(
                        "resolved",
                        f"stream {stream!r} message #{i} is {item}, first read after the "
                        f"resolved marker {marker} that covers it",
                    )
                seen.add(item)
                newest[(item.topic, item.key)] = item


def _parse(stream: str, index: int, payload: bytes) -> _Row | Timestamp:
    try:
        body = json.loads(payload)
        if "resolved" in body:
            return Timestamp.parse(body["resolved"])
        return _Row(body["topic"], body["key"][0], Timestamp.parse(body["updated"]))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise SinkContractViolation(
            "delivery",
            f"stream {stream!r} message #{index} is neither a row the kit emitted nor a "
            f"resolved marker: {payload[:200]!r} ({type(exc).__name__}: {exc})",
        ) from None


@dataclass(frozen=True, slots=True)
class SinkSetup:
    """One configuration of a sink, as a parametrized fixture hands it to the kit: the
    arguments of :func:`check_sink`."""

    factory: SinkFactory
    reader: Reader | None
    failing: SinkFactory | None = None
    recover: Callable[[], None] | None = None
    message: MessageFactory = kit_message

    def check(self, **kwargs: Any) -> None:
        """:func:`check_sink` on this setup (``kwargs``: its keyword arguments)."""
        check_sink(
            self.factory,
            self.reader,
            failing=self.failing,
            recover=self.recover,
            message=self.message,
            **kwargs,
        )


def two_rows_published(
    create: Callable[[str], object],
    uri: str,
    files: Callable[[], dict[str, bytes]],
    what: str,
    timeout_s: float = 30.0,
) -> tuple[dict[str, bytes], str]:
    """Run ``create`` (a SQL statement runner) to make table ``t`` with two rows and a
    changefeed of it into ``uri`` with resolved markers; wait until ``files()`` (name ->
    body, in name order) holds a ``.RESOLVED`` marker, and check that both rows are in
    the data files, which sort before the marker. Returns the files and the marker's
    name, for the sink's own checks."""
    from feedkv.testing.waiting import wait_until

    create("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    create("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    create(
        f"CREATE CHANGEFEED FOR t INTO '{uri}' WITH resolved='0s', min_checkpoint_frequency='0s'"
    )

    def published() -> dict[str, bytes]:
        found = files()
        return found if any(n.endswith(".RESOLVED") for n in found) else {}

    found: dict[str, bytes] = wait_until(published, timeout_s=timeout_s, what=what)
    names = list(found)
    data = [n for n in names if n.endswith(".ndjson")]
    rows = [json.loads(line) for name in data for line in found[name].splitlines()]
    assert [r["after"] for r in rows] == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]
    resolved = next(n for n in names if n.endswith(".RESOLVED"))
    assert names.index(data[0]) < names.index(resolved)
    return found, resolved


def bucket_setup(
    uri_of: Callable[[str], str],
    create: Callable[[str], None],
    bodies: Callable[[str], Sequence[bytes]],
) -> SinkSetup:
    """A cloud storage sink's setup: files written into a bucket of its own (a new
    random name, made by ``create``; ``uri_of(bucket)`` is the sink URI), read back by
    ``bodies(bucket)`` in name order; its failing twin writes into a bucket that does
    not exist, until it is made."""
    bucket = f"kit-{uuid.uuid4().hex[:12]}"
    create(bucket)
    options = parse_options((), now=START)

    def sink_into(name: str) -> Sink:
        uri = uri_of(name)
        return make_sink(parse_sink_uri(uri, options), message_options(options, uri), start=START)

    def reader() -> dict[str, list[bytes]]:
        return {"": [line for body in bodies(bucket) for line in body.splitlines()]}

    missing = f"{bucket}-missing"
    return SinkSetup(
        lambda: sink_into(bucket),
        reader,
        failing=lambda: sink_into(missing),
        recover=lambda: create(missing),
    )


def check_sink(
    factory: SinkFactory,
    reader: Reader | None,
    *,
    failing: SinkFactory | None = None,
    recover: Callable[[], None] | None = None,
    message: MessageFactory = kit_message,
    topics: Sequence[str] = ("t", "u"),
    keys: int = 6,
    versions: int = 3,
    deadline_s: float = 30.0,
) -> None:
    """Check the contracts of the module docstring on a sink ``factory()`` makes (once),
    read back through ``reader`` (or ``None``: the sink keeps nothing), and on one
    ``failing()`` makes (if given), whose destination ``recover()`` (if given) makes
    work again. Rows go to ``keys`` keys spread over ``topics``, in
    ``versions`` versions per key per round. Raises :class:`SinkContractViolation`."""
    calls = _Calls(deadline_s)
    try:
        _check_working(calls, factory, reader, message, topics, keys, versions)
        if failing is not None:
            _check_failing(calls, failing, recover, message, topics, keys)
    finally:
        calls.close()


def _flush(sink: Sink, newest: Timestamp, topics: Sequence[str]) -> None:
    """What a changefeed calls to make every row emitted durable: ``flush``, or for a
    window sink the commit of the window up to ``newest``."""
    if isinstance(sink, WindowSink):
        sink.commit_window(newest, list(topics))
    else:
        sink.flush()


def _check_working(
    calls: _Calls,
    factory: SinkFactory,
    reader: Reader | None,
    make_message: MessageFactory,
    topics: Sequence[str],
    keys: int,
    versions: int,
) -> None:
    emitted: set[_Row] = set()
    consumer = None if reader is None else _Consumer(reader, emitted)
    sink = calls.run("delivery", "making the sink", factory)
    tick = iter(range(1, 1 << 30))
    newest = [START]

    def emit_round() -> list[_Row]:
        rows = []
        for _version in range(versions):
            for key in range(keys):
                row = _Row(topics[key % len(topics)], key, Timestamp(START.wall + next(tick), 0))
                rows.append(row)
                emitted.add(row)
                newest[0] = row.updated
                message = make_message(row.topic, row.key, row.updated)
                calls.run("delivery", f"emit_row({row})", functools.partial(sink.emit_row, message))
        return rows

    def flush_and_read(rows: list[_Row]) -> None:
        calls.run("delivery", "flush", lambda: _flush(sink, newest[0], topics))
        if consumer is None:
            return
        streams = consumer.read()
        read = {item for items in streams.values() for item in items}
        missing = [row for row in rows if row not in read]
        if missing:
            shown = ", ".join(map(str, missing[:5]))
            raise SinkContractViolation(
                "delivery",
                f"{len(missing)} of {len(rows)} rows emitted before flush returned are "
                f"not readable after it: {shown}",
            )

    def resolve(ts: Timestamp) -> None:
        calls.run("resolved", f"emit_resolved({ts})", lambda: sink.emit_resolved(ts, list(topics)))
        if consumer is None:
            return
        for stream, items in consumer.read().items():
            holds_rows = any(isinstance(item, _Row) for item in items)
            if holds_rows and ts not in items:
                raise SinkContractViolation(
                    "resolved",
                    f"emit_resolved({ts}) returned, but stream {stream!r}, which holds rows, "
                    "has no marker for it",
                )

    calls.run("delivery", "flush with nothing emitted", lambda: _flush(sink, START, topics))
    first = emit_round()
    flush_and_read(first)
    resolve(max(row.updated for row in first))
    second = emit_round()
    flush_and_read(first + second)
    resolve(max(row.updated for row in second))

    emit_round()  # never flushed: close may drop these rows
    calls.run("close", "close with rows not flushed", sink.close)
    calls.run("close", "a second close", sink.close)
    if consumer is not None:
        read = {item for items in consumer.read().values() for item in items}
        lost = [row for row in first + second if row not in read]
        if lost:
            raise SinkContractViolation(
                "close", f"{len(lost)} flushed rows are gone after close, such as {lost[0]}"
            )
    _check_refused_after_close(calls, sink, topics)


def _check_refused_after_close(calls: _Calls, sink: Sink, topics: Sequence[str]) -> None:
    late = kit_message(topics[0], 0, Timestamp(START.wall + (1 << 31), 0))
    try:
        calls.run("closed", "emit_row after close", lambda: sink.emit_row(late))
    except SinkError:
        return
    except SinkContractViolation:
        raise
    except Exception as exc:
        raise SinkContractViolation(
            "closed", f"emit_row after close raised {type(exc).__name__}: {exc}, not a SinkError"
        ) from exc
    raise SinkContractViolation(
        "closed", "emit_row after close returned: the row was taken and will never be delivered"
    )


def _check_failing(
    calls: _Calls,
    failing: SinkFactory,
    recover: Callable[[], None] | None,
    make_message: MessageFactory,
    topics: Sequence[str],
    keys: int,
) -> None:
    sink = calls.run("failure", "making the sink of a failed destination", failing)
    rows = [
        make_message(topics[key % len(topics)], key, Timestamp(START.wall + 1 + key, 0))
        for key in range(keys)
    ]

    def deliver() -> None:
        for message in rows:
            sink.emit_row(message)
        end = Timestamp(START.wall + 1 + keys, 0)
        _flush(sink, end, topics)
        sink.emit_resolved(end, list(topics))

    try:
        calls.run("failure", "emitting, flushing and resolving into a failed destination", deliver)
    except SinkError:
        pass
    except SinkContractViolation:
        raise
    except Exception as exc:
        raise SinkContractViolation(
            "failure",
            f"a failed destination raised {type(exc).__name__}: {exc}, not a SinkError",
        ) from exc
    else:
        raise SinkContractViolation(
            "failure",
            "flush and emit_resolved returned though the destination is down: "
            "rows that are not durable were reported durable",
        )
    calls.run("failure", "reset after the failure", sink.reset)
    if recover is not None:
        calls.run("reset", "recovering the destination", recover)
        try:
            calls.run("reset", "emitting, flushing and resolving after reset", deliver)
        except SinkError as exc:
            raise SinkContractViolation(
                "reset",
                f"the destination is back, but the sink still fails after reset: {exc}",
            ) from exc
    calls.run("failure", "close after the failure", sink.close)
