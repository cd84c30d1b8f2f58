"""The secure node's authenticator, as a table of exchanges: certificates, SCRAM (with a
real client's messages), refusals, and the failed-login throttle with a manual clock."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

import pytest

from feedkv.pgwire.auth import Accepted, CertOrPassword, Challenge, Refused
from feedkv.security.login_throttle import LoginThrottle
from feedkv.security.scram import ITERATIONS, make_verifier

VERIFIERS = {"alice": make_verifier("alice-pw", iterations=16)}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _initial(client_first: bytes) -> bytes:
    return b"SCRAM-SHA-256\0" + struct.pack("!i", len(client_first)) + client_first


def _payload(challenge: Challenge, code: int) -> bytes:
    assert challenge.message[:1] == b"R"
    assert struct.unpack("!i", challenge.message[5:9])[0] == code
    return challenge.message[9:]


def login(auth: CertOrPassword, user: str, password: str) -> Accepted | Refused:
    """A SCRAM client's whole exchange with ``auth``."""
    outcome = auth.begin(user, "10.0.0.7")
    if not isinstance(outcome, Challenge):
        assert isinstance(outcome, Accepted | Refused)
        return outcome
    assert _payload(outcome, 10) == b"SCRAM-SHA-256\0\0"
    bare = "n=,r=clientnonce"
    outcome = auth.respond(_initial(f"n,,{bare}".encode()))
    if not isinstance(outcome, Challenge):
        assert isinstance(outcome, Refused)
        return outcome
    server_first = _payload(outcome, 11).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={attrs['r']}"
    message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    final = auth.respond(f"{without_proof},p={proof.decode()}".encode())
    assert isinstance(final, Accepted | Refused)
    return final


def test_a_client_certificate_logs_in_as_its_common_name_only() -> None:
    assert isinstance(CertOrPassword("bob", VERIFIERS.get).begin("bob", "h"), Accepted)
    # another user needs that user's password (root has none here): refused
    refused = login(CertOrPassword("bob", VERIFIERS.get), "root", "x")
    assert isinstance(refused, Refused) and refused.error.code == "28P01"


def test_scram_accepts_the_right_password_and_sends_its_signature() -> None:
    accepted = login(CertOrPassword(None, VERIFIERS.get), "alice", "alice-pw")
    assert isinstance(accepted, Accepted)
    assert accepted.message[:1] == b"R" and struct.unpack("!i", accepted.message[5:9]) == (12,)
    assert accepted.message[9:].startswith(b"v=")


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("ghost", "x")])
def test_wrong_passwords_and_unknown_users_get_the_same_refusal(user: str, password: str) -> None:
    refused = login(CertOrPassword(None, VERIFIERS.get), user, password)
    assert isinstance(refused, Refused)
    assert refused.error.code == "28P01"
    assert str(refused.error) == f'password authentication failed for user "{user}"'


@pytest.mark.parametrize(
    "answer", [b"", b"\0", b"MD5\0\0\0\0\0", _initial(b"p=tls-unique,,n=,r=x"), b"x" * 50]
)
def test_malformed_sasl_messages_are_refused(answer: bytes) -> None:
    auth = CertOrPassword(None, VERIFIERS.get)
    assert isinstance(auth.begin("alice", "h"), Challenge)
    assert isinstance(auth.respond(answer), Refused)


def test_failed_logins_are_throttled_per_user_and_host() -> None:
    clock, throttle = Clock(), LoginThrottle(max_failures=3, window_s=30)

    def auth() -> CertOrPassword:
        return CertOrPassword(None, VERIFIERS.get, throttle=throttle, clock=clock)

    for _ in range(3):
        assert isinstance(login(auth(), "alice", "guess"), Refused)
    throttled = login(auth(), "alice", "alice-pw")  # even the right password now
    assert isinstance(throttled, Refused)
    assert "too many failed logins" in str(throttled.error)
    assert throttled.error.code == "28000"
    # a certificate login is not held up
    assert isinstance(CertOrPassword("alice", VERIFIERS.get, throttle=throttle).begin(
        "alice", "10.0.0.7"), Accepted)  # fmt: skip
    clock.now += 31
    assert isinstance(login(auth(), "alice", "alice-pw"), Accepted)
    assert throttle.retry_after("alice", "10.0.0.7", clock.now) == 0


def _server_first(user: str) -> dict[str, str]:
    auth = CertOrPassword(None, VERIFIERS.get)
    challenge = auth.begin(user, "10.0.0.7")
    assert isinstance(challenge, Challenge)
    assert _payload(challenge, 10) == b"SCRAM-SHA-256\0\0"
    first = auth.respond(_initial(b"n,,n=,r=clientnonce"))
    assert isinstance(first, Challenge)
    return dict(part.split("=", 1) for part in _payload(first, 11).decode().split(","))


def test_an_unknown_user_is_challenged_as_a_known_one_is_and_refused_at_the_end() -> None:
    ghost = _server_first("ghost")
    assert int(ghost["i"]) == ITERATIONS  # what a stored verifier has
    assert _server_first("ghost")["s"] == ghost["s"]  # the same salt each time
    assert _server_first("spook")["s"] != ghost["s"]
    refused = login(CertOrPassword(None, VERIFIERS.get), "ghost", "any")
    assert isinstance(refused, Refused)
    assert str(refused.error) == 'password authentication failed for user "ghost"'
