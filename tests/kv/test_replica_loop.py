"""Three stores' replica loops replicate ranges through Raft on real engines and threads.

The loops talk through a loopback transport that hands each batch to the destination
loop's inbox (the gRPC transport between node processes carries the same batches). A
stopped loop is a dead node: the other two elect a leader and go on; restarted on its
engine, it catches up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from feedkv.errors import (
    AmbiguousResultError,
    NodeUnavailableError,
    NotLeaseHolderError,
    RangeNotFoundError,
)
from feedkv.kv.replica import AppliedEntry, Replica
from feedkv.kv.replica_loop import ReplicaLoop
from feedkv.kv.replicated_command import Effects
from feedkv.raft import RAFT_DB, ConfChange, ConfChangeType, Config, MessageType, decode_message
from feedkv.storage import mvcc
from feedkv.storage.engine import ReadWriter
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import LogicalOp, WriteValue
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.testing.range_sim import WholeEngine
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

NODES = (1, 2, 3)
RANGES = (1, 2)
DEADLINE_S = 30.0


class CountingEngine(LMDBEngine):
    """An engine that counts the reads run on their caller's thread."""

    reads_now = 0

    def read_now(self, fn: Callable[[ReadWriter], Any]) -> Any:
        self.reads_now += 1
        return super().read_now(fn)


class Cluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.engines: dict[int, CountingEngine] = {}
        self.loops: dict[int, ReplicaLoop] = {}
        self.applied_ops: dict[int, dict[int, list[LogicalOp]]] = {n: {} for n in NODES}
        self.clock = 0
        self.sent: list[tuple[int, list[tuple[int, bytes]]]] = []  # (to node, batch)
        for node in NODES:
            engine = CountingEngine(
                directory / f"n{node}", databases=(*MVCC_DATABASES, RAFT_DB), sync=False
            )
            for range_id in RANGES:
                engine.write(lambda rw, r=range_id: Replica.bootstrap(rw, r, NODES))
            self.engines[node] = engine
            self.start(node)

    def start(self, node: int) -> None:
        def on_apply(range_id: int, entries: Sequence[AppliedEntry]) -> None:
            ops = self.applied_ops[node].setdefault(range_id, [])
            for entry in entries:
                ops.extend(entry.effects.ops)

        loop = ReplicaLoop(
            self.engines[node],
            node,
            self._send,
            lambda range_id: WholeEngine(NODES),
            send_snapshot=lambda to, range_id, frames, me=node: self._send_snapshot(
                me, to, range_id, frames
            ),
            tick_s=0.01,
            config=Config(id=node, election_tick=10),
            on_apply=on_apply,
        )
        for range_id in RANGES:
            loop.add(range_id)
        self.loops[node] = loop.start()

    def _send(self, node: int, batch: list[tuple[int, bytes]]) -> None:
        self.sent.append((node, batch))
        loop = self.loops.get(node)
        if loop is not None:
            loop.receive(batch)

    def _send_snapshot(
        self, sender: int, node: int, range_id: int, frames: Iterator[bytes]
    ) -> None:
        loop = self.loops.get(node)
        if loop is None:
            raise NodeUnavailableError(f"n{node} is down")
        loop.receive_snapshot(range_id, frames, sender)

    def stop(self, node: int) -> None:
        self.loops.pop(node).stop()

    def close(self) -> None:
        for node in list(self.loops):
            self.stop(node)
        for engine in self.engines.values():
            engine.close()

    def write(self, range_id: int, key: bytes, value: bytes) -> int:
        """Write through whichever node leads the range, retrying as a client would;
        returns the node that took it."""
        self.clock += 1
        ts = Timestamp(self.clock)

        def evaluate(rw: ReadWriter) -> tuple[None, Effects]:
            return None, Effects(tuple(mvcc.put(rw, key, ts, value)))

        def attempt() -> int | None:
            for node, loop in list(self.loops.items()):
                try:
                    loop.propose(range_id, evaluate).result(timeout=DEADLINE_S)
                except (NotLeaseHolderError, NodeUnavailableError):
                    continue
                except AmbiguousResultError:
                    return None  # the put is idempotent at its timestamp: send it again
                return node
            return None

        taker: int = wait_until(attempt, timeout_s=DEADLINE_S, what=f"a write to r{range_id}")
        return taker

    def batches_with(self, key: bytes) -> list[tuple[int, list[bytes]]]:
        """The batches sent with appends holding writes of keys starting with ``key``:
        ``(node, the entries' data)`` each, in order."""
        found = []
        for node, batch in list(self.sent):
            messages = [decode_message(raw) for _, raw in batch]
            data = [e.data for m in messages if m.type is MessageType.APP for e in m.entries]
            if any(key in d for d in data):
                found.append((node, data))
        return found

    def wait_caught_up(self, range_id: int) -> None:
        def caught_up() -> bool:
            statuses = [loop.status(range_id) for loop in self.loops.values()]
            committed = {committed for _, committed, _ in statuses}
            return len(committed) == 1 and all(a == c for _, c, a in statuses)

        wait_until(caught_up, timeout_s=DEADLINE_S, what=f"r{range_id} caught up on every node")

    def value(self, node: int, key: bytes) -> bytes | None:
        with self.engines[node].snapshot() as snap:
            kv = mvcc.get(snap, key, Timestamp(self.clock + 1))
        return None if kv is None else kv.value


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    held = Cluster(tmp_path)
    try:
        yield held
    finally:
        held.close()


def test_writes_to_two_ranges_reach_every_replica_with_the_same_ops(cluster: Cluster) -> None:
    for i in range(50):
        for range_id in RANGES:
            cluster.write(range_id, b"r%d-%03d" % (range_id, i), b"v%d" % i)
    for range_id in RANGES:
        cluster.wait_caught_up(range_id)
    for node in NODES:
        assert cluster.value(node, b"r2-049") == b"v49"
        for range_id in RANGES:
            ops = cluster.applied_ops[node][range_id]
            assert len([op for op in ops if isinstance(op, WriteValue)]) == 50
            assert ops == cluster.applied_ops[1][range_id]


def test_a_dead_leader_is_replaced_and_catches_up_when_it_returns(cluster: Cluster) -> None:
    leader = cluster.write(1, b"before", b"1")
    cluster.stop(leader)
    taker = cluster.write(1, b"during", b"2")
    assert taker != leader
    for i in range(20):
        cluster.write(1, b"during-%02d" % i, b"x")
    cluster.start(leader)
    cluster.wait_caught_up(1)
    assert cluster.value(leader, b"during") == b"2"
    assert cluster.value(leader, b"during-19") == b"x"
    assert cluster.value(leader, b"before") == b"1"


def test_a_stopped_loop_refuses_proposals(cluster: Cluster) -> None:
    loop = cluster.loops[1]
    cluster.stop(1)
    done = loop.propose(1, lambda rw: (None, Effects()))
    assert isinstance(done.exception(timeout=DEADLINE_S), NodeUnavailableError)


def test_proposals_waiting_together_are_evaluated_in_order_in_one_read(cluster: Cluster) -> None:
    leader = cluster.write(1, b"first", b"1")
    loop, engine = cluster.loops[leader], cluster.engines[leader]
    entered, release = threading.Event(), threading.Event()

    def blocker(rw: ReadWriter) -> tuple[None, Effects]:
        entered.set()
        release.wait(DEADLINE_S)
        return None, Effects()

    def count(i: int) -> Callable[[ReadWriter], tuple[int, Effects]]:
        def evaluate(rw: ReadWriter) -> tuple[int, Effects]:
            if i == 2:
                raise ValueError("the third fails")
            held = mvcc.get(rw, b"counter", Timestamp(1000 + i))
            seen = 0 if held is None else int(held.value)
            return seen, Effects(tuple(mvcc.put(rw, b"counter", Timestamp(1000 + i), b"%d" % i)))

        return evaluate

    blocked = loop.propose(1, blocker)
    assert entered.wait(DEADLINE_S)  # the loop is inside the blocker's evaluation
    reads_before = engine.reads_now
    waiting = [loop.propose(1, count(i)) for i in range(6)]
    release.set()
    blocked.result(timeout=DEADLINE_S)
    assert isinstance(waiting[2].exception(timeout=DEADLINE_S), ValueError)
    # each saw the write of the one before it (the failed one wrote nothing)
    assert [waiting[i].result(timeout=DEADLINE_S) for i in (0, 1, 3, 4, 5)] == [0, 0, 1, 3, 4]
    # one read up to the failure, one for the rest (one more if a Raft message came
    # between two of the proposals: it is taken in its place)
    assert engine.reads_now - reads_before <= 3


def _holding(held: threading.Event, release: threading.Event) -> Callable[[None], None]:
    """An engine job's on_applied that holds the commit thread until ``release``, after
    its commit (eval_lock is free then: reads go on)."""

    def hold(_: None) -> None:
        held.set()
        release.wait(DEADLINE_S)

    return hold


def _recording_put(
    evaluated: list[bytes],
) -> Callable[[bytes], Callable[[ReadWriter], tuple[None, Effects]]]:
    """Proposals that write ``key``, recording the order they were evaluated in."""

    def put(key: bytes) -> Callable[[ReadWriter], tuple[None, Effects]]:
        def evaluate(rw: ReadWriter) -> tuple[None, Effects]:
            evaluated.append(key)
            return None, Effects(tuple(mvcc.put(rw, key, Timestamp(500), b"v")))

        return evaluate

    return put


def test_appends_made_while_a_write_is_in_flight_leave_together_when_it_ends(
    cluster: Cluster,
) -> None:
    leader = cluster.write(1, b"first", b"1")
    loop, engine = cluster.loops[leader], cluster.engines[leader]
    followers = sorted(n for n in NODES if n != leader)
    held, release = threading.Event(), threading.Event()
    evaluated: list[bytes] = []
    hold, put = _holding(held, release), _recording_put(evaluated)

    def turn_ended() -> None:
        """Wait for a heartbeat of the range sent from now: the leader's turn that
        evaluated the proposals so far has ended."""
        since = len(cluster.sent)
        wait_until(
            lambda: any(
                range_id == 1 and decode_message(raw).type is MessageType.HEARTBEAT
                for _, batch in cluster.sent[since:]
                for range_id, raw in batch
            ),
            timeout_s=DEADLINE_S,
            what="a heartbeat",
        )

    blocker = engine.submit(lambda rw: None, hold)
    assert held.wait(DEADLINE_S)  # the commit thread waits, and the loop's next write
    proposed = [loop.propose(1, put(b"in-flight"))]
    wait_until(lambda: len(evaluated) == 1, timeout_s=DEADLINE_S, what="an evaluation")
    turn_ended()  # NB: a write of the leader's is in flight now, this one's or an older
    try:
        proposed += [loop.propose(1, put(b"later-%d" % i)) for i in range(3)]
        wait_until(lambda: len(evaluated) == 4, timeout_s=DEADLINE_S, what="evaluations")
        turn_ended()
        assert cluster.batches_with(b"later-") == []  # held while the write is in flight
    finally:
        release.set()
    blocker.result(timeout=DEADLINE_S)
    for done in proposed:
        assert done.result(timeout=DEADLINE_S) is None
    # they left together: each follower's first batch with one carried them all
    sent = cluster.batches_with(b"later-")
    for follower in followers:
        data = next(data for node, data in sent if node == follower)
        assert all(any(b"later-%d" % i in d for d in data) for i in range(3))


def test_a_proposal_made_while_a_write_is_in_flight_waits_for_the_next_turn(
    cluster: Cluster,
) -> None:
    leader = cluster.write(1, b"first", b"1")
    loop, engine = cluster.loops[leader], cluster.engines[leader]
    held, release, entered, unblock = (threading.Event() for _ in range(4))
    evaluated: list[bytes] = []
    hold, put = _holding(held, release), _recording_put(evaluated)

    def blocker(rw: ReadWriter) -> tuple[None, Effects]:
        entered.set()
        unblock.wait(DEADLINE_S)
        return None, Effects()

    held_write = engine.submit(lambda rw: None, hold)
    assert held.wait(DEADLINE_S)  # the commit thread waits: the loop's next write stays
    proposed = [loop.propose(1, put(b"staged"))]
    wait_until(lambda: loop._deferring, timeout_s=DEADLINE_S, what="a write in flight")
    try:
        proposed += [loop.propose(1, blocker), loop.propose(1, put(b"deferred"))]
        # NB: a change of a range not here fails as the loop takes it from its inbox
        change = loop.change_members(999, ConfChange(ConfChangeType.ADD_NODE, 0, context=4))
        assert entered.wait(DEADLINE_S)  # the loop evaluates the blocker now
        # the change queued after the proposals was taken first: they woke no turn
        assert isinstance(change.exception(timeout=0), RangeNotFoundError)
        assert evaluated == [b"staged"]
    finally:
        unblock.set()
        release.set()
    held_write.result(timeout=DEADLINE_S)
    for done in proposed:
        assert done.result(timeout=DEADLINE_S) is None
    assert evaluated == [b"staged", b"deferred"]
