"""An OAuth 2.0 authorization server's token endpoint on loopback (client credentials
grant, RFC 6749 4.4), and the check a Kafka broker makes of the tokens it issues.

:class:`TokenServer` knows its clients' ids and secrets, takes them as HTTP Basic auth
(RFC 6749 2.3.1, what librdkafka sends) or in the form, answers ``invalid_client`` (401)
to a wrong secret and ``invalid_scope`` (400) to a scope it does not grant, and issues
HS256-signed JWTs whose ``aud`` is the scope without its ``/.default`` suffix, as
Microsoft Entra ID does for ``https://<namespace>.servicebus.windows.net/.default``.
``path`` places it: ``/<tenant id>/oauth2/v2.0/token`` serves as Entra ID's endpoint for
a tenant (whose id goes into the ``tid`` claim).

:class:`TokenServer` also takes Google's service account grant (RFC 7523's
``urn:ietf:params:oauth:grant-type:jwt-bearer``, what google-auth sends for a service
account key): an RS256 assertion signed with the private key of an account it knows
(``service_accounts``: email to public key), ``aud`` its own URL or Google's token
endpoint's, not expired; the token's
audience is then the assertion's ``scope``.

:class:`ImpersonationServer` is Google's IAM Credentials ``generateAccessToken`` (service
account impersonation): it takes a caller whose bearer token its ``check`` accepts and
issues a token for the account impersonated, signed with its key.

:class:`JWTCheck` is a broker's validator (as ``SaslFront.check``): the signature by a key
it trusts, ``exp`` not passed on its own clock, and the audience and tenant it expects.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote

__all__ = [
    "JWT_BEARER",
    "ImpersonationServer",
    "JWTCheck",
    "TokenServer",
    "key_hidden",
    "service_account_key",
    "sign_jwt",
]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"


def service_account_key(project: str, email: str, token_uri: str) -> tuple[str, bytes]:
    """A Google service account's JSON key for ``email`` (a fresh RSA key) whose tokens
    come from ``token_uri``, base64-encoded as CockroachDB's ``CREDENTIALS`` takes it,
    and the key's public half (PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    key = {
        "type": "service_account",
        "project_id": project,
        "private_key_id": "0123456789abcdef",
        "private_key": pem,
        "client_email": email,
        "client_id": "1234567890",
        "token_uri": token_uri,
    }
    return base64.b64encode(json.dumps(key).encode()).decode(), public


def key_hidden(key: str) -> Callable[[object], str | None]:
    """A ``pytest.mark.parametrize`` ``ids`` function that writes ``key`` (a
    :func:`service_account_key`, also URL-quoted) as ``KEY`` in a test's id: each
    process makes a fresh key, so with it in their ids each xdist worker collected
    other tests (and pytest-xdist refuses to run them)."""
    quoted = quote(key, safe="")

    def test_id(value: object) -> str | None:
        if isinstance(value, str) and (key in value or quoted in value):
            return value.replace(quoted, "KEY").replace(key, "KEY")
        return None  # pytest's own id

    return test_id


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_jwt(claims: dict[str, Any], key: bytes) -> str:
    """An HS256 JWT of ``claims`` (RFC 7519) signed with ``key``."""
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(signature)}"


class TokenServer:
    """See the module docstring. ``clients`` maps client ids to secrets; ``scopes`` are
    the scopes it grants (any when empty); tokens live ``lifetime_s``. ``requests``
    records each request's client id (or ``None``) and the answer's status."""

    def __init__(
        self,
        clients: dict[str, str],
        *,
        key: bytes,
        path: str = "/oauth2/token",
        scopes: frozenset[str] = frozenset(),
        issuer: str = "https://idp.test/",
        tenant: str | None = None,
        lifetime_s: int = 3600,
        service_accounts: dict[str, bytes] | None = None,
    ) -> None:
        self.requests: list[tuple[str | None, int]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
                status, answer, client = server._answer(
                    self.path, self.headers.get("Authorization"), form
                )
                with server._lock:
                    server.requests.append((client, status))
                _answer(self, status, answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._clients = clients
        self._key = key
        self._path = path
        self._scopes = scopes
        self._issuer = issuer
        self._tenant = tenant
        self._lifetime_s = lifetime_s
        self._service_accounts = service_accounts or {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def add_service_account(self, email: str, public_key_pem: bytes) -> None:
        """Take assertions signed by the private half of ``public_key_pem`` for
        ``email`` (a service account's key)."""
        with self._lock:
            self._service_accounts[email] = public_key_pem

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(
        self, path: str, authorization: str | None, form: dict[str, str]
    ) -> tuple[int, dict[str, Any], str | None]:
        if path != self._path:
            return 404, {"error": "not_found"}, None
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization and authorization.startswith("Basic "):
            try:
                client_id, _, secret = (
                    base64.b64decode(authorization[6:], validate=True).decode().partition(":")
                )
            except (binascii.Error, UnicodeDecodeError):
                return 400, {"error": "invalid_request"}, None
        if form.get("grant_type") == JWT_BEARER:
            return self._service_account_grant(form.get("assertion", ""))
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}, client_id
        if client_id is None or self._clients.get(client_id) != secret:
            return 401, {"error": "invalid_client"}, client_id
        scopes = form.get("scope", "").split()
        if self._scopes and not set(scopes) <= self._scopes:
            return 400, {"error": "invalid_scope", "scope": " ".join(scopes)}, client_id
        return self._token(client_id, scopes)

    def _token(self, subject: str, scopes: list[str]) -> tuple[int, dict[str, Any], str | None]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self._issuer,
            "sub": subject,
            "iat": now,
            "nbf": now,
            "exp": now + self._lifetime_s,
        }
        if scopes:
            claims["aud"] = scopes[0].removesuffix("/.default")
        if self._tenant is not None:
            claims["tid"] = self._tenant
        token = sign_jwt(claims, self._key)
        return (
            200,
            {"access_token": token, "token_type": "Bearer", "expires_in": self._lifetime_s},
            subject,
        )

    def _service_account_grant(self, assertion: str) -> tuple[int, dict[str, Any], str | None]:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa

        refused = {"error": "invalid_grant"}
        try:
            head, body, signature = assertion.split(".")
            header, claims = json.loads(_unb64(head)), json.loads(_unb64(body))
        except (ValueError, binascii.Error):
            return 400, refused, None
        email = claims.get("iss")
        public_pem = self._service_accounts.get(email)
        if header.get("alg") != "RS256" or public_pem is None:
            return 400, refused, email
        public = serialization.load_pem_public_key(public_pem)
        if not isinstance(public, rsa.RSAPublicKey):
            return 400, refused, email
        try:
            public.verify(
                _unb64(signature),
                f"{head}.{body}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except InvalidSignature:
            return 400, refused, email
        # NB: google-auth addresses its assertions to Google's token endpoint, whatever
        # the key's token_uri, as Google's server expects
        if claims.get("aud") not in (self.url, GOOGLE_TOKEN_AUDIENCE):
            return 400, refused, email
        if time.time() >= claims.get("exp", 0):
            return 400, refused, email
        return self._token(str(email), str(claims.get("scope", "")).split())


@dataclass
class JWTCheck:
    """A broker's check of a bearer JWT, as ``SaslFront.check``: see the module
    docstring. ``subjects`` collects the ``sub`` of each accepted token."""

    key: bytes
    audience: str | None = None
    tenant: str | None = None
    clock: Callable[[], float] = time.time
    subjects: list[str] = field(default_factory=list)

    def __call__(self, token: str) -> str | None:
        parts = token.split(".")
        if len(parts) != 3:
            return "the token is not a JWT"
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except (ValueError, binascii.Error):
            return "the token is not a JWT"
        if header.get("alg") != "HS256":
            return f"the token's algorithm {header.get('alg')!r} is not trusted"
        expected = hmac.new(self.key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            return "the token's signature is not by a trusted issuer"
        if self.clock() >= claims.get("exp", 0):
            return "the token has expired"
        if self.audience is not None and claims.get("aud") != self.audience:
            return f"the token's audience {claims.get('aud')!r} is not {self.audience!r}"
        if self.tenant is not None and claims.get("tid") != self.tenant:
            return f"the token's tenant {claims.get('tid')!r} is not {self.tenant!r}"
        self.subjects.append(str(claims.get("sub")))
        return None


class ImpersonationServer:
    """See the module docstring. ``accounts`` are the service accounts that may be
    impersonated; ``url`` is ``generateAccessToken``'s URL with ``{}`` for the account
    (what google-auth's ``iam_endpoint_override`` takes once formatted). ``requests``
    records (account, delegates, scopes) of each token issued."""

    def __init__(
        self, check: Callable[[str], str | None], *, key: bytes, accounts: frozenset[str]
    ) -> None:
        self.requests: list[tuple[str, list[str], list[str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
                why = "no bearer token" if scheme != "Bearer" else check(token)
                account = self.path.rsplit("/", 1)[-1].removesuffix(":generateAccessToken")
                if why is not None:
                    status, answer = 401, {"error": {"code": 401, "message": why}}
                elif account not in accounts:
                    status = 403
                    answer = {"error": {"code": 403, "message": f"{account}: permission denied"}}
                else:
                    status, answer = 200, server._issue(account, body)
                _answer(self, status, answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._key = key
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        base = f"http://127.0.0.1:{self._server.server_port}"
        self.url = base + "/v1/projects/-/serviceAccounts/{}:generateAccessToken"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _issue(self, account: str, body: dict[str, Any]) -> dict[str, Any]:
        scopes = list(body.get("scope", []))
        delegates = [d.rsplit("/", 1)[-1] for d in body.get("delegates") or []]
        self.requests.append((account, delegates, scopes))
        expires = int(time.time()) + 3600
        claims = {"sub": account, "exp": expires, "aud": scopes[0] if scopes else None}
        return {
            "accessToken": sign_jwt(claims, self._key),
            "expireTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
        }


def _answer(handler: BaseHTTPRequestHandler, status: int, answer: object) -> None:
    data = json.dumps(answer).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
