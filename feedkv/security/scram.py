"""SCRAM-SHA-256 passwords (RFC 5802, RFC 7677), as PostgreSQL and CockroachDB keep them.

Only the *verifier* is stored: ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``
(base64 parts, PostgreSQL's format), from which the password cannot be read back and
with which a server checks a client's proof without ever seeing the password.

:class:`ScramExchange` is the server's side of one login, a pure state machine: it takes
the client's first message and returns the server's; takes the client's final message
and returns the server's signature, or raises :class:`ScramError` (wrong password, bad
message). Channel binding is not offered (``n,,`` / ``y,,`` clients only), as TLS
termination here is the node's own and SCRAM-SHA-256-PLUS needs the TLS finished bytes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

from feedkv.errors import InvalidArgumentError, PermissionDeniedError

__all__ = [
    "MECHANISM",
    "ScramError",
    "ScramExchange",
    "check_login",
    "check_password",
    "make_verifier",
    "mock_verifier",
    "parse_verifier",
    "unknown_user_verifier",
]

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # PostgreSQL's default
_PREFIX = f"{MECHANISM}$"


class ScramError(PermissionDeniedError):
    """The exchange failed: a malformed message, or a proof that does not match."""


def make_verifier(password: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """The verifier to store for ``password`` (a fresh random salt unless given)."""
    if not password:
        raise InvalidArgumentError("a password may not be empty")
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    return f"{_PREFIX}{iterations}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"


def parse_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    """``(iterations, salt, stored_key, server_key)``; InvalidArgumentError if malformed."""
    try:
        if not verifier.startswith(_PREFIX):
            raise ValueError("not SCRAM-SHA-256")
        params, keys = verifier.removeprefix(_PREFIX).split("$")
        iterations, salt = params.split(":")
        stored, server = keys.split(":")
        parsed = (
            int(iterations),
            base64.b64decode(salt, validate=True),
            base64.b64decode(stored, validate=True),
            base64.b64decode(server, validate=True),
        )
    except ValueError as exc:
        raise InvalidArgumentError(f"not a SCRAM-SHA-256 verifier: {exc}") from exc
    if parsed[0] < 1 or len(parsed[2]) != 32 or len(parsed[3]) != 32:
        raise InvalidArgumentError("not a SCRAM-SHA-256 verifier: bad iterations or key length")
    return parsed


def check_password(verifier: str, password: str) -> bool:
    """Whether ``password`` is the one ``verifier`` was made from (a login that sends
    the password itself, over TLS: the HTTP port's Basic authentication)."""
    iterations, salt, stored, _server = parse_verifier(verifier)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return hmac.compare_digest(hashlib.sha256(_hmac(salted, b"Client Key")).digest(), stored)


class ScramExchange:
    """The server's side of one SCRAM-SHA-256 login against ``verifier``."""

    def __init__(self, verifier: str, *, nonce: str | None = None) -> None:
        self._iterations, self._salt, self._stored, self._server_key = parse_verifier(verifier)
        self._server_nonce = nonce or _b64(secrets.token_bytes(18))
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def server_first(self, client_first: bytes) -> bytes:
        """Answer ``n,,n=<user>,r=<client nonce>`` with the salt, iterations and nonce."""
        text = _text(client_first)
        gs2, sep, bare = text.partition(",,")
        if not sep or gs2 not in ("n", "y"):
            raise ScramError("SCRAM channel binding is not supported: send n,, or y,,")
        attrs = _attributes(bare)
        client_nonce = attrs.get("r", "")
        if not client_nonce or "m" in attrs:
            raise ScramError("malformed SCRAM client-first-message: no nonce")
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(self._salt)},i={self._iterations}"
        return self._server_first.encode()

    def server_final(self, client_final: bytes) -> bytes:
        """Check ``c=...,r=...,p=<proof>``: returns ``v=<server signature>``, or raises
        :class:`ScramError` when the proof is wrong."""
        if not self._nonce:
            raise ScramError("SCRAM client-final-message before the first")
        text = _text(client_final)
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM client-final-message: no proof")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise ScramError("SCRAM nonce mismatch")
        if attrs.get("c") not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise ScramError("SCRAM channel binding is not supported")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise ScramError("malformed SCRAM proof") from exc
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._stored, auth_message)
        if len(proof) != len(signature):
            raise ScramError("wrong password")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self._stored):
            raise ScramError("wrong password")
        return f"v={_b64(_hmac(self._server_key, auth_message))}".encode()


def _attributes(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        attrs.setdefault(name, value)
    return attrs


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScramError("a SCRAM message is not UTF-8") from exc


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@functools.cache
def unknown_user_verifier() -> str:
    """The verifier a login of a user who has none (no such user, or no password) is
    checked against: a random password's, with the :data:`ITERATIONS` a stored one has,
    so that refusal costs the same PBKDF2 work as a wrong password's (made once per
    process)."""
    return make_verifier(secrets.token_urlsafe(16))


def check_login(verifier: str | None, password: str) -> bool:
    """Whether ``password`` logs in the user whose stored verifier is ``verifier``
    (``None``: no such user, or one without a password). Every path does the same work,
    one PBKDF2 of ``password``, so how long a refusal takes does not tell an unknown
    user from a wrong password (a login that sends the password itself: the HTTP port's
    Basic authentication, the gRPC port's ``Login``)."""
    checked = check_password(verifier or unknown_user_verifier(), password)
    return checked and verifier is not None and bool(password)


_MOCK_SECRET = secrets.token_bytes(32)  # this process's: what mock verifiers derive from


def mock_verifier(user: str) -> str:
    """A verifier for a user who has none (no such user, or no password), for a SCRAM
    exchange that runs to its end and fails there, as PostgreSQL's mock authentication
    does: a client learns nothing from whether it is challenged. Its salt is derived
    from ``user``, so a user is offered the same salt each time (as a real one is), and
    its iterations are those a stored verifier has; no password matches it."""
    salt = hmac.new(_MOCK_SECRET, b"salt\0" + user.encode(), hashlib.sha256).digest()[:16]
    stored = hmac.new(_MOCK_SECRET, b"stored\0" + user.encode(), hashlib.sha256).digest()
    server = hmac.new(_MOCK_SECRET, b"server\0" + user.encode(), hashlib.sha256).digest()
    return f"{_PREFIX}{ITERATIONS}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"
