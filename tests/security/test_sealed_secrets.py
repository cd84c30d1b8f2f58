"""Sealing secrets at rest: values open only with their key and context, and name the
key they were sealed with."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedkv.errors import InvalidArgumentError
from feedkv.security.secrets import SEALED_PREFIX, Sealer, key_id, new_key, sealed_key_id


def test_a_sealed_value_opens_with_its_key_and_context_only() -> None:
    key = new_key()
    sealer = Sealer(key)
    sealed = sealer.seal("kafka://u:hunter2@broker", b"job/1")
    assert sealed.startswith(SEALED_PREFIX)
    assert sealed_key_id(sealed) == key_id(key) == sealer.key_id
    assert "hunter2" not in sealed
    assert sealer.open(sealed, b"job/1") == "kafka://u:hunter2@broker"
    with pytest.raises(InvalidArgumentError, match="does not open"):
        sealer.open(sealed, b"job/2")
    with pytest.raises(InvalidArgumentError, match=f"sealed with the secrets key {key_id(key)}"):
        Sealer(new_key()).open(sealed, b"job/1")
    tampered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    with pytest.raises(InvalidArgumentError, match="does not open"):
        sealer.open(tampered, b"job/1")


def test_a_sealer_opens_with_an_older_key_and_seals_with_its_own() -> None:
    old, new = new_key(), new_key()
    sealed = Sealer(old).seal("secret", b"c")
    both = Sealer(new).with_older(old)
    assert both.open(sealed, b"c") == "secret"
    assert sealed_key_id(both.seal("x")) == key_id(new)


def test_bad_keys_and_values_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="32 bytes"):
        Sealer(b"short")
    with pytest.raises(InvalidArgumentError, match="not a sealed value"):
        Sealer(new_key()).open("plain")
    with pytest.raises(InvalidArgumentError, match="not base64"):
        Sealer(new_key()).open("sealed:v1:!!notbase64")


_SEALER = Sealer(new_key())


@given(st.text(max_size=200) | st.text(max_size=200).map(lambda t: "sealed:v2:" + t))
def test_opening_any_text_opens_or_raises_a_clear_error(text: str) -> None:
    with contextlib.suppress(InvalidArgumentError):
        _SEALER.open(text)
