"""The authentication step of the handshake: after the startup message names a user,
the connection asks an :class:`Authenticator` what to do until it accepts or refuses.

An authentication method is a small exchange: it may send challenges (an
``AuthenticationSASL`` listing SCRAM-SHA-256, then ``AuthenticationSASLContinue``) and
read the client's answers (``p`` messages), and ends accepted or refused. The
connection only relays: adding SCRAM passwords or client certificates (issue 40) is
a new authenticator, not a change to the connection's state machine.

Today there is one method, :class:`LoopbackTrust`: the user named in the startup message
is taken at its word, from loopback addresses only, which is what an insecure node
(``feedkv start --insecure`` in issue 40's terms) can honestly offer. Whether the user
exists is the connection's check, the same for every method (28000 if not).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Protocol

from feedkv.errors import SQLError

__all__ = [
    "Accepted",
    "AuthOutcome",
    "Authenticator",
    "Challenge",
    "LoopbackTrust",
    "Refused",
]


@dataclass(frozen=True, slots=True)
class Accepted:
    """The client is who it says: the connection sends AuthenticationOk."""


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
    """Trust the user name given, on loopback addresses only."""

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


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"
