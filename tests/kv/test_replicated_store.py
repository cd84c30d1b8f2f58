"""Stores serving a range replicated on three of them through Raft.

Three stores in one process, each on its own engine, replicate range r1 (the whole
keyspace); their replica loops talk through a loopback transport. Clients reach the range
through whichever store holds its lease, as a router does after ``NotLeaseHolderError``.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import threading
import traceback
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from feedkv.errors import (
    AmbiguousResultError,
    NodeUnavailableError,
    NotLeaseHolderError,
    RangeNotFoundError,
    RangeRoutingError,
    RangeUnavailableError,
    TransactionAbortedError,
)
from feedkv.kv import replica_collector, replicated_merge
from feedkv.kv import store as store_module
from feedkv.kv.api import (
    GC,
    BatchRequest,
    BatchResponse,
    EndTxn,
    Get,
    Header,
    HeartbeatTxn,
    Ingest,
    Merge,
    Put,
    Split,
    Transaction,
)
from feedkv.kv.db import KVClient, LocalTransport
from feedkv.kv.observer import RangeEndReason
from feedkv.kv.range_descriptor import (
    LEGACY_NEXT_REPLICA_ID,
    META,
    ReplicaDescriptor,
    replica_tombstone,
)
from feedkv.kv.range_move import SNAPSHOT_DATABASES
from feedkv.kv.replica import LOG_KEEP, LOG_LIMIT
from feedkv.kv.replica_refusal import Refusal, SnapshotRefusedError
from feedkv.kv.router import Transport
from feedkv.kv.store import Store, StoreConfig
from feedkv.kv.txn_record import TXN_RECORDS, read_record
from feedkv.raft import (
    ConfChange,
    ConfChangeType,
    Config,
    ConfState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
    encode_message,
)
from feedkv.storage import mvcc
from feedkv.storage.gc import gc_threshold
from feedkv.storage.logical_ops import (
    CommitIntents,
    IngestValues,
    LogicalOp,
    WriteIntents,
    WriteValue,
)
from feedkv.storage.schema import CHANGES, INTENTS
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, Span

NODES = (1, 2, 3)
DEADLINE_S = 30.0


class ReplicatedStores:
    """Three stores replicating r1, and a transport that finds its lease holder.
    ``grown``: r1 starts on node 1 alone, and the others are added as replicas."""

    def __init__(
        self, directory: Path, *, grown: bool = False, config: StoreConfig | None = None
    ) -> None:
        self.directory = directory
        self.config = config or StoreConfig(sync=False)
        self.stores: dict[int, Store] = {}
        self.grown = grown
        self.cut: set[tuple[int, int]] = set()  # (from, to) pairs whose messages are lost
        self.cut_snapshots = 0  # how many snapshot transfers to cut off, mid-way
        self.snapshot_frames = 0  # frames of the snapshots that arrived whole
        self.after_cut: list[Callable[[], None]] = []  # called once a transfer was cut off
        self.refused: list[tuple[Refusal, int]] = []  # (reason, frames read) of refusals
        for node in NODES:
            self.start(node)

    def start(self, node: int) -> None:
        store = Store(
            self.directory / f"n{node}",
            node_id=node,
            bootstrap=self.grown and node == 1,
            config=self.config,
        )
        if not self.grown:
            store.bootstrap_replicated(NODES)
        store.replicate(
            lambda to, batch, me=node: self._send(me, to, batch),
            send_snapshot=lambda to, range_id, frames, me=node: self._send_snapshot(
                me, to, range_id, frames
            ),
            tick_s=0.01,
            raft=Config(id=node, election_tick=10),
        )
        self.stores[node] = store

    def _send(self, sender: int, node: int, batch: list[tuple[int, bytes]]) -> None:
        store = self.stores.get(node)
        if store is not None and store.replicas is not None and (sender, node) not in self.cut:
            origin = self.stores.get(sender)
            if origin is not None:  # the clock travels with the messages, as between nodes
                store.clock.update(origin.clock.now())
            store.replicas.receive(batch, sender)

    def _send_snapshot(
        self, sender: int, node: int, range_id: int, frames: Iterator[bytes]
    ) -> None:
        """Hand the frames to the receiver as they are read (its loop spools them), or
        cut the transfer off after a few (``cut_snapshots``)."""
        store = self.stores.get(node)
        if store is None or store.replicas is None or (sender, node) in self.cut:
            raise NodeUnavailableError(f"n{node} is unreachable")
        cut = self.cut_snapshots > 0
        self.cut_snapshots -= cut
        taken: list[bytes] = []
        counted = _counted(_kept(frames, taken), self, cut_after=3 if cut else None)
        try:
            store.replicas.receive_snapshot(range_id, counted, sender)
        except SnapshotRefusedError as exc:
            self.refused.append((exc.reason, len(taken)))
            raise
        except _CutOff:
            for check in self.after_cut:
                check()
            raise

    def stop(self, node: int) -> None:
        self.stores.pop(node).close()

    def close(self) -> None:
        for node in list(self.stores):
            self.stop(node)

    def lease_holder(self) -> int:
        def holder() -> int | None:
            for node, store in self.stores.items():
                if store.replicas is None or not store.replicas.has(1):
                    if store.descriptors():
                        return node  # r1 is held here alone
                elif store.replicas.holds_lease(1):
                    return node
            return None

        found: int = wait_until(holder, timeout_s=DEADLINE_S, what="a lease holder of r1")
        return found

    # the Dialer protocol, for a KVClient: each range at its lease holder (the router
    # follows NotLeaseHolderError), lookups at r1's

    def dial(self, node_id: int) -> Transport:
        store = self.stores.get(node_id)
        if store is None:
            raise NodeUnavailableError(f"n{node_id} is down")
        return LocalTransport(store, owned=False)

    def send(self, batch: BatchRequest) -> BatchResponse:
        # NB: unaddressed (range lookups): whichever store holds the lease of the range
        # the batch's key is in (after a split, not always r1's)
        def attempt() -> BatchResponse | None:
            for store in list(self.stores.values()):
                try:
                    return store.send(batch)
                except (NotLeaseHolderError, NodeUnavailableError, RangeRoutingError):
                    continue  # NB: not there (yet), or not its lease holder
            return None

        answer: BatchResponse = wait_until(attempt, timeout_s=DEADLINE_S, what="an answer")
        return answer

    def now(self) -> Timestamp:
        return self.stores[self.lease_holder()].clock.now()

    def close_transport(self) -> None:
        pass

    def value(self, node: int, key: bytes) -> bytes | None:
        with self.stores[node].engine.snapshot() as snap:
            kv = mvcc.get(snap, key, Timestamp(2**62))
        return None if kv is None else kv.value

    def caught_up(self) -> bool:
        loops = [s.replicas for s in self.stores.values() if s.replicas and s.replicas.has(1)]
        statuses = [loop.status(1) for loop in loops]
        return len({c for _, c, _ in statuses}) == 1 and all(a == c for _, c, a in statuses)


class _CutOff(ConnectionError):
    """A snapshot's transfer cut off mid-way (what a broken stream raises)."""


def _kept(frames: Iterator[bytes], taken: list[bytes]) -> Iterator[bytes]:
    for frame in frames:
        taken.append(b"")  # NB: counted, not held
        yield frame


def _counted(
    frames: Iterator[bytes], cluster: ReplicatedStores, cut_after: int | None
) -> Iterator[bytes]:
    taken = 0
    for frame in frames:
        if cut_after is not None and taken == cut_after:
            raise _CutOff(f"the transfer was cut off after {taken} frames")
        taken += 1
        yield frame
    cluster.snapshot_frames += taken


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicatedStores]:
    held = ReplicatedStores(tmp_path)
    try:
        yield held
    finally:
        held.close()


def _assert_everywhere(cluster: ReplicatedStores, values: dict[bytes, bytes]) -> None:
    """Once every replica caught up, each node's store holds ``values``."""
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    for node in NODES:
        for key, value in values.items():
            assert cluster.value(node, key) == value, (node, key)


def test_writes_through_the_lease_holder_reach_every_replica(cluster: ReplicatedStores) -> None:
    client = KVClient(cluster)
    for i in range(40):
        client.put(b"k%02d" % i, b"v%d" % i)
    assert client.get(b"k39") == b"v39"
    _assert_everywhere(cluster, {b"k00": b"v0", b"k39": b"v39"})


def test_an_ingest_goes_through_the_log_as_one_command_to_every_replica(
    cluster: ReplicatedStores,
) -> None:
    holder = cluster.lease_holder()
    follower = next(n for n in NODES if n != holder)
    seen, arrived = _collect_ops(
        cluster.stores[follower], lambda ops: any(isinstance(op, IngestValues) for op in ops)
    )
    client = KVClient(cluster)
    pairs = [(b"i%03d" % i, b"v%d" % i) for i in range(300)]
    ts = client.ingest(pairs, client.now(), batch=1000)
    assert arrived.wait(DEADLINE_S)
    (ingested,) = [op for op in seen if isinstance(op, IngestValues)]
    assert ingested.span == Span(b"i000", b"i299\x00")
    assert [(op.key, op.value, op.ts) for op in ingested.each()] == [(k, v, ts) for k, v in pairs]
    _assert_everywhere(cluster, {b"i000": b"v0", b"i299": b"v299"})


def test_a_transactions_bulk_intents_and_their_resolution_reach_every_replica(
    cluster: ReplicatedStores,
) -> None:
    """An Ingest in a transaction (a COPY's rows in one of its ranges) lays its intents,
    and the EndTxn resolves them, as one command each through the log."""
    holder = cluster.lease_holder()
    follower = next(n for n in NODES if n != holder)
    seen, arrived = _collect_ops(
        cluster.stores[follower], lambda ops: any(isinstance(op, CommitIntents) for op in ops)
    )
    keys = tuple(b"k%02d" % i for i in range(50))
    values = tuple(b"v" + k for k in keys)
    span = Span(keys[0], keys[-1] + b"\x00")
    now = cluster.now()
    txn = Transaction(b"t" * 16, keys[0], 0, now, now, 1)
    cluster.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(), Ingest(span, keys, values))))
    cluster.send(BatchRequest(Header(txn=txn), (EndTxn(True, (span,)),)))
    assert arrived.wait(DEADLINE_S)
    (laid,) = [op for op in seen if isinstance(op, WriteIntents)]
    (committed,) = [op for op in seen if isinstance(op, CommitIntents)]
    assert (laid.span, laid.ts, laid.count) == (span, now, 50)
    assert [(v.key, v.value, v.ts) for v in committed.each()] == [
        (k, v, now) for k, v in zip(keys, values, strict=True)
    ]
    _assert_everywhere(cluster, {b"k00": b"vk00", b"k49": b"vk49"})


def test_a_follower_refuses_reads_and_writes_naming_the_lease_holder(
    cluster: ReplicatedStores,
) -> None:
    holder = cluster.lease_holder()
    follower = next(n for n in NODES if n != holder)
    for request in (Get(b"a"), Put(b"a", b"1")):
        with pytest.raises(NotLeaseHolderError) as caught:
            cluster.stores[follower].send(BatchRequest(Header(range_id=1), (request,)))
        assert caught.value.lease_holder in (holder, 0)


def test_transactions_keep_a_total_across_a_lease_holder_crash(
    cluster: ReplicatedStores,
) -> None:
    """A bank of ten accounts: transfers run while the lease holder dies; every
    acknowledged transfer stays, and the total never changes."""
    client = KVClient(cluster)
    accounts = [b"acct%d" % i for i in range(10)]
    for account in accounts:
        client.put(account, b"100")

    def transfer(i: int) -> None:
        src, dst = accounts[i % 10], accounts[(i * 3 + 1) % 10]
        if src == dst:
            return

        def move(txn: object) -> None:
            a = int(txn.get(src) or b"0")  # type: ignore[attr-defined]
            b = int(txn.get(dst) or b"0")  # type: ignore[attr-defined]
            txn.put(src, b"%d" % (a - 1))  # type: ignore[attr-defined]
            txn.put(dst, b"%d" % (b + 1))  # type: ignore[attr-defined]

        client.run_transaction(move)

    for i in range(20):
        transfer(i)
    cluster.stop(cluster.lease_holder())
    for i in range(20, 40):
        transfer(i)
    total = sum(int(client.get(a) or b"0") for a in accounts)
    assert total == 1000


def test_an_observer_on_a_follower_sees_the_writes_in_order(cluster: ReplicatedStores) -> None:
    holder = cluster.lease_holder()
    follower = next(n for n in NODES if n != holder)
    seen, arrived = _collect_ops(
        cluster.stores[follower], lambda ops: sum(isinstance(op, WriteValue) for op in ops) >= 10
    )
    client = KVClient(cluster)
    stamps = [client.put(b"w", b"%d" % i) for i in range(10)]
    assert arrived.wait(DEADLINE_S)
    writes = [op for op in seen if isinstance(op, WriteValue) and op.key == b"w"]
    assert [op.value for op in writes] == [b"%d" % i for i in range(10)]
    assert [op.ts for op in writes] == stamps


def test_a_range_held_alone_grows_to_three_replicas_and_survives_its_first_node(
    tmp_path: Path,
) -> None:
    cluster = ReplicatedStores(tmp_path, grown=True)
    try:
        client = KVClient(cluster)
        for i in range(30):
            client.put(b"old%02d" % i, b"v%d" % i)
        first = cluster.stores[1]
        first.start_replicating(1)
        client.put(b"one-replica", b"1")
        (alone,) = first.descriptors()
        first.add_replica(1, 2)
        first.add_replica(1, 3)
        # NB: each change of members (a learner added, then promoted) bumps the
        # generation, so a report naming fewer members loses to this one everywhere
        grown = [((1, 2, 3), alone.generation + 4)]
        assert [(d.replicas, d.generation) for d in first.descriptors()] == grown
        client.put(b"three-replicas", b"3")
        wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
        for node in (2, 3):
            assert cluster.value(node, b"old29") == b"v29"
            assert cluster.value(node, b"one-replica") == b"1"
            descs = cluster.stores[node].descriptors()
            assert [(d.replicas, d.generation) for d in descs] == grown
        cluster.stop(1)
        client.put(b"after", b"!")
        assert client.get(b"old00") == b"v0"
        assert client.get(b"after") == b"!"
    finally:
        cluster.close()


def test_a_replicated_range_splits_on_every_replica_and_both_halves_survive_a_crash(
    cluster: ReplicatedStores,
) -> None:
    client = KVClient(cluster)
    for i in range(20):
        client.put(b"k%02d" % i, b"v%d" % i)
    left, right = client.split(b"k10")
    assert right.span.start == b"k10" and right.replicas == left.replicas
    for i in range(20):
        client.put(b"k%02d" % i, b"w%d" % i)
    for node in NODES:
        descs = wait_until(
            lambda node=node: (
                len(cluster.stores[node].descriptors()) == 2 and cluster.stores[node].descriptors()
            ),
            timeout_s=DEADLINE_S,
            what=f"n{node} to apply the split",
        )
        assert [d.span.start for d in descs] == [b"", b"k10"]
        assert all(set(d.replicas) == set(NODES) for d in descs)
    cluster.stop(cluster.lease_holder())
    assert [kv.value for kv in client.scan(b"k", b"l")] == [b"w%d" % i for i in range(20)]
    client.put(b"k15", b"after")
    client.put(b"k05", b"after")
    assert client.get(b"k15") == client.get(b"k05") == b"after"


def test_a_lease_holder_cut_off_from_the_others_stops_serving_and_loses_nothing(
    cluster: ReplicatedStores,
) -> None:
    """A network partition (the loopback transport drops every message between the lease
    holder and the other two): the minority side answers no read and takes no write; the
    majority elects a new lease holder and goes on; once healed, the old lease holder
    catches up and every acknowledged write is there."""
    client = KVClient(cluster)
    client.put(b"before", b"1")
    isolated = cluster.lease_holder()
    others = [n for n in NODES if n != isolated]
    cluster.cut = {(isolated, n) for n in others} | {(n, isolated) for n in others}
    store = cluster.stores[isolated]
    # the minority: a write in flight there never commits (it ends ambiguous once the
    # node learns it lost the lease), and its reads go through the log too, so none is
    # answered from a stale lease
    stuck = store.start(BatchRequest(Header(range_id=1), (Put(b"minority", b"x"),)))
    read = store.start(BatchRequest(Header(range_id=1), (Get(b"before"),)))
    # the majority goes on without it
    new_holder = wait_until(
        lambda: next((n for n in others if cluster.stores[n].replicas.holds_lease(1)), None),  # type: ignore[union-attr]
        timeout_s=DEADLINE_S,
        what="a lease holder on the majority side",
    )
    majority = KVClient(_OneNode(cluster.stores[new_holder]))
    majority.put(b"majority", b"2")
    assert majority.get(b"before") == b"1"
    for attempt in (stuck, read):
        assert isinstance(
            attempt.exception(timeout=DEADLINE_S), AmbiguousResultError | NotLeaseHolderError
        )
    cluster.cut = set()
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="the healed node to catch up")
    assert cluster.value(isolated, b"majority") == b"2"
    assert all(cluster.value(n, b"minority") is None for n in NODES)


class _OneNode:
    """A transport to one store (the side of a partition a client can reach)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def send(self, batch: BatchRequest) -> BatchResponse:
        return self.store.send(batch)

    def now(self) -> Timestamp:
        return self.store.clock.now()

    def close(self) -> None:
        pass


def test_a_follower_behind_the_truncated_log_takes_a_snapshot_and_ends_its_feeds(
    cluster: ReplicatedStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower cut off while the lease holder writes past its log's truncation comes
    back by snapshot: its observers end with RAFT_SNAPSHOT (the entries the snapshot
    stands for never reach them as ops), and it takes on the promises those entries made
    (closed timestamps, reads served), should it lead. The snapshot's data is read off
    the replica loop's thread (a large range must not stall every other range)."""
    readers: list[str] = []
    imaged = store_module._ReplicatedRange.snapshot_chunks

    def snapshot_chunks(self: store_module._ReplicatedRange, reader: object) -> Iterator[bytes]:
        readers.append(threading.current_thread().name)
        yield from imaged(self, reader)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module._ReplicatedRange, "snapshot_chunks", snapshot_chunks)
    client = KVClient(cluster)
    client.put(b"k", b"first")
    holder = cluster.lease_holder()
    behind = next(n for n in NODES if n != holder)
    ended: list[RangeEndReason] = []

    class Watch:
        def on_ops(self, ops: object) -> None:
            pass

        def on_closed(self, ts: Timestamp) -> None:
            pass

        def on_range_ended(self, reason: RangeEndReason) -> None:
            ended.append(reason)

    _, snap = cluster.stores[behind].observe(1, Watch())  # type: ignore[arg-type]
    snap.close()
    cluster.cut = {(behind, n) for n in NODES} | {(n, behind) for n in NODES}
    for i in range(LOG_LIMIT + 2 * LOG_KEEP):
        client.put(b"k", b"%d" % i)
    served = cluster.now()  # after every read the lease holder served
    cluster.cut = set()
    wait_until(lambda: ended, timeout_s=DEADLINE_S, what="the follower's feeds to end")
    assert ended == [RangeEndReason.RAFT_SNAPSHOT]
    assert readers and all(name.startswith("snapshots-") for name in readers), readers
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="the follower to catch up")
    assert cluster.value(behind, b"k") == b"%d" % (LOG_LIMIT + 2 * LOG_KEEP - 1)
    promised = cluster.stores[behind]._ctx  # NB: what it would hold to as lease holder
    assert promised.tscache.max_read(b"k", None) >= served
    assert promised.closed.get(1) > Timestamp(0, 0)


def _collect_ops(
    store: Store, enough: Callable[[list[LogicalOp]], bool]
) -> tuple[list[LogicalOp], threading.Event]:
    """Observe r1 on ``store``: the ops it hands over, and an event set once ``enough``
    of them arrived."""
    seen: list[LogicalOp] = []
    arrived = threading.Event()

    class Collect:
        def on_ops(self, ops: object) -> None:
            seen.extend(ops)  # type: ignore[call-overload]
            if enough(seen):
                arrived.set()

        def on_closed(self, ts: Timestamp) -> None:
            pass

        def on_range_ended(self, reason: RangeEndReason) -> None:
            pass

    _, snap = store.observe(1, Collect())  # type: ignore[arg-type]
    snap.close()
    return seen, arrived


class _Ending:
    """An observer that records why its range ended."""

    def __init__(self) -> None:
        self.reasons: list[RangeEndReason] = []
        self.ended = threading.Event()

    def on_ops(self, ops: object) -> None:
        pass

    def on_closed(self, ts: Timestamp) -> None:
        pass

    def on_range_ended(self, reason: RangeEndReason) -> None:
        self.reasons.append(reason)
        self.ended.set()


def _raft_keys(store: Store, range_id: int) -> int:
    from feedkv.raft import RAFT_DB

    prefix = range_id.to_bytes(8, "big")
    end = (range_id + 1).to_bytes(8, "big")
    with store.engine.snapshot() as snap:
        return sum(1 for _ in snap.scan(RAFT_DB, prefix, end))


def _collecting(store: Store) -> dict[int, Span]:
    """The removed replicas whose data the store has not finished deleting."""
    with store.engine.snapshot() as snap:
        return replica_collector.records(snap)


def test_a_removed_follower_drops_the_range_and_ends_its_feeds_with_replica_removed(
    cluster: ReplicatedStores,
) -> None:
    client = KVClient(cluster)
    client.put(b"before", b"1")
    holder = cluster.lease_holder()
    follower = next(n for n in NODES if n != holder)
    watcher = _Ending()
    _, snap = cluster.stores[follower].observe(1, watcher)  # type: ignore[arg-type]
    snap.close()
    wait_until(lambda: cluster.value(follower, b"before") == b"1", timeout_s=DEADLINE_S)

    cluster.stores[holder].remove_replica(1, follower)

    assert watcher.ended.wait(DEADLINE_S)
    assert watcher.reasons == [RangeEndReason.REPLICA_REMOVED]
    gone = cluster.stores[follower]
    wait_until(lambda: not gone.descriptors(), timeout_s=DEADLINE_S, what="r1 dropped")
    assert gone.replicas is not None and not gone.replicas.has(1)
    assert _raft_keys(gone, 1) == 0
    # the data goes after, off the replica loop
    wait_until(lambda: not _collecting(gone), timeout_s=DEADLINE_S, what="r1's data deleted")
    assert cluster.value(follower, b"before") is None
    remaining = tuple(n for n in NODES if n != follower)
    assert sorted(cluster.stores[holder].descriptors()[0].replicas) == sorted(remaining)
    client.put(b"after", b"2")  # two voters of two: still a quorum
    assert client.get(b"before") == b"1" and client.get(b"after") == b"2"


def test_a_replica_dropped_for_want_of_a_leader_is_kept_once_a_leader_talks_to_it(
    cluster: ReplicatedStores,
) -> None:
    """A restarted node drops a replica its group removed while it was down, if the
    replica hears from no leader; the group may have added the node back meanwhile,
    and a leader that heard from the replica counts its log, so a replica that heard
    from one is kept (dropped and made again empty, it would have lost entries its
    node acknowledged)."""
    client = KVClient(cluster)
    client.put(b"k", b"1")
    holder = cluster.lease_holder()
    follower, other = (n for n in NODES if n != holder)
    wait_until(lambda: cluster.value(follower, b"k") == b"1", timeout_s=DEADLINE_S)

    led = cluster.stores[follower]
    led.drop_replica(1, if_leaderless=True)
    client.put(b"k", b"2")  # NB: its messages reach the follower's loop after the drop
    wait_until(lambda: cluster.value(follower, b"k") == b"2", timeout_s=DEADLINE_S)
    assert led.replicas is not None and led.replicas.has(1)

    cluster.cut = {(n, other) for n in NODES}  # it hears from nobody
    cluster.stop(other)
    cluster.start(other)
    alone = cluster.stores[other]
    assert alone.replicas is not None and alone.replicas.status(1)[0] == 0
    alone.drop_replica(1, if_leaderless=True)
    wait_until(lambda: not alone.descriptors(), timeout_s=DEADLINE_S, what="r1 dropped")
    assert not alone.replicas.has(1)


def test_a_lease_holder_that_removes_itself_leaves_the_range_to_the_others(
    cluster: ReplicatedStores,
) -> None:
    client = KVClient(cluster)
    client.put(b"k", b"v")
    holder = cluster.lease_holder()

    cluster.stores[holder].remove_replica(1, holder)

    wait_until(
        lambda: not cluster.stores[holder].descriptors(), timeout_s=DEADLINE_S, what="dropped"
    )
    cluster.stop(holder)  # the others go on without it: it is no longer a member
    client.put(b"k2", b"v2")
    assert client.get(b"k") == b"v" and client.get(b"k2") == b"v2"


def _move_lease_to_a_follower(cluster: ReplicatedStores) -> None:
    """Hand range 1's lease from its holder to a follower, and wait until it holds it."""
    holder = cluster.lease_holder()
    follower = next(n for n in NODES if n != holder)
    loop = cluster.stores[holder].replicas
    assert loop is not None
    loop.transfer_lease(1, follower)
    new_loop = cluster.stores[follower].replicas
    assert new_loop is not None
    wait_until(lambda: new_loop.holds_lease(1), timeout_s=DEADLINE_S, what="the lease moved")


def test_a_lease_handed_to_a_follower_moves_there_and_writes_go_on(
    cluster: ReplicatedStores,
) -> None:
    client = KVClient(cluster)
    client.put(b"k", b"v")
    _move_lease_to_a_follower(cluster)
    client.put(b"k2", b"v2")
    assert client.get(b"k") == b"v" and client.get(b"k2") == b"v2"


def test_a_finished_transactions_record_goes_on_every_replica_and_no_lease_holder_revives_it(
    cluster: ReplicatedStores,
) -> None:
    """The EndTxn that resolves every intent removes the record in the same command,
    which the followers apply too; a replica that takes up the lease afterwards does not
    know of the removal, yet refuses a late heartbeat or commit of that transaction."""
    now = cluster.now()
    txn = Transaction(b"r" * 16, b"a", 0, now, now, 1)
    wrote = cluster.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(), Put(b"a", b"1"))))
    txn = wrote.txn or txn
    assert txn.seq > 0

    def records() -> list[bool]:
        found = []
        for node in NODES:
            with cluster.stores[node].engine.snapshot() as snap:
                found.append(read_record(snap, b"a", txn.id) is not None)
        return found

    wait_until(lambda: cluster.caught_up() and all(records()), timeout_s=DEADLINE_S)
    cluster.send(BatchRequest(Header(txn=txn), (EndTxn(True, (Span.for_key(b"a"),)),)))
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    assert records() == [False, False, False]
    _assert_everywhere(cluster, {b"a": b"1"})

    _move_lease_to_a_follower(cluster)
    with pytest.raises(TransactionAbortedError):
        cluster.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),)))
    with pytest.raises(TransactionAbortedError):
        cluster.send(BatchRequest(Header(txn=txn), (EndTxn(True, (Span.for_key(b"a"),)),)))
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    assert records() == [False, False, False]
    _assert_everywhere(cluster, {b"a": b"1"})


def test_a_client_whose_cache_names_a_leaderless_replica_alone_looks_the_range_up_again(
    cluster: ReplicatedStores,
) -> None:
    """A client that cached the range before it gained replicas knows one replica, which
    (cut off) knows no leader: the client looks the range up again instead of asking
    that replica until it gives up."""
    holder = cluster.lease_holder()
    stale = next(n for n in NODES if n != holder)
    cluster.cut = {(stale, n) for n in NODES} | {(n, stale) for n in NODES}
    wait_until(
        lambda: cluster.stores[stale].replicas.status(1)[0] == 0,  # type: ignore[union-attr]
        timeout_s=DEADLINE_S,
        what="the cut-off replica to forget its leader",
    )
    client = KVClient(cluster)
    (desc,) = [d for d in cluster.stores[holder].descriptors() if d.range_id == 1]
    client._router.ranges.insert([replace(desc, replicas=(stale,))])
    client.put(b"k", b"v")  # NB: gives up after about 40 s without the fresh lookup
    assert client.get(b"k") == b"v"


def test_a_new_lease_holder_writes_above_every_read_the_old_one_answered(
    cluster: ReplicatedStores,
) -> None:
    """Reads write nothing to the log, so the next lease holder never applies their
    timestamp-cache entries: it must cover them by its lease start. A read half a second
    in the future (within the clock offset) moves the old holder's clock; the clock
    travels with its heartbeats to the quorum that elects the next holder, whose write
    to the key read must land above the read."""
    client = KVClient(cluster)
    client.put(b"read-me", b"before")
    holder = cluster.lease_holder()
    read_ts = Timestamp(cluster.stores[holder].clock.physical_now() + 400_000_000)
    read = BatchRequest(Header(range_id=1, timestamp=read_ts), (Get(b"read-me"),))
    assert cluster.stores[holder].send(read).responses[0].value == b"before"
    # the confirmation of the read went through a quorum; now the holder dies
    cluster.stop(holder)
    assert cluster.lease_holder() != holder
    # a write at a timestamp below the read (a transaction's, begun before it)
    earlier = Header(range_id=1, timestamp=Timestamp(read_ts.wall - 200_000_000))
    written = cluster.send(BatchRequest(earlier, (Put(b"read-me", b"after"),)))
    assert written.timestamp > read_ts


def _holder_of(cluster: ReplicatedStores, range_id: int) -> int:
    def holder() -> int | None:
        for node, store in cluster.stores.items():
            if store.replicas is not None and store.replicas.holds_lease(range_id):
                return node
        return None

    found: int = wait_until(holder, timeout_s=DEADLINE_S, what=f"a lease holder of r{range_id}")
    return found


def _leases_together(cluster: ReplicatedStores, left: int, right: int) -> int:
    """Move ``right``'s lease to ``left``'s holder; that node."""
    node = _holder_of(cluster, left)

    def together() -> bool:
        held = _holder_of(cluster, right)
        if held != node:
            cluster.stores[held].replicas.transfer_lease(right, node)  # type: ignore[union-attr]
            return False
        return _holder_of(cluster, left) == node

    wait_until(together, timeout_s=DEADLINE_S, what="both leases on one node")
    return node


def test_two_replicated_ranges_merge_on_every_replica_and_the_merged_one_serves(
    cluster: ReplicatedStores,
) -> None:
    """A replicated merge: the right-hand range freezes, every replica applies the
    freeze, then the left range's log rewrites the descriptors; every store ends the
    right-hand group (its Raft state gone, its data the left range's), its feeds end
    with RANGE_MERGED, and the merged range serves reads and writes on any lease holder."""
    client = KVClient(cluster)
    left, right = _split_everywhere(cluster, client)
    follower = next(n for n in NODES if n != _holder_of(cluster, right))
    ended: list[RangeEndReason] = []

    class Watch:
        def on_ops(self, ops: object) -> None:
            pass

        def on_closed(self, ts: Timestamp) -> None:
            pass

        def on_range_ended(self, reason: RangeEndReason) -> None:
            ended.append(reason)

    cluster.stores[follower].observe(right, Watch())  # type: ignore[arg-type]
    _leases_together(cluster, left, right)
    merged = client.merge(b"k00")
    assert merged.range_id == left and merged.span == Span(b"", KEY_MAX)
    for node in NODES:
        store = cluster.stores[node]
        wait_until(
            lambda store=store: (
                [d.range_id for d in store.descriptors()] == [left]
                and store.replicas is not None
                and not store.replicas.has(right)
            ),
            timeout_s=DEADLINE_S,
            what=f"n{node} to apply the merge",
        )
    wait_until(lambda: ended == [RangeEndReason.RANGE_MERGED], timeout_s=DEADLINE_S, what="end")
    assert [kv.value for kv in client.scan(b"k", b"l")] == [b"v%d" % i for i in range(20)]
    client.put(b"k15", b"after")
    assert client.get(b"k15") == b"after"
    # the merged range outlives its lease holder; no store revives the right-hand group
    cluster.stop(_holder_of(cluster, left))
    client.put(b"k16", b"after")
    assert client.get(b"k16") == b"after"
    for store in cluster.stores.values():
        assert store.replicas is not None and not store.replicas.has(right)


def _split_everywhere(cluster: ReplicatedStores, client: KVClient) -> tuple[int, int]:
    for i in range(20):
        client.put(b"k%02d" % i, b"v%d" % i)
    left, right = client.split(b"k10")
    for node in NODES:
        wait_until(
            lambda node=node: len(cluster.stores[node].descriptors()) == 2,
            timeout_s=DEADLINE_S,
            what=f"n{node} to apply the split",
        )
    return left.range_id, right.range_id


def test_a_merge_a_down_replica_cannot_follow_is_given_up_and_the_range_serves_again(
    cluster: ReplicatedStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replicated_merge, "APPLY_WAIT_S", 1.0)
    client = KVClient(cluster)
    left, right = _split_everywhere(cluster, client)
    holder = _leases_together(cluster, left, right)
    cluster.stop(next(n for n in NODES if n != holder))  # a quorum is left, not everyone
    merge = BatchRequest(Header(range_id=left), (Merge(b"k00"),))
    with pytest.raises(RangeUnavailableError, match="applied its freeze"):
        cluster.stores[holder].send(merge)
    client.put(b"k15", b"thawed")  # the right-hand range serves again
    assert client.get(b"k15") == b"thawed"
    assert len(cluster.stores[holder].descriptors()) == 2


def test_a_merge_runs_where_both_leases_are(cluster: ReplicatedStores) -> None:
    client = KVClient(cluster)
    left, right = _split_everywhere(cluster, client)
    holder = _holder_of(cluster, left)
    other = next(n for n in NODES if n != holder)

    def apart() -> bool:
        held = _holder_of(cluster, right)
        if held == holder:
            cluster.stores[held].replicas.transfer_lease(right, other)  # type: ignore[union-attr]
            return False
        return _holder_of(cluster, left) == holder

    wait_until(apart, timeout_s=DEADLINE_S, what="the leases apart")
    merge = BatchRequest(Header(range_id=left), (Merge(b"k00"),))
    with pytest.raises(RangeUnavailableError, match="must hold both their leases"):
        cluster.stores[holder].send(merge)
    client.put(b"k15", b"still")
    assert client.get(b"k15") == b"still"


def test_writes_racing_a_merge_all_land_on_every_replica(cluster: ReplicatedStores) -> None:
    """Writes to both halves while they merge: a write to the frozen right-hand range
    waits (the client retries) and lands in the merged range; every acknowledged write
    is on every replica afterwards."""
    client = KVClient(cluster)
    left, right = _split_everywhere(cluster, client)
    _leases_together(cluster, left, right)
    acked: dict[bytes, bytes] = {}
    done = 0  # NB: writes acknowledged; acked holds 20 keys at most
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        nonlocal done
        while not stop.is_set():
            key, value = b"k%02d" % (done % 20), b"w%d" % done
            try:
                client.put(key, value)
            except BaseException as exc:  # reported below
                errors.append(exc)
                return
            acked[key] = value
            done += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: done >= 5, timeout_s=DEADLINE_S, what="writes before")
        client.merge(b"k00")
        count = done
        try:
            wait_until(lambda: done > count + 5 or errors, timeout_s=DEADLINE_S, what="writes")
        except TimeoutError as exc:  # NB: seen once, not reproduced: show where it waits
            stack = traceback.format_stack(sys._current_frames()[writer.ident or 0])
            raise AssertionError(
                f"{done - count} writes after the merge; the writer is at\n" + "".join(stack)
            ) from exc
    finally:
        stop.set()
        writer.join()
    assert not errors, errors  # NB: a writer that failed ends the wait above at once
    _assert_everywhere(cluster, acked)


def test_a_store_restarted_after_a_merge_never_revives_the_merged_range(
    cluster: ReplicatedStores,
) -> None:
    """A replica that has not applied the merge yet still talks for the right-hand
    range; a store that applied it and restarted must drop those messages, not start an
    empty replica the right-hand leader would take for the one whose log it knew."""
    client = KVClient(cluster)
    left, right = _split_everywhere(cluster, client)
    _leases_together(cluster, left, right)
    client.merge(b"k00")
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    node = next(n for n in NODES if n != _holder_of(cluster, left))
    cluster.stop(node)
    cluster.start(node)
    store = cluster.stores[node]
    assert store.replicas is not None
    stale = Message(MessageType.HEARTBEAT, node, 3 if node != 3 else 1, 99, commit=283)
    store.replicas.receive([(right, encode_message(stale))])
    client.put(b"k15", b"after")  # NB: the loop is alive past the stale message
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    assert cluster.value(node, b"k15") == b"after"
    assert not store.replicas.has(right)


def test_small_replicated_neighbours_merge_on_their_own_once_their_leases_are_together(
    tmp_path: Path,
) -> None:
    """Neighbours an automatic split made (not a manual one), both small, merge without
    being asked once one node holds both their leases; every replica ends up with one
    range holding every row."""
    config = StoreConfig(sync=False, range_check_interval_s=0.05)
    cluster = ReplicatedStores(tmp_path, config=config)
    try:
        client = KVClient(cluster)
        for i in range(20):
            client.put(b"k%02d" % i, b"v%d" % i)
        holder = cluster.lease_holder()
        split = BatchRequest(Header(range_id=1), (Split(b"k10", automatic=True),))
        cluster.stores[holder].send(split)
        left, right = (d.range_id for d in cluster.stores[holder].descriptors())

        def merged() -> bool:
            if all(len(cluster.stores[n].descriptors()) == 1 for n in NODES):
                return True
            leads = [n for n in NODES if cluster.stores[n].replicas.holds_lease(left)]  # type: ignore[union-attr]
            holds = [n for n in NODES if cluster.stores[n].replicas.holds_lease(right)]  # type: ignore[union-attr]
            if leads and holds and leads != holds:
                cluster.stores[holds[0]].replicas.transfer_lease(right, leads[0])  # type: ignore[union-attr]
            return False

        wait_until(merged, timeout_s=DEADLINE_S, what="the neighbours to merge everywhere")
        assert [client.get(b"k%02d" % i) for i in range(20)] == [b"v%d" % i for i in range(20)]
    finally:
        cluster.close()


def _change_members(cluster: ReplicatedStores, change: Callable[[Store], None]) -> None:
    """Change r1's members on its lease holder (on the next one, if the lease moved
    before the change was proposed, or the store taken for it had just had its replica
    removed: its descriptor, still listed a moment, made it look like r1's only one)."""

    def attempt() -> bool | None:
        try:
            change(cluster.stores[cluster.lease_holder()])
        except (NotLeaseHolderError, RangeNotFoundError):
            return None
        return True

    wait_until(attempt, timeout_s=DEADLINE_S, what="a membership change of r1")


def test_a_replica_removed_and_added_back_on_its_node_is_a_new_replica(
    cluster: ReplicatedStores,
) -> None:
    """The node gets a replica of a new id; messages from and to the old one (its id was
    the node's) are refused: no replica takes a term from them."""
    client = KVClient(cluster)
    for i in range(10):
        client.put(b"a%02d" % i, b"v%d" % i)
    holder = cluster.lease_holder()
    victim, other = (n for n in NODES if n != holder)
    away = cluster.stores[victim].replicas
    assert away is not None
    _change_members(cluster, lambda store: store.remove_replica(1, victim))
    wait_until(lambda: not away.has(1), timeout_s=DEADLINE_S, what="the removed replica dropped")
    client.put(b"while-away", b"1")
    _change_members(cluster, lambda store: store.add_replica(1, victim))
    (desc,) = cluster.stores[cluster.lease_holder()].descriptors()
    assert desc.replica_of(victim) == ReplicaDescriptor(victim, 4)
    assert sorted(desc.replicas) == list(NODES)
    wait_until(
        lambda: away.has(1) and away.replica_id(1) == 4 and cluster.caught_up(),
        timeout_s=DEADLINE_S,
        what="replica 4 caught up",
    )
    assert cluster.value(victim, b"while-away") == b"1"
    assert cluster.value(victim, b"a09") == b"v9"

    term = away.term(1)
    follower = cluster.stores[other].replicas
    assert follower is not None
    # the old replica claims to lead in a later term, to the other follower...
    from_old = Message(MessageType.HEARTBEAT, other, victim, term + 1000, commit=1)
    follower.receive([(1, encode_message(from_old))], victim)
    # ...and a message for it reaches its node, which holds replica 4 now
    to_old = Message(MessageType.HEARTBEAT, victim, holder, term + 1000, commit=1)
    away.receive([(1, encode_message(to_old))], holder)
    client.put(b"after", b"2")
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    assert cluster.value(victim, b"after") == b"2"
    for node in NODES:
        loop = cluster.stores[node].replicas
        assert loop is not None and loop.term(1) < term + 1000, node
    assert away.replica_id(1) == 4


def test_a_replica_removed_while_its_node_was_down_is_replaced_not_revived(
    cluster: ReplicatedStores,
) -> None:
    """Removed and added back while its node was down, the old replica comes back with
    the node, believing itself a member; it is collected (the others refuse it, or the
    leader's first message to the new replica tells its node) and the new one gets a
    snapshot with every write."""
    client = KVClient(cluster)
    client.put(b"before", b"0")
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    holder = cluster.lease_holder()
    victim = next(n for n in NODES if n != holder)
    cluster.stop(victim)
    _change_members(cluster, lambda store: store.remove_replica(1, victim))
    client.put(b"removed", b"1")
    # NB: its node is down: the replica waits there as replica 4
    _change_members(cluster, lambda store: store.add_replica(1, victim))
    client.put(b"added", b"2")
    cluster.start(victim)
    back = cluster.stores[victim]
    loop = back.replicas
    assert loop is not None
    wait_until(
        lambda: loop.has(1) and loop.replica_id(1) == 4 and cluster.caught_up(),
        timeout_s=DEADLINE_S,
        what="replica 4 caught up",
    )
    for key, value in ((b"before", b"0"), (b"removed", b"1"), (b"added", b"2")):
        assert cluster.value(victim, key) == value, key
    (desc,) = back.descriptors()
    assert desc.replica_of(victim) == ReplicaDescriptor(victim, 4)
    with back.engine.snapshot() as snap:
        assert replica_tombstone(snap, 1) == 4  # the old replica's id never comes back


def test_a_removed_replicas_data_goes_off_the_loop_and_its_new_replica_waits_for_it(
    cluster: ReplicatedStores,
) -> None:
    """The node's replica of r1 is removed while its collector is held: its tombstone,
    descriptor and Raft state go at once, its data stays, and the node's loop goes on
    applying r1's right half. Added back (a new replica id), its snapshot is refused at its header
    (Refusal.COLLECTING: two frames read, not the range) until the old data is gone;
    then it arrives."""
    client = KVClient(cluster)
    for i in range(300):
        client.put(b"a%03d" % i, b"v")
    client.split(b"m")
    client.put(b"m-before", b"0")
    holder = cluster.lease_holder()
    victim = next(n for n in NODES if n != holder)
    gone = cluster.stores[victim]
    loop, collector = gone.replicas, gone.collector
    assert loop is not None and collector is not None
    wait_until(lambda: cluster.value(victim, b"m-before") == b"0", timeout_s=DEADLINE_S)
    collector.pause()

    _change_members(cluster, lambda store: store.remove_replica(1, victim))
    wait_until(lambda: _collecting(gone), timeout_s=DEADLINE_S, what="r1 dropped")
    assert set(_collecting(gone)) == {1} and not loop.has(1) and _raft_keys(gone, 1) == 0
    assert [d.span.start for d in gone.descriptors()] == [b"m"]  # r1's right half
    assert cluster.value(victim, b"a000") == b"v"  # not deleted yet
    client.put(b"m-after", b"1")  # the right half, on the same loop
    wait_until(lambda: cluster.value(victim, b"m-after") == b"1", timeout_s=DEADLINE_S)

    client.put(b"b-while-away", b"2")

    wait_until(lambda: _add_back(cluster, victim), timeout_s=DEADLINE_S, what="added back")
    wait_until(
        lambda: any(reason is Refusal.COLLECTING for reason, _ in cluster.refused),
        timeout_s=DEADLINE_S,
        what="the new replica's snapshot refused",
    )
    assert all(reason is Refusal.COLLECTING for reason, _ in cluster.refused)
    assert all(frames <= 2 for _, frames in cluster.refused)  # the message and the header
    assert cluster.value(victim, b"b-while-away") is None
    assert collector.pages == 0

    collector.resume()
    wait_until(
        lambda: loop.has(1) and loop.replica_id(1) == 4 and cluster.caught_up(),
        timeout_s=DEADLINE_S,
        what="replica 4 caught up",
    )
    assert collector.pages >= 1 and not _collecting(gone)
    assert cluster.value(victim, b"b-while-away") == b"2"
    assert cluster.value(victim, b"a299") == b"v"  # from the snapshot


def _add_back(cluster: ReplicatedStores, victim: int) -> bool | None:
    """Add r1's replica on ``victim`` back, at r1's lease holder (``None``: none yet)."""
    # NB: not cluster.lease_holder(): the victim may hold a range (r1's right half)
    for store in cluster.stores.values():
        if store.replicas is not None and store.replicas.holds_lease(1):
            with contextlib.suppress(NotLeaseHolderError):
                store.add_replica(1, victim)
                return True
    return None


def test_a_refused_snapshot_is_not_copied_again_for_its_replica_during_the_backoff(
    tmp_path: Path,
) -> None:
    """Each snapshot a sender makes is a copy of the range to its spool; Raft asks for
    another at every heartbeat's answer. While the receiver still deletes the replica's
    old data, the sender makes one, refused, and holds the others back."""
    config = StoreConfig(sync=False, snapshot_refused_backoff_s=3600.0)
    cluster = ReplicatedStores(tmp_path, config=config)
    try:
        client = KVClient(cluster)
        client.put(b"k", b"1")
        wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
        victim = next(n for n in NODES if n != cluster.lease_holder())
        gone = cluster.stores[victim]
        assert gone.collector is not None
        gone.collector.pause()
        _change_members(cluster, lambda store: store.remove_replica(1, victim))
        wait_until(lambda: _collecting(gone), timeout_s=DEADLINE_S, what="r1 dropped")
        wait_until(lambda: _add_back(cluster, victim), timeout_s=DEADLINE_S, what="added back")

        def held_back() -> int:
            return sum(
                s.replicas.snapshots_held_back for s in cluster.stores.values() if s.replicas
            )

        wait_until(lambda: held_back() >= 20, timeout_s=DEADLINE_S, what="snapshots asked again")
        assert [reason for reason, _ in cluster.refused] == [Refusal.COLLECTING]
    finally:
        cluster.close()


def test_a_snapshot_a_replica_could_not_take_is_refused_at_its_header_with_its_reason(
    cluster: ReplicatedStores,
) -> None:
    """Refused after the message and the data's header, the rest never read: one
    addressed to an older replica than the store's, one at an index the replica applied
    already, and one to an id the store's tombstone covers."""
    client = KVClient(cluster)
    client.put(b"k", b"1")
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    holder = cluster.lease_holder()
    node = next(n for n in NODES if n != holder)
    loop = cluster.stores[node].replicas
    assert loop is not None
    mine = loop.replica_id(1)
    conf = ConfState(NODES, ())

    def refusal(to: int, index: int) -> tuple[Refusal, int]:
        meta = SnapshotMeta(index, 1, conf)
        head = Message(MessageType.SNAP, to, holder, 1, snapshot=Snapshot(meta, b""))
        taken: list[bytes] = []
        frames = _kept(iter([encode_message(head), b"header", *[b"data"] * 50]), taken)
        with pytest.raises(SnapshotRefusedError) as refused:
            loop.receive_snapshot(1, frames, holder)
        return refused.value.reason, len(taken)

    assert refusal(mine - 1, 10**6) == (Refusal.NEWER_REPLICA, 2)
    assert refusal(mine, 1) == (Refusal.APPLIED, 2)
    _change_members(cluster, lambda store: store.remove_replica(1, node))
    gone = cluster.stores[node]
    wait_until(lambda: not gone.descriptors(), timeout_s=DEADLINE_S, what="r1 dropped")
    wait_until(lambda: not _collecting(gone), timeout_s=DEADLINE_S, what="r1's data deleted")
    assert refusal(mine, 10**6) == (Refusal.REPLICA_REMOVED, 2)


def test_a_collection_cut_short_by_a_crash_is_finished_when_the_store_starts(
    tmp_path: Path,
) -> None:
    """The store stops with the removed replica's data and its record still there (its
    collector held); started again, it deletes the data, and the range stays gone."""
    cluster = ReplicatedStores(tmp_path, grown=True)  # NB: a restart bootstraps nothing
    try:
        client = KVClient(cluster)
        for i in range(50):
            client.put(b"a%03d" % i, b"v")
        first = cluster.stores[1]
        first.start_replicating(1)
        for node in (2, 3):
            _change_members(cluster, lambda store, node=node: store.add_replica(1, node))
        wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
        victim = next(n for n in NODES if n != cluster.lease_holder())
        gone = cluster.stores[victim]
        loop, collector = gone.replicas, gone.collector
        assert loop is not None and collector is not None
        assert cluster.value(victim, b"a049") == b"v"
        collector.pause()
        _change_members(cluster, lambda store: store.remove_replica(1, victim))
        wait_until(lambda: _collecting(gone), timeout_s=DEADLINE_S, what="r1 dropped")
        assert set(_collecting(gone)) == {1} and not loop.has(1)
        cluster.stop(victim)  # NB: with the data and the record still there

        cluster.start(victim)
        back = cluster.stores[victim]
        wait_until(lambda: not _collecting(back), timeout_s=DEADLINE_S, what="the deletion")
        assert cluster.value(victim, b"a000") is None and cluster.value(victim, b"a049") is None
        assert not back.descriptors() and _raft_keys(back, 1) == 0
        with back.engine.snapshot() as snap:
            assert replica_tombstone(snap, 1) == 4
    finally:
        cluster.close()


def test_a_range_whose_descriptor_is_in_the_old_encoding_adds_replicas_above_every_node_id(
    tmp_path: Path,
) -> None:
    """r1's descriptor is rewritten on every store as before replica ids (its replicas'
    ids are their nodes'). A replica removed and added back then gets an id above every
    node id, not the node count's next (4), which a replica of that time, on a node down
    when it was removed, could still hold."""
    cluster = ReplicatedStores(tmp_path)
    client = KVClient(cluster)
    client.put(b"k", b"1")
    wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="every replica caught up")
    cluster.close()
    _write_old_encoding(tmp_path, NODES)
    for node in NODES:
        cluster.start(node)
    try:
        (desc,) = cluster.stores[1].descriptors()
        assert desc.next_id == LEGACY_NEXT_REPLICA_ID  # as read from the old encoding
        victim = next(n for n in NODES if n != cluster.lease_holder())
        _change_members(cluster, lambda store: store.remove_replica(1, victim))
        gone = cluster.stores[victim]
        wait_until(lambda: not gone.descriptors(), timeout_s=DEADLINE_S, what="r1 dropped")
        _change_members(cluster, lambda store: store.add_replica(1, victim))
        (desc,) = cluster.stores[cluster.lease_holder()].descriptors()
        assert desc.replica_of(victim) == ReplicaDescriptor(victim, LEGACY_NEXT_REPLICA_ID)
        client.put(b"k", b"2")
        wait_until(
            lambda: cluster.value(victim, b"k") == b"2", timeout_s=DEADLINE_S, what="caught up"
        )
    finally:
        cluster.close()


def _write_old_encoding(directory: Path, nodes: Sequence[int]) -> None:
    """Rewrite r1's descriptor on the stores of ``nodes`` as before replica ids (its
    voters' node ids only: the old encoding has no replica ids and no learners)."""
    for node in nodes:
        store = Store(directory / f"n{node}", node_id=node, bootstrap=False)
        try:
            (desc,) = store.descriptors()
            old = struct.pack(">QQ?HB", 1, desc.generation, desc.sticky, 0, len(desc.replicas))
            old += b"".join(struct.pack(">I", n) for n in desc.replicas) + desc.span.end
            store.engine.write(
                lambda rw, old=old: rw.put(META, b"desc/" + (1).to_bytes(8, "big"), old)
            )
        finally:
            store.close()


def test_a_learner_absent_from_a_descriptor_in_the_old_encoding_keeps_its_id(
    tmp_path: Path,
) -> None:
    """Issue 38: r1 on n1 and n2, and a learner on n3 whose replica id is its node id,
    as every replica had before replica ids; the old encoding lists voters only. After a
    restart on it the learner is still the group's replica 3 on n3: promoted, it is
    that replica (not a new one beside it) and it follows the log."""
    cluster = ReplicatedStores(tmp_path, grown=True)
    client = KVClient(cluster)
    try:
        first = cluster.stores[1]
        first.start_replicating(1)
        client.put(b"k", b"1")  # NB: once the group of one leads
        first.add_replica(1, 2)
        assert first.replicas is not None
        learner = ConfChange(ConfChangeType.ADD_LEARNER, 0, context=3)
        first.replicas.change_members(1, learner).result(DEADLINE_S)
        (desc,) = first.descriptors()
        assert desc.replica_of(3) == ReplicaDescriptor(3, 3, learner=True)
        wait_until(lambda: cluster.value(3, b"k") == b"1", timeout_s=DEADLINE_S, what="n3")
    finally:
        cluster.close()
    _write_old_encoding(tmp_path, NODES)
    for node in NODES:
        cluster.start(node)

    def voter_holding_the_lease() -> Store | None:
        # NB: not ReplicatedStores.lease_holder: n3 holds r1's descriptor and no replica
        # until the leader's messages start it, which that takes for r1 held alone
        for node in (1, 2):
            loop = cluster.stores[node].replicas
            if loop is not None and loop.has(1) and loop.holds_lease(1):
                return cluster.stores[node]
        return None

    def promote() -> bool | None:
        holder = voter_holding_the_lease()
        if holder is None:
            return None
        try:
            holder.add_replica(1, 3)
        except NotLeaseHolderError:
            return None
        return True

    try:
        client.put(b"k", b"2")
        holder = wait_until(voter_holding_the_lease, timeout_s=DEADLINE_S, what="a lease")
        (desc,) = holder.descriptors()
        assert desc.replicas in ((1, 2), (2, 1)) and desc.replica_of(3) is None  # old encoding
        wait_until(promote, timeout_s=DEADLINE_S, what="n3 promoted")
        holder = wait_until(voter_holding_the_lease, timeout_s=DEADLINE_S, what="a lease")
        (desc,) = holder.descriptors()
        assert desc.replica_of(3) == ReplicaDescriptor(3, 3)
        assert len(desc.members) == 3
        client.put(b"k", b"3")
        wait_until(lambda: cluster.value(3, b"k") == b"3", timeout_s=DEADLINE_S, what="n3")
    finally:
        cluster.close()


def _state(store: Store, databases: Sequence[str]) -> dict[str, list[tuple[bytes, bytes]]]:
    with store.engine.snapshot() as snap:
        return {db: list(snap.scan(db, b"")) for db in databases}


def test_a_snapshot_of_many_chunks_arrives_whole_in_bounded_memory(tmp_path: Path) -> None:
    """A range of several MiB, sent to a new replica in 64 KiB chunks: every version,
    intent and transaction record arrives (the time index rebuilt to match), with the
    GC threshold and the closed timestamp; neither side ever holds the range in memory
    (the Python heap's peak over the transfer, both sides in this process, stays a
    small part of the range's size)."""
    config = StoreConfig(sync=False, snapshot_chunk_bytes=64 << 10)
    cluster = ReplicatedStores(tmp_path, grown=True, config=config)
    try:
        client = KVClient(cluster)
        value = b"v" * 1000
        client.ingest([(b"big%05d" % i, value) for i in range(6000)], client.now())
        threshold = client.now()
        for i in range(0, 6000, 500):
            client.put(b"big%05d" % i, b"newer")  # a second version
        now = cluster.now()
        txn = Transaction(b"t" * 16, b"pending0", 0, now, now, 1)  # its intents stay
        keys = tuple(b"pending%d" % i for i in range(5))
        span = Span(keys[0], keys[-1] + b"\x00")
        cluster.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(), Ingest(span, keys, keys))))
        cluster.send(BatchRequest(Header(), (GC(Span(b"big", b"bih"), threshold),)))
        first = cluster.stores[1]
        first.start_replicating(1)
        loop = first.replicas
        assert loop is not None
        wait_until(lambda: loop.holds_lease(1), timeout_s=DEADLINE_S, what="the lease of r1")
        promised = first.closed_timestamp(1)
        held = _state(first, SNAPSHOT_DATABASES)
        size = sum(len(k) + len(v) for rows in held.values() for k, v in rows)
        assert size > 6_000_000 and held[INTENTS] and held[TXN_RECORDS]
        tracemalloc.start()
        try:
            first.add_replica(1, 2)
            second = cluster.stores[2]
            wait_until(
                lambda: (
                    second.replicas is not None and second.replicas.has(1) and cluster.caught_up()
                ),
                timeout_s=DEADLINE_S,
                what="the new replica caught up",
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert cluster.snapshot_frames > 50  # many chunks, not one message
        assert peak < size / 4, f"peak {peak} bytes for a range of {size}"
        databases = (*SNAPSHOT_DATABASES, CHANGES)
        assert _state(second, databases) == _state(first, databases)
        with first.engine.snapshot() as a, second.engine.snapshot() as b:
            assert gc_threshold(b, Span(b"big", b"bih")) == gc_threshold(a, Span(b"big", b"bih"))
            assert gc_threshold(b, Span(b"big", b"bih")) >= threshold
        assert second._ctx.closed.get(1) >= promised
        assert second.descriptors()[0].replica_of(2) is not None
        for node in (1, 2):  # the sender's copy, and the receiver's
            spool = tmp_path / f"n{node}" / "raft-snapshots"
            wait_until(
                lambda spool=spool: not list(spool.iterdir()),
                timeout_s=DEADLINE_S,
                what="spool freed",
            )
    finally:
        cluster.close()


def test_a_snapshot_cut_off_mid_way_leaves_the_old_state_and_is_sent_again(
    tmp_path: Path,
) -> None:
    """A follower behind the truncated log needs a snapshot; its first two transfers are
    cut off after a few of their chunks. Each time it keeps its old state whole (its old
    value, nothing of what it missed, no spooled file), and Raft sends the snapshot
    again, until one arrives with everything."""
    cluster = ReplicatedStores(tmp_path, config=StoreConfig(sync=False, snapshot_chunk_bytes=4096))
    try:
        client = KVClient(cluster)
        client.put(b"k", b"old")
        holder = cluster.lease_holder()
        behind = next(n for n in NODES if n != holder)
        wait_until(lambda: cluster.value(behind, b"k") == b"old", timeout_s=DEADLINE_S)
        cluster.cut = {(behind, n) for n in NODES} | {(n, behind) for n in NODES}
        missed = LOG_LIMIT + 2 * LOG_KEEP
        client.put(b"k", b"new")
        for i in range(missed):
            client.put(b"m%04d" % i, b"x" * 50)
        spool = tmp_path / f"n{behind}" / "raft-snapshots"
        seen: list[tuple[bytes | None, bytes | None, list[Path]]] = []
        cluster.after_cut.append(
            lambda: seen.append(
                (
                    cluster.value(behind, b"k"),
                    cluster.value(behind, b"m0000"),
                    list(spool.iterdir()),
                )
            )
        )
        cluster.cut_snapshots = 2
        cluster.cut = set()
        last = b"m%04d" % (missed - 1)
        wait_until(
            lambda: cluster.value(behind, last) is not None,
            timeout_s=DEADLINE_S,
            what="the snapshot sent again",
        )
        assert seen == [(b"old", None, [])] * 2
        assert cluster.snapshot_frames > 10  # the one that arrived, in many chunks
        assert cluster.value(behind, b"k") == b"new"
        assert cluster.value(behind, b"m0000") == b"x" * 50
        wait_until(cluster.caught_up, timeout_s=DEADLINE_S, what="the follower to catch up")
    finally:
        cluster.close()
