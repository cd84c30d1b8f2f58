"""A user with only a password (no client certificate) uses a secure node's gRPC API:
it logs in with its SQL password and reads what it may SELECT; a wrong password and an
unknown user get the same refusal; repeated failures are throttled; ALTER USER ...
PASSWORD and DROP USER end its session (its batches and new feeds are refused); a
password never travels without TLS."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import feedkv
from feedkv import DB
from feedkv.errors import InvalidArgumentError, PermissionDeniedError
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import SERVICE
from feedkv.sql import catalog
from feedkv.sql.row_codec import table_span
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root",))


@pytest.fixture(scope="module")
def ca_only(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Path:
    """What a password user holds: the cluster's CA certificate, nothing else."""
    path = tmp_path_factory.mktemp("ca-only")
    shutil.copy(certs / "ca.crt", path / "ca.crt")
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[DB]:
    """A secure embedded node on loopback; ``rides`` is a table users get SELECT on."""
    store = tmp_path_factory.mktemp("secure") / "store"
    database = feedkv.connect(
        store, certs_dir=certs, listen="127.0.0.1:0", config=StoreConfig(sync=False)
    )
    database.sql("CREATE TABLE rides (id INT PRIMARY KEY, city STRING)")
    database.sql("INSERT INTO rides VALUES (1, 'rome'), (2, 'oslo')")
    yield database
    database.close()


def _url(db: DB) -> str:
    return db.serving_url().partition("?")[0]


def _rides(db: DB) -> tuple[bytes, bytes]:
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    span = table_span(catalog.table_by_name(snapshot, database, "rides").id)
    return span.start, span.end


def _user(db: DB, name: str, password: str) -> None:
    db.sql(f"CREATE USER {name} WITH PASSWORD '{password}'")
    db.sql(f"GRANT SELECT ON rides TO {name}")


def test_a_password_user_reads_the_table_it_may_select(db: DB, ca_only: Path) -> None:
    _user(db, "pam", "pam-secret-1")
    with feedkv.connect(_url(db), certs_dir=ca_only, user="pam", password="pam-secret-1") as pam:
        assert len(pam.scan(*_rides(db))) == 2
        with pytest.raises(PermissionDeniedError, match="only root reads"):
            pam.scan(b"\x01", b"\xff\xff")


def test_a_wrong_password_and_an_unknown_user_are_refused_alike(
    db: DB, ca_only: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _user(db, "wes", "wes-secret-1")
    messages = []
    for user in ("wes", "nobody"):
        with pytest.raises(PermissionDeniedError) as refused:
            feedkv.connect(_url(db), certs_dir=ca_only, user=user, password="not-it-3b1")
        messages.append(str(refused.value).replace(repr(user), "USER"))
    assert messages[0] == messages[1] == "wrong user name or password for USER"
    logged = [r.getMessage() for r in caplog.records if "refused a gRPC login" in r.getMessage()]
    assert len(logged) == 2  # logged, without the password
    assert not any("not-it-3b1" in r.getMessage() for r in caplog.records)
    with pytest.raises(InvalidArgumentError, match="an empty password cannot log in"):
        feedkv.connect(_url(db), certs_dir=ca_only, user="wes", password="")


def test_repeated_failed_logins_are_throttled(db: DB, ca_only: Path) -> None:
    _user(db, "tim", "tim-secret-1")
    for _ in range(5):
        with pytest.raises(PermissionDeniedError, match="wrong user name or password"):
            feedkv.connect(_url(db), certs_dir=ca_only, user="tim", password="guess")
    with pytest.raises(PermissionDeniedError, match="too many failed logins for 'tim'"):
        feedkv.connect(_url(db), certs_dir=ca_only, user="tim", password="tim-secret-1")


def _ended(client: DB, span: tuple[bytes, bytes]) -> str:
    """The refusal of a read whose session has ended ("": not yet; a dropped user's
    grants are gone at once, so a read may first be refused for that)."""
    try:
        client.scan(*span)
    except PermissionDeniedError as exc:
        return str(exc) if "has ended" in str(exc) else ""
    return ""


def test_a_password_change_ends_the_session(db: DB, ca_only: Path) -> None:
    _user(db, "ann", "ann-secret-1")
    span = _rides(db)
    with feedkv.connect(_url(db), certs_dir=ca_only, user="ann", password="ann-secret-1") as ann:
        assert len(ann.scan(*span)) == 2
        db.sql("ALTER USER ann WITH PASSWORD 'ann-secret-2'")
        message = wait_until(lambda: _ended(ann, span), what="ann's session to end")
        assert "the session of 'ann' has ended" in message
        with ThreadPoolExecutor(8) as pool:  # reads at once go on the stream of batches
            reads = [pool.submit(ann.scan, *span) for _ in range(16)]
            for read in reads:
                with pytest.raises(PermissionDeniedError, match="has ended"):
                    read.result(timeout=60)
        # a new feed's stream to the node is refused as its batches are
        with (
            pytest.raises(PermissionDeniedError, match="has ended"),
            ann.rangefeed(span, Timestamp(1, 0)) as feed,
        ):
            next(iter(feed))
    with feedkv.connect(_url(db), certs_dir=ca_only, user="ann", password="ann-secret-2") as ann:
        assert len(ann.scan(*span)) == 2


def test_drop_user_ends_the_session(db: DB, ca_only: Path) -> None:
    _user(db, "dan", "dan-secret-1")
    span = _rides(db)
    with feedkv.connect(_url(db), certs_dir=ca_only, user="dan", password="dan-secret-1") as dan:
        assert len(dan.scan(*span)) == 2
        db.sql("DROP USER dan")
        message = wait_until(lambda: _ended(dan, span), what="dan's session to end")
        assert "the session of 'dan' has ended" in message


def test_a_password_is_never_sent_without_tls(db: DB) -> None:
    with pytest.raises(InvalidArgumentError, match="a password is sent only over TLS"):
        feedkv.connect(_url(db), user="pam", password="pam-secret-1")


def test_a_certificate_user_needs_no_password(db: DB, certs: Path) -> None:
    with feedkv.connect(_url(db), certs_dir=certs) as root:
        assert len(root.scan(*_rides(db))) == 2


@pytest.fixture(scope="module")
def login_stub(db: DB, ca_only: Path) -> Iterator[Any]:
    credentials = grpc.ssl_channel_credentials((ca_only / "ca.crt").read_bytes())
    with grpc.secure_channel(_url(db).removeprefix("feedkv://"), credentials) as channel:
        yield channel.unary_unary(f"/{SERVICE}/Login")


_FIELD = st.text(max_size=20) | st.integers(-(2**63), 2**63) | st.none() | st.binary(max_size=10)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    request=st.binary(max_size=100)
    | st.builds(lambda u, p: msgpack.packb({"user": u, "password": p}), _FIELD, _FIELD)
)
def test_malformed_logins_are_refused_saying_so(login_stub: Any, request: bytes) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        login_stub(request, timeout=30)
    assert refused.value.code() in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
    ), refused.value.details()
