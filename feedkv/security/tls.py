"""TLS for every port, from a certs directory (:mod:`feedkv.security.certs`).

A secure node serves with :class:`ServerTLS`: gRPC over TLS without client
certificates, each call carrying its caller's credentials instead (a claim signed with a
client certificate's key, or a password login's session: :mod:`feedkv.security.call_auth`
says why and how; who may call what is decided per call from that user,
:func:`peer_user`); the SQL port asks for a client certificate but also takes passwords
(SCRAM) over TLS; the HTTP port is https without client certificates. Clients build a
:class:`ClientTLS` for one identity: the CA they trust and the certificate (or password)
they prove it with.

``None`` in place of either means plaintext: an insecure node (``feedkv start
--insecure``), or an embedded one that serves its own Spark executors on loopback.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.security.call_auth import (
    AUDIENCE_METHOD,
    AUDIENCE_TTL_S,
    CallVerifier,
    CertClaims,
    Metadata,
    SessionClaims,
)
from feedkv.security.certs import NODE_USER, CertsDir, load_certs_dir, read_cert
from feedkv.security.revocation import CRL_FILE, Revocations
from feedkv.security.secrets import load_key

__all__ = [
    "AUDIENCE_PATH",
    "AuthenticatedContext",
    "ClientTLS",
    "ServerTLS",
    "call_metadata",
    "node_audience",
    "open_channel",
    "peer_user",
]


@dataclass(frozen=True)
class ClientTLS:
    """A client's side of TLS: trust ``certs.ca_cert``; prove to be ``user`` with its
    certificate from the directory, or with ``password`` when given (then no
    certificate is needed: a SQL client, or a gRPC client that logs in)."""

    certs: CertsDir
    user: str
    password: str | None = field(default=None, repr=False)
    _claims: CertClaims | SessionClaims | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @classmethod
    def load(
        cls,
        certs_dir: str | Path,
        user: str,
        *,
        require_cert: bool = True,
        password: str | None = None,
    ) -> ClientTLS:
        """InvalidArgumentError names a missing or bad file."""
        certs = load_certs_dir(Path(certs_dir))
        if (require_cert and password is None) or certs.has_identity(user):
            load_certs_dir(certs.path, user=user)
        return cls(certs, user, password)

    @property
    def has_cert(self) -> bool:
        return self.certs.has_identity(self.user)

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        """Trust the CA; the caller is proven by each call's metadata (:meth:`claims`)."""
        return grpc.ssl_channel_credentials(root_certificates=self.certs.ca_cert.read_bytes())

    def claims(self) -> CertClaims | SessionClaims:
        """What proves this identity on each gRPC call (made once, shared by every
        channel of this identity)."""
        claims = self._claims
        if claims is None:
            if self.password is not None:
                claims = SessionClaims(self.user, self.password)
            elif not self.has_cert:
                raise InvalidArgumentError(
                    f"no certificate for {self.user!r} in {self.certs.path} "
                    f"(client.{self.user}.crt): make one with `feedkv cert create-client`, "
                    "or log in with a password (password=)"
                )
            else:
                claims = CertClaims(self.user, *self.certs.identity(self.user))
            object.__setattr__(self, "_claims", claims)  # NB: frozen, cached once
        return claims

    def ssl_context(self) -> ssl.SSLContext:
        """Verify the server against the CA and its host name; present the client
        certificate when there is one."""
        context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
        if self.has_cert:
            cert, key = self.certs.identity(self.user)
            context.load_cert_chain(str(cert), str(key))
        return context


@dataclass(frozen=True)
class ServerTLS:
    """A node's side: its ``node.crt``, the CA its clients' certificates come from and
    the certificates revoked since (:mod:`feedkv.security.revocation`)."""

    certs: CertsDir
    verifier: CallVerifier = field(repr=False, compare=False)
    revocations: Revocations = field(repr=False, compare=False)  # ca.crl's

    @classmethod
    def load(cls, certs_dir: str | Path) -> ServerTLS:
        """InvalidArgumentError names a missing or bad file (``ca.crl`` included)."""
        certs = load_certs_dir(Path(certs_dir), user=NODE_USER)
        revocations = Revocations(certs.path / CRL_FILE, read_cert(certs.ca_cert))
        verifier = CallVerifier(
            certs.ca_cert.read_bytes(), load_key(certs.secrets_key), revocations=revocations
        )
        return cls(certs, verifier, revocations)

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """No client certificate asked for: each call proves its caller in its
        metadata (:mod:`feedkv.security.call_auth`), checked by :attr:`verifier`."""
        return grpc.ssl_server_credentials(
            [(self.certs.node_key.read_bytes(), self.certs.node_cert.read_bytes())],
            require_client_auth=False,
        )

    def ssl_context(self, *, client_certs: bool) -> ssl.SSLContext:
        """``client_certs``: ask for (and verify, when given) a client certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.certs.node_cert), str(self.certs.node_key))
        if client_certs:
            context.load_verify_locations(cafile=str(self.certs.ca_cert))
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def client(self) -> ClientTLS:
        """The node's identity when it calls other nodes."""
        return ClientTLS(self.certs, NODE_USER)


def open_channel(
    address: str, options: list[tuple[str, Any]], tls: ClientTLS | None
) -> grpc.Channel:
    """A channel to ``address``: TLS with ``tls``'s identity, plaintext without.

    Proxies: only when ``grpc_proxy`` is set (gRPC's own variable) does the channel go
    through the HTTP proxy it names; a machine's ``http_proxy``, set for the web, must
    not carry calls between nodes. So every channel a node or client opens takes the
    same way (:mod:`feedkv.testing.partition` cuts nodes apart through such proxies)."""
    proxied = 1 if os.environ.get("grpc_proxy") else 0  # noqa: SIM112 (gRPC reads it so)
    options = [*options, ("grpc.enable_http_proxy", proxied)]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    claims = tls.claims()
    channel = grpc.secure_channel(address, tls.grpc_credentials(), options=options)
    _claims[channel] = claims
    return channel


# NB: what each secure channel's calls carry; looked up per call (a dict lookup) rather
# than added by an interceptor or call credentials, which cost a Python layer (and, for
# grpcio's metadata plugins, a thread) per call
_claims: weakref.WeakKeyDictionary[grpc.Channel, CertClaims | SessionClaims] = (
    weakref.WeakKeyDictionary()
)


def call_metadata(channel: grpc.Channel) -> Metadata | None:
    """The metadata each call on ``channel`` carries: its identity's credentials
    (``None``: a plaintext channel). A certificate claim is made for the node at the
    other end (:func:`node_audience`), which may cost a call to it
    (:class:`~feedkv.errors.NodeUnavailableError` when it fails: nothing was sent)."""
    claims = _claims.get(channel)
    if claims is None:
        return None
    if isinstance(claims, SessionClaims):
        return claims.metadata()
    return claims.metadata(node_audience(channel))


# NB: the service is feedkv.kv.wire.SERVICE, which this layer may not import (pinned by
# tests/security/test_claim_audience.py)
AUDIENCE_PATH = f"/feedkv.kv.Node/{AUDIENCE_METHOD}"
_AUDIENCE_TIMEOUT_S = 10.0


@dataclass
class _Audience:
    name: str
    refresh_at: float  # monotonic seconds
    refreshing: bool = False


_audiences: weakref.WeakKeyDictionary[grpc.Channel, _Audience] = weakref.WeakKeyDictionary()
_audiences_lock = threading.Lock()


def node_audience(channel: grpc.Channel, *, clock: Callable[[], float] = time.monotonic) -> str:
    """The identity of the node at the other end of the TLS ``channel``, which a claim
    made for it names (:mod:`feedkv.security.call_auth`). Asked of the node on first use
    (blocking: :class:`~feedkv.errors.NodeUnavailableError` if that fails), and again
    every :data:`AUDIENCE_TTL_S` in the background, the known one answering meanwhile:
    a call to a node cut off by a partition waits for its own deadline only."""
    now = clock()
    known = _audiences.get(channel)
    if known is None:
        ask = channel.unary_unary(AUDIENCE_PATH)
        try:
            name = bytes(ask(b"", timeout=_AUDIENCE_TIMEOUT_S)).decode()
        except grpc.RpcError as exc:
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise NodeUnavailableError(f"cannot ask the node who it is: {details}") from exc
        with _audiences_lock:
            known = _audiences.setdefault(channel, _Audience(name, now + AUDIENCE_TTL_S))
        return known.name
    if now >= known.refresh_at:
        with _audiences_lock:
            start = not known.refreshing
            known.refreshing = True
        if start:
            _refresh(channel, known, clock)
    return known.name


def _refresh(channel: grpc.Channel, known: _Audience, clock: Callable[[], float]) -> None:
    future = channel.unary_unary(AUDIENCE_PATH).future(b"", timeout=_AUDIENCE_TIMEOUT_S)

    def done(call: Any) -> None:
        try:
            known.name = bytes(call.result()).decode()
        except grpc.RpcError:
            pass  # NB: the node is away: keep the name, ask again after the next TTL
        finally:
            with _audiences_lock:
                known.refresh_at = clock() + AUDIENCE_TTL_S
                known.refreshing = False

    future.add_done_callback(done)


class AuthenticatedContext:
    """A call's gRPC context with the user its credentials proved (the node's guard
    wraps each call's context in one: :func:`peer_user` reads it)."""

    def __init__(self, context: grpc.ServicerContext, user: str) -> None:
        self.user = user
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def peer_user(context: Any) -> str | None:
    """The user the call's credentials proved (``None``: a plaintext node's call)."""
    return context.user if isinstance(context, AuthenticatedContext) else None
