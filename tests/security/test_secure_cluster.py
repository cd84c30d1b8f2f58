"""Three secure nodes: they join, gossip, move ranges and serve rangefeeds to each other
over TLS as ``node``; a client with a certificate of another CA is refused by each. They
start with one ``--join`` list and ``feedkv init`` (their claims to bootstrap go over TLS
too)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from feedkv.errors import NodeUnavailableError, PermissionDeniedError
from feedkv.kv.address import parse_node_url
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.rangefeed.event import Event, Value
from feedkv.rangefeed.feed_client import open_client
from feedkv.security.tls import ClientTLS
from feedkv.sql import catalog
from feedkv.sql.row_codec import table_span
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.cluster import LocalCluster
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    certs = make_certs_dir(tmp_path_factory.mktemp("pki"))
    base = tmp_path_factory.mktemp("secure-cluster")
    with LocalCluster(base, 3, certs_dir=certs, init=True) as started:
        yield started


@pytest.mark.slow(30)
def test_ranges_move_between_secure_nodes_and_feeds_follow(cluster: LocalCluster) -> None:
    db = cluster.connect(0)
    for split in (b"s/", b"s/5", b"s0"):
        db.split(split)
    db.relocate(b"s/", 2)
    db.relocate(b"s/5", 3)
    since = db.now()
    for i in range(10):
        cluster.connect(i % 3).put(b"s/%d" % i, b"v%d" % i)
    assert [kv.value for kv in cluster.connect(2).scan(b"s/", b"s0")] == [
        b"v%d" % i for i in range(10)
    ]
    last = db.put(b"s/9", b"last")
    events: list[Event] = []
    with cluster.connect(1).rangefeed([Span(b"s/", b"s0")], since) as feed:
        closer = threading.Timer(60, feed.close)  # the deadline: a stuck feed ends
        closer.start()
        for event in feed:
            events.append(event)
            seen = {e.key for e in events if isinstance(e, Value)}
            # NB: each range sends its own catch-up: the last write may come first
            if len(seen) == 10 and any(isinstance(e, Value) and e.ts == last for e in events):
                break
        closer.cancel()
    values = {e.key for e in events if isinstance(e, Value)}
    assert values == {b"s/%d" % i for i in range(10)}
    assert any(isinstance(e, Value) and e.ts == last for e in events)


def test_each_node_refuses_a_client_of_another_ca(cluster: LocalCluster, tmp_path: Path) -> None:
    foreign = ClientTLS.load(make_certs_dir(tmp_path), "root")
    for index in range(3):
        with pytest.raises(NodeUnavailableError, match="does it trust this certificate"):
            GrpcTransport(*parse_node_url(cluster.url(index)), connect_timeout_s=2, tls=foreign)


def test_a_user_reads_its_table_on_whichever_node_holds_it(cluster: LocalCluster) -> None:
    """The node that serves a read checks the grants, read through its own client of
    the cluster (the catalog may be on another node)."""
    certs = cluster.certs_dir
    assert certs is not None
    make_certs_dir(certs.parent, users=("alice",))
    db = cluster.connect(0)
    db.sql("CREATE USER alice")
    db.sql("CREATE TABLE cluster_rides (id INT PRIMARY KEY)")
    db.sql("INSERT INTO cluster_rides VALUES (1), (2), (3)")
    db.sql("CREATE TABLE cluster_payments (id INT PRIMARY KEY)")
    db.sql("GRANT SELECT ON cluster_rides TO alice")
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    rides = table_span(catalog.table_by_name(snapshot, database, "cluster_rides").id)
    payments = table_span(catalog.table_by_name(snapshot, database, "cluster_payments").id)
    db.relocate(rides.start, 3)
    url = cluster.url(0).partition("?")[0]
    with open_client(f"{url}?certs_dir={quote(str(certs))}&user=alice") as alice:
        assert len(alice.scan(rides.start, rides.end)) == 3
        with pytest.raises(PermissionDeniedError, match="on relation cluster_payments"):
            alice.scan(payments.start, payments.end)


def test_a_password_users_session_holds_on_every_node(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A session from one node's Login is taken by the node that holds the table (each
    node checks it with the cluster's key), and its running feed there ends when its
    SELECT is revoked."""
    certs = cluster.certs_dir
    assert certs is not None
    ca_only = tmp_path / "ca-only"
    ca_only.mkdir()
    shutil.copy(certs / "ca.crt", ca_only / "ca.crt")
    db = cluster.connect(0)
    db.sql("CREATE USER pia WITH PASSWORD 'pia-secret-1'")
    db.sql("CREATE TABLE cluster_fares (id INT PRIMARY KEY)")
    db.sql("INSERT INTO cluster_fares VALUES (1), (2)")
    db.sql("GRANT SELECT ON cluster_fares TO pia")
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    fares = table_span(catalog.table_by_name(snapshot, database, "cluster_fares").id)
    db.relocate(fares.start, 2)
    url = f"{cluster.url(0).partition('?')[0]}?certs_dir={quote(str(ca_only))}&user=pia"
    with open_client(url, password="pia-secret-1") as pia:
        assert len(pia.scan(fares.start, fares.end)) == 2
        with pia.rangefeed(fares, pia.now(), values=False) as feed:
            closer = threading.Timer(60, feed.close)  # the deadline: a stuck feed ends
            closer.start()
            try:
                events = iter(feed)
                next(events)  # running: the first checkpoint
                db.sql("REVOKE SELECT ON cluster_fares FROM pia")
                with pytest.raises(PermissionDeniedError, match="it was revoked"):
                    for _ in events:
                        pass
            finally:
                closer.cancel()
