"""A seeded nemesis: a workload that does what makes change feeds hard, until stopped.

:class:`Nemesis` runs a few *worker* threads and one *chaos* thread against a node
through a :class:`~feedkv.kv.db.KVClient` (an embedded :class:`feedkv.DB` or one
connected over gRPC). Workers run, over a small set of keys:

- ``COMMIT``: a client transaction that reads some keys and writes several (keys in two
  ranges commit in two phases, with intents and a record); ``ROLLBACK``: the same, rolled
  back (the client buffers writes, so nothing reaches the node);
- ``ABORT``, ``SLOW_COMMIT`` and ``ABANDON``: transactions driven by hand through the
  batch API, so that their intents really are written: a record, one intent per write
  (a key may be written twice: an intermediate write), then a rollback, a commit after a
  pause (long enough for the rangefeed pusher to move it), or nothing at all: the
  transaction is never heartbeated again and the node must clean its intents up;
- ``PUSH``: a highest-priority transaction writing keys this worker left intents on
  recently, which aborts their transactions on the spot;
- ``PUT`` and ``DELETE``: single-key writes outside transactions; ``SCAN``: a read of
  every key at the node's current time, which pushes the timestamps of the pending
  transactions whose intents it meets.

The chaos thread splits and merges ranges at keys of the set and, when the caller gives
a ``restart`` callback, restarts the node at points drawn from the seed.

Determinism: every choice (operation, keys, values, priorities, pauses) comes from a
``random.Random`` per thread seeded from ``seed``, and no choice depends on an outcome,
so a seed always draws the same operations (:func:`plan` lists them without running
anything). How the threads interleave, and so what the operations do, is not fixed.

Errors: a node that is restarting, a transaction that lost a conflict or a range that
moved are part of the game: every :class:`~feedkv.errors.FeedKVError` except
:class:`~feedkv.errors.InvariantViolation` is recorded as the operation's outcome and
the thread carries on. An invariant violation or any other exception is a finding: it
stops nothing, but :meth:`Nemesis.stop` raises the first one.

What happened is kept in :attr:`Nemesis.log` (one :class:`OpRecord` per operation, with
its outcome and timing), so a harness that finds a broken promise can show the
operations that touched the key concerned (:meth:`NemesisReport.touching`).
"""

from __future__ import annotations

import collections
import contextlib
import enum
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from feedkv.errors import (
    ExternalError,
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
    NodeUnavailableError,
    TransactionRetryError,
)
from feedkv.kv.api import (
    MAX_PRIORITY,
    BatchRequest,
    EndTxn,
    Header,
    HeartbeatTxn,
    Put,
    Transaction,
)
from feedkv.kv.db import KVClient
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp
from feedkv.util.keys import Span, key_next, merge_spans

__all__ = [
    "CHAOS",
    "Nemesis",
    "NemesisConfig",
    "NemesisReport",
    "Op",
    "OpRecord",
    "Step",
    "plan",
]

CHAOS = "chaos"  # the name of the thread that splits, merges and restarts


class Op(enum.StrEnum):
    """What one step of the nemesis does."""

    COMMIT = "commit"
    ROLLBACK = "rollback"
    ABORT = "abort"
    SLOW_COMMIT = "slow commit"
    ABANDON = "abandon"
    PUSH = "push"
    PUT = "put"
    DELETE = "delete"
    SCAN = "scan"
    SPLIT = "split"
    MERGE = "merge"
    RESTART = "restart"


WORKER_OPS = (
    Op.COMMIT,
    Op.ROLLBACK,
    Op.ABORT,
    Op.SLOW_COMMIT,
    Op.ABANDON,
    Op.PUSH,
    Op.PUT,
    Op.DELETE,
    Op.SCAN,
)
CHAOS_OPS = (Op.SPLIT, Op.MERGE)

_DEFAULT_WEIGHTS: Mapping[Op, int] = {
    Op.COMMIT: 30,
    Op.ROLLBACK: 5,
    Op.ABORT: 8,
    Op.SLOW_COMMIT: 8,
    Op.ABANDON: 6,
    Op.PUSH: 8,
    Op.PUT: 12,
    Op.DELETE: 4,
    Op.SCAN: 5,
}
_DEFAULT_CHAOS_WEIGHTS: Mapping[Op, int] = {Op.SPLIT: 3, Op.MERGE: 2}

RESTART_RIDE_S = 30.0  # how long a split waits out a restarting node, at most
MAX_COMMIT_ATTEMPTS = 5  # a hand-driven commit re-sent after being pushed, at most


@dataclass(frozen=True, slots=True)
class NemesisConfig:
    """How hard the nemesis pushes; every field has a default that suits a test node with
    fast closed timestamps (tens of ms), txn liveness and push age (hundreds of ms).

    ``restarts`` node restarts happen, at chaos steps drawn from the seed among the first
    ``4 * restarts + 2``, but only when :class:`Nemesis` is given a ``restart`` callback.
    Pauses are in seconds; pauses drawn as ``(low, high)`` are uniform in that interval.
    """

    workers: int = 3
    max_keys_per_txn: int = 4
    weights: Mapping[Op, int] = field(default_factory=lambda: dict(_DEFAULT_WEIGHTS))
    chaos_weights: Mapping[Op, int] = field(default_factory=lambda: dict(_DEFAULT_CHAOS_WEIGHTS))
    restarts: int = 0
    delete_fraction: float = 0.15  # of the writes of a transaction
    rewrite_fraction: float = 0.3  # of hand-driven txns that write one key twice
    op_pause_s: float = 0.005  # between a worker's steps
    slow_commit_s: tuple[float, float] = (0.02, 0.15)  # intents live this long, then commit
    chaos_pause_s: tuple[float, float] = (0.05, 0.25)  # between chaos steps
    error_pause_s: float = 0.05  # after a fault outside (the node restarting)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise InvalidArgumentError(f"a nemesis needs at least one worker, got {self.workers}")
        if self.max_keys_per_txn < 1:
            raise InvalidArgumentError(
                f"max_keys_per_txn must be at least 1, got {self.max_keys_per_txn}"
            )
        if self.restarts < 0:
            raise InvalidArgumentError(f"restarts must be >= 0, got {self.restarts}")
        for name, weights, allowed in (
            ("weights", self.weights, WORKER_OPS),
            ("chaos_weights", self.chaos_weights, CHAOS_OPS),
        ):
            wrong = [op for op in weights if op not in allowed]
            if wrong:
                raise InvalidArgumentError(
                    f"{name} may only weigh {', '.join(map(str, allowed))}; "
                    f"got {', '.join(map(str, wrong))}"
                )
            if any(w < 0 for w in weights.values()) or not sum(weights.values()):
                raise InvalidArgumentError(f"{name} must be >= 0 and not all zero: {weights}")


@dataclass(frozen=True, slots=True)
class Step:
    """One operation as drawn from the seed, before it runs.

    ``writes`` are ``(key, value)`` in the order they are sent (``None`` deletes; a key
    may appear twice in hand-driven transactions); ``reads`` are read first by client
    transactions; ``key`` is where a split or merge happens; ``priority`` is the
    transaction's; ``pause_s`` is the pause before the step; ``hold_s`` how long a
    ``SLOW_COMMIT`` leaves its intents pending before it commits.
    """

    op: Op
    writes: tuple[tuple[bytes, bytes | None], ...] = ()
    reads: tuple[bytes, ...] = ()
    key: bytes | None = None
    priority: int | None = None
    pause_s: float = 0.0
    hold_s: float = 0.0


@dataclass(frozen=True, slots=True)
class OpRecord:
    """A step as it ran: ``outcome`` is what happened (``"committed"``, ``"aborted"``,
    ... or the class name of the error that ended it); ``ts`` the commit timestamp when
    there is one; ``txn_id`` the transaction's id for hand-driven transactions;
    ``started``/``ended`` are ``time.monotonic()`` readings."""

    thread: str
    index: int
    step: Step
    outcome: str
    ts: Timestamp | None
    txn_id: bytes | None
    started: float
    ended: float

    def __str__(self) -> str:
        writes = ", ".join(f"{k!r}={v!r}" for k, v in self.step.writes)
        where = f" at {self.step.key!r}" if self.step.key is not None else ""
        txn = f" txn {self.txn_id.hex()[:8]}" if self.txn_id else ""
        ts = f" @ {self.ts}" if self.ts is not None else ""
        return (
            f"{self.thread}#{self.index} {self.step.op}{where}{txn} [{writes}] -> "
            f"{self.outcome}{ts}"
        )


@dataclass(frozen=True, slots=True)
class NemesisReport:
    """What a nemesis run did: every operation in the order it finished."""

    seed: int
    log: tuple[OpRecord, ...]

    def counts(self) -> collections.Counter[tuple[Op, str]]:
        """How many steps of each kind ended with each outcome."""
        return collections.Counter((r.step.op, r.outcome) for r in self.log)

    def touching(self, key: bytes) -> list[OpRecord]:
        """The operations that wrote ``key`` (for explaining a violation about it)."""
        return [r for r in self.log if any(k == key for k, _v in r.step.writes)]

    def __str__(self) -> str:
        counts = sorted(self.counts().items(), key=lambda item: (item[0][0], item[0][1]))
        shown = ", ".join(f"{op} {outcome}: {n}" for (op, outcome), n in counts)
        return f"nemesis seed {self.seed}: {len(self.log)} operations ({shown})"


class _Planner:
    """Draws one thread's steps from its own seeded generator."""

    def __init__(self, name: str, seed: int, keys: Sequence[bytes], config: NemesisConfig) -> None:
        self.name = name
        self._rng = random.Random(seed)
        self._keys = keys
        self._config = config
        self._index = 0
        self._recent: collections.deque[bytes] = collections.deque(maxlen=8)
        self._restarts_at: frozenset[int] = frozenset()
        if name == CHAOS and config.restarts:
            window = range(1, 4 * config.restarts + 2)
            self._restarts_at = frozenset(self._rng.sample(window, config.restarts))

    def next(self) -> Step:
        index = self._index
        self._index += 1
        return self._next_chaos(index) if self.name == CHAOS else self._next_work(index)

    def _next_chaos(self, index: int) -> Step:
        rng, config = self._rng, self._config
        pause = rng.uniform(*config.chaos_pause_s)
        if index in self._restarts_at:
            return Step(Op.RESTART, pause_s=pause)
        op = _pick(rng, config.chaos_weights)
        return Step(op, key=rng.choice(self._keys), pause_s=pause)

    def _next_work(self, index: int) -> Step:
        rng, config = self._rng, self._config
        op = _pick(rng, config.weights)
        pause = config.op_pause_s
        count = rng.randint(1, min(config.max_keys_per_txn, len(self._keys)))
        keys = rng.sample(self._keys, count)
        if op is Op.SCAN:
            return Step(op, pause_s=pause)
        if op in (Op.PUT, Op.DELETE):
            value = None if op is Op.DELETE else self._value(index, 0)
            return Step(op, writes=((keys[0], value),), pause_s=pause)
        if op is Op.PUSH:
            # Aim at keys this worker left intents on lately (its own choices, so the
            # draw stays deterministic); the node aborts whatever is still pending there.
            targets = list(dict.fromkeys(self._recent)) or keys
            keys = rng.sample(targets, min(count, len(targets)))
        hand_driven = op in (Op.ABORT, Op.SLOW_COMMIT, Op.ABANDON)
        if hand_driven and rng.random() < config.rewrite_fraction:
            keys.append(keys[0])  # an intermediate write, which must never be published
        writes = tuple(
            (key, None if rng.random() < config.delete_fraction else self._value(index, i))
            for i, key in enumerate(keys)
        )
        reads: tuple[bytes, ...] = ()
        if op in (Op.COMMIT, Op.ROLLBACK):
            reads = tuple(rng.sample(self._keys, rng.randint(0, min(2, len(self._keys)))))
        priority = MAX_PRIORITY if op is Op.PUSH else rng.randint(1, MAX_PRIORITY - 1)
        hold = rng.uniform(*config.slow_commit_s) if op is Op.SLOW_COMMIT else 0.0
        if hand_driven:
            self._recent.extend(keys)
        return Step(op, writes, reads, None, priority, pause, hold)

    def _value(self, index: int, part: int) -> bytes:
        return f"{self.name}.{index}.{part}".encode()


def _pick(rng: random.Random, weights: Mapping[Op, int]) -> Op:
    ops = sorted(weights)  # a fixed order, whatever order the mapping was built in
    return rng.choices(ops, [weights[op] for op in ops])[0]


def _planners(seed: int, keys: Sequence[bytes], config: NemesisConfig) -> list[_Planner]:
    master = random.Random(seed)
    names = [f"w{i}" for i in range(config.workers)] + [CHAOS]
    return [_Planner(name, master.getrandbits(64), keys, config) for name in names]


def _check_keys(keys: Sequence[bytes]) -> tuple[bytes, ...]:
    unique = tuple(dict.fromkeys(keys))
    if not unique:
        raise InvalidArgumentError("a nemesis needs at least one key")
    return unique


def plan(
    keys: Sequence[bytes], seed: int, steps: int, config: NemesisConfig | None = None
) -> dict[str, tuple[Step, ...]]:
    """The first ``steps`` steps each thread of a nemesis with this seed would run, by
    thread name (``"w0"``, ``"w1"``, ..., :data:`CHAOS`). Runs nothing."""
    planners = _planners(seed, _check_keys(keys), config or NemesisConfig())
    return {p.name: tuple(p.next() for _ in range(steps)) for p in planners}


class Nemesis:
    """Runs the seeded workload against ``db`` in background threads until :meth:`stop`.

    ``keys`` are the keys the workload writes, splits and merges at (a dozen or two make
    conflicts common). ``restart``, if given, is called from the chaos thread to restart
    the node (stop it, start it again on the same store); ``db`` must then be a client
    that survives it (one connected over gRPC to a fixed address does).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Thread-safe.
    """

    def __init__(
        self,
        db: KVClient,
        keys: Sequence[bytes],
        seed: int,
        *,
        config: NemesisConfig | None = None,
        restart: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.keys = _check_keys(keys)
        self.seed = seed
        self.config = config or NemesisConfig()
        self._restart = restart
        self._planners = _planners(seed, self.keys, self.config)
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._log: list[OpRecord] = []
        self._restarts = 0
        self._unexpected: list[tuple[OpRecord, BaseException]] = []
        self._in_flight: dict[str, tuple[int, Step, float]] = {}
        self._threads: list[threading.Thread] = []

    # Running.

    def start(self) -> None:
        """Start the threads (once)."""
        if self._threads:
            raise InvalidArgumentError("this nemesis was already started")
        for planner in self._planners:
            thread = threading.Thread(
                target=self._run, args=(planner,), name=f"nemesis-{planner.name}", daemon=True
            )
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 30.0) -> NemesisReport:
        """Stop drawing steps, wait for the steps in flight (up to ``timeout_s``) and
        return what happened. Raises the first unexpected error (an invariant violation
        or a non-feedkv exception) any step met, noting the step. Idempotent."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in self._threads):
            now = time.monotonic()
            with self._changed:
                stuck = [
                    f"{name}#{index} ({now - started:.1f} s in {step})"
                    for name, (index, step, started) in sorted(self._in_flight.items())
                ]
            raise TimeoutError(
                f"nemesis seed {self.seed}: steps still running {timeout_s:g} s after stop: "
                + "; ".join(stuck)
            )
        with self._changed:
            unexpected = list(self._unexpected)
        if unexpected:
            record, exc = unexpected[0]
            exc.add_note(f"raised by nemesis step {record} (seed {self.seed})")
            raise exc
        return self.report()

    def __enter__(self) -> Nemesis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Progress.

    @property
    def log(self) -> list[OpRecord]:
        """The steps finished so far, in the order they finished (a copy)."""
        with self._changed:
            return list(self._log)

    @property
    def operations(self) -> int:
        """How many steps have finished (every thread)."""
        with self._changed:
            return len(self._log)

    @property
    def restarts(self) -> int:
        """How many node restarts have completed."""
        with self._changed:
            return self._restarts

    def report(self) -> NemesisReport:
        """What happened so far (:meth:`stop` returns the final one)."""
        return NemesisReport(self.seed, tuple(self.log))

    def wait_for(self, *, operations: int = 0, restarts: int = 0, timeout_s: float = 30.0) -> None:
        """Block until at least ``operations`` steps finished and ``restarts`` restarts
        completed; return early if a step met an unexpected error (:meth:`stop` raises
        it). Raises ``TimeoutError`` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._unexpected and (
                len(self._log) < operations or self._restarts < restarts
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"nemesis seed {self.seed}: {len(self._log)}/{operations} operations "
                        f"and {self._restarts}/{restarts} restarts after {timeout_s:g} s"
                    )
                self._changed.wait(left)

    # The threads.

    def _run(self, planner: _Planner) -> None:
        index = 0
        while True:
            step = planner.next()
            if self._stop.wait(step.pause_s):  # wait-ok: pacing the workload
                return
            started = time.monotonic()
            with self._changed:
                self._in_flight[planner.name] = (index, step, started)
            txn_id: list[bytes] = []
            ts: Timestamp | None = None
            error: BaseException | None = None
            try:
                outcome, ts = self._execute(step, txn_id)
            except InvariantViolation as exc:
                outcome, error = type(exc).__name__, exc
            except FeedKVError as exc:
                outcome = type(exc).__name__
                if isinstance(exc, ExternalError):
                    self._stop.wait(self.config.error_pause_s)  # wait-ok: the node is away
            except Exception as exc:
                outcome, error = type(exc).__name__, exc
            record = OpRecord(
                planner.name,
                index,
                step,
                outcome,
                ts,
                txn_id[0] if txn_id else None,
                started,
                time.monotonic(),
            )
            index += 1
            with self._changed:
                del self._in_flight[planner.name]
                self._log.append(record)
                if step.op is Op.RESTART and error is None:
                    self._restarts += 1
                if error is not None:
                    self._unexpected.append((record, error))
                self._changed.notify_all()

    def _through_restarts(self, call: Callable[[], object]) -> None:
        """``call()``, asked again while the node is away for a restart (its client
        reconnecting), until it answers, the nemesis stops or ``RESTART_RIDE_S`` pass: a
        chaos step drawn in a restart's window still runs. For calls that may be asked
        twice (a split at a range's start answers the split that made it)."""
        deadline = time.monotonic() + RESTART_RIDE_S
        while True:
            try:
                call()
                return
            except NodeUnavailableError:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise
                self._stop.wait(self.config.error_pause_s)  # wait-ok: the node is away

    def _execute(self, step: Step, txn_id: list[bytes]) -> tuple[str, Timestamp | None]:
        op = step.op
        if op in (Op.COMMIT, Op.ROLLBACK, Op.PUSH):
            return self._client_txn(step)
        if op in (Op.ABORT, Op.SLOW_COMMIT, Op.ABANDON):
            return self._hand_txn(step, txn_id)
        if op is Op.PUT or op is Op.DELETE:
            key, value = step.writes[0]
            ts = self.db.put(key, value) if value is not None else self.db.delete(key)
            return "written", ts
        if op is Op.SCAN:
            self.db.scan(min(self.keys), key_next(max(self.keys)))
            return "read", None
        if op is Op.SPLIT and step.key is not None:
            key = step.key
            self._through_restarts(lambda: self.db.split(key))
            return "split", None
        if op is Op.MERGE and step.key is not None:
            self.db.merge(step.key)
            return "merged", None
        if op is Op.RESTART and self._restart is not None:
            self._restart()
            return "restarted", None
        return "skipped", None

    def _client_txn(self, step: Step) -> tuple[str, Timestamp | None]:
        txn = self.db.transaction(priority=step.priority)
        try:
            for key in step.reads:
                txn.get(key)
            for key, value in step.writes:
                if value is None:
                    txn.delete(key)
                else:
                    txn.put(key, value)
            if step.op is Op.ROLLBACK:
                txn.rollback()
                return "rolled back", None
            return "committed", txn.commit()
        finally:
            txn.rollback()  # a no-op once committed or rolled back

    def _hand_txn(self, step: Step, txn_id: list[bytes]) -> tuple[str, Timestamp | None]:
        """A transaction coordinated here, request by request, so that its intents are
        written before it ends (or never ends: ``ABANDON``)."""
        anchor = step.writes[0][0]
        priority = step.priority if step.priority is not None else 1
        ident = uuid.uuid4().bytes
        txn_id.append(ident)
        txn = Transaction(ident, anchor, 0, ZERO_TIMESTAMP, ZERO_TIMESTAMP, priority)
        txn = self._send(txn, HeartbeatTxn())  # the record first, as a coordinator does
        locked: list[Span] = []
        try:
            for key, value in step.writes:
                locked.append(Span.for_key(key))
                txn = self._send(txn, Put(key, value))
            if step.op is Op.ABANDON:
                return "abandoned", None
            if step.op is Op.ABORT:
                self._send(txn, EndTxn(False, tuple(merge_spans(locked))))
                return "aborted", None
            # The intents live a while: the rangefeed pusher may move the transaction
            # (or abort it, if the pause outlives its liveness). Stopping cuts it short.
            self._stop.wait(step.hold_s)  # wait-ok: pacing the workload
            txn = self._send(txn, HeartbeatTxn())
            return "committed", self._commit(txn, tuple(merge_spans(locked)))
        except FeedKVError:
            if step.op is not Op.ABANDON and locked:
                # If this fails too, the record expires and the pushers clean up.
                with contextlib.suppress(FeedKVError):
                    self._send(txn, EndTxn(False, tuple(merge_spans(locked))))
            raise

    def _commit(self, txn: Transaction, locked: tuple[Span, ...]) -> Timestamp:
        for _attempt in range(MAX_COMMIT_ATTEMPTS):
            if txn.write_ts != txn.read_ts:
                # NB: this transaction read nothing, so it has nothing to refresh: it may
                # commit at its write timestamp as it is.
                txn = replace(txn, read_ts=txn.write_ts)
            try:
                self._send(txn, EndTxn(True, locked))
            except TransactionRetryError as exc:
                if exc.ts is None:
                    raise
                txn = replace(txn, read_ts=exc.ts, write_ts=exc.ts)
                continue
            return txn.write_ts
        raise TransactionRetryError(
            "RETRY_PUSHED",
            f"txn {txn.id.hex()[:8]} was pushed {MAX_COMMIT_ATTEMPTS} times while committing",
        )

    def _send(self, txn: Transaction, request: HeartbeatTxn | Put | EndTxn) -> Transaction:
        # Range id 0: the node routes by key, so splits and merges never get in the way.
        response = self.db.transport.send(BatchRequest(Header(txn=txn), (request,)))
        return response.txn if response.txn is not None else txn
