"""Secrets at rest: sink credentials in job records are sealed (AES-256-GCM) with a
per-cluster key, so the records hold no secret in clear.

The key is made once per cluster (the first job record writes it, in the same
transaction) and kept in the store's system keys, readable through the raw KV API only,
which a secure node allows to nodes and root alone: what protects the secrets from other
SQL users is that they cannot read raw keys, and what sealing adds is that the records
(their SHOW output, logs, exports, a raw scan) never carry them in clear. NB: someone
with the store's files has the key too; a key outside the store (in the certs directory)
is the next step, once every reader of job records runs on a node.
"""

from __future__ import annotations

import base64
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from feedkv.errors import InvalidArgumentError

__all__ = ["KEY_BYTES", "SEALED_PREFIX", "Sealer", "new_key"]

KEY_BYTES = 32
SEALED_PREFIX = "sealed:v1:"
_NONCE_BYTES = 12


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


class Sealer:
    """Seals and opens strings with one key; ``context`` (the record's identity) is
    bound to each sealed value, so a value moved to another record does not open."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise InvalidArgumentError(f"a sealing key has {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, plaintext: str, context: bytes = b"") -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), context)
        return SEALED_PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, text: str, context: bytes = b"") -> str:
        """InvalidArgumentError if ``text`` was not sealed with this key and context."""
        if not text.startswith(SEALED_PREFIX):
            raise InvalidArgumentError("not a sealed value")
        try:
            raw = base64.b64decode(text.removeprefix(SEALED_PREFIX), validate=True)
            plain = self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context)
        except (ValueError, InvalidTag) as exc:
            raise InvalidArgumentError(
                "a sealed value does not open with this cluster's key (it was altered, "
                "or sealed by another cluster)"
            ) from exc
        return plain.decode()
