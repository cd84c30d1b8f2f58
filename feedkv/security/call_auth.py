"""Who makes a call on a secure node's gRPC port: a token in every call's metadata.

Why not TLS client certificates: grpcio's server credentials either require a client
certificate (and verify it) or do not ask for one at all; there is no "verify it if
given" mode (``server_credentials_ssl`` picks between C-core's
``REQUEST_AND_REQUIRE_..._AND_VERIFY`` and ``DONT_REQUEST``). A port that requires one
locks out a user who has only a password, as most CockroachDB users do. So the port asks
for no client certificate (TLS still proves the *node* to the client and encrypts), and
every call carries ``authorization`` metadata in one of two forms:

``cert <claim>.<certificate>.<signature>``
    For nodes and certificate users. The client signs a claim (user, audience, expiry)
    with its certificate's private key; the node checks that the certificate was issued
    by the cluster's CA, is valid now, allows client authentication and names the user
    (its CN) and is not revoked (:mod:`feedkv.security.revocation`, looked at on every
    call), that the signature is the certificate key's, and that the claim's
    audience is this node. Only the holder of the key can make one; a claim lives
    :data:`CERT_TOKEN_S` and the client makes a new one before it ends.

    The audience binds a claim to the node it was made for, so one captured by a node
    (or read from a log) cannot be replayed to another. It is the node's identity,
    :attr:`CallVerifier.audience`: ``<cluster id>/n<node id>`` for a member of a
    cluster, the store's own id for a node alone. The client asks the node for it
    (:data:`AUDIENCE_METHOD`, a call that needs no credentials) over the TLS channel
    that has already proved the node holds a certificate of the cluster's CA, and asks
    again every :data:`AUDIENCE_TTL_S` (a node of another identity that came up at the
    address answers with its own). Why not what the client dialed (host and port, or the
    TLS server name): a node cannot reliably know every name it is reached by (DNS
    names, ``localhost``, a forwarded port); nor the server certificate's fingerprint:
    grpcio does not show the client the peer's certificate, and nodes often share one
    ``node.crt`` (one per host is not required), which would make them one audience.

``session <claim>.<mac>``
    For password users, after ``Login`` (as CockroachDB's HTTP login gives a session
    cookie): the node checks the password against the user's stored SCRAM verifier
    (the same one the SQL port checks) and answers with a token that lives
    :data:`SESSION_S`, MACed with a key derived from the cluster's ``secrets.key``
    (which every node holds, :mod:`feedkv.security.secrets`), so any node of the
    cluster takes it. The claim holds a fingerprint of the verifier it was issued
    against: ``ALTER USER ... PASSWORD`` or ``DROP USER`` ends every session of the user,
    at the latest :data:`RECHECK_S` later, when a node looks at the user again.

A wrong password and an unknown user get the same answer, and failed logins are
throttled per user and address (:class:`~feedkv.security.login_throttle.LoginThrottle`).
A call without a token, or with one that does not hold, is refused with a message that
says what to do. Cost: a token is verified once (an ECDSA check, or a MAC) and then found
in a cache; a session's user is looked at again at most every :data:`RECHECK_S`.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from feedkv.errors import InvalidArgumentError, PermissionDeniedError
from feedkv.security.login_throttle import LoginThrottle
from feedkv.security.revocation import Revocations
from feedkv.security.scram import check_login

__all__ = [
    "AUDIENCE_METHOD",
    "AUDIENCE_TTL_S",
    "AUTH_KEY",
    "CERT_TOKEN_S",
    "RECHECK_S",
    "SESSION_S",
    "CallVerifier",
    "CertClaims",
    "Login",
    "SessionClaims",
]

AUTH_KEY = "authorization"  # the metadata key (gRPC keys are lower case)
AUDIENCE_METHOD = "Audience"  # the node's identity, as UTF-8 bytes; needs no credentials
AUDIENCE_TTL_S = 60.0
CERT_TOKEN_S = 600.0
SESSION_S = 3600.0
RECHECK_S = 1.0
_CERT_LABEL = b"feedkv grpc call v1\n"
_SESSION_LABEL = b"feedkv grpc session v1"
_MAX_CACHED = 10_000
Metadata = tuple[tuple[str, str], ...]
# The user's stored SCRAM verifier (None: no such user, or no password).
Verifiers = Callable[[str], str | None]
# Logs ``user`` in with ``password``: ``(session token, seconds it lives)``.
Login = Callable[[str, str], tuple[str, float]]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _fingerprint(verifier: str) -> str:
    return hashlib.sha256(verifier.encode()).hexdigest()[:16]


class CertClaims:
    """The client side of a certificate user's (or a node's) calls: makes a signed
    claim from the certificate and key files and makes a new one when half its life is
    gone. Thread-safe."""

    def __init__(
        self, user: str, cert: Path, key: Path, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.user = user
        self._cert_der = x509.load_pem_x509_certificate(cert.read_bytes()).public_bytes(
            serialization.Encoding.DER
        )
        loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise InvalidArgumentError(f"{key} is not an EC key (feedkv cert makes P-256 keys)")
        self._key = loaded
        self._clock = clock
        self._lock = threading.Lock()
        self._made: dict[str, tuple[Metadata, float]] = {}  # audience: (metadata, renew at)

    def metadata(self, audience: str) -> Metadata:
        """The metadata of a call to the node whose identity is ``audience``."""
        now = self._clock()
        made = self._made.get(audience)
        if made is not None and now < made[1]:
            return made[0]
        with self._lock:
            made = self._made.get(audience)
            if made is None or now >= made[1]:
                claim = json.dumps(
                    {"u": self.user, "aud": audience, "exp": int(now + CERT_TOKEN_S)}
                ).encode()
                signature = self._key.sign(_CERT_LABEL + claim, ec.ECDSA(hashes.SHA256()))
                token = f"{_b64(claim)}.{_b64(self._cert_der)}.{_b64(signature)}"
                if len(self._made) >= _MAX_CACHED:
                    self._made.clear()
                made = self._made[audience] = (
                    ((AUTH_KEY, f"cert {token}"),),
                    now + CERT_TOKEN_S / 2,
                )
            return made[0]


class SessionClaims:
    """The client side of a password user's calls: logs in (``login``, given by the
    transport that reaches a node) on first use and again when half the session's life
    is gone. The password stays in this object, never in a call but ``Login``."""

    def __init__(
        self, user: str, password: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not password:
            raise InvalidArgumentError("an empty password cannot log in")
        self.user = user
        self._password = password
        self._clock = clock
        self._lock = threading.Lock()
        self._login: Login | None = None
        self._metadata: Metadata = ()
        self._renew_at = 0.0

    def __repr__(self) -> str:
        return f"SessionClaims(user={self.user!r}, password=<redacted>)"

    def attach(self, login: Login) -> None:
        """How to log in (the first transport's ``Login``; later calls keep it)."""
        with self._lock:
            if self._login is None:
                self._login = login

    def metadata(self, audience: str | None = None) -> Metadata:
        """``audience``: not used (a session holds at every node of the cluster)."""
        if self._clock() < self._renew_at:
            return self._metadata
        with self._lock:
            now = self._clock()
            if now >= self._renew_at:
                if self._login is None:
                    raise InvalidArgumentError("a password session has no node to log in to")
                token, lifetime = self._login(self.user, self._password)
                self._metadata = ((AUTH_KEY, f"session {token}"),)
                self._renew_at = now + lifetime / 2
            return self._metadata


@dataclass(slots=True)
class _Known:
    user: str
    expires: float  # wall seconds
    fingerprint: str | None  # a session's: the verifier it was issued against
    checked: float  # monotonic seconds of the last look at the user
    serial: int | None = None  # a claim's: its certificate's serial number


class CallVerifier:
    """The node's side: who a call's metadata proves its caller is (:meth:`caller`),
    and the ``Login`` that turns a password into a session (:meth:`login`).
    ``verifiers(user)``: the user's stored verifier, read when needed (the node sets it
    once it can read its catalog: :meth:`attach`). :attr:`audience`: the identity
    certificate claims must be made for (a random one until the node sets its own);
    claims made for the names it had before still hold here.
    Thread-safe."""

    def __init__(
        self,
        ca_cert: bytes,
        secrets_key: bytes,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        revocations: Revocations | None = None,
    ) -> None:
        self._ca = x509.load_pem_x509_certificate(ca_cert)
        self._revocations = revocations
        self._session_key = hmac.new(secrets_key, _SESSION_LABEL, hashlib.sha256).digest()
        self._wall = wall
        self._monotonic = monotonic
        self._verifiers: Verifiers | None = None
        self._audience = f"unnamed-{secrets.token_hex(8)}"
        # NB: a node waiting for `feedkv init` answers to its random name, and the
        # nodes that asked it then keep making claims for that name until they ask
        # again (AUDIENCE_TTL_S): it was this process's and no other's, so they hold
        self._former: set[str] = set()
        self._throttle = LoginThrottle()
        self._lock = threading.Lock()
        self._known: dict[str, _Known] = {}

    @property
    def audience(self) -> str:
        return self._audience

    @audience.setter
    def audience(self, name: str) -> None:
        with self._lock:
            if name != self._audience:
                self._former.add(self._audience)
                self._audience = name

    def attach(self, verifiers: Verifiers) -> None:
        self._verifiers = verifiers

    def caller(self, metadata: Sequence[tuple[str, str | bytes]]) -> str:
        """The user the call's ``authorization`` proves; PermissionDeniedError says
        why not."""
        token = next((str(v) for k, v in metadata if k == AUTH_KEY), None)
        if token is None:
            raise PermissionDeniedError(
                "this node is secure: a call needs credentials (connect with certs_dir= "
                "and user= for a client certificate, or user= and password=)"
            )
        with self._lock:
            known = self._known.get(token)
        now = self._wall()
        if known is None:
            known = self._verify(token)
        if now >= known.expires:
            with self._lock:
                self._known.pop(token, None)
            raise PermissionDeniedError(
                f"the credentials of {known.user!r} have expired: log in again"
            )
        if known.fingerprint is not None and self._monotonic() - known.checked >= RECHECK_S:
            self._recheck(token, known)
        if known.serial is not None and self._revocations is not None:
            # NB: on every call, so a revocation also ends the claims already taken
            self._revocations.check(known.user, known.serial)
        return known.user

    def _verify(self, token: str) -> _Known:
        kind, _, body = token.partition(" ")
        try:
            if kind == "cert":
                known = self._verify_cert(body)
            elif kind == "session":
                known = self._verify_session(body)
                self._recheck(token, known)
            else:
                raise PermissionDeniedError(f"unknown credentials {kind[:20]!r}")
        except (ValueError, binascii.Error, KeyError, TypeError) as exc:
            raise PermissionDeniedError(f"malformed credentials: {exc}") from None
        with self._lock:
            if len(self._known) >= _MAX_CACHED:
                now = self._wall()
                for stale in [t for t, k in self._known.items() if k.expires <= now]:
                    del self._known[stale]
                if len(self._known) >= _MAX_CACHED:
                    self._known.clear()
            self._known[token] = known
        return known

    def _verify_cert(self, body: str) -> _Known:
        claim_b64, cert_b64, signature_b64 = body.split(".")
        claim = _unb64(claim_b64)
        cert = x509.load_der_x509_certificate(_unb64(cert_b64))
        try:
            cert.verify_directly_issued_by(self._ca)
        except (InvalidSignature, ValueError, TypeError):
            raise PermissionDeniedError(
                "the certificate in the call's credentials was not issued by this cluster's CA"
            ) from None
        now = datetime.datetime.fromtimestamp(self._wall(), datetime.UTC)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise PermissionDeniedError("the certificate in the call's credentials has expired")
        try:
            usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usage = None
        if usage is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usage:
            raise PermissionDeniedError("the certificate is not for client authentication")
        key = cert.public_key()
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise PermissionDeniedError("the certificate's key is not an EC key")
        try:
            key.verify(_unb64(signature_b64), _CERT_LABEL + claim, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise PermissionDeniedError(
                "the call's credentials are not signed by their certificate's key"
            ) from None
        fields = json.loads(claim)
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        user = str(fields["u"])
        if not names or names[0].value != user:
            raise PermissionDeniedError(
                f"the credentials claim user {user!r}, their certificate is not theirs"
            )
        audience = fields.get("aud")
        if audience != self._audience and audience not in self._former:
            raise PermissionDeniedError(
                f"the credentials of {user!r} were made for node {str(audience)[:80]!r}, "
                f"not for this node ({self.audience!r}): a signed claim holds only at the "
                "node it was made for"
            )
        expires = min(float(fields["exp"]), cert.not_valid_after_utc.timestamp())
        return _Known(user, expires, None, self._monotonic(), cert.serial_number)

    def _verify_session(self, body: str) -> _Known:
        claim_b64, mac_b64 = body.split(".")
        claim = _unb64(claim_b64)
        expected = hmac.new(self._session_key, claim, hashlib.sha256).digest()
        if not hmac.compare_digest(expected, _unb64(mac_b64)):
            raise PermissionDeniedError("the session token was not issued by this cluster")
        fields = json.loads(claim)
        return _Known(str(fields["u"]), float(fields["exp"]), str(fields["v"]), 0.0)

    def _recheck(self, token: str, known: _Known) -> None:
        """A session holds while its user still has the password it was issued for."""
        verifier = self._verifiers(known.user) if self._verifiers is not None else None
        if verifier is None or _fingerprint(verifier) != known.fingerprint:
            with self._lock:
                self._known.pop(token, None)
            raise PermissionDeniedError(
                f"the session of {known.user!r} has ended (the user was dropped or its "
                "password changed): log in again"
            )
        known.checked = self._monotonic()

    def login(self, user: str, password: str, host: str) -> tuple[str, float]:
        """A session token for ``user`` and the seconds it lives, if ``password`` is
        the user's; PermissionDeniedError otherwise (the same for an unknown user)."""
        wait = self._throttle.retry_after(user, host, self._monotonic())
        if wait > 0:
            raise PermissionDeniedError(
                f"too many failed logins for {user!r}: try again in {wait:.0f} s"
            )
        verifier = self._verifiers(user) if self._verifiers is not None and user else None
        # NB: an unknown user's password is checked too (check_login), so the answer
        # takes as long as a wrong password's and does not tell them apart
        accepted = check_login(verifier, password)
        if verifier is None or not accepted:
            self._throttle.failed(user, host, self._monotonic())
            raise PermissionDeniedError(f"wrong user name or password for {user!r}")
        self._throttle.succeeded(user, host)
        claim = json.dumps(
            {"u": user, "exp": self._wall() + SESSION_S, "v": _fingerprint(verifier)}
        ).encode()
        mac = hmac.new(self._session_key, claim, hashlib.sha256).digest()
        return f"{_b64(claim)}.{_b64(mac)}", SESSION_S
