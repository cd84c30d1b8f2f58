"""SCRAM-SHA-256: the stored verifier, RFC 7677's exchange, and refusals."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from feedkv.errors import InvalidArgumentError
from feedkv.security.scram import (
    ITERATIONS,
    ScramError,
    ScramExchange,
    check_login,
    check_password,
    make_verifier,
    parse_verifier,
    unknown_user_verifier,
)

# RFC 7677, section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_rfc_7677_exchange_is_accepted() -> None:
    exchange = ScramExchange(make_verifier("pencil", salt=RFC_SALT), nonce=RFC_SERVER_NONCE)
    first = exchange.server_first(RFC_CLIENT_FIRST)
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert exchange.server_final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL


def _client_final(password: str, server_first: bytes, client_first_bare: str) -> bytes:
    attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={attrs['r']}"
    message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_a_wrong_password_is_refused() -> None:
    exchange = ScramExchange(make_verifier("right"))
    first = exchange.server_first(b"n,,n=,r=abc")
    with pytest.raises(ScramError, match="wrong password"):
        exchange.server_final(_client_final("wrong", first, "n=,r=abc"))
    exchange = ScramExchange(make_verifier("right"))
    first = exchange.server_first(b"n,,n=,r=abc")
    assert exchange.server_final(_client_final("right", first, "n=,r=abc")).startswith(b"v=")


def test_the_verifier_does_not_hold_the_password() -> None:
    verifier = make_verifier("hunter2-secret")
    assert "hunter2" not in verifier
    assert verifier.startswith("SCRAM-SHA-256$4096:")
    assert make_verifier("hunter2-secret") != verifier  # a fresh salt each time
    iterations, salt, stored, server = parse_verifier(verifier)
    assert (iterations, len(salt), len(stored), len(server)) == (4096, 16, 32, 32)


@pytest.mark.parametrize(
    "verifier", ["", "md5abc", "SCRAM-SHA-256$x:y$z:w", "SCRAM-SHA-256$4096:AAAA$AAAA:AAAA"]
)
def test_a_malformed_verifier_is_refused(verifier: str) -> None:
    with pytest.raises(InvalidArgumentError, match="not a SCRAM-SHA-256 verifier"):
        parse_verifier(verifier)


@settings(max_examples=2000, deadline=None)
@given(first=hs.binary(max_size=200), final=hs.binary(max_size=200))
def test_garbage_messages_raise_scram_errors_only(first: bytes, final: bytes) -> None:
    exchange = ScramExchange(make_verifier("pw", iterations=1))
    try:
        exchange.server_first(first)
    except ScramError:
        return
    with pytest.raises(ScramError):
        exchange.server_final(final)


def test_check_password_accepts_only_the_password_the_verifier_was_made_from() -> None:
    verifier = make_verifier("s3cret", iterations=64)
    assert check_password(verifier, "s3cret")
    assert not check_password(verifier, "s3cret ")
    assert not check_password(verifier, "")


def test_check_login_does_the_same_work_for_an_unknown_user_as_for_a_wrong_password() -> None:
    stored = make_verifier("right-pw")
    assert parse_verifier(unknown_user_verifier())[0] == parse_verifier(stored)[0] == ITERATIONS
    before = unknown_user_verifier.cache_info()
    assert check_login(stored, "right-pw")
    assert not check_login(stored, "wrong-pw")
    assert not check_login(stored, "")
    after_known = unknown_user_verifier.cache_info()
    assert after_known.hits + after_known.misses == before.hits + before.misses  # not used
    assert not check_login(None, "right-pw")
    assert not check_login(None, "")
    after = unknown_user_verifier.cache_info()
    assert after.hits + after.misses == before.hits + before.misses + 2  # checked against it
