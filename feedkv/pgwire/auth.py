"""The authentication step of the handshake: after the startup message names a user,
the connection asks an :class:`Authenticator` what to do until it accepts or refuses.

An authentication method is a small exchange: it may send challenges (an
``AuthenticationSASL`` listing SCRAM-SHA-256, then ``AuthenticationSASLContinue``) and
read the client's answers (``p`` messages), and ends accepted or refused. The
connection only relays: adding SCRAM passwords or client certificates (issue 40) is
a new authenticator, not a change to the connection's state machine.

Two methods. :class:`LoopbackTrust`, an insecure node's (``feedkv start --insecure``):
the user named in the startup message is taken at its word, from loopback addresses
only. :class:`CertOrPassword`, a secure node's (its connections are all TLS, see
:mod:`feedkv.pgwire.server`): a client certificate whose CN is the user logs in at once;
otherwise SCRAM-SHA-256 against the user's stored verifier
(:mod:`feedkv.security.scram`). Whether the user exists is the connection's check, the
same for every method (28000 if not); a failed password is logged without it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from feedkv.errors import SQLError
from feedkv.security.login_throttle import LoginThrottle
from feedkv.security.scram import MECHANISM, ScramError, ScramExchange, mock_verifier

__all__ = [
    "Accepted",
    "AuthOutcome",
    "Authenticator",
    "CertOrPassword",
    "Challenge",
    "LoopbackTrust",
    "Refused",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Accepted:
    """The client is who it says: the connection sends ``message`` (SCRAM's
    AuthenticationSASLFinal, or nothing), then AuthenticationOk."""

    message: bytes = b""


@dataclass(frozen=True, slots=True)
class Refused:
    """The connection sends ``error`` (SQLSTATE 28000 or 28P01) as FATAL and closes."""

    error: SQLError


@dataclass(frozen=True, slots=True)
class Challenge:
    """Send ``message`` (an Authentication message) and hand the client's answer to
    :meth:`Authenticator.respond`."""

    message: bytes


AuthOutcome = Accepted | Refused | Challenge


class Authenticator(Protocol):
    """One connection's authentication exchange. Not thread-safe: one connection's."""

    def begin(self, user: str, peer_host: str | None) -> AuthOutcome:
        """The client named ``user`` from ``peer_host`` (``None``: not a TCP peer)."""
        ...

    def respond(self, data: bytes) -> AuthOutcome:
        """The client's answer (a ``p`` message's body) to the last :class:`Challenge`."""
        ...


class LoopbackTrust:
    """Trust the user name given, on loopback addresses only. ``cert_user`` is ignored
    (an insecure node has no TLS)."""

    def __init__(self, cert_user: str | None = None) -> None:
        pass

    def begin(self, user: str, peer_host: str | None) -> AuthOutcome:
        if peer_host is None or _is_loopback(peer_host):
            return Accepted()
        return Refused(
            SQLError(
                "28000",
                f"connections from {peer_host} are refused: this node has no "
                "authentication yet and accepts SQL clients on loopback addresses only",
            )
        )

    def respond(self, data: bytes) -> AuthOutcome:
        return Refused(SQLError("08P01", "unexpected password message: none was asked for"))


class Refusing:
    """A connection refused, whatever user it asks for, with ``error``: one whose
    client certificate is revoked (``ca.crl``, :mod:`feedkv.security.revocation`;
    28000, logged as a warning: ``warn``), one a draining node takes no more (57P01)."""

    def __init__(self, error: SQLError, *, warn: bool = False) -> None:
        self._error = error
        self._level = logging.WARNING if warn else logging.INFO

    def begin(self, user: str, peer_host: str | None) -> AuthOutcome:
        log.log(self._level, "SQL login of %r from %s refused: %s", user, peer_host, self._error)
        return Refused(self._error)

    def respond(self, data: bytes) -> AuthOutcome:
        return Refused(SQLError("08P01", "unexpected password message: none was asked for"))


class CertOrPassword:
    """A secure node's authentication: ``cert_user`` (the CN of the client certificate
    the TLS handshake verified) logs in as that user alone; any other user proves a
    password by SCRAM-SHA-256 against ``verifier(user)`` (``None``: no password)."""

    def __init__(
        self,
        cert_user: str | None,
        verifier: Callable[[str], str | None],
        *,
        throttle: LoginThrottle | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``throttle``: shared by the port's connections, it refuses a user's password
        logins from a host after too many failures there (see
        :mod:`feedkv.security.login_throttle`)."""
        self._cert_user = cert_user
        self._verifier = verifier
        self._throttle = throttle
        self._clock = clock
        self._user = ""
        self._peer_host: str | None = None
        self._exchange: ScramExchange | None = None
        self._mock = False  # the exchange is against a mock verifier: it fails
        self._step = "none"

    def begin(self, user: str, peer_host: str | None) -> AuthOutcome:
        self._user, self._peer_host = user, peer_host
        if self._cert_user is not None and self._cert_user == user:
            return Accepted()
        if self._throttle is not None:
            wait = self._throttle.retry_after(user, peer_host or "", self._clock())
            if wait > 0:
                log.warning(
                    "SQL login of %r from %s refused: too many failed logins", user, peer_host
                )
                return Refused(
                    SQLError(
                        "28000",
                        f'too many failed logins for user "{user}" from this host; '
                        f"try again in {wait:.0f} s",
                    )
                )
        verifier = self._verifier(user)
        # NB: a user without a verifier (missing, or without a password) is challenged
        # too and refused at the end, as a wrong password is: the exchange does not tell
        # them apart
        self._mock = verifier is None
        self._exchange = ScramExchange(verifier or mock_verifier(user))
        self._step = "initial"
        return Challenge(_authentication(10, MECHANISM.encode() + b"\0\0"))

    def respond(self, data: bytes) -> AuthOutcome:
        exchange = self._exchange
        if exchange is None:
            return Refused(SQLError("08P01", "unexpected password message: none was asked for"))
        try:
            if self._step == "initial":
                mechanism, sep, rest = data.partition(b"\0")
                if not sep or mechanism.decode("ascii", "replace") != MECHANISM or len(rest) < 4:
                    raise ScramError(f"expected a {MECHANISM} SASLInitialResponse")
                (length,) = struct.unpack("!i", rest[:4])
                if length != len(rest) - 4:
                    raise ScramError("the SASLInitialResponse's length is wrong")
                self._step = "final"
                return Challenge(_authentication(11, exchange.server_first(rest[4:])))
            if self._step == "final":
                self._step = "done"
                if self._mock:
                    with contextlib.suppress(ScramError):  # NB: the same work, then no
                        exchange.server_final(data)
                    raise ScramError("no such user, or no password set and no certificate")
                final = exchange.server_final(data)
                if self._throttle is not None:
                    self._throttle.succeeded(self._user, self._peer_host or "")
                return Accepted(_authentication(12, final))
        except ScramError as exc:
            return self._failed(str(exc))
        return Refused(SQLError("08P01", "unexpected password message after authentication"))

    def _failed(self, reason: str) -> Refused:
        if self._throttle is not None:
            self._throttle.failed(self._user, self._peer_host or "", self._clock())
        log.warning(
            "SQL login of %r from %s refused: %s", self._user, self._peer_host or "?", reason
        )
        return Refused(SQLError("28P01", f'password authentication failed for user "{self._user}"'))


def _authentication(code: int, payload: bytes) -> bytes:
    body = struct.pack("!i", code) + payload
    return b"R" + struct.pack("!i", len(body) + 4) + body


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"
