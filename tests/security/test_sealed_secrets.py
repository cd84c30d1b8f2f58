"""Sealing secrets at rest: values open only with their key and context."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.security.secrets import SEALED_PREFIX, Sealer, new_key


def test_a_sealed_value_opens_with_its_key_and_context_only() -> None:
    sealer = Sealer(new_key())
    sealed = sealer.seal("kafka://u:hunter2@broker", b"job/1")
    assert sealed.startswith(SEALED_PREFIX)
    assert "hunter2" not in sealed
    assert sealer.open(sealed, b"job/1") == "kafka://u:hunter2@broker"
    with pytest.raises(InvalidArgumentError, match="does not open"):
        sealer.open(sealed, b"job/2")
    with pytest.raises(InvalidArgumentError, match="does not open"):
        Sealer(new_key()).open(sealed, b"job/1")
    tampered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    with pytest.raises(InvalidArgumentError, match="does not open"):
        sealer.open(tampered, b"job/1")


def test_bad_keys_and_values_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="32 bytes"):
        Sealer(b"short")
    with pytest.raises(InvalidArgumentError, match="not a sealed value"):
        Sealer(new_key()).open("plain")
    with pytest.raises(InvalidArgumentError, match="does not open"):
        Sealer(new_key()).open(SEALED_PREFIX + "!!notbase64")
