"""``HoldHistory`` on a secure node: a user holding CHANGEFEED on a table places, renews
and releases a hold on its history through the node; without it, or for another table's
hold, the node refuses and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import msgpack
import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.hold_calls import METHOD, HoldRequest, call_hold
from feedkv.changefeed.jobs import HistoryHold
from feedkv.errors import PermissionDeniedError
from feedkv.kv.address import parse_node_url
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, call_metadata
from feedkv.sql import catalog
from feedkv.testing.certs import make_certs_dir

HOUR_NS = 3600 * 1_000_000_000


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[DB]:
    config = StoreConfig(sync=False)
    store = tmp_path_factory.mktemp("secure") / "store"
    database = feedkv.connect(store, certs_dir=certs, listen="127.0.0.1:0", config=config)
    database.sql("CREATE USER alice")
    database.sql("CREATE TABLE rides (id INT PRIMARY KEY)")
    database.sql("CREATE TABLE payments (id INT PRIMARY KEY)")
    database.sql("GRANT SELECT ON rides TO alice")
    database.sql("GRANT SELECT ON payments TO alice")
    yield database
    database.close()


@pytest.fixture(scope="module")
def alice(db: DB, certs: Path) -> Iterator[GrpcTransport]:
    url = db.serving_url()
    transport = GrpcTransport(*parse_node_url(url), tls=ClientTLS.load(certs, "alice"))
    yield transport
    transport.close()


def _table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return catalog.table_by_name(snapshot, database, name).id


def _holds(db: DB) -> dict[str, HistoryHold]:
    holds = (HistoryHold.from_json(kv.value) for kv in db.scan(*catalog.hold_span()))
    return {hold.id: hold for hold in holds}


def test_without_changefeed_the_node_places_no_hold(db: DB, alice: GrpcTransport) -> None:
    since = db.now()
    request = HoldRequest("h-select", _table_id(db, "rides"), since, HOUR_NS)
    with pytest.raises(PermissionDeniedError, match="CHANGEFEED privilege on relation rides"):
        call_hold(alice.channel, request)
    assert "h-select" not in _holds(db)


def test_with_changefeed_a_hold_is_placed_renewed_and_released(
    db: DB, alice: GrpcTransport
) -> None:
    db.sql("GRANT CHANGEFEED ON rides TO alice")
    rides = _table_id(db, "rides")
    first = db.now()
    call_hold(alice.channel, HoldRequest("h1", rides, first, HOUR_NS))
    placed = _holds(db)["h1"]
    assert (placed.table_id, placed.since) == (rides, first)
    assert first.wall < placed.expires <= db.now().wall + HOUR_NS  # from the node's clock
    later = db.now()
    call_hold(alice.channel, HoldRequest("h1", rides, later, HOUR_NS))
    assert _holds(db)["h1"].since == later
    # another table's hold of the same id is refused, even for a table alice may use
    db.sql("GRANT CHANGEFEED ON payments TO alice")
    payments = _table_id(db, "payments")
    with pytest.raises(PermissionDeniedError, match="holds another table"):
        call_hold(alice.channel, HoldRequest("h1", payments, later, HOUR_NS))
    call_hold(alice.channel, HoldRequest("h1", rides, None))
    assert "h1" not in _holds(db)


def test_a_malformed_request_is_refused_saying_why(alice: GrpcTransport) -> None:
    stub = alice.channel.unary_unary(f"/{SERVICE}/{METHOD}")
    with pytest.raises(grpc.RpcError) as info:
        stub(msgpack.packb({"id": "x"}), timeout=10, metadata=call_metadata(alice.channel))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "expected id, table, since and after_ns" in str(info.value.details())
