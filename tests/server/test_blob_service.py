"""``Blob`` and ``BlobPut`` on a secure node: another node (or root) writes, reads,
renames, lists and deletes the files of a ``nodelocal://`` directory below the node's
external I/O directory, and nothing outside it; other users may call neither."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.sink import SinkError, TerminalSinkError
from feedkv.changefeed.sinks.node_blobs import BLOB_METHOD, PIECE_BYTES, NodeBlobs
from feedkv.errors import InvariantViolation, NodeUnavailableError
from feedkv.kv.address import parse_node_url
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, call_metadata
from feedkv.server import blob_service
from feedkv.spark.changefeed_job import node_blobs_of
from feedkv.testing.certs import make_certs_dir


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


@pytest.fixture(scope="module")
def extern(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node") / "extern"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, certs: Path, extern: Path) -> Iterator[DB]:
    store = tmp_path_factory.mktemp("secure") / "store"
    database = feedkv.connect(
        store,
        certs_dir=certs,
        listen="127.0.0.1:0",
        config=StoreConfig(sync=False),
        external_io_dir=extern,
    )
    database.sql("CREATE USER alice")
    yield database
    database.close()


def _transport(db: DB, certs: Path, user: str) -> GrpcTransport:
    return GrpcTransport(*parse_node_url(db.serving_url()), tls=ClientTLS.load(certs, user))


@pytest.fixture(scope="module")
def root(db: DB, certs: Path) -> Iterator[GrpcTransport]:
    transport = _transport(db, certs, "root")
    yield transport
    transport.close()


def test_a_file_goes_there_in_pieces_and_comes_back_whole(
    root: GrpcTransport, extern: Path
) -> None:
    blobs = NodeBlobs(lambda: root.channel, 1, "cdc/out")
    data = bytes(range(256)) * (PIECE_BYTES * 5 // 2 // 256)  # two and a half pieces
    blobs.put("2026-11-29/a.ndjson", data)
    assert (extern / "cdc" / "out" / "2026-11-29" / "a.ndjson").read_bytes() == data
    assert blobs.get("2026-11-29/a.ndjson") == data
    assert blobs.get("2026-11-29/missing") is None
    blobs.put("2026-11-29/empty", b"")
    assert blobs.get("2026-11-29/empty") == b""
    blobs.rename("2026-11-29/a.ndjson", "2026-11-29/b.ndjson")
    blobs.rename("2026-11-29/a.ndjson", "2026-11-29/b.ndjson")  # a retried rename
    assert sorted(blobs.list("2026-11-29/")) == ["2026-11-29/b.ndjson", "2026-11-29/empty"]
    blobs.delete("2026-11-29/b.ndjson")
    blobs.delete("2026-11-29/b.ndjson")  # already gone
    assert blobs.list("2026-11-29/") == ["2026-11-29/empty"]
    with pytest.raises(SinkError, match="it is gone"):
        blobs.rename("2026-11-29/never", "2026-11-29/there")


@pytest.mark.parametrize(
    ("directory", "name"),
    [("../escape", "f"), ("cdc", "../../escape"), ("/etc", "f"), ("cdc", "/tmp/f")],
)
def test_no_path_leaves_the_external_io_directory(
    root: GrpcTransport, extern: Path, directory: str, name: str
) -> None:
    blobs = NodeBlobs(lambda: root.channel, 1, directory)
    with pytest.raises(TerminalSinkError, match="outside the node's external I/O directory"):
        blobs.put(name, b"x")
    with pytest.raises(TerminalSinkError, match="outside"):
        blobs.get(name)
    with pytest.raises(TerminalSinkError, match="outside"):
        NodeBlobs(lambda: root.channel, 1, "cdc").rename("f", "../../escape")
    assert not (extern.parent / "escape").exists()


def test_a_malformed_request_is_refused_and_the_node_serves_on(root: GrpcTransport) -> None:
    stub = root.channel.unary_unary(f"/{SERVICE}/{BLOB_METHOD}")
    metadata = call_metadata(root.channel)
    for raw, why in (
        (b"\xc1", "not a message"),
        (b"\x80", "expected op, dir, name and to"),
        (b"\x84\xa2op\xa4sing\xa3dir\xa1d\xa4name\xa0\xa2to\xa0", "is not one of"),
        (b"\x84\xa2op\xa3get\xa3dir\xa0\xa4name\xa0\xa2to\xa0", "dir must be a path"),
        (b"\x84\xa2op\xa3put\xa3dir\xa1d\xa4name\xa1f\xa2to\xa0", "goes through BlobPut"),
    ):
        with pytest.raises(grpc.RpcError) as raised:
            stub(raw, timeout=10, metadata=metadata)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert why in str(raised.value.details())
    assert NodeBlobs(lambda: root.channel, 1, "ok").list("") == []


def test_a_user_other_than_root_may_not_call_it(db: DB, certs: Path, extern: Path) -> None:
    alice = _transport(db, certs, "alice")
    try:
        blobs = NodeBlobs(lambda: alice.channel, 1, "alice")
        with pytest.raises(TerminalSinkError, match="only for nodes and root"):
            blobs.put("f", b"x")
        with pytest.raises(TerminalSinkError, match="only for nodes and root"):
            blobs.list("")
    finally:
        alice.close()
    assert not (extern / "alice").exists()


def test_an_unreachable_node_is_a_retryable_error() -> None:
    channel = grpc.insecure_channel("127.0.0.1:1")
    try:
        blobs = NodeBlobs(lambda: channel, 4, "cdc")
        with pytest.raises(SinkError, match="node n4") as raised:
            blobs.put("f", b"x")
        assert not isinstance(raised.value, TerminalSinkError)
    finally:
        channel.close()


def test_a_spark_process_reaches_a_nodes_directory_through_its_client(db: DB, extern: Path) -> None:
    """A Spark driver or executor writes a ``nodelocal://`` sink's files through its
    client of the job's node, which dials the node the URI names (here the node itself,
    n1, the gateway)."""
    node_blobs_of(db.serving_url())(1, "spark/out").put("f.ndjson", b"{}\n")
    assert (extern / "spark" / "out" / "f.ndjson").read_bytes() == b"{}\n"


def test_a_node_not_known_yet_is_retryable_and_a_broken_dialler_fails_loudly() -> None:
    """The dialler's "not known yet" waits like a sink that is down; a bug behind it
    (a node dialled without gRPC) is not turned into a retry for ever."""

    def unknown() -> grpc.Channel:
        raise NodeUnavailableError("node n4 is not known to this node (yet)")

    def broken() -> grpc.Channel:
        raise InvariantViolation("node n4 is dialled without gRPC")

    with pytest.raises(SinkError, match="not known to this node") as raised:
        NodeBlobs(unknown, 4, "cdc").put("f", b"x")
    assert not isinstance(raised.value, TerminalSinkError)
    with pytest.raises(InvariantViolation, match="without gRPC"):
        NodeBlobs(broken, 4, "cdc").list("")


def test_a_file_past_the_limit_is_refused_and_leaves_nothing(
    root: GrpcTransport, extern: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put is written as its pieces come; one refused halfway leaves no file and no
    temporary one."""
    monkeypatch.setattr(blob_service, "_MAX_FILE_BYTES", 2 * PIECE_BYTES)
    blobs = NodeBlobs(lambda: root.channel, 1, "limit")
    with pytest.raises(TerminalSinkError, match="a file is at most"):
        blobs.put("big", b"x" * (PIECE_BYTES * 5 // 2))
    assert list((extern / "limit").iterdir()) == []
    blobs.put("small", b"x" * PIECE_BYTES)
    assert [p.name for p in (extern / "limit").iterdir()] == ["small"]
