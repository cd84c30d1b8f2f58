"""A nemesis for a cluster of node processes: a SQL bank under SIGKILLs.

:class:`Bank` moves money between the accounts of table ``bank`` from a few client
threads of the test process, each through a node of a
:class:`~feedkv.testing.cluster.LocalCluster` (its *gateway*; a client whose gateway
dies moves to another). Each transfer is one transaction that updates two balances and
inserts its own row into ``transfers``, so what committed can be read back and
replayed: :meth:`Bank.check` finds a lost acknowledged transfer, a transfer that
committed without being attempted, a balance that is not the replay of the transfers
that committed, and a total that changed.

:func:`kill_and_restart` SIGKILLs one node, chosen by its role at that moment (the
lease holder of the bank's range, a follower of it, or the node running a changefeed
job, :data:`ROLES`), and starts it again; :func:`plan_kills` draws the roles and pauses
from a seed. :func:`resume_times` says how long writes took to resume after each kill:
from the kill to the end of the first transfer that began after it and was
acknowledged (0 when writes never stopped). It and :func:`percentile` are pure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import feedkv
from feedkv.db import DB
from feedkv.errors import FeedKVError, InvalidArgumentError, InvariantViolation
from feedkv.sql import catalog
from feedkv.sql.row_codec import table_span
from feedkv.sql.session import Session
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

__all__ = [
    "COORDINATOR",
    "FOLLOWER",
    "LEASE_HOLDER",
    "ROLES",
    "Bank",
    "Kill",
    "KillStep",
    "any_client",
    "find_role",
    "healthy",
    "kill_and_restart",
    "percentile",
    "plan_kills",
    "resume_times",
    "summary",
]

LEASE_HOLDER, FOLLOWER, COORDINATOR = "lease holder", "follower", "coordinator"
ROLES = (LEASE_HOLDER, FOLLOWER, COORDINATOR)
DEADLINE_S = 120.0  # for a node to come back, a range to be whole again: two busy cores
# NB: a transfer's client gives up after this many conflicts (or routing failures, which
# SQL reports as conflicts) and connects anew, through the next node
TXN_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class KillStep:
    """One kill as drawn from the seed: whom (by role), after how long a pause once the
    cluster is whole again, and how long the node stays down."""

    role: str
    pause_s: float
    down_s: float


def plan_kills(
    seed: int,
    kills: int,
    *,
    pause_s: tuple[float, float] = (0.5, 3.0),
    down_s: tuple[float, float] = (0.2, 3.0),
) -> list[KillStep]:
    """``kills`` steps drawn from ``seed``, every role in turn first (so a few kills
    already cover each), then at random."""
    if kills < 0:
        raise InvalidArgumentError(f"kills must be >= 0, got {kills}")
    rng = random.Random(seed)
    roles = [ROLES[i] if i < len(ROLES) else rng.choice(ROLES) for i in range(kills)]
    return [KillStep(role, rng.uniform(*pause_s), rng.uniform(*down_s)) for role in roles]


@dataclass(frozen=True, slots=True)
class Kill:
    """A kill as it happened: the node (index, 0 for n1), its role, and the
    ``time.monotonic()`` readings of the kill and of the restart."""

    step: KillStep
    node: int
    killed_at: float
    restarted_at: float


def resume_times(kills: Sequence[float], writes: Sequence[tuple[float, float]]) -> list[float]:
    """For each kill time, the seconds until the end of the first write that started at
    or after it and succeeded (``writes``: ``(started, ended)`` of the successful ones);
    ``inf`` when none did."""
    ends_by_start = sorted(writes)
    times = []
    for killed in kills:
        ended = min((end for start, end in ends_by_start if start >= killed), default=None)
        times.append(float("inf") if ended is None else max(0.0, ended - killed))
    return times


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values``, by the nearest rank."""
    if not values:
        raise InvalidArgumentError("no values to take a percentile of")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


class Bank:
    """The bank; see the module docstring. ``workers`` client threads, each starting on
    node ``worker % nodes``; ``pace_s`` between a worker's transfers. Thread-safe."""

    def __init__(
        self,
        cluster: LocalCluster,
        seed: int,
        *,
        accounts: int = 20,
        balance: int = 100,
        workers: int = 3,
        pace_s: float = 0.01,
    ) -> None:
        self.cluster = cluster
        self.seed = seed
        self.accounts = accounts
        self.balance = balance
        self.workers = workers
        self.pace_s = pace_s
        self.acknowledged: set[int] = set()
        self.unknown: set[int] = set()  # failed: committed or not, nobody knows
        self.writes: list[tuple[float, float]] = []  # (started, ended) when acknowledged
        self.errors: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}  # by the error's type: its last message
        self.findings: list[BaseException] = []  # an invariant broken, or a bug
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def create(self, db: DB) -> None:
        db.sql("CREATE TABLE bank (id INT PRIMARY KEY, balance INT)")
        db.sql("CREATE TABLE transfers (id INT PRIMARY KEY, src INT, dst INT, amount INT)")
        rows = ", ".join(f"({i}, {self.balance})" for i in range(self.accounts))
        db.sql(f"INSERT INTO bank VALUES {rows}")

    def span(self, db: DB) -> Span:
        """The key span of table ``bank``."""
        snapshot = catalog.Snapshot(db, db.now())
        database = catalog.database_by_name(snapshot, "defaultdb")
        return table_span(catalog.table_by_name(snapshot, database, "bank").id)

    # Running.

    def start(self) -> None:
        for worker in range(self.workers):
            thread = threading.Thread(
                target=self._work, args=(worker,), name=f"bank-{worker}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout_s: float = DEADLINE_S) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            raise TimeoutError(f"bank workers still running {timeout_s:g} s after stop: {stuck}")

    @property
    def done(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def wait_for_more(self, count: int, timeout_s: float = DEADLINE_S) -> None:
        """Wait until ``count`` more transfers are acknowledged (or a worker found a bug)."""
        target = self.done + count
        wait_until(
            lambda: self.done >= target or self.findings,
            timeout_s=timeout_s,
            what=f"{count} more transfers (errors so far: {dict(self.errors)}; the last of "
            f"each: {self.last_error})",
        )
        if self.findings:
            raise self.findings[0]

    def _work(self, worker: int) -> None:
        rng = random.Random(self.seed * 1000 + worker)
        nodes = len(self.cluster.processes)
        gateway = worker % nodes
        client: DB | None = None
        session: Session | None = None
        number = 0
        try:
            while not self._stop.wait(self.pace_s):  # wait-ok: pacing the workload
                if session is None:
                    client, session = self._connect(gateway)
                    if session is None:
                        gateway = (gateway + 1) % nodes
                        continue
                number += 1
                ident = worker * 10_000_000 + number
                src, dst = rng.sample(range(self.accounts), 2)
                amount = rng.randint(1, 10)
                started = time.monotonic()
                try:
                    session.run_transaction(
                        _transfer(ident, src, dst, amount), max_attempts=TXN_ATTEMPTS
                    )
                except InvariantViolation:
                    raise
                except FeedKVError as exc:
                    with self._lock:
                        self.unknown.add(ident)
                        self.errors[type(exc).__name__] += 1
                        self.last_error[type(exc).__name__] = str(exc)[:1000]
                    if client is not None:
                        client.close()
                    client = session = None
                    gateway = (gateway + 1) % nodes  # it may be the node that died
                    continue
                with self._lock:
                    self.acknowledged.add(ident)
                    self.writes.append((started, time.monotonic()))
        except BaseException as exc:
            with self._lock:
                self.findings.append(exc)
        finally:
            if client is not None:
                client.close()

    def _connect(self, gateway: int) -> tuple[DB | None, Session | None]:
        try:
            client = feedkv.connect(self.cluster.url(gateway))
        except (FeedKVError, RuntimeError) as exc:  # RuntimeError: the node is down
            with self._lock:
                self.errors[f"connect: {type(exc).__name__}"] += 1
            return None, None
        return client, client.session()

    # Checking.

    def check(self, db: DB) -> None:
        """Raise :class:`AssertionError` if the bank broke a promise (run it once the
        workers stopped)."""
        balances = dict(db.sql("SELECT id, balance FROM bank").rows)
        transfers = db.sql("SELECT id, src, dst, amount FROM transfers").rows
        present = {row[0] for row in transfers}
        lost = self.acknowledged - present
        assert not lost, f"{len(lost)} acknowledged transfers lost: {sorted(lost)[:10]}"
        phantom = present - self.acknowledged - self.unknown
        assert not phantom, f"transfers never attempted committed: {sorted(phantom)[:10]}"
        total = sum(balances.values())
        assert total == self.accounts * self.balance, (
            f"the bank's total is {total}, not {self.accounts * self.balance}"
        )
        replayed = {i: self.balance for i in range(self.accounts)}
        for _ident, src, dst, amount in transfers:
            replayed[src] -= amount
            replayed[dst] += amount
        wrong = {
            i: (balances.get(i), want) for i, want in replayed.items() if balances.get(i) != want
        }
        assert not wrong, (
            f"balances that are not the replay of the transfers that committed: {wrong}"
        )


def _transfer(ident: int, src: int, dst: int, amount: int) -> Callable[[Session], None]:
    def body(session: Session) -> None:
        session.execute("UPDATE bank SET balance = balance - $1 WHERE id = $2", amount, src)
        session.execute("UPDATE bank SET balance = balance + $1 WHERE id = $2", amount, dst)
        session.execute("INSERT INTO transfers VALUES ($1, $2, $3, $4)", ident, src, dst, amount)

    return body


# Killing.


def any_client(cluster: LocalCluster) -> DB:
    """A client of some running node."""
    for index, process in enumerate(cluster.processes):
        if process is not None:
            with contextlib.suppress(FeedKVError):
                return cluster.connect(index)
    raise RuntimeError("no node is running")


def find_role(db: DB, span: Span, role: str, coordinator: Callable[[], int | None]) -> int | None:
    """The index of the node with ``role`` now (``coordinator()``: the node running the
    changefeed job); ``None`` if none has it (no lease holder elected yet)."""
    if role == COORDINATOR:
        return coordinator()
    found = next((r for r in db.ranges() if r.span.start <= span.start < r.span.end), None)
    if found is None or not found.lease_holder:
        return None
    if role == LEASE_HOLDER:
        return found.lease_holder - 1
    followers = [n for n in found.replicas if n != found.lease_holder]
    return followers[0] - 1 if followers else None


def healthy(cluster: LocalCluster, span: Span) -> bool:
    """Whether every node runs and sees every other live, and the bank's range has
    three replicas and a lease holder."""
    if any(p is None for p in cluster.processes):
        return False
    try:
        nodes = len(cluster.processes)
        if not all(cluster.live_nodes(i) == nodes for i in range(nodes)):
            return False
        with any_client(cluster) as db:
            found = [r for r in db.ranges() if r.span.start <= span.start < r.span.end]
            return bool(found) and len(found[0].replicas) == 3 and bool(found[0].lease_holder)
    except (FeedKVError, RuntimeError):
        return False


def kill_and_restart(
    cluster: LocalCluster,
    step: KillStep,
    span: Span,
    coordinator: Callable[[], int | None],
    pause: threading.Event | None = None,
) -> Kill:
    """Wait until the cluster is whole, pause, SIGKILL the node with ``step.role``,
    leave it down ``step.down_s`` and start it again; returns what happened."""
    wait_until(lambda: healthy(cluster, span), timeout_s=DEADLINE_S, what="a whole cluster")
    pacing = pause or threading.Event()
    pacing.wait(step.pause_s)  # wait-ok: a random moment

    def victim() -> int | None:
        with contextlib.suppress(FeedKVError, RuntimeError), any_client(cluster) as db:
            return find_role(db, span, step.role, coordinator)
        return None

    node = wait_until(
        lambda: (found := victim()) is not None and found + 1,
        timeout_s=DEADLINE_S,
        what=f"the {step.role}",
    )
    index = node - 1
    killed_at = time.monotonic()
    cluster.kill(index)
    pacing.wait(step.down_s)  # wait-ok: the node stays down a while
    cluster.restart(index)
    return Kill(step, index, killed_at, time.monotonic())


def summary(kills: Sequence[Kill], resumed: Sequence[float]) -> dict[str, object]:
    """Figures for a report: resume times (s) p50 and max, overall and per role."""
    by_role: dict[str, list[float]] = {}
    for kill, seconds in zip(kills, resumed, strict=True):
        by_role.setdefault(kill.step.role, []).append(seconds)
    return {
        "kills": len(kills),
        "resume_p50_s": round(percentile(resumed, 0.5), 3),
        "resume_max_s": round(max(resumed), 3),
        "by_role": {
            role: {
                "kills": len(v),
                "p50_s": round(percentile(v, 0.5), 3),
                "max_s": round(max(v), 3),
            }
            for role, v in sorted(by_role.items())
        },
        "each": [
            dataclasses.asdict(k.step) | {"node": f"n{k.node + 1}", "resume_s": round(s, 3)}
            for k, s in zip(kills, resumed, strict=True)
        ],
    }
