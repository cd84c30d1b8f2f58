"""A user other than root reads, over a secure node's gRPC API, the keys of the tables it
holds SELECT on and nothing else: scans, exports and rangefeeds of such a table pass;
another table, a span that crosses tables, system keys, writes and transactions are
refused with a PermissionDeniedError that says what; a REVOKE holds for the next read."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import feedkv
from feedkv import DB
from feedkv.errors import PermissionDeniedError
from feedkv.kv.access import Read, reads_of
from feedkv.kv.address import parse_node_url
from feedkv.kv.api import BatchRequest, Get, Header, Put, Scan
from feedkv.kv.dialer import call
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.rangefeed.event import Checkpoint
from feedkv.rangefeed.feed_client import KVFeedClient, open_client
from feedkv.security.tls import ClientTLS
from feedkv.sql import catalog
from feedkv.sql.read_access import DescriptorRead, NameRead, TableRead, read_target
from feedkv.sql.row_codec import CATALOG_PREFIX, TABLES_PREFIX, table_prefix, table_span
from feedkv.testing.certs import make_certs_dir
from feedkv.util.encoding import encode_value
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, key_next, prefix_end


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[DB]:
    """A secure embedded node listening on loopback, with tables ``rides`` (alice may
    SELECT) and ``payments`` (she may not)."""
    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    store = tmp_path_factory.mktemp("secure") / "store"
    database = feedkv.connect(store, certs_dir=certs, listen="127.0.0.1:0", config=config)
    database.sql("CREATE USER alice")
    database.sql("CREATE TABLE rides (id INT PRIMARY KEY, city STRING)")
    database.sql("CREATE TABLE payments (id INT PRIMARY KEY, card STRING)")
    database.sql("INSERT INTO rides VALUES (1, 'rome'), (2, 'oslo')")
    database.sql("INSERT INTO payments VALUES (1, '4111-1111')")
    database.sql("GRANT SELECT ON rides TO alice")
    yield database
    database.close()


def _url(db: DB, certs: Path, user: str) -> str:
    return f"{db.serving_url().partition('?')[0]}?certs_dir={quote(str(certs))}&user={user}"


@pytest.fixture(scope="module")
def alice(db: DB, certs: Path) -> Iterator[KVFeedClient]:
    client = open_client(_url(db, certs, "alice"))
    yield client
    client.close()


def _table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return catalog.table_by_name(snapshot, database, name).id


def test_a_user_with_select_scans_and_exports_the_table(db: DB, alice: KVFeedClient) -> None:
    span = table_span(_table_id(db, "rides"))
    rows = alice.scan(span.start, span.end)
    assert len(rows) == 2
    versions = list(alice.export(span, Timestamp(0, 0), alice.now()))
    assert {v.key for v in versions} == {kv.key for kv in rows}


def test_a_user_with_select_follows_the_table(db: DB, alice: KVFeedClient) -> None:
    span = table_span(_table_id(db, "rides"))
    with alice.rangefeed(span, alice.now(), values=False) as feed:
        event = next(iter(feed))
    assert isinstance(event, Checkpoint)


def test_a_table_without_select_is_refused_naming_it(db: DB, alice: KVFeedClient) -> None:
    span = table_span(_table_id(db, "payments"))
    with pytest.raises(
        PermissionDeniedError, match=r"user alice does not have SELECT privilege on .*payments"
    ):
        alice.scan(span.start, span.end)
    with (
        pytest.raises(PermissionDeniedError, match="SELECT privilege on relation payments"),
        alice.rangefeed(span, alice.now()) as feed,
    ):
        next(iter(feed))


def test_a_scan_that_crosses_into_another_table_is_refused(
    db: DB, alice: KVFeedClient, certs: Path
) -> None:
    rides, payments = table_span(_table_id(db, "rides")), table_span(_table_id(db, "payments"))
    # the client cuts a scan at range boundaries (here: tables), so its rides part passes
    with pytest.raises(PermissionDeniedError, match="SELECT privilege on relation payments"):
        alice.scan(rides.start, payments.end)
    # a crafted batch of one scan over both, sent past the client's routing
    transport = GrpcTransport(*parse_node_url(db.serving_url()), tls=ClientTLS.load(certs, "alice"))
    try:
        crossing = BatchRequest(Header(), (Scan(Span(rides.start, payments.end)),))
        with pytest.raises(PermissionDeniedError, match="reaches beyond table"):
            transport.send(crossing)
        with pytest.raises(PermissionDeniedError, match="system keys"):
            transport.send(BatchRequest(Header(), (Scan(Span(rides.start[:1], rides.end)),)))
        # the cluster's own methods stay the nodes' and root's
        with pytest.raises(PermissionDeniedError, match="Gossip: the raw KV API is only for"):
            call(transport.channel, "Gossip", {})
    finally:
        transport.close()


def test_system_keys_writes_and_transactions_are_refused(alice: KVFeedClient, db: DB) -> None:
    with pytest.raises(PermissionDeniedError, match="system keys"):
        alice.scan(b"\x01", b"\xff\xff")
    with pytest.raises(PermissionDeniedError, match="system keys"):
        alice.scan(CATALOG_PREFIX, prefix_end(CATALOG_PREFIX))  # users, grants, jobs
    with pytest.raises(PermissionDeniedError, match="system keys"):
        alice.get(catalog.job_key(1))
    rides = table_prefix(_table_id(db, "rides"))
    with pytest.raises(PermissionDeniedError, match="Put over the raw KV API is only for"):
        alice.put(rides + b"\x01", b"forged")
    with pytest.raises(PermissionDeniedError, match="transactions over the raw KV API"):
        alice.run_transaction(lambda txn: txn.get(rides))


def test_a_revoke_holds_for_the_next_read(db: DB, alice: KVFeedClient) -> None:
    db.sql("CREATE TABLE fares (id INT PRIMARY KEY)")
    db.sql("INSERT INTO fares VALUES (7)")
    span = table_span(_table_id(db, "fares"))
    db.sql("GRANT SELECT ON fares TO alice")
    assert len(alice.scan(span.start, span.end)) == 1
    db.sql("REVOKE SELECT ON fares FROM alice")
    with pytest.raises(PermissionDeniedError, match="SELECT privilege on relation fares"):
        alice.scan(span.start, span.end)


def test_an_admin_reads_any_table_but_no_system_keys(db: DB, certs: Path) -> None:
    make_certs_dir(certs.parent, users=("carol",))
    db.sql("CREATE USER carol")
    db.sql("GRANT admin TO carol")
    span = table_span(_table_id(db, "payments"))
    with open_client(_url(db, certs, "carol")) as carol:
        assert carol.scan(span.start, span.end)
        with pytest.raises(PermissionDeniedError, match="system keys"):
            carol.scan(CATALOG_PREFIX, prefix_end(CATALOG_PREFIX))


# The pure part: which spans stand for what.


def test_read_target_names_a_table_an_index_or_a_descriptor() -> None:
    rows = table_span(104)
    assert read_target(Read(rows)) == TableRead(104)
    index = Span(table_prefix(104) + b"\x8a", table_prefix(104) + b"\x8b")
    assert read_target(Read(index)) == TableRead(104)
    key = catalog.descriptor_key(104)
    assert read_target(Read(Span(key, key_next(key)))) == DescriptorRead(104)
    assert read_target(Read(Span.for_key(key), point=True)) == DescriptorRead(104)


def test_read_target_refuses_what_no_grant_covers() -> None:
    with pytest.raises(PermissionDeniedError, match="beyond table 104"):
        read_target(Read(Span(table_prefix(104), table_span(105).end)))
    key = catalog.descriptor_key(104)
    with pytest.raises(PermissionDeniedError, match="system keys"):
        read_target(Read(Span(key, catalog.descriptor_key(105))))  # two descriptors
    with pytest.raises(PermissionDeniedError, match="system keys"):
        read_target(Read(Span(b"\x00", b"\x01")))
    with pytest.raises(PermissionDeniedError, match="system keys"):
        read_target(Read(Span(CATALOG_PREFIX, prefix_end(CATALOG_PREFIX))))


def test_a_name_entry_is_read_only_as_a_point(db: DB) -> None:
    names = [
        kv.key
        for kv in db.scan(CATALOG_PREFIX, prefix_end(CATALOG_PREFIX))
        if catalog.is_name_key(kv.key)
    ]
    assert names
    assert read_target(Read(Span.for_key(names[0]), point=True)) == NameRead()
    with pytest.raises(PermissionDeniedError, match="system keys"):
        read_target(Read(Span(names[0], names[-1] + b"\x00")))


def test_reads_of_a_batch_lists_reads_and_refuses_the_rest() -> None:
    key = table_prefix(104) + b"\x01"
    reads = reads_of(BatchRequest(Header(), (Get(key), Scan(table_span(104)))))
    assert reads == [Read(Span.for_key(key), point=True), Read(table_span(104))]
    with pytest.raises(PermissionDeniedError, match="Put over the raw KV API"):
        reads_of(BatchRequest(Header(), (Get(key), Put(key, b"x"))))


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(
        [
            b"",
            TABLES_PREFIX,
            table_prefix(104),
            CATALOG_PREFIX,
            CATALOG_PREFIX + encode_value("desc"),
            catalog.descriptor_key(104),
            CATALOG_PREFIX + encode_value("ns"),
        ]
    ),
    st.binary(max_size=12),
    st.binary(min_size=1, max_size=12),
    st.booleans(),
)
def test_any_span_is_a_target_it_lies_in_or_refused(
    prefix: bytes, start: bytes, length: bytes, point: bool
) -> None:
    """Whatever span a crafted request names, the rule either names what holds all of it
    or refuses with PermissionDeniedError: no other error, and no span reaching outside."""
    first = prefix + start
    span = Span.for_key(first) if point else Span(first, first + length)
    try:
        target = read_target(Read(span, point=point))
    except PermissionDeniedError:
        return
    if isinstance(target, TableRead):
        assert table_span(target.table_id).contains(span)
    elif isinstance(target, DescriptorRead):
        assert span.start == catalog.descriptor_key(target.descriptor_id)
        assert span.end <= key_next(span.start)
    else:
        assert point and catalog.is_name_key(span.start)


def test_concurrent_reads_on_one_stream_are_each_checked(db: DB, alice: KVFeedClient) -> None:
    """Batches sent together share the client's stream to the node: each is checked on
    its own, and a refused one fails alone."""
    rides, payments = table_span(_table_id(db, "rides")), table_span(_table_id(db, "payments"))

    def read(i: int) -> str:
        span = rides if i % 2 == 0 else payments
        try:
            return f"{len(alice.scan(span.start, span.end))} rows"
        except PermissionDeniedError as exc:
            return "refused" if "on relation payments" in str(exc) else str(exc)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(read, range(400)))
    assert results == ["2 rows", "refused"] * 200
