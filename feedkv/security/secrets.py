"""Secrets at rest: sink credentials in job records are sealed (AES-256-GCM), so the
records (their SHOW output, logs, exports, a raw scan, the store's files) never carry
them in clear.

Where the key lives decides what sealing protects:

- **A secure cluster** (``--certs-dir``) seals with ``secrets.key`` in the certs
  directory, beside ``ca.crt``, outside the store: ``feedkv cert create-ca`` writes it
  (:func:`write_key`), and it travels to every node with ``ca.crt``, as the rest of the
  certs directory does. So someone holding a store's files (a copied disk, a backup of
  the store directory) holds sealed values and no key. Why ``create-ca`` and not the
  first start: the key must be the same on every node, and the CA is made once per
  cluster on one machine, from where its files are copied to the nodes; a key made by
  each node's first start would differ from node to node.
- **An insecure node** (``--insecure``) has no certs directory, so the key is made in
  the store at the first job record (:data:`~feedkv.sql.catalog.SEALING_KEY`), which
  protects nothing from someone with the store's files, as the start-up warning says
  (CockroachDB's insecure mode protects nothing either). Sealing still keeps secrets out
  of logs, SHOW output and exports.

Each sealed value names its key (:attr:`Sealer.key_id`, a hash of the key, which
reveals nothing of it), so a value meets a missing or different key with a clear error
naming both rather than an unreadable job: a node whose certs directory lacks the key of
its store's job records refuses to start (:func:`~feedkv.changefeed.jobs.check_secrets`).
Values sealed with a store's key (written insecure, or before the key moved out of the
store) still open on a secure node, which seals them again with its own key at their
next write.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from feedkv.errors import InvalidArgumentError

__all__ = [
    "KEY_BYTES",
    "KEY_FILE",
    "SEALED_PREFIX",
    "HeldKey",
    "KeyMissing",
    "Sealer",
    "key_id",
    "load_key",
    "held_key",
    "new_key",
    "sealed_key_id",
    "write_key",
]

KEY_BYTES = 32
KEY_FILE = "secrets.key"  # in a certs directory, beside ca.crt
SEALED_PREFIX = "sealed:"
_V1 = "sealed:v1:"  # no key id: sealed with a store's key, before keys had ids
_V2 = "sealed:v2:"  # sealed:v2:<key id>:<base64 of nonce + ciphertext>
_NONCE_BYTES = 12
_KEY_HEADER = "feedkv secrets key v1\n"


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def key_id(key: bytes) -> str:
    """A name for ``key`` that reveals nothing of it: 16 hex digits of a hash."""
    return hashlib.sha256(b"feedkv secrets key id\x00" + key).hexdigest()[:16]


def write_key(path: Path) -> bool:
    """Write a new key at ``path`` (mode 0600) unless one is there: an existing key may
    have sealed secrets, which a new one could not open. True if written."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _KEY_HEADER + base64.b64encode(new_key()).decode() + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    return True


def load_key(path: Path) -> bytes:
    """The key in ``path``; InvalidArgumentError names a missing or malformed file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot read the secrets key {path}: {exc.strerror or exc}; `feedkv cert "
            "create-ca` writes it beside ca.crt: copy it from the directory the CA was "
            "made in (every node of a cluster needs the same one)"
        ) from exc
    header, _, body = text.partition("\n")
    try:
        if header + "\n" != _KEY_HEADER:
            raise ValueError("no header")
        key = base64.b64decode(body.strip(), validate=True)
    except ValueError as exc:
        raise InvalidArgumentError(
            f"{path} is not a feedkv secrets key (`feedkv cert create-ca` writes one)"
        ) from exc
    if len(key) != KEY_BYTES:
        raise InvalidArgumentError(f"{path} holds a key of {len(key)} bytes, not {KEY_BYTES}")
    return key


class Sealer:
    """Seals strings with one key and opens those sealed with any of its keys;
    ``context`` (the record's identity) is bound to each sealed value, so a value moved
    to another record does not open.

    ``source`` says where the key came from, for error messages (a certs directory's
    file, or "the store"); ``older`` are keys it only opens with (a store's, on a
    secure node)."""

    def __init__(self, key: bytes, *, source: str = "", older: Iterable[bytes] = ()) -> None:
        for each in (key, *older):
            if len(each) != KEY_BYTES:
                raise InvalidArgumentError(f"a sealing key has {KEY_BYTES} bytes, not {len(each)}")
        self.key_id = key_id(key)
        self.source = source
        self._aeads = {key_id(k): AESGCM(k) for k in (*older, key)}
        self._key = key

    def with_older(self, key: bytes | None) -> Sealer:
        """This sealer, also opening values sealed with ``key`` (``None``: itself)."""
        if key is None or key_id(key) in self._aeads:
            return self
        return Sealer(self._key, source=self.source, older=[key])

    def holds(self, kid: str) -> bool:
        return kid in self._aeads

    def seal(self, plaintext: str, context: bytes = b"") -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aeads[self.key_id].encrypt(nonce, plaintext.encode(), context)
        return f"{_V2}{self.key_id}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, text: str, context: bytes = b"") -> str:
        """InvalidArgumentError if ``text`` was not sealed with one of these keys and
        ``context``; when its key is not one of them, the message names both."""
        kid = sealed_key_id(text)
        if kid is None:  # v1: the store's key, without an id
            candidates = list(self._aeads.values())
            body = text.removeprefix(_V1)
        else:
            aead = self._aeads.get(kid)
            if aead is None:
                raise InvalidArgumentError(self.missing(kid))
            candidates = [aead]
            body = text.removeprefix(_V2).split(":", 1)[1]
        try:
            raw = base64.b64decode(body, validate=True)
        except ValueError as exc:
            raise InvalidArgumentError("a sealed value is not base64: it was altered") from exc
        for aead in candidates:
            try:
                plain = aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context)
            except (ValueError, InvalidTag):
                continue
            return plain.decode()
        raise InvalidArgumentError(
            "a sealed value does not open with this cluster's key (it was altered, or "
            "sealed by another cluster)"
        )

    def missing(self, kid: str) -> str:
        """The message for a value sealed with key ``kid``, which this sealer lacks."""
        return (
            f"a changefeed job's secrets are sealed with the secrets key {kid}, but this "
            f"node's key is {self.key_id} ({self.source or 'the store'}): start it with "
            f"the certs directory whose {KEY_FILE} sealed them"
        )


def sealed_key_id(text: str) -> str | None:
    """The key id a sealed value names (``None``: a v1 value, sealed with a store's
    key). InvalidArgumentError if ``text`` is not a sealed value."""
    if text.startswith(_V1):
        return None
    if text.startswith(_V2) and ":" in text.removeprefix(_V2):
        return text.removeprefix(_V2).split(":", 1)[0]
    raise InvalidArgumentError("not a sealed value")


class KeyMissing:
    """A secure client whose certs directory has no secrets key: it can neither seal
    nor open job secrets, and says why when asked to."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"there is no secrets key at {self.path}, so this client can neither read nor "
            "write changefeed jobs' sealed secrets: copy the cluster's secrets.key there "
            "(`feedkv cert create-ca` wrote it beside ca.crt), or run the statement over "
            "a node's SQL port"
        )


# What a process holds to seal job secrets with: a sealer (its certs directory's key),
# a missing key (a secure client without one), or None (insecure: the store's key).
HeldKey = Sealer | KeyMissing | None


def held_key(certs_dir: Path | None) -> HeldKey:
    """What a process given ``certs_dir`` (``None``: insecure) seals with."""
    if certs_dir is None:
        return None
    path = Path(certs_dir) / KEY_FILE
    if not path.exists():
        return KeyMissing(path)
    return Sealer(load_key(path), source=str(path))
