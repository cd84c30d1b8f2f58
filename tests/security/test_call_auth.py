"""The credentials each call carries to a secure node's gRPC port, checked without a
node: certificate claims hold for their certificate's user only, from this cluster's
CA, until they expire; session tokens hold until they expire or their user's password
changes or the user goes; anything else is refused with a PermissionDeniedError."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.errors import PermissionDeniedError
from feedkv.security.call_auth import (
    AUTH_KEY,
    CERT_TOKEN_S,
    RECHECK_S,
    SESSION_S,
    CallVerifier,
    CertClaims,
    SessionClaims,
)
from feedkv.security.scram import make_verifier
from feedkv.security.secrets import load_key
from feedkv.testing.certs import make_certs_dir

NOW = time.time()  # the certificates made here are valid from now on
AUDIENCE = "cluster-1/n1"  # the node the verifiers here are


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


def _verifier(certs: Path, users: dict[str, str], wall: _Clock, mono: _Clock) -> CallVerifier:
    verifier = CallVerifier(
        (certs / "ca.crt").read_bytes(),
        load_key(certs / "secrets.key"),
        wall=wall,
        monotonic=mono,
    )
    verifier.attach(users.get)
    verifier.audience = AUDIENCE
    return verifier


def _claims(certs: Path, user: str, clock: _Clock) -> CertClaims:
    return CertClaims(user, certs / f"client.{user}.crt", certs / f"client.{user}.key", clock=clock)


def test_a_certificate_claim_proves_its_certificates_user(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {}, wall, mono)
    metadata = _claims(certs, "alice", wall).metadata(AUDIENCE)
    assert verifier.caller(metadata) == "alice"
    assert verifier.caller(metadata) == "alice"  # the second time from the cache
    wall.now += CERT_TOKEN_S
    with pytest.raises(PermissionDeniedError, match="the credentials of 'alice' have expired"):
        verifier.caller(metadata)


def test_a_claim_signed_for_another_user_is_refused(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {}, wall, mono)
    forged = CertClaims("root", certs / "client.alice.crt", certs / "client.alice.key", clock=wall)
    with pytest.raises(PermissionDeniedError, match="claim user 'root'"):
        verifier.caller(forged.metadata(AUDIENCE))


def test_a_claim_made_for_a_nodes_name_while_it_waited_for_init_holds_once_it_joins(
    certs: Path,
) -> None:
    """A node waiting for `feedkv init` answers to a random name, and the nodes that
    called it then make claims for that name for a while after it joined its cluster
    and took its cluster name: they hold (they were made for this node), while a claim
    for any other name is still refused."""
    wall = _Clock(NOW)
    verifier = CallVerifier(
        (certs / "ca.crt").read_bytes(), load_key(certs / "secrets.key"), wall=wall
    )
    waiting = verifier.audience
    made_while_waiting = _claims(certs, "alice", wall).metadata(waiting)
    verifier.audience = AUDIENCE
    assert verifier.caller(made_while_waiting) == "alice"
    assert verifier.caller(_claims(certs, "root", wall).metadata(AUDIENCE)) == "root"
    with pytest.raises(PermissionDeniedError, match="made for node 'unnamed-elsewhere'"):
        verifier.caller(_claims(certs, "root", wall).metadata("unnamed-elsewhere"))


def test_a_certificate_of_another_ca_is_refused(certs: Path, tmp_path: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {}, wall, mono)
    foreign = make_certs_dir(tmp_path, users=("root",))
    with pytest.raises(PermissionDeniedError, match="not issued by this cluster's CA"):
        verifier.caller(_claims(foreign, "root", wall).metadata(AUDIENCE))


def test_a_claim_with_a_signature_of_another_key_is_refused(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {}, wall, mono)
    alice = _claims(certs, "alice", wall).metadata(AUDIENCE)[0][1]
    root = _claims(certs, "root", wall).metadata(AUDIENCE)[0][1]
    claim, cert, _ = alice.removeprefix("cert ").split(".")
    signature = root.split(".")[2]
    with pytest.raises(PermissionDeniedError, match="not signed by their certificate's key"):
        verifier.caller(((AUTH_KEY, f"cert {claim}.{cert}.{signature}"),))


def _session(verifier: CallVerifier, user: str, password: str) -> SessionClaims:
    session = SessionClaims(user, password)
    session.attach(lambda u, p: verifier.login(u, p, "127.0.0.1"))
    return session


def test_a_session_holds_until_it_expires(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {"pam": make_verifier("pw-1")}, wall, mono)
    metadata = _session(verifier, "pam", "pw-1").metadata()
    assert verifier.caller(metadata) == "pam"
    wall.now += SESSION_S
    with pytest.raises(PermissionDeniedError, match="have expired: log in again"):
        verifier.caller(metadata)


def test_a_session_ends_when_the_password_changes_or_the_user_goes(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    users = {"pam": make_verifier("pw-1"), "dan": make_verifier("pw-2")}
    verifier = _verifier(certs, users, wall, mono)
    pam = _session(verifier, "pam", "pw-1").metadata()
    dan = _session(verifier, "dan", "pw-2").metadata()
    assert (verifier.caller(pam), verifier.caller(dan)) == ("pam", "dan")
    users["pam"] = make_verifier("pw-1")  # the same password, set again: a new verifier
    del users["dan"]
    assert verifier.caller(pam) == "pam"  # looked at again only after RECHECK_S
    mono.now += RECHECK_S
    for metadata, name in ((pam, "pam"), (dan, "dan")):
        with pytest.raises(PermissionDeniedError, match=f"the session of '{name}' has ended"):
            verifier.caller(metadata)


def test_a_session_token_not_made_by_the_cluster_is_refused(certs: Path, tmp_path: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    users = {"pam": make_verifier("pw-1")}
    ours = _verifier(certs, users, wall, mono)
    theirs = _verifier(make_certs_dir(tmp_path, users=()), users, wall, mono)
    with pytest.raises(PermissionDeniedError, match="not issued by this cluster"):
        ours.caller(_session(theirs, "pam", "pw-1").metadata())


def test_a_wrong_password_is_refused_as_an_unknown_user_is(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {"pam": make_verifier("pw-1")}, wall, mono)
    with pytest.raises(PermissionDeniedError, match=r"^wrong user name or password for 'pam'$"):
        verifier.login("pam", "pw-2", "10.0.0.1")
    with pytest.raises(PermissionDeniedError, match=r"^wrong user name or password for 'bob'$"):
        verifier.login("bob", "pw-2", "10.0.0.1")


def test_a_call_without_credentials_is_refused(certs: Path) -> None:
    verifier = _verifier(certs, {}, _Clock(NOW), _Clock(0.0))
    with pytest.raises(PermissionDeniedError, match="a call needs credentials"):
        verifier.caller((("user-agent", "grpc-python"),))


@settings(max_examples=300, deadline=None)
@given(token=st.text(max_size=200) | st.just("cert a.b.c") | st.just("session x.y"))
def test_malformed_credentials_are_refused_saying_so(certs: Path, token: str) -> None:
    verifier = _verifier(certs, {}, _Clock(NOW), _Clock(0.0))
    with pytest.raises(PermissionDeniedError):
        verifier.caller(((AUTH_KEY, token),))


def test_a_certificate_past_its_validity_is_refused(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {}, wall, mono)
    claims = _claims(certs, "alice", wall)
    wall.now += 6 * 366 * 86400.0  # certificates live five years
    with pytest.raises(PermissionDeniedError, match=r"the certificate .* has expired"):
        verifier.caller(claims.metadata(AUDIENCE))


def test_a_claim_holds_only_at_the_node_it_was_made_for(certs: Path) -> None:
    wall, mono = _Clock(NOW), _Clock(0.0)
    verifier = _verifier(certs, {}, wall, mono)
    alice = _claims(certs, "alice", wall)
    assert verifier.caller(alice.metadata(AUDIENCE)) == "alice"
    with pytest.raises(
        PermissionDeniedError,
        match=r"the credentials of 'alice' were made for node 'cluster-1/n2', not for this "
        r"node \('cluster-1/n1'\): a signed claim holds only at the node it was made for",
    ):
        verifier.caller(alice.metadata("cluster-1/n2"))
    # one made for no node at all (as before claims named their node) is refused too
    key = serialization.load_pem_private_key(
        (certs / "client.alice.key").read_bytes(), password=None
    )
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    claim = json.dumps({"u": "alice", "exp": int(NOW + 60)}).encode()
    cert = x509.load_pem_x509_certificate((certs / "client.alice.crt").read_bytes())
    signature = key.sign(b"feedkv grpc call v1\n" + claim, ec.ECDSA(hashes.SHA256()))
    token = ".".join(
        base64.urlsafe_b64encode(part).decode().rstrip("=")
        for part in (claim, cert.public_bytes(serialization.Encoding.DER), signature)
    )
    with pytest.raises(PermissionDeniedError, match="were made for node 'None'"):
        verifier.caller(((AUTH_KEY, f"cert {token}"),))
