"""A cluster of three ``feedkv start`` processes on loopback: joining, placement by
relocation, reads, writes and transactions across nodes, a dead node, restarts."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from feedkv.changefeed.jobs import get_job
from feedkv.cli.node import run_node_status
from feedkv.cli.start import CLOCK_OFFSET_ENV
from feedkv.errors import (
    AmbiguousResultError,
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
)
from feedkv.kv.dialer import nodes
from feedkv.rangefeed.event import Checkpoint
from feedkv.rangefeed.feed_client import open_client
from feedkv.security.tls import ServerTLS
from feedkv.server.cluster import join_cluster, join_once
from feedkv.server.relocation import STALL_ENV
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.feed_validator import check_resolved_feed, read_until_resolved
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until
from feedkv.util.build import BUILD_TAG
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")

# ``cockroach node status``'s columns, in its order (feedkv's own follow them)
COCKROACH_NODE_STATUS_COLUMNS = (
    "id",
    "address",
    "sql_address",
    "build",
    "started_at",
    "updated_at",
    "locality",
    "is_available",
    "is_live",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), 3, rebalance_interval="0s") as started:
        yield started


@pytest.fixture(autouse=True)
def healed(cluster: LocalCluster) -> None:
    """Each test starts with every node up (a failed test may have left one down)."""
    cluster.heal()


def keys(n: int) -> list[bytes]:
    return [b"acct/%04d" % i for i in range(n)]


@pytest.mark.slow(40)
def test_ranges_move_between_nodes_under_transfers_and_the_total_holds(
    cluster: LocalCluster,
) -> None:
    """The bank test across nodes: serializable transfers between accounts on three
    nodes while their ranges are relocated; the total is constant at every read and
    every account is on the node it was moved to."""
    db = cluster.connect(0)
    accounts = keys(60)
    for key in accounts:
        db.put(key, b"100")
    db.split(b"acct/0020")
    db.split(b"acct/0040")
    stop = threading.Event()
    errors: list[BaseException] = []

    def transfer(i: int) -> None:
        client = cluster.connect(i % 3)
        n = 0
        try:
            while not stop.is_set():
                src, dst = accounts[(7 * n + i) % 60], accounts[(13 * n + 3 * i + 1) % 60]
                n += 1
                if src == dst:
                    continue

                def move(txn, src=src, dst=dst):  # type: ignore[no-untyped-def]
                    a, b = int(txn.get(src)), int(txn.get(dst))
                    txn.put(src, str(a - 1).encode())
                    txn.put(dst, str(b + 1).encode())

                client.run_transaction(move)
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    workers = [threading.Thread(target=transfer, args=(i,)) for i in range(3)]
    for worker in workers:
        worker.start()
    try:
        for key, node in [(b"acct/0020", 2), (b"acct/0040", 3), (b"acct/0000", 2)] * 2:
            moved = db.relocate(key, node)
            assert moved.lease_holder == node
            total = sum(int(kv.value) for kv in db.scan(b"acct/", b"acct0"))
            assert total == 6000
            node = 1 if node != 1 else 2
            db.relocate(key, node)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert not errors, errors
    rows = db.scan(b"acct/", b"acct0")
    assert len(rows) == 60 and sum(int(kv.value) for kv in rows) == 6000
    placed = {r.span.start: r for r in db.ranges()}
    assert set(placed) >= {b"acct/0020", b"acct/0040"}


@pytest.mark.slow(40)
def test_a_dead_nodes_ranges_fail_clearly_and_its_acknowledged_writes_survive(
    cluster: LocalCluster,
) -> None:
    db = cluster.connect(0)
    db.split(b"dead/")
    db.split(b"dead0")
    db.relocate(b"dead/", 3)
    for i in range(20):
        db.put(b"dead/%02d" % i, b"v%d" % i)
    db.put(b"alive", b"yes")

    cluster.kill(2)
    wait_until(
        lambda: not next(n for n in nodes(db) if n["id"] == 3)["live"],
        timeout_s=30,
        what="node n3 to be seen dead",
    )
    with pytest.raises(NodeUnavailableError, match="n3"):
        cluster.connect(0).get(b"dead/01")
    assert db.get(b"alive") == b"yes"  # nothing else stops

    cluster.restart(2)
    wait_until(lambda: cluster.live_nodes(0) == 3, timeout_s=30, what="n3 back")
    fresh = cluster.connect(1)
    assert [kv.value for kv in fresh.scan(b"dead/", b"dead0")] == [b"v%d" % i for i in range(20)]


@pytest.mark.slow(40)
def test_a_rangefeed_over_three_nodes_follows_its_ranges_as_they_move(
    cluster: LocalCluster,
) -> None:
    """A feed whose ranges live on all three nodes, read from a client of one node, while
    writes go on and the ranges move: every committed version arrives (the old node
    ends the piece with REPLICA_REMOVED after its last checkpoint, the client resumes on
    the new node), in order per key, and no value below a checkpoint follows it."""
    db = cluster.connect(0)
    feed_span = Span(b"feed/", b"feed0")
    for split in (b"feed/", b"feed/3", b"feed/6", b"feed0"):
        db.split(split)
    db.relocate(b"feed/3", 2)
    db.relocate(b"feed/6", 3)
    since = db.now()
    stop = threading.Event()

    written: list[int] = []

    def writer() -> None:
        client = cluster.connect(1)
        i = 0
        while not stop.is_set():
            client.put(b"feed/%d%03d" % (i % 9, i), b"v%d" % i)
            written.append(i)
            i += 1
        client.close()

    thread = threading.Thread(target=writer)
    with cluster.connect(2).rangefeed([feed_span], since) as feed:
        thread.start()
        try:
            for key, node in [(b"feed/3", 3), (b"feed/6", 1), (b"feed/", 2), (b"feed/3", 1)]:
                # NB: writes go on between the moves, however fast the moves are
                enough = len(written) + 3
                wait_until(lambda n=enough: len(written) >= n, timeout_s=60, what="writes")
                db.relocate(key, node)
        finally:
            stop.set()
            thread.join()
        last = db.put(b"feed/9last", b"end")
        events = read_until_resolved(feed, last, timeout_s=60)
    history = check_resolved_feed(events, db, feed_span, since, last)
    assert len(history) > 9


def _sink_values(out: Path) -> set[str]:
    """The ``v`` of every row the file sink under ``out`` holds."""
    found = set()
    for path in out.rglob("*.ndjson"):
        for line in path.read_text().splitlines():
            after = json.loads(line).get("after")
            if after is not None:
                found.add(after["v"])
    return found


@pytest.mark.slow(60)
def test_a_dead_nodes_changefeed_job_is_adopted_by_a_live_node_and_goes_on(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A job runs on one node under a lease; SIGKILL that node and another live node
    adopts the job once liveness sees the node dead, resuming from the high-water mark
    (contract 5 of the cluster). The data's ranges are moved off the doomed node first:
    unreplicated, they would wait for it."""
    db = cluster.connect(0)
    db.sql("CREATE TABLE adopt (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO adopt VALUES (1, 'before')")
    out = tmp_path / "out"
    job_id = db.sql(
        f"CREATE CHANGEFEED FOR adopt INTO 'file://{out}' "
        "WITH resolved='0s', min_checkpoint_frequency='0s'"
    ).rows[0][0]

    def runner() -> str | None:
        record = db.run_transaction(lambda txn: get_job(txn, job_id))
        return record.lease.node_id if record is not None and record.lease else None

    wait_until(lambda: runner() is not None, timeout_s=30, what="a node to run the job")
    wait_until(lambda: "before" in _sink_values(out), timeout_s=30, what="the first row")
    doomed = int(runner().removeprefix("n")) - 1  # type: ignore[union-attr]
    keeper = (doomed + 1) % 3
    for info in db.ranges():
        if info.replicas[0] == doomed + 1:
            db.relocate(info.span.start or b"\x00", keeper + 1)
    survivor = cluster.connect(keeper)
    cluster.kill(doomed)
    wait_until(
        lambda: runner() not in (None, f"n{doomed + 1}"),
        timeout_s=120,
        what="a live node to adopt the job",
    )
    survivor.sql("INSERT INTO adopt VALUES (2, 'after')")
    wait_until(lambda: "after" in _sink_values(out), timeout_s=30, what="the row after")
    cluster.restart(doomed)
    wait_until(lambda: cluster.live_nodes(keeper) == 3, timeout_s=30, what="the node back")


@pytest.mark.slow(60)
@pytest.mark.parametrize(
    ("step", "moved", "crashed"),
    [
        ("streamed", False, "source"),
        ("dropped", True, "source"),
        ("installed", False, "target"),
        ("activating", True, "target"),
    ],
)
def test_a_move_cut_by_a_crash_leaves_one_owner_and_loses_nothing(
    cluster: LocalCluster, step: str, moved: bool, crashed: str
) -> None:
    """SIGKILL a node in the middle of a move of a range from n1. The node the range
    leaves: after the target holds the copy but before the commit (the move aborts when
    n1 restarts; the target drops its copy), or after the commit but before the target
    was told (it asks n1 once n1 is back, and serves the range). The node it goes to:
    while it writes the copy (the move aborts: the range serves where it was, and the
    target drops its copy when it is back), or once the move committed but before it
    serves the range (back, it learns the move committed and serves it). Either way one
    node owns the range, every row is there, and it takes writes again."""
    stalled, target = (0, 2) if crashed == "source" else (2, 3)
    span = Span(b"crash-%s/" % step.encode(), b"crash-%s0" % step.encode())
    db = cluster.connect(1)
    db.split(span.start)
    db.split(span.end)
    db.relocate(span.start, 1)
    for i in range(50):
        db.put(span.start + b"%02d" % i, b"v%d" % i)
    cluster.kill(stalled)
    cluster.restart(stalled, env={STALL_ENV: step})
    wait_until(lambda: cluster.live_nodes(1) == 3, timeout_s=30, what="the node back")

    def move() -> None:
        with contextlib.suppress(FeedKVError), cluster.connect(1) as client:
            client.relocate(span.start, target)

    mover = threading.Thread(target=move)
    mover.start()
    log = cluster.base / f"n{stalled + 1}.stderr"
    wait_until(
        lambda: f"stalls after its {step} step" in log.read_text(),
        timeout_s=30,
        what=f"the move to stall after {step}",
    )
    cluster.kill(stalled)
    mover.join()
    cluster.restart(stalled)

    def owners() -> list[int]:
        with cluster.connect(1) as client:
            return [r.lease_holder for r in client.ranges() if r.span == span]

    wait_until(lambda: owners() == [target if moved else 1], timeout_s=60, what="one owner")
    with cluster.connect(1) as client:
        rows = client.scan(span.start, span.end)
        assert [kv.value for kv in rows] == [b"v%d" % i for i in range(50)]
        client.put(span.start + b"after", b"served")
        assert client.get(span.start + b"after") == b"served"


@pytest.mark.slow(40)
def test_a_node_whose_clock_is_off_refuses_to_serve_and_says_why(cluster: LocalCluster) -> None:
    """A node whose clock is more than the maximum offset (500 ms) from the others'
    must not serve: its timestamps could order writes wrongly. As CockroachDB's, it
    stops with the reason; started again with its clock right, it serves."""
    cluster.kill(2)
    with pytest.raises(RuntimeError, match=r"n3 refuses to serve: .*clock is \d+ ms ahead"):
        cluster.restart(2, env={CLOCK_OFFSET_ENV: "2000"})
    assert cluster.connect(0).get(b"anything") is None  # the others serve on
    cluster.restart(2)
    with cluster.connect(2) as fixed:
        assert fixed.get(b"anything") is None


@pytest.mark.slow(60)
def test_the_rebalancer_spreads_new_ranges_over_the_live_nodes(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "spread", 3, rebalance_interval="1s") as spread:
        db = spread.connect(0)
        for i in range(8):
            db.put(b"spread/%d" % i, b"v%d" % i)
            db.split(b"spread/%d" % i)

        def counts() -> list[int]:
            held = [r.lease_holder for r in db.ranges()]
            return sorted(held.count(n) for n in (1, 2, 3))

        def even() -> bool:
            held = counts()
            return held[0] >= 2 and held[-1] - held[0] <= 1

        wait_until(even, timeout_s=60, what="an even spread of the ranges")
        assert [kv.value for kv in db.scan(b"spread/", b"spread0")] == [
            b"v%d" % i for i in range(8)
        ]


def test_node_status_lists_every_node_with_its_liveness_and_ranges(
    cluster: LocalCluster,
) -> None:
    out = io.StringIO()
    assert run_node_status(cluster.url(1), "json", out) == 0
    listed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [n["id"] for n in listed] == [1, 2, 3]
    # CockroachDB's columns first, in its order; each node's build came by gossip
    assert list(listed[0])[:9] == list(COCKROACH_NODE_STATUS_COLUMNS)
    assert all(n["is_available"] and n["is_live"] for n in listed)
    assert {n["build"] for n in listed} == {BUILD_TAG}
    with cluster.connect(0) as db:
        held = [r.lease_holder for r in db.ranges()]
    assert sum(n["ranges"] for n in listed) == len(held)
    assert {n["address"] for n in listed} == {cluster.address(i) for i in range(3)}


def test_a_spark_processes_client_reaches_the_ranges_of_every_node(cluster: LocalCluster) -> None:
    """Spark's executors and its source runner open their clients with ``open_client``:
    each request must go to its range's node, not only to the node of the URL (found by
    ``feedkv demo --nodes 3``, whose job stalled once a range had moved)."""
    db = cluster.connect(0)
    db.split(b"spark/")
    db.split(b"spark0")
    db.put(b"spark/k", b"v")
    db.relocate(b"spark/", 3)
    client = open_client(cluster.url(0))
    try:
        assert client.get(b"spark/k") == b"v"
        assert [kv.key for kv in client.scan(b"spark/", b"spark0")] == [b"spark/k"]
    finally:
        client.close()


def test_gossip_tables_and_node_status_agree(cluster: LocalCluster) -> None:
    """``crdb_internal.gossip_nodes`` and ``crdb_internal.gossip_liveness``, read by a
    PostgreSQL client from a node's SQL port, and ``feedkv node status`` of that node
    list the same nodes with the same addresses, epochs, starts, liveness and ranges
    (a node's view may change between two reads as gossip arrives: they are read until
    a pair agrees)."""
    process = cluster.processes[1]
    assert process is not None

    def read() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[Any, ...]]]:
        out = io.StringIO()
        assert run_node_status(cluster.url(1), "json", out) == 0
        status = [json.loads(line) for line in out.getvalue().splitlines()]
        with psycopg.connect(process.sql_url) as conn:
            gossip = conn.execute(
                "SELECT n.node_id, n.address, n.build_tag, l.epoch, n.started_at, n.is_live, "
                "n.ranges "
                "FROM crdb_internal.gossip_nodes AS n JOIN crdb_internal.gossip_liveness "
                "AS l ON n.node_id = l.node_id ORDER BY n.node_id"
            ).fetchall()
            liveness = conn.execute(
                "SELECT node_id, expiration, membership, updated_at "
                "FROM crdb_internal.gossip_liveness ORDER BY node_id"
            ).fetchall()
            # one replica per range: each node holds the lease of every range it holds
            assert conn.execute(
                "SELECT count(*) FROM crdb_internal.gossip_nodes WHERE ranges != leases"
            ).fetchone() == (0,)
        # NB: a timestamp's text drops its fraction's trailing zeros, as CockroachDB's
        listed: list[tuple[object, ...]] = [
            (
                n["id"],
                n["address"],
                n["build"],
                n["epoch"],
                datetime.datetime.fromisoformat(n["started_at"]),
                n["is_live"],
                n["ranges"],
            )
            for n in status
        ]
        from_sql: list[tuple[object, ...]] = [tuple(r) for r in gossip]
        return listed, from_sql, liveness

    def agree() -> bool:
        listed, from_sql, liveness = read()
        return listed == from_sql and len(liveness) == 3

    wait_until(agree, timeout_s=30, what="node status and the gossip tables to agree")
    listed, _from_sql, liveness = read()
    addresses = {i + 1: cluster.address(i) for i in range(3)}
    assert [(n[0], n[1], n[5]) for n in listed] == [(i, a, True) for i, a in addresses.items()]
    with psycopg.connect(process.sql_url) as conn:
        [(own,)] = conn.execute("SELECT crdb_internal.node_id()").fetchall()
    assert addresses[own] == cluster.address(1)  # the node the client is connected to
    for node_id, expiration, membership, updated_at in liveness:
        assert membership == "active" and updated_at is not None, node_id
        seconds = float(expiration.split(",")[0])
        assert seconds > updated_at.replace(tzinfo=datetime.UTC).timestamp(), expiration


@pytest.mark.slow(60)
def test_a_client_finds_a_node_that_restarted_on_another_port(cluster: LocalCluster) -> None:
    """A client connected (to n1) before n3 restarted on a new port reaches n3's range
    again, and its rangefeed over that range goes on: it asks its gateway where n3
    listens now once the old address fails, instead of dialling the old one for good."""
    span = Span(b"readdr/", b"readdr0")
    with cluster.connect(0) as db:
        db.split(span.start)
        db.split(span.end)
        db.relocate(span.start, 3)
        db.put(b"readdr/a", b"1")
        since = db.now()
    client = cluster.connect(0)
    try:
        assert client.get(b"readdr/a") == b"1"  # it dialled n3 at its first address
        with client.rangefeed([span], since) as feed:
            old = cluster.url(2)
            cluster.kill(2)
            cluster.restart(2)
            assert cluster.url(2) != old
            assert client.get(b"readdr/a") == b"1"
            written = client.put(b"readdr/b", b"2")
            events = read_until_resolved(feed, written, timeout_s=60)
        assert isinstance(events[-1], Checkpoint), "the feed did not resolve past the write"
        assert b"readdr/b" in {getattr(e, "key", None) for e in events}
        # a write first: the old connection may fail it as ambiguous (it cannot tell
        # whether the node applied it before it went), and the next one goes to n3 anew
        cluster.kill(2)
        cluster.restart(2)
        with contextlib.suppress(AmbiguousResultError):
            client.put(b"readdr/c", b"3")
        client.put(b"readdr/c", b"3")
        assert client.get(b"readdr/c") == b"3"
    finally:
        client.close()


@pytest.mark.slow(60)
def test_a_merge_of_neighbours_on_two_nodes_brings_the_right_one_over_first(
    cluster: LocalCluster,
) -> None:
    """Merging two adjacent ranges held by different nodes: the left range's node has
    the right one moved to it, then merges them. Every row of both is there, the merged
    range is on the left's node, it takes writes, and a rangefeed over both ranges
    opened before the merge goes on through the move and the merge (validated)."""
    span = Span(b"xmerge/", b"xmerge0")
    middle = b"xmerge/5"
    db = cluster.connect(0)
    for key in (span.start, middle, span.end):
        db.split(key)
    db.relocate(span.start, 2)
    db.relocate(middle, 3)
    for i in range(10):
        db.put(b"xmerge/%d" % i, b"v%d" % i)
    since = db.now()
    with cluster.connect(0).rangefeed([span], since) as feed:
        db.put(b"xmerge/0a", b"before")
        merged = cluster.connect(0).merge(span.start)
        assert merged.span == span and merged.lease_holder == 2
        last = db.put(b"xmerge/9z", b"after")
        events = read_until_resolved(feed, last, timeout_s=60)
    check_resolved_feed(events, db, span, since, last)
    with cluster.connect(2) as other:
        assert [(r.span, r.lease_holder) for r in other.ranges() if r.span.overlaps(span)] == [
            (span, 2)
        ]
        rows = other.scan(span.start, span.end)
    assert len(rows) == 12
    assert {kv.value for kv in rows} >= {b"v%d" % i for i in range(10)}


def test_merging_the_last_range_is_refused_on_a_cluster_too(cluster: LocalCluster) -> None:
    with cluster.connect(0) as db:
        last = db.ranges()[-1]
        with pytest.raises(InvalidArgumentError, match="last range"):
            db.merge(last.span.start + b"\xff" if last.span.start else b"\x01")


def test_alter_table_relocate_moves_a_tables_ranges_between_nodes(cluster: LocalCluster) -> None:
    """``ALTER TABLE t RELOCATE VALUES (ARRAY[n], key)`` (and ``RELOCATE LEASE``) move the
    range holding the key to node n, as ``SHOW RANGES`` then says; the rows stay."""
    with cluster.connect(1) as db:
        db.sql("CREATE TABLE placed (k INT PRIMARY KEY, v STRING)")
        db.sql("INSERT INTO placed VALUES (1, 'a'), (10, 'b'), (20, 'c')")
        db.sql("ALTER TABLE placed SPLIT AT VALUES (10), (20)")
        db.sql("ALTER TABLE placed RELOCATE VALUES (ARRAY[2], 1), (ARRAY[3], 10)")
        db.sql("ALTER TABLE placed RELOCATE LEASE VALUES (1, 20)")

        def holders() -> list[int]:
            rows = db.sql("SHOW RANGES FROM TABLE placed").rows
            return [lease_holder for _s, _e, _id, _gen, lease_holder, _r in rows]

        # NB: the node asked hears of a move between two other nodes at the next gossip
        wait_until(lambda: holders() == [2, 3, 1], timeout_s=30, what="the ranges placed")
        assert db.sql("SELECT v FROM placed ORDER BY k").rows == [("a",), ("b",), ("c",)]
        with pytest.raises(InvalidArgumentError, match="no node n9"):
            db.sql("ALTER TABLE placed RELOCATE VALUES (ARRAY[9], 1)")


def test_a_node_that_cannot_join_says_why(cluster: LocalCluster, tmp_path: Path) -> None:
    """A node of another CA fails its TLS handshakes with the members: the error says
    the certificates do not match rather than how a new cluster starts; with nothing
    listening at --join it says that a cluster starts from a node without --join."""
    stranger = ServerTLS.load(make_certs_dir(tmp_path / "other-ca")).client()
    with pytest.raises(NodeUnavailableError) as untrusted:
        join_cluster([cluster.address(0)], timeout_s=0, tls=stranger)
    assert "do not trust each other's certificates" in str(untrusted.value)
    assert "feedkv init" not in str(untrusted.value)
    with pytest.raises(NodeUnavailableError) as nobody:
        join_cluster(["127.0.0.1:1"], timeout_s=0, tls=stranger)
    assert "a new cluster starts from one node started without --join" in str(nobody.value)


def test_a_node_waiting_to_join_logs_why_in_its_log_file(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A new node of another CA waits to join (as CockroachDB's does) and says why in
    its log file, not on stderr alone: its log starts before the node has an id."""
    other = make_certs_dir(tmp_path / "other-ca")
    store = tmp_path / "stranger"
    node = NodeProcess(store, "--certs-dir", str(other), "--join", cluster.address(0), wait=False)
    log_file = store / "logs" / "feedkv.log"
    try:
        wait_until(
            lambda: log_file.exists() and "do not trust each other's" in log_file.read_text(),
            timeout_s=60,
            what="the TLS failure in the node's log file",
        )
    finally:
        node.terminate()
    [line] = [json.loads(x) for x in log_file.read_text().splitlines() if "trust" in x][:1]
    assert line["level"] == "warning" and line["node"] == ""
    assert "stopped before it served" in log_file.read_text()


def test_a_join_asked_again_gets_the_same_node_id(cluster: LocalCluster) -> None:
    """A joiner whose answer was lost (its call timed out under load) asks again with
    the same token: it gets the id it was given, not a second one (a 3-node cluster
    whose third node came up as n4 broke relocations that named n3)."""
    assert cluster.certs_dir is not None
    tls = ServerTLS.load(cluster.certs_dir).client()
    members = [cluster.address(1), cluster.address(0)]
    first, _ = join_once(members, tls, 30.0, "retried")
    again, _ = join_once(list(reversed(members)), tls, 30.0, "retried")
    other, _ = join_once(members, tls, 30.0, "another")
    assert first is not None and again is not None and other is not None
    assert again == first
    assert other[1] == first[1] + 1
