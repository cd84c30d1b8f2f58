"""Changefeed jobs on Spark keep every changefeed promise under a nemesis SQL workload.

The validators of :mod:`feedkv.testing.changefeed_validator` (order, resolved,
before/after, completeness, fingerprint) read what a job published into a ``file://``
sink while several clients ran a seeded workload of multi-row writes, explicit
transactions (some rolled back, conflicting ones retried) and range splits over a small
key set: through ``PAUSE JOB`` / ``RESUME JOB`` on an embedded node, and through SIGKILLs
of a node subprocess that drives the Spark query.

The published files of one job are one stream (``CREATE CHANGEFEED ... INTO
'file://dir'``: the directory is the file prefix), read in file-name order, which the
sink promises is safe (:mod:`feedkv.changefeed.sinks.cloud_storage`)."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import ExternalError, SerializationFailure
from feedkv.sql import catalog
from feedkv.sql.row_codec import decode_row_key, table_span
from feedkv.sql.session import Session
from feedkv.testing.changefeed_validator import (
    ChangefeedMessage,
    ChangefeedValidator,
    parse_json_message,
    sql_row_reader,
    sql_table_reader,
)
from feedkv.testing.node_process import NodeProcess, free_port
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE_S = 120.0  # for the job to get somewhere; Spark is slow on a loaded machine
IDS = 30  # the workload's keys: few, so each row changes many times
INITIAL_ROWS = 10  # rows written before the changefeed, for its initial scan
PACE_S = 0.02  # between a client's operations, to leave Spark some CPU
# NB: key_in_value, which CockroachDB implies for cloud storage sinks: without it a line
# of a file carries no key, and a deletion ({"after": null, ...}) names no row.
OPTIONS = (
    "updated, diff, mvcc_timestamp, key_in_value, resolved = '200ms', "
    "min_checkpoint_frequency = '200ms'"
)

Statement = tuple[str, tuple[Any, ...]]


# The workload.


@dataclass(frozen=True)
class Op:
    """One client operation: ``write`` (one statement in a transaction of its own),
    ``commit`` (``BEGIN``, the statements, ``COMMIT``: retried whole on 40001),
    ``rollback`` (``BEGIN``, the statements, ``ROLLBACK``) or ``split``."""

    kind: str
    statements: tuple[Statement, ...]


def sample_ids(rng: random.Random, low: int, high: int, among: int = IDS) -> list[int]:
    return rng.sample(range(among), rng.randint(low, high))


def placeholders(count: int, first: int = 1) -> str:
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


# A session, and how to let go of it.
Connector = Callable[[], tuple[Session, Callable[[], None]]]


def embedded(db: DB) -> Connector:
    return lambda: (db.session(), lambda: None)


def remote(url: str) -> Connector:
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
    """

    def __init__(
        self, connect: Connector, seed: int, *, clients: int, ops: int, outages: bool = False
    ) -> None:
        self.seed = seed
        self.outages = outages
        self.total = clients * ops
        self.stats = Stats()
        self.failures: list[str] = []
        self._connect = connect
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
                self._pace.wait(PACE_S)  # wait-ok: pacing between operations
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


def create_table(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING, n INT)")
    rng = random.Random(0)
    values, params = random_values(rng, range(INITIAL_ROWS))
    db.sql(f"INSERT INTO t VALUES {values}", *params)


# The job, through SQL.


def create_job(db: DB, out: Path) -> int:
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{out}' WITH {OPTIONS}").rows
    return int(job_id)


def show_job(db: DB, job_id: int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    [row] = result.rows
    return dict(zip(result.columns, row, strict=True))


def check_job(db: DB, job_id: int) -> dict[str, Any]:
    """The job as SHOW CHANGEFEED JOB gives it; a job that failed fails the test."""
    error = db.changefeeds.error(job_id)
    if error is not None:
        raise AssertionError(f"changefeed job {job_id} failed: {error}")
    job = show_job(db, job_id)
    if job["status"] not in ("running", "pause-requested", "paused"):
        raise AssertionError(f"changefeed job {job_id} is {job['status']}: {job['error']}")
    return job


def high_water(db: DB, job_id: int) -> Timestamp | None:
    value: Decimal | None = check_job(db, job_id)["high_water_timestamp"]
    return Timestamp.parse(format(value, "f")) if value is not None else None


def wait_for_high_water(db: DB, job_id: int, above: Timestamp | None) -> None:
    """Wait until the job's high-water mark is set and past ``above``."""

    def moved() -> bool:
        mark = high_water(db, job_id)
        return mark is not None and (above is None or mark > above)

    wait_until(moved, timeout_s=DEADLINE_S, poll_s=0.1, what=f"a high-water mark past {above}")


def wait_for_status(db: DB, job_id: int, status: str) -> None:
    wait_until(
        lambda: check_job(db, job_id)["status"] == status,
        timeout_s=DEADLINE_S,
        poll_s=0.1,
        what=f"job {job_id} {status}",
    )


def job_start(db: DB, job_id: int) -> Timestamp:
    """Where the job's feed starts (exclusive): the CREATE statement's timestamp."""
    record = db.changefeeds.record(job_id)
    assert record is not None
    return record.spec.start


# Reading the sink.


def published(out: Path) -> list[Path]:
    """The sink's published files in file-name order: ``.feedkv/`` (staging, manifests)
    is not output, nor a ``*.tmp`` a killed writer left before its rename."""
    files = sorted((p.relative_to(out).as_posix(), p) for p in out.rglob("*") if p.is_file())
    return [p for name, p in files if not name.startswith(".feedkv/") and p.suffix != ".tmp"]


def highest_resolved(out: Path) -> Timestamp | None:
    marks = [
        parse_json_message(None, None, p.read_bytes()).resolved
        for p in published(out)
        if p.name.endswith(".RESOLVED")
    ]
    return max((m for m in marks if m is not None), default=None)


def wait_for_resolved(db: DB, job_id: int, out: Path, end: Timestamp) -> None:
    """Wait until a resolved file at or past ``end`` is published."""

    def reached() -> bool:
        check_job(db, job_id)
        mark = highest_resolved(out)
        return mark is not None and mark >= end

    wait_until(reached, timeout_s=DEADLINE_S, poll_s=0.2, what=f"a resolved file >= {end}")


def read_feed(out: Path) -> list[ChangefeedMessage]:
    """Every message the sink published, in file-name order."""
    messages: list[ChangefeedMessage] = []
    stray = []
    for path in published(out):
        if path.name.endswith(".RESOLVED"):
            messages.append(parse_json_message(None, None, path.read_bytes()))
        elif path.name.endswith(".ndjson"):
            topic = path.name.split("-")[3]  # <ts>-<session>-<file id>-<topic>-<schema id>
            for line in path.read_text().splitlines():
                key = json.dumps(json.loads(line)["key"])
                messages.append(parse_json_message(topic, key, line))
        else:
            stray.append(path.relative_to(out).as_posix())
    assert not stray, f"files outside .feedkv/ that are neither data nor markers: {stray}"
    return messages


def committed(db: DB, after: Timestamp, upto: Timestamp) -> set[tuple[tuple[Any, ...], Timestamp]]:
    """Every committed version of ``t``'s rows in ``(after, upto]`` (an incremental
    export): (primary key, timestamp)."""
    snapshot = catalog.Snapshot(db, upto)
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    return {
        (decode_row_key(desc, version.key)[0], version.ts)
        for version in db.export(table_span(desc.id), after, upto)
    }


def validate(db: DB, out: Path, start: Timestamp, end: Timestamp, seed: int) -> None:
    """Run every validator over the published stream, reading the table through ``db``;
    and check the stream holds every committed version up to ``end``."""
    messages = read_feed(out)
    validator = ChangefeedValidator(sql_row_reader(db, "t"), sql_table_reader(db, "t"))
    validator.note_all(messages)
    try:
        validator.check()
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}") from None

    rows = [m for m in messages if m.resolved is None]
    versions = {(tuple(m.key or ()), m.updated) for m in rows}
    expected = committed(db, start, end)
    assert len(expected) >= 300, f"the workload committed only {len(expected)} row versions"
    missing = sorted(expected - versions, key=str)
    assert not missing, (
        f"seed {seed}: {len(missing)} committed versions never emitted: {missing[:5]}"
    )
    scanned = [m for m in rows if m.updated == start]
    assert {tuple(m.key or ()) for m in scanned} == {(k,) for k in range(INITIAL_ROWS)}
    assert any(m.before is not None and m.after is not None for m in rows)  # updates
    assert any(m.before is not None and m.after is None for m in rows)  # deletions
    # the scan's marker, some while the workload ran, and the one at or past its end
    assert len({m.resolved for m in messages if m.resolved is not None}) >= 3


# 1. An embedded node: PAUSE and RESUME in the middle of the workload.


SEED_PAUSE = 20260501


@pytest.mark.timeout(300)
def test_a_paused_and_resumed_job_keeps_every_changefeed_promise(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    create_table(db)
    job_id = create_job(db, out)
    start = job_start(db, job_id)
    wait_for_high_water(db, job_id, None)  # the initial scan is done

    # Pause while the clients write, let them write while paused, resume while they write.
    workload = Workload(embedded(db), SEED_PAUSE, clients=4, ops=150)
    workload.allow(workload.total // 2)
    workload.start().wait_for(workload.total // 3)
    db.sql(f"PAUSE JOB {job_id}")
    wait_for_status(db, job_id, "paused")
    workload.allow(3 * workload.total // 4)
    workload.wait_for(3 * workload.total // 4 - 20)
    db.sql(f"RESUME JOB {job_id}")
    stats = workload.join()
    end = db.now()
    wait_for_resolved(db, job_id, out, end)
    assert check_job(db, job_id)["status"] == "running"
    # NB: stopped before its files are read: a listing taken while a batch is published
    # could see a resolved file in one date directory but miss data files in another
    db.sql(f"CANCEL JOB {job_id}")
    wait_until(
        lambda: show_job(db, job_id)["status"] == "canceled",
        timeout_s=DEADLINE_S,
        poll_s=0.1,
        what="the job canceled",
    )

    assert stats.commits > 50 and stats.rollbacks > 10 and stats.splits > 5
    validate(db, out, start, end, SEED_PAUSE)


# 2. A node subprocess, SIGKILLed and restarted in the middle of the workload.


SEED_RESTART = 20260502
RESTARTS = 2


@pytest.mark.timeout(600)
def test_a_job_whose_node_is_killed_keeps_every_changefeed_promise(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    store, out = tmp_path / "store", tmp_path / "out"
    # NB: one port for every restart, so the clients find the node again
    listen = f"127.0.0.1:{free_port()}"
    args = ("--spark-master", "local[2]", "--closed-ts-target", "200ms", "--listen", listen)
    nodes.append(NodeProcess(store, *args))
    url = nodes[-1].url
    with feedkv.connect(url) as client:
        create_table(client)
        job_id = create_job(client, out)
        start = job_start(client, job_id)
        wait_for_high_water(client, job_id, None)

    # Each phase of the workload starts once Spark runs on the node (its high-water mark
    # moved) and the node is killed while the phase's last operations still run.
    workload = Workload(remote(url), SEED_RESTART, clients=3, ops=150, outages=True)
    workload.allow(0)
    workload.start()
    phase = workload.total // (RESTARTS + 1)
    rng = random.Random(SEED_RESTART)
    for restart in range(1, RESTARTS + 1):
        with feedkv.connect(url) as client:
            wait_for_high_water(client, job_id, high_water(client, job_id))
        workload.allow(restart * phase)
        workload.wait_for(restart * phase - rng.randint(20, 40))
        nodes[-1].kill_all()
        nodes.append(NodeProcess(store, *args))
        assert nodes[-1].url == url
    with feedkv.connect(url) as client:
        wait_for_high_water(client, job_id, high_water(client, job_id))
    stats = workload.join()

    with feedkv.connect(url) as client:
        end = client.now()
        wait_for_resolved(client, job_id, out, end)
        assert check_job(client, job_id)["status"] == "running"
        client.sql(f"CANCEL JOB {job_id}")
        wait_until(
            lambda: show_job(client, job_id)["status"] == "canceled",
            timeout_s=DEADLINE_S,
            poll_s=0.1,
            what="the job canceled",
        )
        assert stats.commits > 30 and stats.rollbacks > 5
        assert stats.unavailable > 0  # the kills did cut operations short
        validate(client, out, start, end, SEED_RESTART)
    assert nodes[-1].terminate(timeout_s=120) == 0
