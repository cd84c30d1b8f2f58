"""Three ``feedkv start --replicas 3`` processes: every range grows to three replicas
through Raft, and a SIGKILLed lease holder loses nothing while writes go on."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from feedkv.db import DB
from feedkv.errors import AmbiguousResultError, InvalidArgumentError
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.feed_validator import check_resolved_feed, read_until_resolved
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")

ACCOUNTS = [b"acct/%03d" % i for i in range(20)]
DEADLINE_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, "--replicas", "3", rebalance_interval="0s") as started:
        yield started


def _replicated(db: DB) -> bool:
    return all(len(r.replicas) == 3 for r in db.ranges())


def _lease_holder(db: DB) -> int:
    (only,) = db.ranges()
    return only.lease_holder


def _agreed_lease_holder(cluster: LocalCluster) -> int:
    """The lease holder every node's directory names (a node's view lags a change of
    lease by a heartbeat: a test that kills "the lease holder" must not kill a node
    that lost it a moment ago)."""

    def agreed() -> int | None:
        seen = set()
        for i in range(3):
            with cluster.connect(i) as db:
                seen.add(_lease_holder(db))
        return seen.pop() if len(seen) == 1 else None

    holder: int = wait_until(agreed, timeout_s=DEADLINE_S, what="an agreed lease holder")
    return holder


@pytest.mark.slow(40)
def test_a_killed_lease_holder_loses_no_acknowledged_transfer(cluster: LocalCluster) -> None:
    """A bank of 20 accounts: transfers run from a node that survives while the range's
    lease holder is SIGKILLed; every transfer acknowledged stays, the total never
    changes, writes go on without the dead node, and it catches up when it returns.

    A commit in flight to the victim when it dies is ambiguous (it may have committed),
    as with CockroachDB: the client is told so and goes on, and the total holds either
    way (a transfer keeps it). Only the kill may cause one."""
    probe = cluster.connect(0)
    wait_until(lambda: _replicated(probe), timeout_s=DEADLINE_S, what="three replicas")
    for key in ACCOUNTS:
        probe.put(key, b"100")
    victim = _agreed_lease_holder(cluster) - 1
    gateway = next(i for i in range(3) if i != victim)
    probe.close()
    db = cluster.connect(gateway)
    done: list[int] = []
    ambiguous: list[AmbiguousResultError] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def transfers() -> None:
        n = 0
        try:
            while not stop.is_set():
                src, dst = ACCOUNTS[n % 20], ACCOUNTS[(7 * n + 3) % 20]
                n += 1
                if src == dst:
                    continue

                def move(txn, src=src, dst=dst):  # type: ignore[no-untyped-def]
                    a, b = int(txn.get(src)), int(txn.get(dst))
                    txn.put(src, str(a - 1).encode())
                    txn.put(dst, str(b + 1).encode())

                try:
                    db.run_transaction(move)
                except AmbiguousResultError as exc:
                    ambiguous.append(exc)
                    continue
                done.append(n)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=transfers)
    worker.start()
    try:
        wait_until(lambda: len(done) >= 20, timeout_s=DEADLINE_S, what="transfers before")
        cluster.kill(victim)
        before = len(done)
        wait_until(
            lambda: len(done) >= before + 20 or errors, timeout_s=DEADLINE_S, what="transfers after"
        )
        assert not errors, errors
        # NB: the gateway hears of the new lease holder's claim at its next heartbeat
        wait_until(
            lambda: _lease_holder(db) != victim + 1,
            timeout_s=DEADLINE_S,
            what="the lease off the dead node",
        )
        cluster.restart(victim)
        wait_until(lambda: len(done) >= before + 40, timeout_s=DEADLINE_S, what="more transfers")
    finally:
        stop.set()
        worker.join()
    assert not errors, errors
    assert len(ambiguous) <= 1, ambiguous  # one commit at most was in flight at the kill
    rows = db.scan(b"acct/", b"acct0")
    assert len(rows) == 20 and sum(int(kv.value) for kv in rows) == 2000
    # the node that came back holds every write: kill another, and it must serve them
    survivor = next(i for i in range(3) if i not in (victim, gateway))
    cluster.kill(survivor)
    assert sum(int(kv.value) for kv in db.scan(b"acct/", b"acct0")) == 2000
    db.close()


@pytest.mark.slow(30)
def test_relocating_a_replicated_range_says_what_moves_it(cluster: LocalCluster) -> None:
    """RELOCATE of a replicated range to nodes other than its replicas is refused naming
    the range as SQL users know it and what places its replicas (the message printed the
    range's descriptor, its keys as Python bytes, and a flag the zone replaced)."""
    with cluster.connect(0) as db:
        wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
        db.sql("CREATE TABLE placed (k INT PRIMARY KEY)")
        with pytest.raises(InvalidArgumentError) as refused:
            db.sql("ALTER TABLE placed RELOCATE LEASE VALUES (9, 1)")
    message = str(refused.value)
    assert "b'" not in message
    assert "CONFIGURE ZONE USING num_replicas" in message
    assert message.startswith("range r") and message.endswith("not n9")


@pytest.mark.slow(60)
def test_the_first_node_restarted_without_join_finds_its_cluster(cluster: LocalCluster) -> None:
    """n1 started the cluster without ``--join``; SIGKILLed, its ranges' leases move to
    the others, and it is started again as it first was, without ``--join`` (as a user
    restarts it). It calls the nodes its store kept the addresses of, and serves again,
    what was written while it was down among the rest (before, it knew no one, waited
    for a lease holder it could not reach and gave up starting)."""
    with cluster.connect(1) as db:
        wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
    wait_until(
        lambda: (cluster.base / "n1" / "peers.json").exists(),
        timeout_s=DEADLINE_S,
        what="n1 to keep the others' addresses",
    )
    cluster.kill(0)
    with cluster.connect(1) as db:
        wait_until(lambda: _lease_holder(db) != 1, timeout_s=DEADLINE_S, what="a new lease")
        db.put(b"while-n1-was-down", b"1")
    cluster.restart(0, join=False)
    wait_until(lambda: cluster.live_nodes(0) == 3, timeout_s=DEADLINE_S, what="n1 to see all")
    with cluster.connect(0) as db:
        assert db.get(b"while-n1-was-down") == b"1"


@pytest.mark.slow(30)
def test_sql_tables_split_across_replicated_ranges_and_outlive_a_node(
    cluster: LocalCluster,
) -> None:
    """CREATE TABLE splits the replicated range at the table's prefix on every replica;
    rows written through SQL stay readable and writable after any one node is killed."""
    db = cluster.connect(0)
    wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, item STRING)")
    db.sql("INSERT INTO orders VALUES (1, 'tea'), (2, 'cake')")
    ranges = db.ranges()
    assert len(ranges) >= 2 and all(len(r.replicas) == 3 for r in ranges)
    with pytest.raises(InvalidArgumentError, match=r"is replicated on n\d, n\d, n\d:"):
        db.relocate(ranges[-1].span.start, 4)  # no replica there (its lease may move)
    # CockroachDB's store metrics: every node holds a replica of each range, and each
    # range is counted once, by its lease holder
    total = len(ranges)
    wait_until(
        lambda: _range_metrics(cluster, [0, 1, 2]) == (3 * total, total, total, 0, 0),
        timeout_s=DEADLINE_S,
        what="each range counted once",
    )
    cluster.kill(2)
    db.sql("INSERT INTO orders VALUES (3, 'jam')")
    rows = db.sql("SELECT id, item FROM orders ORDER BY id").rows
    assert [tuple(r) for r in rows] == [(1, "tea"), (2, "cake"), (3, "jam")]
    # once n3 is seen dead, each range has two live replicas of three: under-replicated
    # (none is added: no node is left to take one), available
    wait_until(
        lambda: _range_metrics(cluster, [0, 1])[2:] == (total, 0, total),
        timeout_s=DEADLINE_S,
        what="the survivors' ranges under-replicated",
    )
    db.close()


def _range_metrics(cluster: LocalCluster, nodes: list[int]) -> tuple[int, ...]:
    """replicas, replicas_leaseholders, ranges, ranges_unavailable and
    ranges_underreplicated, summed over ``nodes``' /_status/vars."""
    names = (
        "replicas",
        "replicas_leaseholders",
        "ranges",
        "ranges_unavailable",
        "ranges_underreplicated",
    )
    sums = dict.fromkeys(names, 0)
    for index in nodes:
        node = cluster.processes[index]
        assert node is not None
        response = httpx.get(node.http_url + "/_status/vars", verify=node.http_verify, timeout=10)
        assert response.status_code == 200
        for family in text_string_to_metric_families(response.text):
            if family.name in sums:
                sums[family.name] += int(family.samples[0].value)
    return tuple(sums[name] for name in names)


@pytest.mark.slow(40)
def test_a_rangefeed_goes_on_without_a_gap_when_its_nodes_lease_holder_dies(
    cluster: LocalCluster,
) -> None:
    """A feed over a replicated range while writes go on and the range's lease holder is
    SIGKILLed: the feed is served by the client's own node's replica, a follower, which
    goes on; every committed version arrives, in order per key, and no value below a
    checkpoint follows it."""
    db = cluster.connect(0)
    wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
    victim = _agreed_lease_holder(cluster) - 1
    gateway = next(i for i in range(3) if i != victim)
    db.close()
    db = cluster.connect(gateway)
    # NB: the gateway hears of the replicas added by a heartbeat, maybe after node 0:
    # until then it addresses the feed to the only replica it knows of, n1
    wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas, as seen")
    feed_span = Span(b"feed/", b"feed0")
    since = db.now()
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            with contextlib.suppress(AmbiguousResultError):  # in flight at the victim
                db.put(b"feed/%03d" % (i % 50), b"v%d" % i)
                written.append(i)
            i += 1

    thread = threading.Thread(target=writer)
    with db.rangefeed([feed_span], since) as feed:
        served = feed.ranges()
        assert [r.node_id for r in served] == [gateway + 1], (served, db.ranges())
        thread.start()
        try:
            wait_until(lambda: len(written) > 30, timeout_s=DEADLINE_S, what="writes before")
            cluster.kill(victim)
            before = len(written)
            wait_until(lambda: len(written) > before + 30, timeout_s=DEADLINE_S, what="writes")
        finally:
            stop.set()
            thread.join()
        last = db.put(b"feed/last", b"end")
        events = read_until_resolved(feed, last, timeout_s=DEADLINE_S)
    history = check_resolved_feed(events, db, feed_span, since, last)
    assert len(history) > 60
    db.close()


@pytest.mark.slow(20)
def test_a_lease_moves_on_request_and_a_merge_gathers_its_neighbours_lease_first(
    cluster: LocalCluster,
) -> None:
    """``relocate`` moves a replicated range's lease to the replica asked for (and
    refuses a node without one); a merge whose right-hand range's lease is on another
    node has it handed over to the left range's lease holder first, then merges."""
    db = cluster.connect(0)
    wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
    db.put(b"m/left", b"l")
    db.put(b"m/right", b"r")
    db.split(b"m/r")

    def holder(key: bytes) -> int:
        return next(r for r in db.ranges() if r.span.start <= key < r.span.end).lease_holder

    left = holder(b"m/left")
    other = next(n for n in (1, 2, 3) if n != left)
    assert db.relocate(b"m/right", other).lease_holder == other
    wait_until(lambda: holder(b"m/right") == other, timeout_s=DEADLINE_S, what="the lease moved")
    with pytest.raises(InvalidArgumentError, match="RELOCATE LEASE moves its lease to one of them"):
        db.relocate(b"m/right", 9)
    ranges = len(db.ranges())
    merged = db.merge(b"m/left")
    assert merged.span.start <= b"m/right" < merged.span.end
    wait_until(lambda: len(db.ranges()) == ranges - 1, timeout_s=DEADLINE_S, what="one range less")
    assert (db.get(b"m/left"), db.get(b"m/right")) == (b"l", b"r")
    db.close()
