"""Sinks: where a changefeed's messages go, and the machinery every sink shares.

A changefeed talks to a :class:`Sink`: ``emit_row`` (may buffer), ``flush`` (blocks
until everything emitted is durable), ``emit_resolved`` (called only after a flush, so
a resolved marker never precedes a row it covers), ``close``, and ``reset`` (after a
failure: drop what was not delivered, forget the failure, take rows again).

Most sinks are a :class:`BatchingSink` around a thin :class:`SinkClient` that only knows
its wire (write a file, POST a payload). The batcher is written once: per-topic batches
sealed by size, count or age; one sender thread that delivers sealed batches in order
(so per-key order survives) and retries a failing delivery with backoff; a memory
budget for sealed batches waiting to be sent, past which they spill to disk; and a disk
budget, past which ``emit_row`` blocks, which stalls the feed until the sink recovers.
With a node's :class:`~feedkv.changefeed.node_buffers.NodeBuffers` the two budgets are
the node's, shared by all its changefeeds' sinks, and a sink with no room left raises
:class:`SinkStalledError` after a short wait: the changefeed tears its feed down and
restarts once the sink's backlog has cleared (:meth:`BatchingSink.wait_drained`) and
the node's buffers have room for what it could not hold (:meth:`BatchingSink.has_room`).
A delivery that still fails after its retries fails the sink with a retryable
:class:`SinkError`; the changefeed resets the sink and restarts from its last resolved
timestamp. A :class:`TerminalSinkError` (bad credentials, a path that is not a writable
directory) is not retried: the changefeed ends with it.

Sinks are chosen by URI scheme through :data:`SINK_KINDS` (:func:`parse_sink_uri`
checks a URI and the options against what the sink supports at creation time;
:func:`make_sink` builds it, importing optional dependencies only then).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import difflib
import functools
import importlib
import os
import pickle
import re
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlsplit

from feedkv.changefeed.buffer_ledger import spill_prefix
from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.changefeed.options import ROW_FORMATS, ChangefeedOptions, option_error
from feedkv.errors import ExternalError
from feedkv.util.hlc import Timestamp
from feedkv.util.units import parse_size

__all__ = [
    "SINK_KINDS",
    "SINK_OPTIONS",
    "BatchingSink",
    "FlushConfig",
    "Message",
    "RetryConfig",
    "RowBlock",
    "Sink",
    "SinkClient",
    "SinkError",
    "SinkKind",
    "SinkStalledError",
    "SinkURI",
    "TerminalSinkError",
    "TopicError",
    "WindowSink",
    "check_sink",
    "local_paths",
    "make_sink",
    "message_options",
    "parse_sink_uri",
    "schema_topic",
    "sink_defaults",
    "sink_topics",
]


class SinkError(ExternalError):
    """The sink could not take messages (down, refusing, timing out). Retryable: the
    changefeed restarts from its last resolved timestamp."""


class TerminalSinkError(SinkError):
    """The sink refused in a way no retry can change (bad credentials, a bucket that does
    not exist, a path that is not a writable directory). Not retried: the changefeed
    ends, and its job fails (or pauses, under ``on_error='pause'``) with this error."""


class SinkStalledError(SinkError):
    """The node's changefeed buffers (memory, then disk) are full and the sink did not
    make room in time: the changefeed stalls (tears its feed down, waits for the sink's
    backlog to clear, restarts from its high-water mark). ``needed``: the bytes of the
    batch that found no room."""

    def __init__(self, message: str, needed: int = 0) -> None:
        super().__init__(message)
        self.needed = needed


class TopicError(SinkError):
    """The sink refused some topics only (a Kafka topic it may not write, or does not
    have): ``topics`` maps each changefeed topic to why. Every other topic's messages
    were taken (from :meth:`Sink.flush`: are durable), so the changefeed sets the tables
    of those topics aside and goes on with the others
    (:mod:`feedkv.changefeed.table_failures`)."""

    def __init__(self, topics: dict[str, str]) -> None:
        self.topics = dict(topics)
        named = "; ".join(f"topic {t!r}: {why}" for t, why in sorted(self.topics.items()))
        super().__init__(f"the sink refused {named}")


class Message(NamedTuple):
    """One encoded row change. ``value=None`` is a tombstone (a deletion without a value).
    ``row`` carries the decoded row for file formats that write rows, not bytes."""

    topic: str
    key: bytes
    value: bytes | None
    mvcc_ts: Timestamp
    updated: Timestamp
    schema_id: int = 0  # the version of the table descriptor the row was decoded with
    row: Any = None
    headers: tuple[tuple[str, bytes], ...] = ()  # headers_json_column_name's (Kafka)

    @property
    def size(self) -> int:
        if type(self.row) is RowBlock:
            return self.row.nbytes
        return len(self.key) + (len(self.value) if self.value else 0) + 64


@dataclass(frozen=True, slots=True)
class RowBlock:
    """Many rows for a Parquet file at once, as its columns: ``batch`` is a
    ``pyarrow.RecordBatch`` from :class:`~feedkv.changefeed.file_formats.ParquetRows`,
    of one descriptor version. A :class:`Message` whose ``row`` is a block stands for
    all of its rows; Spark tasks pass Parquet rows this way (a row at a time cost more
    than writing the file)."""

    batch: Any

    @property
    def nbytes(self) -> int:
        return int(self.batch.nbytes)


class Sink(Protocol):
    def emit_row(self, message: Message) -> None:
        """Take one message. May buffer; may block while the sink is full (backpressure)."""
        ...

    def flush(self) -> None:
        """Block until every message emitted so far is durable in the sink; raises
        :class:`SinkError` if it cannot be."""
        ...

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        """Write a resolved marker for ``ts``; callers flush first. Durable on return."""
        ...

    def close(self) -> None:
        """Release resources; messages not flushed are dropped. Idempotent."""
        ...

    def reset(self) -> None:
        """After a :class:`SinkError`: drop what was not delivered and forget the
        failure, so the changefeed can emit again from its last resolved timestamp
        (which covers everything dropped)."""
        ...


@runtime_checkable
class WindowSink(Sink, Protocol):
    """A sink that commits what it took in windows of the resolved frontier (the lake
    sinks): the changefeed calls :meth:`commit_window` where it would call ``flush``."""

    def commit_window(self, resolved: Timestamp, topics: Iterable[str]) -> None:
        """Block until every message emitted so far is durable, committed as the window
        ending at ``resolved`` (inclusive): every row at or below it has been emitted.
        ``topics`` are every topic the changefeed's rows may go to.
        Idempotent per window: rows a previous run already committed (at or below what
        the sink's destination records) are not written again. Raises
        :class:`SinkError`."""
        ...


class SinkClient(Protocol):
    """One sink's wire: delivers a whole batch or raises :class:`SinkError`."""

    def send(self, topic: str, batch: list[Message]) -> None: ...

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FlushConfig:
    """When a batch is sealed: at ``messages`` messages or ``bytes`` bytes, or when its
    oldest message is ``frequency`` seconds old (0: only on size and on flush)."""

    messages: int = 1000
    bytes: int = 4 << 20
    frequency: float = 0.0


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """A failing delivery is tried ``max`` more times, waiting ``backoff`` seconds
    before the first retry and doubling up to ``max_backoff``."""

    max: int = 3
    backoff: float = 0.5
    max_backoff: float = 10.0

    def delays(self) -> Iterable[float]:
        delay = self.backoff
        for _ in range(self.max):
            yield delay
            delay = min(delay * 2, self.max_backoff)


@dataclass
class _Batch:
    topic: str
    messages: list[Message] = field(default_factory=list)
    bytes: int = 0
    opened: float = 0.0
    spilled: str | None = None  # the file holding the messages while they wait on disk
    node: bool = False  # its bytes are held in the node's budget (memory or disk)
    count: int = 0  # its messages (while spilled, ``messages`` is empty)

    def load(self) -> list[Message]:
        if self.spilled is None:
            return self.messages
        with open(self.spilled, "rb") as f:
            messages: list[Message] = pickle.load(f)
        return messages


class BatchingSink:
    """A :class:`Sink` over a :class:`SinkClient`; see the module docstring.

    ``memory_budget`` bounds the bytes of sealed batches held in memory; past it they
    spill to files in ``spill_dir`` up to ``disk_budget`` bytes, past which ``emit_row``
    blocks. With ``buffers`` (the node's), those two budgets are the node's instead and
    a sink that finds no room in either for ``buffers.stall_after_s`` raises
    :class:`SinkStalledError`. ``sleep`` and ``clock`` are injected for tests."""

    def __init__(
        self,
        client: SinkClient,
        *,
        flush: FlushConfig | None = None,
        retry: RetryConfig | None = None,
        memory_budget: int = 64 << 20,
        disk_budget: int = 1 << 30,
        spill_dir: str | None = None,
        buffers: NodeBuffers | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._buffers = buffers
        self._flush = flush or FlushConfig()
        self._retry = retry or RetryConfig()
        self._memory_budget = memory_budget
        self._disk_budget = disk_budget
        self._spill_dir = spill_dir
        self._clock = clock
        self._sleep = sleep
        self._cond = threading.Condition()
        self._open: dict[str, _Batch] = {}
        self._sealed: deque[_Batch] = deque()
        self._memory = 0  # bytes of sealed batches in memory
        self._disk = 0  # bytes of sealed batches spilled to disk
        self._sending = 0  # batches taken by the sender, not yet delivered
        self._error: SinkError | None = None
        self._closed = False
        self.stats = {"batches": 0, "messages": 0, "retries": 0, "spilled": 0}
        self._sender = threading.Thread(target=self._run, name="sink-sender", daemon=True)
        self._sender.start()

    # Sink.

    def emit_row(self, message: Message) -> None:
        with self._cond:
            self._raise_if_failed()
            batch = self._open.get(message.topic)
            if batch is None:
                batch = self._open[message.topic] = _Batch(message.topic, opened=self._clock())
                if self._flush.frequency > 0:
                    self._cond.notify_all()  # the sender times the new batch's age
            batch.messages.append(message)
            batch.bytes += message.size
            if self._buffers is not None:
                self._buffers.counts.add(entries_in=1)
            if len(batch.messages) >= self._flush.messages or batch.bytes >= self._flush.bytes:
                self._seal(message.topic)

    def flush(self) -> None:
        with self._cond:
            for topic in list(self._open):
                self._seal(topic)
            self._cond.wait_for(
                lambda: (
                    self._error is not None or self._closed or not (self._sealed or self._sending)
                )
            )
            self._raise_if_failed()

    def wait_drained(self, timeout: float | None = None) -> bool:
        """Block until every sealed batch is delivered (the backlog cleared), the sink
        failed or it closed; whether one of those happened within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (
                    self._error is not None or self._closed or not (self._sealed or self._sending)
                ),
                timeout,
            )

    def has_room(self, needed: int = 0) -> bool:
        """Whether the node's buffers have room for a stalled changefeed to start again
        with a batch of ``needed`` bytes (:meth:`NodeBuffers.has_room`); always, for a
        sink outside them. Any thread; reads the shared ledger when there is one."""
        return self._buffers is None or self._buffers.has_room(needed)

    @property
    def failure(self) -> SinkError | None:
        """Why the sink failed (``None``: it has not): after :meth:`wait_drained`, whether
        the backlog was delivered or given up on."""
        with self._cond:
            return self._error

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        topics = sorted(set(topics))
        self._deliver(functools.partial(self._client.send_resolved, ts, topics))

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._drop_unsent()
            for topic in list(self._open):
                self._drop_open(topic)
            self._cond.notify_all()
        self._sender.join()
        self._client.close()

    def reset(self) -> None:
        with self._cond:
            self._drop_unsent()
            for topic in list(self._open):
                self._drop_open(topic)
            # NB: a batch the sender holds may still land; one sent after the restart's
            # rows would break their order, so wait for it to land or fail.
            self._cond.wait_for(lambda: self._closed or not self._sending)
            self._error = None
            self._cond.notify_all()

    def _drop_open(self, topic: str) -> None:
        """Drop the open batch of ``topic`` (lock held): its entries are released."""
        batch = self._open.pop(topic)
        if self._buffers is not None:
            self._buffers.counts.add(entries_released=len(batch.messages))

    def _drop_unsent(self) -> None:
        for batch in self._sealed:
            self._discard(batch)
        self._sealed.clear()

    # Batches.

    def _seal(self, topic: str, *, may_wait: bool = True) -> bool:
        """Move the open batch of ``topic`` to the send queue (lock held); spill it to
        disk when memory is over budget, and wait while the disk is too (unless called
        by the sender, which must never wait for itself: then the batch stays open and
        this returns False)."""
        if self._buffers is not None:
            return self._seal_in(self._buffers, topic, may_wait)
        batch = self._open.pop(topic)
        over_memory = self._memory + batch.bytes > self._memory_budget
        if over_memory and self._sealed and may_wait:
            self._cond.wait_for(
                lambda: (
                    self._error is not None
                    or self._closed
                    or self._disk + batch.bytes <= self._disk_budget
                    or not self._sealed
                )
            )
            self._raise_if_failed()
        if over_memory and self._sealed and self._disk + batch.bytes <= self._disk_budget:
            self._spill(batch)
        if batch.spilled is None:
            self._memory += batch.bytes
        self._sealed.append(batch)
        self._cond.notify_all()
        return True

    def _seal_in(self, buffers: NodeBuffers, topic: str, may_wait: bool) -> bool:
        """:meth:`_seal` within the node's budgets: in memory if it has room, else on
        disk, else wait for room up to ``buffers.stall_after_s`` and raise
        :class:`SinkStalledError` (the batch is dropped: the changefeed's restart reads
        its rows again)."""
        batch = self._open[topic]
        batch.count = len(batch.messages)  # NB: before a spill empties them
        deadline = self._clock() + buffers.stall_after_s
        while True:
            if self._open.get(topic) is not batch:
                # NB: the sender sealed it (it aged) while this waited for room
                return True
            if buffers.memory.try_acquire(batch.bytes):
                buffers.counts.add(mem_acquired=batch.bytes)
                break
            if buffers.disk.try_acquire(batch.bytes):
                self._spill(batch, buffers.spill_path(), spill_prefix())
                break
            if not may_wait:
                return False
            self._raise_if_failed()
            left = deadline - self._clock()
            if left <= 0:
                self._drop_open(topic)
                raise SinkStalledError(
                    f"the node's changefeed buffers are full ({buffers.memory.used} of "
                    f"{buffers.memory.limit} bytes in memory, {buffers.disk.used} of "
                    f"{buffers.disk.limit} on disk) and the sink took nothing for "
                    f"{buffers.stall_after_s:g} s",
                    batch.bytes,
                )
            # NB: other sinks give the node's budget back without this sink's lock, so
            # this wakes to look again, as well as when its own sender delivers a batch.
            self._cond.wait(min(_ROOM_POLL_S, left))
        del self._open[topic]
        batch.node = True
        if batch.spilled is None:
            self._memory += batch.bytes
        self._sealed.append(batch)
        self._cond.notify_all()
        return True

    def _spill(
        self, batch: _Batch, spill_dir: str | None = None, prefix: str = "feedkv-sink-"
    ) -> None:
        """Write ``batch`` to a file of its own (in the node's buffers: named for this
        process, so it goes when the process dies, :func:`spill_prefix`)."""
        where = spill_dir if spill_dir is not None else self._spill_dir
        fd, path = tempfile.mkstemp(prefix=prefix, suffix=".spill", dir=where)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(batch.messages, f, protocol=pickle.HIGHEST_PROTOCOL)
        batch.messages = []
        batch.spilled = path
        self._disk += batch.bytes
        self.stats["spilled"] += 1

    def _discard(self, batch: _Batch) -> None:
        if batch.spilled is not None:
            os.unlink(batch.spilled)
            self._disk -= batch.bytes
        else:
            self._memory -= batch.bytes
        if batch.node and self._buffers is not None:
            in_memory = batch.spilled is None
            budget = self._buffers.memory if in_memory else self._buffers.disk
            budget.release(batch.bytes)
            self._buffers.counts.add(
                entries_released=batch.count, mem_released=batch.bytes if in_memory else 0
            )

    def _run(self) -> None:
        while True:
            with self._cond:
                batch = self._next_batch()
                if batch is None:
                    return
                self._sending += 1
            messages: list[Message] = []
            try:
                messages = batch.load()
                if self._buffers is not None:
                    self._buffers.counts.add(entries_out=len(messages))
                self._deliver(functools.partial(self._client.send, batch.topic, messages))
            except SinkError as exc:
                with self._cond:
                    self._error = self._error or exc
            except Exception as exc:  # a client's bug or bad data: fail the sink, not the sender
                failed = SinkError(f"the sink could not take a batch: {type(exc).__name__}: {exc}")
                failed.__cause__ = exc
                with self._cond:
                    self._error = self._error or failed
            finally:
                with self._cond:
                    self._discard(batch)
                    self._sending -= 1
                    self.stats["batches"] += 1
                    self.stats["messages"] += len(messages)
                    self._cond.notify_all()

    def _next_batch(self) -> _Batch | None:
        """The next sealed batch to send (lock held), sealing open batches that are too
        old while waiting; ``None`` when closed."""
        while True:
            if self._closed:
                return None
            if self._sealed and self._error is None:
                return self._sealed.popleft()
            timeout = None
            if self._flush.frequency > 0 and self._open:
                now = self._clock()
                held = False  # an aged batch the node's budgets have no room for yet
                for topic, open_batch in list(self._open.items()):
                    if now - open_batch.opened >= self._flush.frequency:
                        held |= not self._seal(topic, may_wait=False)
                if self._sealed:
                    continue
                oldest = min(b.opened for b in self._open.values())
                timeout = max(0.0, oldest + self._flush.frequency - now)
                if held:
                    timeout = max(timeout, _ROOM_POLL_S)
            self._cond.wait(timeout)

    def _deliver(self, send: Callable[[], None]) -> None:
        delays = iter(self._retry.delays())
        while True:
            try:
                send()
                return
            except TerminalSinkError:
                raise
            except SinkError:
                delay = next(delays, None)
                if delay is None or self._closed:
                    raise
                self.stats["retries"] += 1
                self._sleep(delay)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise type(self._error)(str(self._error)) from self._error
        if self._closed:
            raise SinkError("the sink is closed")


_ROOM_POLL_S = 0.1  # how often a sink waiting for room in the node's budgets looks again

# The registry.


@dataclass(frozen=True, slots=True)
class SinkKind:
    """What one kind of sink accepts. ``factory`` is ``module:function`` taking
    ``(SinkURI, ChangefeedOptions)``, imported when a sink is made."""

    name: str
    schemes: tuple[str, ...]
    factory: str
    params: frozenset[str] = frozenset()
    formats: frozenset[str] = frozenset({"json"})
    options: frozenset[str] = frozenset()  # sink-specific options it accepts
    keyless: bool = False  # its messages have no key beside the value (files, webhooks)
    # Its URI's authority: a list of host:port addresses (Kafka brokers), one host
    # with an optional port (webhooks), a name without a port (a directory's host, a
    # bucket, a table), or nothing at all.
    authority: str = "name"  # "addresses" | "address" | "name" | "none"
    path: bool = True  # whether its URI may have a path
    # ``module:function`` taking ``(SinkURI, ChangefeedOptions)``: reaches the sink once
    # when a changefeed is created, raising SQLError if it cannot be used (None: no check)
    check: str | None = None
    # ``module:function`` taking and returning ChangefeedOptions: the sink's own defaults
    # for options the statement did not give (lake sinks carry rows: format=parquet)
    defaults: str | None = None
    # It keeps tables of whole source rows by primary key: a CDC query's projection or
    # split column families are refused when the changefeed is created.
    whole_rows: bool = False
    # It takes envelope=key_only and envelope=row, as in CockroachDB only Kafka (and a
    # sinkless changefeed) do; the others need a value that says which row it is.
    any_envelope: bool = False
    # It takes envelope=enriched (in CockroachDB: Kafka, webhooks, Pub/Sub, sinkless).
    enriched: bool = False
    # Its messages name their topic in the value (topic_in_value, which CockroachDB
    # turns on for webhooks: one endpoint takes the messages of every table).
    topic_in_value: bool = False
    # ``module:function`` taking ``(SinkURI, changefeed topics)`` and returning the
    # sink's own topic names, for a sink that has topics (Kafka, Pub/Sub; None: files,
    # webhooks, tables have none): see :func:`sink_topics`
    topics: str | None = None


@dataclass(frozen=True, slots=True)
class SinkURI:
    """A parsed sink URI: ``params`` are its query parameters (each at most once, but
    for those CockroachDB lets repeat, whose values are joined by spaces)."""

    uri: str
    kind: SinkKind
    scheme: str
    host: str
    path: str
    params: dict[str, str]

    def param(self, name: str, default: str | None = None) -> str | None:
        return self.params.get(name, default)

    def size_param(self, name: str, default: int) -> int:
        text = self.params.get(name)
        if text is None:
            return default
        try:
            return parse_size(text)
        except ValueError:
            raise option_error(
                f"sink parameter {name}={text!r} is not a size such as '16MiB'"
            ) from None

    def bool_param(self, name: str) -> bool:
        """A true/false parameter (``true``, ``t``, ``1`` / ``false``, ``f``, ``0``);
        false when absent."""
        text = self.params.get(name)
        if text is None:
            return False
        if text.lower() in ("true", "t", "1"):
            return True
        if text.lower() in ("false", "f", "0"):
            return False
        raise option_error(
            f"sink parameter {name}={text!r} is not a boolean: write {name}=true or {name}=false"
        )

    def pem_param(self, name: str) -> bytes | None:
        """A base64-encoded PEM file (certificates and keys, as CockroachDB's URIs carry
        them), decoded; ``None`` when absent."""
        text = self.params.get(name)
        if text is None:
            return None
        # NB: a '+' written unescaped in a query string reads back as a space; and the
        # URL-safe alphabet is taken too.
        encoded = text.strip().replace(" ", "+").translate(_URLSAFE)
        try:
            pem = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise option_error(
                f"sink parameter {name} is not base64-encoded PEM: encode the file with "
                "`base64 -w0 file.pem` and URL-escape the result"
            ) from None
        if b"-----BEGIN " not in pem:
            raise option_error(
                f"sink parameter {name} is base64 but not of a PEM file: "
                f"{name} decodes to something other than PEM (no -----BEGIN line)"
            )
        return pem


_URLSAFE = str.maketrans("-_", "+/")
# Parameters that may be given more than once, as CockroachDB takes them: their values
# are kept separated by spaces.
_REPEATABLE = frozenset({"sasl_scopes"})

# Options only some sinks accept (each SinkKind lists the ones it does).
SINK_OPTIONS = frozenset(
    {
        "compression",
        "kafka_sink_config",
        "webhook_sink_config",
        "webhook_auth_header",
        "webhook_client_timeout",
        "pubsub_sink_config",
        "lake_mode",
        "headers_json_column_name",
        "extra_headers",
    }
)
_TLS = frozenset({"ca_cert", "client_cert", "client_key", "insecure_tls_skip_verify"})

SINK_KINDS: tuple[SinkKind, ...] = (
    SinkKind(
        "cloud storage",
        ("file", "nodelocal", "s3", "gs", "azure", "azure-blob"),
        "feedkv.changefeed.sinks.cloud_storage:make",
        frozenset(
            {
                "file_size",
                "partition_format",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_REGION",
                "AWS_ENDPOINT",
                "AZURE_ACCOUNT_NAME",
                "AZURE_ACCOUNT_KEY",
                "AZURE_ENVIRONMENT",
                "AZURE_ENDPOINT",  # feedkv's, as AWS_ENDPOINT: Azurite in the tests
                "AZURE_CLIENT_ID",  # CockroachDB's service principal (Entra ID)
                "AZURE_CLIENT_SECRET",
                "AZURE_TENANT_ID",
                "AZURE_AUTHORITY_HOST",  # feedkv's: Entra ID's stand-in in the tests
                "AUTH",  # gs://: specified (CREDENTIALS) or implicit
                "CREDENTIALS",
                "ASSUME_ROLE",  # gs://: a service account to impersonate
                "GS_ENDPOINT",  # feedkv's, as AWS_ENDPOINT: an emulator in the tests
                "GS_IAM_ENDPOINT",  # feedkv's: IAM Credentials' stand-in in the tests
            }
        ),
        frozenset({"json", "csv", "parquet"}),
        frozenset({"compression"}),
        keyless=True,
        check="feedkv.changefeed.sinks.cloud_storage:check",
    ),
    SinkKind(
        "kafka",
        # confluent-cloud:// and azure-event-hub://: Kafka with CockroachDB's presets
        # (TLS, SASL PLAIN from api_key/api_secret or the shared access key)
        ("kafka", "confluent-cloud", "azure-event-hub"),
        "feedkv.changefeed.sinks.kafka:make",
        frozenset(
            {
                "api_key",
                "api_secret",
                "shared_access_key_name",
                "shared_access_key",
                "topic_prefix",
                "kafka_topic_prefix",  # the CDC design's name of topic_prefix
                "topic_name",
                "schema_topic",  # the CDC design's topic of schema changes
                "tls_enabled",
                "sasl_enabled",
                "sasl_mechanism",
                "sasl_handshake",
                "sasl_user",
                "sasl_password",
                "sasl_client_id",  # sasl_mechanism=OAUTHBEARER's client credentials
                "sasl_client_secret",
                "sasl_token_url",
                "sasl_scopes",
                "sasl_grant_type",
                "sasl_aws_region",  # sasl_mechanism=AWS_MSK_IAM's role
                "sasl_aws_iam_role_arn",
                "sasl_aws_iam_session_name",
            }
        )
        | _TLS,
        frozenset({"json", "avro", "protobuf"}),
        frozenset({"kafka_sink_config", "headers_json_column_name", "extra_headers"}),
        authority="addresses",
        path=False,
        check="feedkv.changefeed.sinks.kafka:check",
        any_envelope=True,
        enriched=True,
        topics="feedkv.changefeed.sinks.kafka:sink_topics",
    ),
    SinkKind(
        "webhook",
        ("webhook-https", "webhook-http"),
        "feedkv.changefeed.sinks.webhook:make",
        _TLS,
        frozenset({"json", "csv"}),
        frozenset(
            {
                "webhook_sink_config",
                "webhook_auth_header",
                "webhook_client_timeout",
                "extra_headers",
                "compression",
            }
        ),
        keyless=True,
        authority="address",
        enriched=True,
        topic_in_value=True,
    ),
    SinkKind(
        "Pub/Sub",
        ("gcpubsub",),
        "feedkv.changefeed.sinks.pubsub:make",
        frozenset(
            {
                "region",
                "topic_name",
                "with_table_name_attribute",
                "AUTH",  # specified (CREDENTIALS) or implicit
                "CREDENTIALS",
                "ASSUME_ROLE",  # a service account to impersonate
            }
        ),
        frozenset({"json"}),
        frozenset({"pubsub_sink_config"}),
        path=False,
        enriched=True,
        topics="feedkv.changefeed.sinks.pubsub:sink_topics",
    ),
    SinkKind(
        "SQL table",
        ("experimental-sql",),
        "feedkv.changefeed.sinks.sql_table:make",
        frozenset(),
        frozenset({"json"}),
    ),
    SinkKind(
        "delta",
        ("delta", "delta+s3"),  # delta+s3://bucket/prefix: tables in S3, as s3:// files
        "feedkv.changefeed.sinks.lake:make",
        frozenset(
            {
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_REGION",
                "AWS_ENDPOINT",
                "marker_history",
            }
        ),
        frozenset({"parquet"}),
        frozenset({"lake_mode"}),
        check="feedkv.changefeed.sinks.lake:check",
        defaults="feedkv.changefeed.sinks.lake:defaults",
        whole_rows=True,
    ),
    SinkKind(
        "iceberg",
        ("iceberg",),
        "feedkv.changefeed.sinks.lake:make",
        frozenset({"warehouse", "catalog_uri", "token", "credential", "marker_history"}),
        frozenset({"parquet"}),
        frozenset({"lake_mode"}),
        check="feedkv.changefeed.sinks.lake:check",
        defaults="feedkv.changefeed.sinks.lake:defaults",
        whole_rows=True,
    ),
    SinkKind(
        "null",
        ("null",),
        "feedkv.changefeed.sinks.null:make",
        frozenset(),
        frozenset({"json", "avro", "csv", "parquet", "protobuf"}),
        authority="none",
        path=False,
        any_envelope=True,
        enriched=True,
    ),
)
_BY_SCHEME = {scheme: kind for kind in SINK_KINDS for scheme in kind.schemes}


def message_options(
    options: ChangefeedOptions, sink_uri: str | None, *, query: bool = False
) -> ChangefeedOptions:
    """The options a sink's messages are encoded with. A sink whose messages have no
    key beside the value (files, webhooks) gets the key inside a wrapped (or bare) JSON
    value, as with ``key_in_value``, or a deletion would not say which row it deleted;
    a webhook, whose endpoint takes every table's messages, gets the topic there too,
    as with ``topic_in_value``. CockroachDB turns these on for those sinks, unless the
    changefeed is a CDC ``query``: its projection is the whole message."""
    if sink_uri is None or query:
        return options
    if options.format != "json" or options.envelope not in ("wrapped", "bare"):
        return options
    kind = _BY_SCHEME.get(urlsplit(sink_uri).scheme.lower())
    if kind is None:
        return options
    return dataclasses.replace(
        options,
        key_in_value=options.key_in_value or kind.keyless,
        topic_in_value=options.topic_in_value or kind.topic_in_value,
    )


def schema_topic(sink_uri: str | None) -> str | None:
    """The topic ``sink_uri`` asks schema changes to be emitted to (its ``schema_topic``
    parameter, Kafka's only; ``None``: none)."""
    if not sink_uri:
        return None
    for name, value in parse_qsl(urlsplit(sink_uri).query, keep_blank_values=True):
        if name == "schema_topic":
            return value
    return None


def sink_defaults(uri: str, options: ChangefeedOptions) -> ChangefeedOptions:
    """``options`` with the defaults of ``uri``'s sink for what they do not give (for
    lake sinks, ``format=parquet``: they take rows, not encoded messages); unchanged
    for a sink without defaults or a URI no sink takes (:func:`parse_sink_uri` says
    why)."""
    try:
        kind = _BY_SCHEME.get(urlsplit(uri).scheme.lower())
    except ValueError:
        return options
    if kind is None or kind.defaults is None:
        return options
    module, _, function = kind.defaults.partition(":")
    adjusted: ChangefeedOptions = getattr(importlib.import_module(module), function)(options)
    return adjusted


def local_paths(uri: SinkURI) -> tuple[str, ...]:
    """The paths on the node's disk that ``uri``'s sink writes in, each of which must lie
    below the node's external I/O directory: a ``file://`` sink's directory, a
    ``delta://`` sink's tables, an ``iceberg://`` SQL catalog's local warehouse and its
    SQLite database. (A ``nodelocal://`` sink's path is below that directory by its
    name.)"""
    if uri.scheme in ("file", "delta"):
        return (uri.path,)
    if uri.scheme != "iceberg":
        return ()
    paths = []
    warehouse = uri.param("warehouse") or ""
    if warehouse.startswith("/"):
        paths.append(warehouse)
    catalog = uri.param("catalog_uri") or ""
    if catalog.startswith("sqlite:///") and catalog != "sqlite:///:memory:":
        # NB: sqlite:////absolute or sqlite:///relative, which SQLite opens in the node's
        # working directory: made absolute there, not below the directory
        paths.append(os.path.abspath(catalog.removeprefix("sqlite:///")))
    return tuple(paths)


def parse_sink_uri(uri: str, options: ChangefeedOptions) -> SinkURI:
    """Check ``uri`` and the sink-specific ``options`` against what its sink supports;
    raises SQLError 22023 naming the problem."""
    for position, ch in enumerate(uri, 1):
        if ch.isspace() or not ch.isprintable():
            raise option_error(
                f"sink URI {uri!r} has {ch!r} at character {position}: a URI has no spaces "
                "or control characters (percent-encode them, as %20)"
            )
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise option_error(f"sink URI {uri!r} is not a URI: {exc}") from None
    kind = _BY_SCHEME.get(parts.scheme.lower())
    if kind is None:
        known = ", ".join(f"{s}://" for s in _BY_SCHEME)
        hint = difflib.get_close_matches(parts.scheme.lower(), list(_BY_SCHEME), n=1)
        suggestion = f" (did you mean {hint[0]}://?)" if hint else ""
        what = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise option_error(f"sink URI {uri!r} has {what}{suggestion}; expected one of {known}")
    scheme = parts.scheme.lower()
    if not uri[len(parts.scheme) + 1 :].startswith("//"):
        raise option_error(
            f"sink URI {uri!r}: the scheme must be followed by '//', as in {scheme}://"
        )
    if parts.fragment or uri.endswith("#"):
        raise option_error(
            f"sink URI {uri!r} has a fragment (#{parts.fragment}): sink URIs take none; "
            "percent-encode a '#' in a value as %23"
        )
    _check_authority(uri, kind, scheme, parts.netloc)
    if not kind.path and parts.path not in ("", "/"):
        raise option_error(
            f"sink URI {uri!r} has the path {parts.path!r}, which a {scheme}:// URI does not "
            "take"
            + (
                "; a kafka:// URI names brokers only: choose topics with topic_prefix or topic_name"
                if kind.name == "kafka"
                else ""
            )
        )
    try:
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError as exc:
        raise option_error(
            f"sink URI {uri!r} has a malformed query {parts.query!r} ({exc}): write "
            "?name=value&name=value"
        ) from None
    params: dict[str, str] = {}
    for name, value in query:
        if name not in kind.params:
            hint = difflib.get_close_matches(name, list(kind.params), n=1)
            suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
            raise option_error(f"unknown {kind.name} sink parameter {name!r}{suggestion}")
        if name in params and name in _REPEATABLE:
            params[name] = f"{params[name]} {value}"  # NB: no scope holds a space (RFC 6749)
            continue
        if name in params:
            raise option_error(f"sink parameter {name!r} is given more than once")
        params[name] = value
    if options.format not in kind.formats:
        # NB: CockroachDB's words (its sinks refuse a format so), then which it takes
        raise option_error(
            f"this sink is incompatible with format={options.format}: the {kind.name} "
            f"sink takes format={'/'.join(sorted(kind.formats))}"
        )
    if (
        options.envelope in ("key_only", "row")
        and not kind.any_envelope
        and not kind.whole_rows
        and options.format not in ROW_FORMATS
    ):
        raise option_error(
            f"envelope={options.envelope} is only usable with the Kafka sink or a sinkless "
            f"changefeed, not the {kind.name} sink"
        )
    if options.envelope == "enriched" and not kind.enriched:
        raise option_error(
            f"envelope=enriched is only usable with the Kafka and webhook sinks or a sinkless "
            f"changefeed, not the {kind.name} sink"
        )
    for name, _value in options.given:
        if name in SINK_OPTIONS and name not in kind.options:
            raise option_error(f"option {name} is not usable with the {kind.name} sink")
    if kind.whole_rows and options.split_column_families:
        raise option_error(
            f"option split_column_families is not usable with the {kind.name} sink: "
            "it keeps whole rows"
        )
    return SinkURI(uri, kind, scheme, parts.netloc, parts.path, params)


_HOST = re.compile(r"[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\]")  # a name, an IPv4 or [IPv6]


def _check_authority(uri: str, kind: SinkKind, scheme: str, netloc: str) -> None:
    """Refuse a malformed authority (hosts, ports, user information) naming the bad
    part; whether one is required is for the sink to say when it is made."""
    if kind.authority == "none":
        if netloc:
            raise option_error(
                f"sink URI {uri!r} names {netloc!r}, but a {scheme}:// URI takes no host: "
                f"write {scheme}://"
            )
        return
    if kind.authority == "name":
        if ":" in netloc.rpartition("@")[2] or "@" in netloc:
            raise option_error(
                f"sink URI {uri!r}: a {scheme}:// URI names no port or user in {netloc!r}"
            )
        return
    if not netloc:
        return
    addresses = netloc.split(",") if kind.authority == "addresses" else [netloc]
    for address in addresses:
        if kind.authority == "address":
            address = address.rpartition("@")[2]  # NB: user information is the sink's
        if not address:
            raise option_error(f"sink URI {uri!r} has an empty address in {netloc!r}")
        host, port = address, None
        if address.startswith("["):
            end = address.find("]")
            host, rest = address[: end + 1], address[end + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise option_error(f"sink URI {uri!r} has a malformed address {address!r}")
                port = rest[1:]
        elif ":" in address:
            host, _, port = address.rpartition(":")
        if not host:
            raise option_error(f"sink URI {uri!r} has no host before the port in {address!r}")
        if not _HOST.fullmatch(host):
            raise option_error(
                f"sink URI {uri!r} has the host {host!r}, which is not a host name or an IP address"
            )
        if port is not None and not (port.isdigit() and port.isascii() and 1 <= int(port) <= 65535):
            raise option_error(
                f"sink URI {uri!r} has the port {port!r} in {address!r}: a port is a number "
                "from 1 to 65535"
            )


def check_sink(uri: SinkURI, options: ChangefeedOptions, **kwargs: Any) -> None:
    """Reach the sink of a checked URI once, as CREATE CHANGEFEED does before it makes a
    job (CockroachDB dials Kafka and checks cloud storage there); raises SQLError
    saying why it cannot be used. Sinks without a check (webhooks) pass. ``kwargs``: as
    :func:`make_sink`'s, for the checks that use them."""
    if uri.kind.check is None:
        return
    module, _, function = uri.kind.check.partition(":")
    getattr(importlib.import_module(module), function)(uri, options, **kwargs)


def sink_topics(uri: SinkURI, topics: Iterable[str]) -> tuple[str, ...] | None:
    """The topics of its own that ``uri``'s sink sends the changefeed topics ``topics``
    to (``topic_prefix`` and ``topic_name`` applied, escaped as the sink escapes them),
    sorted and each once: what CockroachDB's CREATE CHANGEFEED announces (``changefeed
    will emit to topic ...``) and SHOW CHANGEFEED JOBS lists as ``topics``. ``None``
    for a sink without topics (files, webhooks), for which CockroachDB says neither."""
    if uri.kind.topics is None:
        return None
    module, _, function = uri.kind.topics.partition(":")
    names: Iterable[str] = getattr(importlib.import_module(module), function)(uri, topics)
    return tuple(sorted(set(names)))


def make_sink(uri: SinkURI, options: ChangefeedOptions, **kwargs: Any) -> Sink:
    """Build the sink for a checked URI (importing its client library now)."""
    module, _, function = uri.kind.factory.partition(":")
    factory = getattr(importlib.import_module(module), function)
    sink: Sink = factory(uri, options, **kwargs)
    return sink
