"""A certificate claim names the node it is made for: a claim captured at one node (or
read from its log) and replayed to another is refused there with UNAUTHENTICATED and a
message that says so; clients ask each node who it is and make their claims for it, so
they reach every node as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import SERVICE
from feedkv.security.call_auth import AUDIENCE_METHOD, AUDIENCE_TTL_S, CertClaims
from feedkv.security.tls import AUDIENCE_PATH, node_audience
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.waiting import wait_until


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root",))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[tuple[DB, DB]]:
    """Two secure nodes on loopback with the same certs directory (one node.crt)."""
    base = tmp_path_factory.mktemp("nodes")
    opened = [
        feedkv.connect(
            base / name, certs_dir=certs, listen="127.0.0.1:0", config=StoreConfig(sync=False)
        )
        for name in ("a", "b")
    ]
    yield opened[0], opened[1]
    for db in opened:
        db.close()


def _address(db: DB) -> str:
    return db.serving_url().partition("?")[0].removeprefix("feedkv://")


def _channel(db: DB, certs: Path) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials((certs / "ca.crt").read_bytes())
    return grpc.secure_channel(_address(db), credentials)


def test_a_claim_made_for_one_node_is_refused_by_another(nodes: tuple[DB, DB], certs: Path) -> None:
    a, b = nodes
    root = CertClaims("root", certs / "client.root.crt", certs / "client.root.key")
    with _channel(a, certs) as to_a, _channel(b, certs) as to_b:
        audience_a, audience_b = node_audience(to_a), node_audience(to_b)
        assert audience_a != audience_b
        made_for_a = root.metadata(audience_a)
        now_at_a = to_a.unary_unary(f"/{SERVICE}/Now")
        now_at_b = to_b.unary_unary(f"/{SERVICE}/Now")

        assert now_at_a(b"", metadata=made_for_a, timeout=30)  # where it was made for

        with pytest.raises(grpc.RpcError) as refused:
            now_at_b(b"", metadata=made_for_a, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert refused.value.details() == (
            f"Now: the credentials of 'root' were made for node {audience_a!r}, not for "
            f"this node ({audience_b!r}): a signed claim holds only at the node it was "
            "made for"
        )
        assert now_at_b(b"", metadata=root.metadata(audience_b), timeout=30)


def test_clients_make_their_claims_for_each_node_they_reach(
    nodes: tuple[DB, DB], certs: Path
) -> None:
    for node in nodes:
        with feedkv.connect(f"feedkv://{_address(node)}", certs_dir=certs) as client:
            client.put(b"k", b"v")
            assert client.get(b"k") == b"v"


def test_a_node_alone_is_named_for_its_store(nodes: tuple[DB, DB], certs: Path) -> None:
    for node in nodes:
        assert node.node is not None
        with _channel(node, certs) as channel:
            assert node_audience(channel) == node.node.node_id


def test_the_audience_call_is_the_node_services() -> None:
    assert f"/{SERVICE}/{AUDIENCE_METHOD}" == AUDIENCE_PATH


def test_members_of_a_cluster_are_named_for_the_cluster_and_their_node_id(
    tmp_path: Path, certs: Path
) -> None:
    config = StoreConfig(sync=False)
    first = feedkv.connect(
        tmp_path / "n1", certs_dir=certs, listen="127.0.0.1:0", join=[], config=config
    )
    try:
        second = feedkv.connect(
            tmp_path / "n2",
            certs_dir=certs,
            listen="127.0.0.1:0",
            join=[_address(first)],
            config=config,
        )
        try:
            with _channel(first, certs) as to_first, _channel(second, certs) as to_second:
                one, two = node_audience(to_first), node_audience(to_second)
            cluster, _, node = one.partition("/")
            assert (node, two) == ("n1", f"{cluster}/n2")
            # the nodes reach each other with claims made for each other
            assert {n.node_id for n in second.nodes()} == {1, 2}
            second.put(b"k", b"v")
            assert first.get(b"k") == b"v"
        finally:
            second.close()
    finally:
        first.close()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_client_asks_the_node_again_in_the_background_after_a_while(
    tmp_path: Path, certs: Path
) -> None:
    db = feedkv.connect(
        tmp_path / "store", certs_dir=certs, listen="127.0.0.1:0", config=StoreConfig(sync=False)
    )
    try:
        assert db.node is not None and db.node.tls is not None
        verifier = db.node.tls.verifier
        clock = _Clock()
        with _channel(db, certs) as channel:
            first = node_audience(channel, clock=clock)
            assert first == verifier.audience
            verifier.audience = "another-identity"  # as another node come up at the address
            assert node_audience(channel, clock=clock) == first  # known for a while
            clock.now += AUDIENCE_TTL_S
            # NB: answered with the known name, or the new one if the refresh this call
            # started in the background came back already (a race the test cannot order)
            assert node_audience(channel, clock=clock) in (first, "another-identity")
            wait_until(
                lambda: node_audience(channel, clock=clock) == "another-identity",
                timeout_s=30,
                what="the new identity",
            )
    finally:
        db.close()
