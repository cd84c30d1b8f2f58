"""A long-lived client of three ``feedkv start --replicas 3`` processes, given all three
(``feedkv://h1:p1,h2:p2,h3:p3``), outlives the SIGKILL of the node it connected through:
its gateway calls (the clock, range lookups, the node list, SQL) move to the next node of
its list, and a feed opened before the kill goes on without a gap."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv.db import DB
from feedkv.errors import AmbiguousResultError
from feedkv.kv.db import RangeInfo
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.feed_validator import check_resolved_feed, read_until_resolved
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, "--replicas", "3", rebalance_interval="0s") as started:
        yield started


@pytest.mark.slow(30)
def test_a_client_moves_to_the_next_node_of_its_url_when_its_gateway_is_killed(
    cluster: LocalCluster,
) -> None:
    db: DB = feedkv.connect(cluster.all_nodes_url())
    assert db.gateway_node() == 1
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, item STRING)")
    db.sql("INSERT INTO orders VALUES (1, 'tea')")

    def replicated() -> list[RangeInfo] | None:
        ranges = cluster.agreed_ranges()
        return ranges if ranges and all(len(r.replicas) == 3 for r in ranges) else None

    ranges = wait_until(replicated, timeout_s=DEADLINE_S, what="three replicas, agreed")
    # NB: the node killed holds the feed's range's lease too (the first node's, as started)
    assert [r.lease_holder for r in ranges if r.span.contains_key(b"feed/")] == [1]
    feed_span = Span(b"feed/", b"feed0")
    since = db.now()
    written: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        try:
            while not stop.is_set():
                with contextlib.suppress(AmbiguousResultError):  # in flight at the kill
                    db.put(b"feed/%03d" % (i % 40), b"v%d" % i)
                    written.append(i)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    with db.rangefeed([feed_span], since) as feed:
        assert {r.node_id for r in feed.ranges()} == {1}  # served by the gateway's replica
        thread.start()
        try:
            wait_until(lambda: len(written) > 30 or errors, timeout_s=DEADLINE_S, what="writes")
            cluster.kill(0)
            before = len(written)
            wait_until(
                lambda: len(written) > before + 30 or errors,
                timeout_s=DEADLINE_S,
                what="writes after the kill",
            )
        finally:
            stop.set()
            thread.join()
        assert not errors, errors
        # the gateway calls, each after the death
        assert db.now() > since
        assert db.gateway_node() in (2, 3)
        assert {n.node_id for n in db.nodes()} == {1, 2, 3}

        def move(txn: feedkv.Txn) -> None:  # a transaction begun after the death
            old = txn.get(b"feed/000")
            txn.put(b"feed/moved", old or b"none")

        db.run_transaction(move)
        db.sql("INSERT INTO orders VALUES (2, 'cake')")
        rows = db.sql("SELECT id, item FROM orders ORDER BY id").rows
        assert [tuple(r) for r in rows] == [(1, "tea"), (2, "cake")]
        last = db.put(b"feed/last", b"end")
        events = read_until_resolved(feed, last, timeout_s=DEADLINE_S)
    history = check_resolved_feed(events, db, feed_span, since, last)
    assert len(history) > 60
    db.close()
