"""A whole-keyspace rangefeed keeps every promise while the seeded nemesis runs: commits,
rollbacks, abandoned intents, high-priority pushes, splits, merges and node restarts.

Each scenario consumes the feed on its own thread into a
:class:`~feedkv.testing.feed_validator.FeedValidator`, stops the nemesis, writes a marker,
waits for the feed to checkpoint past it and checks the events against the store's
committed history up to the marker. A broken promise fails with the nemesis operations
that wrote the keys concerned. The last test is the smallest form of a hang the nemesis
ran into (a commit that waited out an abandoned intent).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import ExternalError, FeedKVError, NodeUnavailableError
from feedkv.kv.api import MAX_PRIORITY, BatchRequest, Header, HeartbeatTxn, Put, Transaction
from feedkv.kv.store import StoreConfig
from feedkv.rangefeed.client import RangeFeed
from feedkv.rangefeed.event import Checkpoint
from feedkv.rangefeed.store_feeds import FeedConfig
from feedkv.server.node import Node
from feedkv.storage.export import iter_export
from feedkv.testing.feed_validator import FeedValidator, Violation, assert_valid
from feedkv.testing.nemesis import CHAOS, Nemesis, NemesisConfig, NemesisReport, Op, Step, plan
from feedkv.testing.node_process import free_port
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
ZERO = Timestamp(0, 0)
KEYS = [b"k%02d" % i for i in range(16)]
MARKER = b"zz-marker"  # outside the nemesis keys
OPERATIONS = 250  # per run: about two seconds of nemesis
DEADLINE_S = 30.0
STOP_DEADLINE_S = 10.0  # for the steps in flight when the nemesis stops
COMMIT_DEADLINE_S = 5.0  # a commit waiting out one abandoned intent takes ~0.2 s

STORE_CONFIG = StoreConfig(
    closed_ts_target_ns=20_000_000,
    closed_ts_interval_s=0.01,
    txn_liveness_ns=200_000_000,
    push_poll_s=0.01,
    sync=False,
)
FEED_CONFIG = FeedConfig(push_age_ns=100_000_000, push_interval_s=0.02)


class FeedConsumer:
    """Feeds every event of ``feed`` to ``validator`` on its own thread, and tracks the
    highest checkpoint seen."""

    def __init__(self, feed: RangeFeed, validator: FeedValidator) -> None:
        self.feed = feed
        self.validator = validator
        self.resolved = ZERO
        self.error: BaseException | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._consume, name="feed-consumer")
        self._thread.start()

    def _consume(self) -> None:
        try:
            for event in self.feed:
                self.validator.observe(event)
                if isinstance(event, Checkpoint) and event.ts > self.resolved:
                    with self._changed:
                        self.resolved = event.ts
                        self._changed.notify_all()
        except BaseException as exc:
            self.error = exc
        finally:
            with self._changed:
                self._changed.notify_all()

    def wait_resolved(self, ts: Timestamp, timeout_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.resolved < ts:
                if self.error is not None or not self._thread.is_alive():
                    raise AssertionError(f"the feed ended before {ts}: {self.error!r}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"the feed did not checkpoint past {ts} within {timeout_s:g} s "
                        f"(resolved {self.resolved})"
                    )
                self._changed.wait(left)

    def close(self) -> FeedValidator:
        """Stop the feed and hand the validator back to the caller's thread."""
        self.feed.close()
        self._thread.join(DEADLINE_S)
        if self._thread.is_alive():
            raise AssertionError("the feed consumer did not stop")
        if self.error is not None:
            raise self.error
        return self.validator


class RestartableNode:
    """A node listening on a fixed loopback port that can be restarted on its store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = free_port()
        self.node = self._start()

    @property
    def url(self) -> str:
        return f"feedkv://127.0.0.1:{self.port}"

    def _start(self) -> Node:
        def attempt() -> Node | None:
            try:
                return Node(
                    self.path,
                    listen=f"127.0.0.1:{self.port}",
                    config=STORE_CONFIG,
                    feed_config=FEED_CONFIG,
                )
            except NodeUnavailableError:
                return None  # the port is not free again yet

        return wait_until(attempt, timeout_s=DEADLINE_S, what=f"port {self.port} to be free")

    def restart(self) -> None:
        """Stop the node (its feeds end, calls in flight drain), start it again."""
        self.node.stop(grace_s=5.0)
        self.node = self._start()

    def stop(self) -> None:
        self.node.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RestartableNode]:
    node = RestartableNode(tmp_path / "store")
    yield node
    node.stop()


def write_marker(db: DB) -> Timestamp:
    """Write the marker, riding out a client still reconnecting after a restart."""

    def attempt() -> Timestamp | None:
        try:
            return db.put(MARKER, b"end")
        except ExternalError:
            return None

    return wait_until(attempt, timeout_s=DEADLINE_S, what="the marker write")


def explain(violations: list[Violation], report: NemesisReport) -> str:
    """The nemesis operations that wrote the first keys the violations name."""
    keys = list(dict.fromkeys(v.key for v in violations if v.key is not None))[:5]
    lines = [str(report)]
    for key in keys:
        touching = report.touching(key)
        lines.append(f"operations that wrote {key!r} ({len(touching)}, the last 12):")
        lines += [f"  {record}" for record in touching[-12:]]
    return "\n".join(lines)


def run_and_check(
    db: DB,
    node: Callable[[], Node],
    seed: int,
    *,
    restarts: int = 0,
    restart: Callable[[], None] | None = None,
) -> NemesisReport:
    """Run the nemesis under a whole-keyspace feed with diffs and validate the feed."""
    config = NemesisConfig(restarts=restarts)
    consumer = FeedConsumer(
        db.rangefeed(EVERYTHING, ZERO, with_diff=True),
        FeedValidator([EVERYTHING], ZERO, with_diff=True),
    )
    try:
        nemesis = Nemesis(db, KEYS, seed, config=config, restart=restart)
        nemesis.start()
        try:
            nemesis.wait_for(operations=OPERATIONS, restarts=restarts, timeout_s=DEADLINE_S)
        finally:
            report = nemesis.stop(timeout_s=STOP_DEADLINE_S)
        marker_ts = write_marker(db)
        consumer.wait_resolved(marker_ts)
    finally:
        validator = consumer.close()
    with node().store.engine.snapshot() as snap:
        committed = list(iter_export(snap, EVERYTHING, ZERO, MAX_TIMESTAMP))
    violations = validator.check(committed, up_to=marker_ts)
    try:
        assert_valid(violations)
    except AssertionError as exc:
        exc.add_note(f"seed {seed}, {restarts} restart(s)\n" + explain(violations, report))
        raise
    assert validator.events > len(report.log) // 2, "the feed saw next to nothing"
    return report


def assert_the_run_followed_the_plan(report: NemesisReport, restarts: int) -> None:
    """Every thread ran a prefix of what the seed draws, and the nemesis did its job."""
    by_thread: dict[str, list[Step]] = {}
    for record in report.log:
        by_thread.setdefault(record.thread, []).append(record.step)
    drawn = plan(
        KEYS, report.seed, max(map(len, by_thread.values())), NemesisConfig(restarts=restarts)
    )
    for thread, steps in by_thread.items():
        assert steps == list(drawn[thread][: len(steps)]), thread
    outcomes = report.counts()
    assert outcomes[Op.COMMIT, "committed"] > 0, report
    assert outcomes[Op.ABANDON, "abandoned"] > 0, report
    assert outcomes[Op.SLOW_COMMIT, "committed"] + outcomes[Op.ABORT, "aborted"] > 0, report
    assert outcomes[Op.SPLIT, "split"] > 0, report
    assert outcomes[Op.RESTART, "restarted"] == restarts, report


@pytest.mark.parametrize(("seed", "restarts"), [(101, 1), (202, 0), (303, 2), (404, 1)])
def test_a_feed_over_grpc_keeps_every_promise_under_the_nemesis_and_node_restarts(
    served: RestartableNode, seed: int, restarts: int
) -> None:
    db = feedkv.connect(served.url)
    try:
        report = run_and_check(
            db, lambda: served.node, seed, restarts=restarts, restart=served.restart
        )
    finally:
        db.close()
    assert_the_run_followed_the_plan(report, restarts)


@pytest.mark.parametrize("seed", [505, 606])
def test_an_embedded_feed_keeps_every_promise_under_the_nemesis(tmp_path: Path, seed: int) -> None:
    db = feedkv.connect(tmp_path / "store", config=STORE_CONFIG, feed_config=FEED_CONFIG)
    node = db.node
    assert node is not None
    try:
        report = run_and_check(db, lambda: node, seed)
    finally:
        db.close()
    assert_the_run_followed_the_plan(report, 0)


def test_the_same_seed_draws_the_same_operations() -> None:
    config = NemesisConfig(restarts=2)
    first = plan(KEYS, 7, 200, config)
    assert first == plan(KEYS, 7, 200, config)
    assert first != plan(KEYS, 8, 200, config)
    assert set(first) == {"w0", "w1", "w2", CHAOS}
    chaos = [step.op for step in first[CHAOS]]
    assert chaos.count(Op.RESTART) == 2
    assert Op.RESTART in chaos[:10]
    drawn = {step.op for steps in first.values() for step in steps}
    assert drawn == set(Op)


def test_a_commit_that_waited_out_an_abandoned_intent_still_finishes(tmp_path: Path) -> None:
    """The smallest form of a hang the nemesis runs into. A one-phase commit meets the
    intent of an abandoned, higher-priority transaction, so it waits out the owner's
    liveness (200 ms), far longer than the closed timestamp target (20 ms). Its timestamp,
    fixed when it first met the intent, is then below the closed timestamp; the commit
    must move above it and finish, not chase it forever."""
    db = feedkv.connect(tmp_path / "store", config=STORE_CONFIG, feed_config=FEED_CONFIG)
    outcome: list[Timestamp | FeedKVError] = []
    done = threading.Event()

    def commit() -> None:
        txn = db.transaction(priority=1)
        txn.put(b"x", b"mine")
        try:
            outcome.append(txn.commit())
        except FeedKVError as exc:
            outcome.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=commit, daemon=True)
    try:
        owner = Transaction(uuid.uuid4().bytes, b"x", 0, ZERO, ZERO, MAX_PRIORITY)
        owner = db.transport.send(BatchRequest(Header(txn=owner), (HeartbeatTxn(),))).txn or owner
        db.transport.send(BatchRequest(Header(txn=owner), (Put(b"x", b"abandoned"),)))
        thread.start()
        assert done.wait(COMMIT_DEADLINE_S), (
            f"the commit did not finish within {COMMIT_DEADLINE_S:g} s of waiting for an "
            "abandoned intent (each retry is pushed to just above the closed timestamp, "
            "which has moved on by the time the retry is evaluated)"
        )
        assert isinstance(outcome[0], Timestamp), outcome
        assert db.get(b"x") == b"mine"
    finally:
        db.close()  # a stuck commit ends: the node refuses its next attempt
        if thread.is_alive():
            thread.join(DEADLINE_S)
