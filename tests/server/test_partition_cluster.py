"""Network partitions between three ``feedkv start --replicas 3`` processes.

The nodes call each other through the proxies of a :class:`~feedkv.testing.partition.
Network`, which the test cuts: the range's lease holder is cut off from the other two
(both ways, or only what it sends, or only what it receives), while a client outside
the partition writes through a node of the majority and follows a rangefeed. The
minority answers no write and no consistent read; the majority elects a lease holder
and goes on; once the partition heals nothing acknowledged is missing, the healed node
takes part in the quorum again, and the feed kept every promise across it all."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from feedkv.db import DB
from feedkv.errors import (
    AmbiguousResultError,
    NodeUnavailableError,
    NotLeaseHolderError,
)
from feedkv.kv.address import parse_node_url
from feedkv.kv.api import BatchRequest, Get, GetResponse, Header, Put
from feedkv.kv.grpc_transport import GrpcTransport, url_tls
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.feed_validator import check_resolved_feed, read_until_resolved
from feedkv.testing.partition import Network
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 90.0  # generous: two cores, shared
FEED = Span(b"feed/", b"feed0")


@pytest.fixture
def network() -> Iterator[Network]:
    with Network(3) as made:
        yield made


@pytest.fixture
def cluster(tmp_path: Path, network: Network) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path, 3, "--replicas", "3", rebalance_interval="0s", node_env=network.env
    ) as started:
        network.locate(started.node_at)
        yield started


def _lease_holder(db: DB) -> int:
    """The index (0: n1) of the node holding the lease of the one range."""
    (only,) = db.ranges()
    return only.lease_holder - 1


def _direct(cluster: LocalCluster, index: int) -> GrpcTransport:
    """A transport to that node alone: no routing to another replica."""
    url = cluster.url(index)
    return GrpcTransport(*parse_node_url(url), tls=url_tls(url))  # secure: as root


REFUSALS = (AmbiguousResultError, NotLeaseHolderError, NodeUnavailableError)


class _Writer:
    """Puts unique values to 50 keys of the feed's span, one after another, through a
    client of a node of the majority; keeps what was acknowledged."""

    def __init__(self, db: DB) -> None:
        self.db = db
        self.acknowledged: list[tuple[bytes, bytes]] = []
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="partition-writer")

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            key, value = b"feed/%03d" % (i % 50), b"v%d" % i
            i += 1
            try:
                self.db.put(key, value)
            except AmbiguousResultError:
                continue  # in flight when its node lost the lease: may or may not be there
            except BaseException as exc:
                self.failures.append(exc)
                return
            self.acknowledged.append((key, value))

    def wait_for_more(self, count: int) -> None:
        before = len(self.acknowledged)
        wait_until(
            lambda: len(self.acknowledged) >= before + count or self.failures,
            timeout_s=DEADLINE_S,
            what=f"{count} more acknowledged writes",
        )
        assert not self.failures, self.failures

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _both_ways(network: Network, holder: int, others: list[int]) -> None:
    network.isolate(holder)


def _what_it_sends(network: Network, holder: int, others: list[int]) -> None:
    for other in others:
        network.cut(holder, other)


def _what_it_receives(network: Network, holder: int, others: list[int]) -> None:
    for other in others:
        network.cut(other, holder)


CUTS: dict[str, Callable[[Network, int, list[int]], None]] = {
    "both ways": _both_ways,
    "what it sends": _what_it_sends,
    "what it receives": _what_it_receives,
}


@pytest.mark.slow(25)
@pytest.mark.parametrize("cut", list(CUTS))
def test_a_lease_holder_cut_off_from_the_majority_serves_nothing_and_loses_nothing(
    cluster: LocalCluster, network: Network, cut: str
) -> None:
    probe = cluster.connect(0)
    wait_until(
        lambda: all(len(r.replicas) == 3 for r in probe.ranges()),
        timeout_s=DEADLINE_S,
        what="three replicas",
    )
    probe.put(b"before", b"1")
    holder = _lease_holder(probe)
    probe.close()
    others = [i for i in range(3) if i != holder]
    # the replicas really talk through the proxies (else the cut below would cut nothing)
    wait_until(
        lambda: all(network.bytes_between.get((holder, o), 0) > 0 for o in others),
        timeout_s=DEADLINE_S,
        what="Raft traffic through the proxies",
    )
    db = cluster.connect(others[0])
    since = db.now()
    minority = _direct(cluster, holder)
    pool = concurrent.futures.ThreadPoolExecutor(2)
    with db.rangefeed([FEED], since) as feed:
        with _Writer(db) as writer:
            writer.wait_for_more(20)
            CUTS[cut](network, holder, others)
            # the minority: a write and a consistent read sent to it alone are never served
            # (they end once it learns, or decides, it has lost the lease)
            stuck_write = pool.submit(
                minority.send, BatchRequest(Header(range_id=1), (Put(b"minority", b"x"),))
            )
            stuck_read = pool.submit(
                minority.send, BatchRequest(Header(range_id=1), (Get(b"before"),))
            )
            # the majority elects a lease holder and goes on
            wait_until(
                lambda: _lease_holder(db) != holder,
                timeout_s=DEADLINE_S,
                what="a lease holder on the majority side",
            )
            writer.wait_for_more(30)
            with pytest.raises(REFUSALS):
                stuck_write.result(timeout=DEADLINE_S)
            # NB: a read that reached the lease holder while its leader lease still held
            # (less than election_tick - lease_margin ticks after its last answered
            # heartbeat round: no other leader can be elected before then) is served, as
            # it may be; it must then read what was committed
            try:
                read = stuck_read.result(timeout=DEADLINE_S)
            except REFUSALS:
                pass
            else:
                (answer,) = read.responses
                assert isinstance(answer, GetResponse) and answer.value == b"1", read
            network.heal()
            writer.wait_for_more(30)
        pool.shutdown()
        minority.close()
        last = db.put(b"feed/last", b"end")
        events = read_until_resolved(feed, last, timeout_s=DEADLINE_S)
    history = check_resolved_feed(events, db, FEED, since, last)

    # nothing acknowledged is lost; the write the minority refused is nowhere, unless it
    # was refused as ambiguous: cut off only from what the others send, the lease holder
    # still sent them the entry, which the next leader may commit (as it does after a
    # SIGKILL too)
    versions = {(v.key, v.value) for v in history}
    lost = [w for w in writer.acknowledged if w not in versions]
    assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:5]}"
    if not isinstance(stuck_write.exception(), AmbiguousResultError):
        assert db.get(b"minority") is None

    # the healed node is a working replica again: without one of the majority, the
    # range still takes writes (it needs the healed node's vote) and serves them all
    cluster.kill(others[1])
    # a write first: if the killed node held the lease, the old connection may fail it
    # as ambiguous (it cannot tell whether the node applied it before it went)
    with contextlib.suppress(AmbiguousResultError):
        db.put(b"after", b"2")
    db.put(b"after", b"2")
    assert db.get(b"after") == b"2" and db.get(b"before") == b"1"
    db.close()
