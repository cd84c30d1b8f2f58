"""Revoked certificates: ``feedkv cert revoke`` writes ``ca.crl`` signed by the CA, and a
running secure node refuses a revoked user's certificate on the gRPC port (new calls and
claims it had already taken) and on the SQL port, each with a clear error, reading the
list again when the file changes; an unrevoked user's certificate still works. The HTTP
port takes no certificate (its login is a password), so a certificate does not log
anyone in there, revoked or not."""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from cryptography import x509

import feedkv
from feedkv import DB
from feedkv.errors import InvalidArgumentError, PermissionDeniedError
from feedkv.kv.store import StoreConfig
from feedkv.security.certs import create_ca, create_client
from feedkv.security.revocation import CRL_FILE, Revocations, revoke
from feedkv.server.http import OVERVIEW_PATH
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.waiting import wait_until


def _serial(cert: Path) -> int:
    return x509.load_pem_x509_certificate(cert.read_bytes()).serial_number


def _crl(certs: Path) -> x509.CertificateRevocationList:
    return x509.load_pem_x509_crl((certs / CRL_FILE).read_bytes())


# The list itself.


def test_revoke_writes_a_crl_signed_by_the_ca_by_file_or_serial(tmp_path: Path) -> None:
    certs = make_certs_dir(tmp_path, users=("root", "ann", "ben"))
    ann, ben = _serial(certs / "client.ann.crt"), _serial(certs / "client.ben.crt")

    serial, what = revoke(certs, tmp_path / "ca.key", str(certs / "client.ann.crt"))
    assert serial == ann and "CN=ann" in what
    revoke(certs, tmp_path / "ca.key", f"{ben:#x}")
    revoke(certs, tmp_path / "ca.key", str(ann))  # again: nothing changes

    crl = _crl(certs)
    ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    assert crl.is_signature_valid(ca.public_key())  # type: ignore[arg-type]
    assert sorted(r.serial_number for r in crl) == sorted([ann, ben])
    colons = ":".join(f"{b:02X}" for b in ann.to_bytes(20, "big").lstrip(b"\0"))
    assert revoke(certs, tmp_path / "ca.key", colons)[0] == ann  # as openssl prints it


def test_revoke_refuses_another_cas_key_and_a_target_that_is_neither(tmp_path: Path) -> None:
    certs = make_certs_dir(tmp_path / "ours")
    create_ca(tmp_path / "theirs", tmp_path / "theirs.key")
    with pytest.raises(InvalidArgumentError, match="does not belong to"):
        revoke(certs, tmp_path / "theirs.key", "12345")
    with pytest.raises(InvalidArgumentError, match="neither a certificate file nor a serial"):
        revoke(certs, tmp_path / "ours" / "ca.key", "client.nobody.crt")
    assert not (certs / CRL_FILE).exists()


def test_a_node_reads_the_list_again_when_it_changes(tmp_path: Path) -> None:
    certs = make_certs_dir(tmp_path, users=("ann",))
    ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    revocations = Revocations(certs / CRL_FILE, ca)
    ann = _serial(certs / "client.ann.crt")
    assert not revocations.is_revoked(ann)  # no file: nothing revoked
    revoke(certs, tmp_path / "ca.key", str(ann))
    assert revocations.is_revoked(ann)
    with pytest.raises(PermissionDeniedError, match=r"the certificate of 'ann' .* revoked"):
        revocations.check("ann", ann)

    # a list that is not the CA's: refused at start, ignored (the old one kept) later
    create_ca(tmp_path / "other", tmp_path / "other.key")
    create_client(tmp_path / "other", tmp_path / "other.key", "ann")
    revoke(tmp_path / "other", tmp_path / "other.key", "777")
    shutil.copy(tmp_path / "other" / CRL_FILE, certs / CRL_FILE)
    assert revocations.is_revoked(ann) and not revocations.is_revoked(777)
    with pytest.raises(InvalidArgumentError, match="not signed by the CA"):
        Revocations(certs / CRL_FILE, ca)


# A running node.


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice", "bob"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, pki: Path) -> Iterator[DB]:
    database = feedkv.connect(
        tmp_path_factory.mktemp("node") / "store",
        certs_dir=pki,
        listen="127.0.0.1:0",
        sql_addr="127.0.0.1:0",
        http_addr="127.0.0.1:0",
        config=StoreConfig(sync=False),
        changefeed_runner="thread",
    )
    database.sql("CREATE USER alice WITH PASSWORD 'alice-pw'")
    database.sql("CREATE USER bob")
    yield database
    database.close()


def _grpc(db: DB, pki: Path, user: str) -> DB:
    return feedkv.connect(db.serving_url().partition("?")[0], certs_dir=pki, user=user)


def _sql(db: DB, pki: Path, user: str) -> psycopg.Connection[tuple[object, ...]]:
    assert db.node is not None and db.node.sql_server is not None
    server = db.node.sql_server
    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=user,
        dbname="defaultdb",
        sslmode="verify-full",
        sslrootcert=str(pki / "ca.crt"),
        sslcert=str(pki / f"client.{user}.crt"),
        sslkey=str(pki / f"client.{user}.key"),
        connect_timeout=30,
    )


def _refused(call: object) -> str:
    """The refusal of ``call()`` (a PermissionDeniedError) once the node has read the
    new list ("": it still took the call)."""
    try:
        call()  # type: ignore[operator]
    except PermissionDeniedError as exc:
        return str(exc)
    return ""


def test_a_revoked_certificate_is_refused_on_every_port_and_another_still_works(
    db: DB, pki: Path
) -> None:
    assert db.node is not None
    http_url = db.node.http_url
    alice_before = _grpc(db, pki, "alice")
    try:
        assert {n.node_id for n in alice_before.nodes()} == {1}
        with _sql(db, pki, "alice") as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("alice",)

        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "feedkv.cli.main",
                "cert",
                "revoke",
                str(pki / "client.alice.crt"),
                "--certs-dir",
                str(pki),
                "--ca-key",
                str(pki.parent / "ca.key"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
        )
        assert run.returncode == 0, run.stderr
        assert f"revoked {pki / 'client.alice.crt'} (CN=alice" in run.stdout
        serial = _serial(pki / "client.alice.crt")
        expected = (
            f"the certificate of 'alice' (serial {serial:#x}) has been revoked (ca.crl): "
            "ask for a new one"
        )

        # gRPC: a client that already holds a claim the node took, and a new one
        message = wait_until(
            lambda: _refused(alice_before.nodes), timeout_s=30, what="the claim refused"
        )
        assert expected in message
        with pytest.raises(PermissionDeniedError) as refused, _grpc(db, pki, "alice") as alice:
            alice.nodes()
        assert expected in str(refused.value)
    finally:
        alice_before.close()

    # SQL: the client certificate is refused whatever user it asks for
    with pytest.raises(psycopg.OperationalError) as sql_refused:
        _sql(db, pki, "alice")
    assert expected in str(sql_refused.value)

    # HTTP: no certificate logs anyone in; alice's password still does
    context = ssl.create_default_context(cafile=pki / "ca.crt")
    context.load_cert_chain(pki / "client.alice.crt", pki / "client.alice.key")
    with httpx.Client(verify=context) as http:
        assert http.get(http_url + OVERVIEW_PATH).status_code == 401
        token = base64.b64encode(b"alice:alice-pw").decode()
        answer = http.get(http_url + OVERVIEW_PATH, headers={"Authorization": f"Basic {token}"})
        assert answer.status_code == 200 and answer.json()["user"] == "alice"

    # bob's certificate, not revoked, works on both ports
    with _grpc(db, pki, "bob") as bob:
        assert {n.node_id for n in bob.nodes()} == {1}
    with _sql(db, pki, "bob") as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("bob",)
