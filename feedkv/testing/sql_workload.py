"""A seeded SQL workload for changefeed nemesis tests, and the checks of what a feed of
it published.

The workload writes table ``t (id INT PRIMARY KEY, v STRING, n INT)`` (made by
:func:`create_table`, with :data:`INITIAL_ROWS` rows for an initial scan) from several
clients at once: multi-row writes, explicit transactions over a few hot rows (so they
conflict and are retried whole on 40001; some are rolled back) and range splits. What
each client does is drawn from a seed alone (:func:`plan`), never from an outcome, so a
seed names a run. :class:`Workload` runs the plan, one thread per client, and can hold
the clients back (:meth:`Workload.allow`) so that a test injects a fault at a chosen
point.

Beside it, a nemesis step the SQL layer cannot take (its writes are buffered until
``COMMIT``, so a SQL transaction never leaves intents behind):
:func:`abandon_transaction` writes intents on rows of ``t`` through the node's store and
walks away, so the rangefeed's pusher must resolve them before the feed's resolved
timestamp can pass them.

:func:`check_feed` runs every validator of
:mod:`feedkv.testing.changefeed_validator` over what a changefeed of ``t`` published (one
stream, or one per partition), and checks that every committed row version
(:func:`committed`, read back from the store, never remembered) is in it.
:func:`cloud_storage_messages` reads the messages of a cloud storage sink's files
(:func:`published_files` lists those of a directory). :class:`Counter` adds one to a
row, transaction after transaction, through a node that may be killed.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import feedkv
from feedkv.changefeed.sinks.cloud_storage import file_topic
from feedkv.errors import (
    ExternalError,
    InvalidArgumentError,
    SerializationFailure,
    TransactionRetryError,
)
from feedkv.kv.api import BatchRequest, EndTxn, Header, HeartbeatTxn, Put, Transaction
from feedkv.sql import catalog
from feedkv.sql.row_codec import decode_row_key, row_kvs, table_span
from feedkv.testing.changefeed_validator import (
    ChangefeedMessage,
    ChangefeedValidator,
    parse_json_message,
    sql_row_reader,
    sql_table_reader,
)
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, key_next

if TYPE_CHECKING:
    from feedkv.db import DB
    from feedkv.rangefeed.feed_client import FeedClient
    from feedkv.sql.client import SQLClient
    from feedkv.sql.session import Session

__all__ = [
    "DEADLINE_S",
    "IDS",
    "INITIAL_ROWS",
    "PACE_S",
    "Connector",
    "Op",
    "Statement",
    "Stats",
    "Workload",
    "abandon_transaction",
    "check_feed",
    "cloud_storage_messages",
    "committed",
    "create_table",
    "embedded",
    "placeholders",
    "plan",
    "published_files",
    "random_op",
    "random_transaction",
    "random_values",
    "random_write",
    "remote",
    "sample_ids",
]

DEADLINE_S = 120.0  # for a client's operation, or the workload, to get somewhere
IDS = 30  # the workload's keys: few, so each row changes many times
INITIAL_ROWS = 10  # rows written before the changefeed, for its initial scan
PACE_S = 0.02  # between a client's operations, to leave the feed some CPU

Statement = tuple[str, tuple[Any, ...]]
"""A SQL statement and its parameters (``$1``, ...)."""


# The plan.


@dataclass(frozen=True)
class Op:
    """One client operation: ``write`` (one statement in a transaction of its own),
    ``commit`` (``BEGIN``, the statements, ``COMMIT``: retried whole on 40001),
    ``rollback`` (``BEGIN``, the statements, ``ROLLBACK``) or ``split``."""

    kind: str
    statements: tuple[Statement, ...]


def sample_ids(rng: random.Random, low: int, high: int, among: int = IDS) -> list[int]:
    """From ``low`` to ``high`` distinct ids below ``among``."""
    return rng.sample(range(among), rng.randint(low, high))


def placeholders(count: int, first: int = 1) -> str:
    """``$first, ..., $(first + count - 1)``."""
    return ", ".join(f"${i}" for i in range(first, first + count))


def random_values(rng: random.Random, ids: Sequence[int]) -> tuple[str, tuple[Any, ...]]:
    """``($1, $2, $3), ...`` for rows ``ids`` with random ``v`` and ``n``."""
    rows, params = [], []
    for i, k in enumerate(ids):
        rows.append(f"(${3 * i + 1}, ${3 * i + 2}, ${3 * i + 3})")
        v = rng.choice([None, "a", "b", "é", "x" * 40, f"k{k}"])
        params += [k, v, rng.choice([None, rng.randrange(-1000, 1000)])]
    return ", ".join(rows), tuple(params)


def random_write(rng: random.Random, among: int = IDS) -> Statement:
    """A statement that writes one or several rows of ``t`` (ids below ``among``)."""
    roll = rng.random()
    if roll < 0.3:
        values, params = random_values(rng, sample_ids(rng, 1, 4, among))
        return f"UPSERT INTO t VALUES {values}", params
    if roll < 0.45:
        values, params = random_values(rng, sample_ids(rng, 1, 3, among))
        return f"INSERT INTO t VALUES {values} ON CONFLICT (id) DO NOTHING", params
    if roll < 0.7:
        ids = sample_ids(rng, 2, 5, among)
        text = f"UPDATE t SET v = $1, n = n + 1 WHERE id IN ({placeholders(len(ids), 2)})"
        return text, (rng.choice(["u", "w", None]), *ids)
    if roll < 0.8:
        low = rng.randrange(among)
        return "UPDATE t SET n = -n, v = v || '.' WHERE id >= $1 AND id < $2", (
            low,
            low + rng.randint(3, 6),
        )
    if roll < 0.9:
        ids = sample_ids(rng, 1, 3, among)
        return f"DELETE FROM t WHERE id IN ({placeholders(len(ids))})", tuple(ids)
    low = rng.randrange(among)
    return "DELETE FROM t WHERE id >= $1 AND id < $2", (low, low + rng.randint(2, 4))


def random_transaction(rng: random.Random) -> tuple[Statement, ...]:
    """Reads and writes of a few hot rows (so transactions conflict), a row written
    twice now and then (an intermediate write that must never be published)."""
    hot = rng.choice([5, 8, IDS])
    statements: list[Statement] = []
    for _ in range(rng.randint(2, 5)):
        if rng.random() < 0.3:
            ids = sample_ids(rng, 1, 3, hot)
            statements.append((f"SELECT n FROM t WHERE id IN ({placeholders(len(ids))})", (*ids,)))
        else:
            statements.append(random_write(rng, hot))
    return tuple(statements)


def random_op(rng: random.Random) -> Op:
    """One operation: mostly single writes, then transactions (a few rolled back), and
    now and then a split of ``t``'s range."""
    roll = rng.random()
    if roll < 0.62:
        return Op("write", (random_write(rng),))
    if roll < 0.87:
        return Op("commit", random_transaction(rng))
    if roll < 0.96:
        return Op("rollback", random_transaction(rng))
    return Op("split", ((f"ALTER TABLE t SPLIT AT VALUES ({rng.randrange(1, IDS)})", ()),))


def plan(seed: int, clients: int, ops: int) -> list[list[Op]]:
    """Each client's operations: drawn from ``seed`` alone, never from an outcome."""
    return [
        [random_op(rng) for _ in range(ops)]
        for rng in (random.Random(f"{seed}/{client}") for client in range(clients))
    ]


def create_table(db: SQLClient) -> None:
    """``CREATE TABLE t`` and its :data:`INITIAL_ROWS` first rows (ids ``0..``)."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING, n INT)")
    rng = random.Random(0)
    values, params = random_values(rng, range(INITIAL_ROWS))
    db.sql(f"INSERT INTO t VALUES {values}", *params)


# Running it.


@dataclass
class Stats:
    """What the clients' operations did (retries are attempts beyond the first)."""

    writes: int = 0
    commits: int = 0
    rollbacks: int = 0
    splits: int = 0
    retries: int = 0  # transactions restarted on 40001
    unavailable: int = 0  # operations cut short by a node that was down

    def add(self, other: Stats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


Connector = Callable[[], tuple["Session", Callable[[], None]]]
"""Opens a session, and gives the way to let go of it."""


def embedded(db: SQLClient) -> Connector:
    """Sessions of ``db`` itself (nothing to let go of)."""
    return lambda: (db.session(), lambda: None)


def remote(url: str) -> Connector:
    """A new client of the node at ``url`` per connection."""

    def connect() -> tuple[Session, Callable[[], None]]:
        client = feedkv.connect(url)
        return client.session(), client.close

    return connect


class Workload:
    """Runs :func:`plan`'s operations, one thread per client, through ``connect``.

    Conflicts are part of the game: statements and ``run_transaction`` retry them. With
    ``outages``, so is a node that is down: an operation that fails with an
    :class:`~feedkv.errors.ExternalError` (unreachable, ambiguous commit) is run again on
    a new connection, so it may take effect twice; what was written is read back from
    the store, never remembered. Any other error is a finding, raised by :meth:`join`.
    Each client waits ``pace_s`` between its operations.
    """

    def __init__(
        self,
        connect: Connector,
        seed: int,
        *,
        clients: int,
        ops: int,
        outages: bool = False,
        pace_s: float = PACE_S,
    ) -> None:
        self.seed = seed
        self.outages = outages
        self.total = clients * ops
        self.stats = Stats()
        self.failures: list[str] = []
        self._connect = connect
        self._pace_s = pace_s
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self._allowed = self.total
        self._started = 0
        self._done = 0
        self._pace = threading.Event()  # never set: a pause between operations
        self._threads = [
            threading.Thread(target=self._client, args=(i, ops_), name=f"client-{i}", daemon=True)
            for i, ops_ in enumerate(plan(seed, clients, ops))
        ]

    @property
    def done(self) -> int:
        """Operations finished so far, over all clients."""
        with self._lock:
            return self._done

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def allow(self, ops: int) -> None:
        """Let the clients start ``ops`` operations in all; the rest wait for more."""
        with self._turn:
            self._allowed = ops
            self._turn.notify_all()

    def wait_for(self, done: int) -> None:
        """Wait until ``done`` operations have finished (or a client failed)."""
        wait_until(
            lambda: self.done >= done or self.failures,
            timeout_s=DEADLINE_S,
            what=f"{done} operations of the workload",
        )

    def join(self) -> Stats:
        """Let every operation run, wait for the clients to finish and return what they
        did; raises :class:`AssertionError` if a client failed or hung."""
        self.allow(self.total)
        for thread in self._threads:
            thread.join(timeout=DEADLINE_S)
            assert not thread.is_alive(), f"{thread.name} did not finish"
        assert not self.failures, f"the workload (seed {self.seed}) failed: {self.failures}"
        return self.stats

    def _client(self, index: int, ops: list[Op]) -> None:
        stats = Stats()
        connection = None
        try:
            connection = self._connect()
            for number, op in enumerate(ops):
                self._claim()
                try:
                    connection = self._run_op(connection, op, stats)
                except BaseException as exc:
                    self.failures.append(f"client {index}, operation #{number} {op}: {exc!r}")
                    return
                with self._lock:
                    self._done += 1
                self._pace.wait(self._pace_s)  # wait-ok: pacing between operations
        except BaseException as exc:
            self.failures.append(f"client {index}: {exc!r}")
        finally:
            if connection is not None:
                connection[1]()
            with self._lock:
                self.stats.add(stats)

    def _claim(self) -> None:
        """Wait until one more operation is allowed, and take it."""
        with self._turn:
            if not self._turn.wait_for(lambda: self._started < self._allowed, 2 * DEADLINE_S):
                raise TimeoutError(f"held back at {self._allowed} operations for too long")
            self._started += 1

    def _run_op(
        self, connection: tuple[Session, Callable[[], None]], op: Op, stats: Stats
    ) -> tuple[Session, Callable[[], None]]:
        """Run ``op``, again on a new connection while the node is unreachable; returns
        the connection to go on with."""
        for attempt in itertools.count(1):
            try:
                self._run(connection[0], op, stats)
                return connection
            except ExternalError:
                if not self.outages or attempt >= 20:
                    raise
                stats.unavailable += 1
                connection[1]()
                connection = self._reconnect()
        raise AssertionError("unreachable")

    def _reconnect(self) -> tuple[Session, Callable[[], None]]:
        """A new connection; connecting waits (5 s at a time) for a node to answer."""

        def attempt() -> tuple[Session, Callable[[], None]] | None:
            try:
                return self._connect()
            except ExternalError:
                return None

        connected = wait_until(attempt, timeout_s=DEADLINE_S, poll_s=0.05, what="a node")
        assert connected is not None
        return connected

    @staticmethod
    def _run(session: Session, op: Op, stats: Stats) -> None:
        if op.kind == "write":
            [(text, params)] = op.statements
            session.execute(text, *params)
            stats.writes += 1
        elif op.kind == "split":
            [(text, params)] = op.statements
            session.execute(text, *params)
            stats.splits += 1
        elif op.kind == "commit":
            attempts = 0

            def body(s: Session) -> None:
                nonlocal attempts
                attempts += 1
                for text, params in op.statements:
                    s.execute(text, *params)

            try:
                session.run_transaction(body)
            finally:
                stats.retries += max(0, attempts - 1)
            stats.commits += 1
        else:
            session.execute("BEGIN")
            try:
                for text, params in op.statements:
                    session.execute(text, *params)
            except SerializationFailure:
                stats.retries += 1  # it was going to be rolled back anyway
            finally:
                session.execute("ROLLBACK")  # NB: needs no node: the writes are buffered
            stats.rollbacks += 1


# A transaction that walks away.


def abandon_transaction(db: DB, ids: Sequence[int], *, commit: bool) -> Timestamp:
    """Write rows ``ids`` of ``t`` as intents of a transaction driven by hand through
    the node's store (``db`` must be embedded), then walk away; returns the intents'
    timestamp.

    With ``commit=False`` the transaction stays pending, with nobody to heartbeat it:
    the pusher moves it up, and aborts it once it has expired; its rows must never be
    published. With ``commit=True`` it commits naming its intents, as a coordinator
    does, which publishes the rows (a commit that named none would leave them behind with
    no record: the record goes at the commit, and an intent without one reads as aborted,
    as in CockroachDB).
    """
    node = db.node
    if node is None:
        raise InvalidArgumentError(
            "abandon_transaction needs an embedded node: feedkv.connect(<store directory>)"
        )
    store = node.store
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    columns = {c.name: c.id for c in desc.columns}
    puts = tuple(
        Put(key, value)
        for k in ids
        for key, value in row_kvs(
            desc, {columns["id"]: k, columns["v"]: "abandoned", columns["n"]: k}
        ).items()
    )
    now = store.clock.now()
    txn = Transaction(uuid.uuid4().bytes, puts[0].key, 0, now, now, 1)
    for requests in ((HeartbeatTxn(),), puts):
        response = store.send(BatchRequest(Header(txn=txn), requests))
        txn = response.txn or txn
    written = tuple(Span(put.key, key_next(put.key)) for put in puts)
    while commit:
        # It read nothing, so moving its reads up to a pushed write timestamp is a refresh
        # that cannot fail (what the client's transaction does before it commits).
        txn = replace(txn, read_ts=txn.write_ts)
        try:
            # NB: in a batch of its own: sent with the writes, it would commit in one phase
            store.send(BatchRequest(Header(txn=txn), (EndTxn(True, lock_spans=written),)))
            break
        except TransactionRetryError as exc:
            if exc.ts is None or exc.reason != "RETRY_PUSHED":
                raise
            txn = txn.with_write_ts(exc.ts)  # a pusher moved the record up: commit there
    return txn.write_ts


# What was published.


def published_files(out: Path) -> list[str]:
    """The files a cloud storage sink published into directory ``out`` (names relative
    to it), in name order: ``.feedkv/`` (the Spark runner's staging and manifests) is
    not output, nor a ``*.tmp`` a writer left before its rename."""
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    return [n for n in names if not n.startswith(".feedkv/") and not n.endswith(".tmp")]


def cloud_storage_messages(
    names: Iterable[str], read: Callable[[str], bytes]
) -> list[ChangefeedMessage]:
    """Every message in the published files ``names`` of a cloud storage sink (a
    directory or a bucket prefix; names relative to it, ``read`` gives one's contents),
    in file-name order, which the sink promises is safe
    (:mod:`feedkv.changefeed.sinks.cloud_storage`); one line of an ``.ndjson`` file is one
    message, its key in its value (``key_in_value``, implied for these sinks)."""
    messages: list[ChangefeedMessage] = []
    stray = []
    for name in sorted(names):
        if name.endswith(".RESOLVED"):
            messages.append(parse_json_message(None, None, read(name)))
        elif name.endswith(".ndjson"):
            topic = file_topic(name)
            for line in read(name).decode().splitlines():
                key = json.dumps(json.loads(line)["key"])
                messages.append(parse_json_message(topic, key, line))
        else:
            stray.append(name)
    assert not stray, f"published files that are neither data nor resolved markers: {stray}"
    return messages


def committed(
    db: FeedClient, after: Timestamp, upto: Timestamp, table: str = "t"
) -> set[tuple[tuple[Any, ...], Timestamp]]:
    """Every committed version of ``table``'s rows in ``(after, upto]`` (an incremental
    export): (primary key, timestamp)."""
    snapshot = catalog.Snapshot(db, upto)
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), table)
    return {
        (decode_row_key(desc, version.key)[0], version.ts)
        for version in db.export(table_span(desc.id), after, upto)
    }


def check_feed(
    db: SQLClient,
    streams: Mapping[str, Sequence[ChangefeedMessage]],
    start: Timestamp,
    end: Timestamp,
    seed: int,
    *,
    min_versions: int,
    min_markers: int = 3,
) -> list[ChangefeedMessage]:
    """Run every validator over a changefeed of ``t`` started at ``start`` (exclusive,
    with an initial scan, ``WITH updated, diff``): ``streams`` maps each partition (``""``
    for a sink of one stream) to the messages it delivered, in order; the table is read
    through ``db``. Then check that the feed holds every version committed up to ``end``
    (at least ``min_versions`` of them), the initial scan, updates, deletions and at
    least ``min_markers`` distinct resolved markers. Returns the row messages of every
    stream.
    """
    validator = ChangefeedValidator(
        sql_row_reader(db, "t"), sql_table_reader(db, "t"), partitions=streams.keys()
    )
    validator.note_partitions(streams)
    try:
        validator.check()
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}") from None

    messages = [m for stream in streams.values() for m in stream]
    rows = [m for m in messages if m.resolved is None]
    versions = {(tuple(m.key or ()), m.updated) for m in rows}
    expected = committed(db, start, end)
    assert len(expected) >= min_versions, (
        f"the workload committed only {len(expected)} row versions"
    )
    missing = sorted(expected - versions, key=str)
    assert not missing, (
        f"seed {seed}: {len(missing)} committed versions never emitted: {missing[:5]}"
    )
    scanned = [m for m in rows if m.updated == start]
    assert {tuple(m.key or ()) for m in scanned} == {(k,) for k in range(INITIAL_ROWS)}
    assert any(m.before is not None and m.after is not None for m in rows)  # updates
    assert any(m.before is not None and m.after is None for m in rows)  # deletions
    # the scan's marker, some while the workload ran, and the one at or past its end
    assert len({m.resolved for m in messages if m.resolved is not None}) >= min_markers
    return rows


class BackgroundWriter:
    """Runs :meth:`step` over and over in a thread of its own, through one connection to
    the node at ``url``, until stopped or the node dies: a crash test's writer. ``done``
    adds up what the steps return. What it wrote is for the test to read back from the
    store, not to remember: a step cut short by a kill may or may not have committed.

    ``with`` starts it and stops it (or :meth:`start` and :meth:`stop`); :meth:`stop`
    raises what ended it early, unless that was a :class:`~feedkv.FeedKVError` (the
    node went away)."""

    pace_s = 0.0  # NB: a pause between steps leaves a Spark job some CPU
    stop_timeout_s = 240.0

    def __init__(self, url: str, name: str) -> None:
        self.url = url
        self.done = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def step(self, db: DB) -> int:
        """One write (or a few); returns what it adds to ``done``."""
        raise NotImplementedError

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.stop_timeout_s)
        assert not self._thread.is_alive(), f"{self._thread.name} did not stop"
        if self.failure is not None and not isinstance(self.failure, feedkv.FeedKVError):
            raise self.failure

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, more: int, what: str = "writes", timeout_s: float = 240.0) -> None:
        """Wait until ``done`` grew by ``more``; raises :class:`AssertionError` when the
        writer stopped first."""
        target = self.done + more
        wait_until(
            lambda: self.done >= target or self.failure is not None,
            timeout_s=timeout_s,
            what=f"{more} more {what}",
        )
        if self.failure is not None:
            raise AssertionError(f"the writer stopped: {self.failure!r}") from self.failure

    def _run(self) -> None:
        try:
            with feedkv.connect(self.url) as db:
                while not self._stop.wait(self.pace_s):
                    self.done += self.step(db)
        except BaseException as exc:  # the node was killed, or a real failure
            self.failure = exc


class Counter(BackgroundWriter):
    """Adds 1 to ``a``'s row ``k = 1`` (``a (k INT PRIMARY KEY, v INT)``), one
    transaction at a time: every committed version of the row is the one before plus
    1, so a changelog of it must hold each value once."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "counter")

    def step(self, db: DB) -> int:
        db.sql("UPDATE a SET v = v + 1 WHERE k = 1")
        return 1
