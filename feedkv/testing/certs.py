"""Certs directories for tests: a CA, a node certificate for loopback and client
certificates, made once per directory (``feedkv cert``'s functions).

Nodes that tests start are secure by default (:class:`~feedkv.testing.node_process.
NodeProcess`, :class:`~feedkv.testing.cluster.LocalCluster`, the test fixtures), all
with :func:`shared_certs_dir`: one directory a process makes on first use and removes
at its exit, so a test session pays for its keys once and every TLS handshake after that
is a handshake only.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from feedkv.security.certs import create_ca, create_client, create_node

__all__ = ["SHARED_USERS", "make_certs_dir", "shared_certs_dir"]

# the client certificates of the shared directory: the admin and two ordinary users
SHARED_USERS = ("root", "alice", "bob")


def make_certs_dir(base: Path, users: Sequence[str] = ("root",)) -> Path:
    """``base/certs`` with a CA (its key at ``base/ca.key``), a node certificate for
    127.0.0.1 and localhost, and client certificates for ``users`` (their keys in
    PKCS#8 DER too, for Java's driver); returns the directory. Existing files are
    kept, so fixtures may call it again."""
    certs, ca_key = base / "certs", base / "ca.key"
    if not (certs / "ca.crt").exists():
        create_ca(certs, ca_key)  # and the secrets key
    if not (certs / "node.crt").exists():
        create_node(certs, ca_key, ["127.0.0.1", "localhost"])
    for user in users:
        if not (certs / f"client.{user}.crt").exists():
            create_client(certs, ca_key, user, pkcs8=True)
    return certs


@functools.cache
def shared_certs_dir() -> Path:
    """This process's certs directory for tests (made once; removed at exit): a CA and
    its secrets key, a node certificate for 127.0.0.1 and localhost, and client
    certificates for :data:`SHARED_USERS`."""
    base = Path(tempfile.mkdtemp(prefix="feedkv-test-certs-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    return make_certs_dir(base, SHARED_USERS)
