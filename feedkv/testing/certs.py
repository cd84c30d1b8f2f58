"""Certs directories for tests: a CA, a node certificate for loopback and client
certificates, made once per directory (``feedkv cert``'s functions)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from feedkv.security.certs import create_ca, create_client, create_node

__all__ = ["make_certs_dir"]


def make_certs_dir(base: Path, users: Sequence[str] = ("root",)) -> Path:
    """``base/certs`` with a CA (its key at ``base/ca.key``), a node certificate for
    127.0.0.1 and localhost, and client certificates for ``users``; returns the
    directory. Existing files are kept, so fixtures may call it again."""
    certs, ca_key = base / "certs", base / "ca.key"
    if not (certs / "ca.crt").exists():
        create_ca(certs, ca_key)  # and the secrets key
    if not (certs / "node.crt").exists():
        create_node(certs, ca_key, ["127.0.0.1", "localhost"])
    for user in users:
        if not (certs / f"client.{user}.crt").exists():
            create_client(certs, ca_key, user)
    return certs
