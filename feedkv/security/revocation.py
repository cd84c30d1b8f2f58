"""Revoked certificates: the certs directory's ``ca.crl``, a certificate revocation list
(RFC 5280) signed by the cluster's CA.

``feedkv cert revoke --certs-dir DIR --ca-key KEY CERT_OR_SERIAL`` (:func:`revoke`) adds
a certificate's serial number to ``DIR/ca.crl``, signing the list again with the CA's
key; the operator copies the file to every node's certs directory, as ``ca.crt``. A node
(:class:`Revocations`) refuses a revoked certificate wherever one is presented: the
certificate in a gRPC call's claim (:mod:`feedkv.security.call_auth`, also for a claim
it had already taken) and a client certificate on the SQL port. The HTTP port logs
users in by password only, so it takes no certificate to refuse.

A node reads the file again when it changes (its inode, size or modification time, looked
at on each check: one ``stat``), so a revocation holds without a restart, where
CockroachDB reloads its certificates on SIGHUP. A list that is not signed by the CA, or
does not parse, stops a node from starting (:class:`~feedkv.errors.InvalidArgumentError`);
met on a reload, it is logged and the list read before stays in force: a half-copied
file must not undo revocations.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from feedkv.errors import InvalidArgumentError, PermissionDeniedError
from feedkv.security.certs import CA_CERT, read_cert, read_key

__all__ = ["CRL_FILE", "Revocations", "revoke", "revoked_message"]

log = logging.getLogger(__name__)

CRL_FILE = "ca.crl"
CRL_LIFETIME = datetime.timedelta(days=366)  # its nextUpdate: when to publish one again
_HEX_SERIAL = re.compile(r"^(0x[0-9a-fA-F]+|[0-9a-fA-F]{2}(:[0-9a-fA-F]{2})+)$")


def revoke(certs_dir: Path, ca_key: Path, target: str) -> tuple[int, str]:
    """Add ``target``'s serial number to ``certs_dir/ca.crl`` (made if missing), signed
    with ``ca_key``; returns ``(serial, what it was)``. ``target``: a certificate file,
    or a serial number (decimal, ``0x``-hex, or colon-separated hex bytes as
    ``openssl x509 -serial`` prints it). Revoking a serial again changes nothing."""
    ca_cert = read_cert(certs_dir / CA_CERT)
    key = read_key(ca_key)
    if key.public_key() != ca_cert.public_key():
        raise InvalidArgumentError(f"the CA key {ca_key} does not belong to {certs_dir / CA_CERT}")
    serial, what = _serial_of(target)
    path = certs_dir / CRL_FILE
    existing = _load(path, ca_cert) if path.exists() else {}
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(now)
        .next_update(now + CRL_LIFETIME)
    )
    existing.setdefault(serial, now)
    for number, when in sorted(existing.items()):
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(number).revocation_date(when).build()
        )
    crl = builder.sign(key, hashes.SHA256())
    # NB: a new file moved into place, so a node never reads a half-written one
    partial = path.with_name(f".{CRL_FILE}.{os.getpid()}.tmp")
    partial.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    os.replace(partial, path)
    return serial, what


def _serial_of(target: str) -> tuple[int, str]:
    path = Path(target)
    if path.is_file():
        cert = read_cert(path)
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        name = str(names[0].value) if names else "?"
        return cert.serial_number, f"{path} (CN={name}, serial {cert.serial_number:#x})"
    text = target.strip()
    try:
        if _HEX_SERIAL.match(text):
            serial = int(text.removeprefix("0x").replace(":", ""), 16)
        else:
            serial = int(text, 10)
    except ValueError:
        serial = -1
    if serial <= 0:
        raise InvalidArgumentError(
            f"{target!r} is neither a certificate file nor a serial number (decimal, 0x-hex "
            "or colon-separated hex)"
        )
    return serial, f"serial {serial:#x}"


def _load(path: Path, ca_cert: x509.Certificate) -> dict[int, datetime.datetime]:
    """The serials ``path`` revokes, with when; InvalidArgumentError if it cannot be
    read or is not the CA's."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        if data.lstrip().startswith(b"-----"):
            crl = x509.load_pem_x509_crl(data)
        else:
            crl = x509.load_der_x509_crl(data)
    except ValueError as exc:
        raise InvalidArgumentError(f"{path} is not a certificate revocation list: {exc}") from exc
    if crl.issuer != ca_cert.subject or not crl.is_signature_valid(ca_cert.public_key()):  # type: ignore[arg-type]
        raise InvalidArgumentError(
            f"{path} is not signed by the CA of this certs directory: make it with "
            "`feedkv cert revoke` and that CA's key"
        )
    return {r.serial_number: r.revocation_date_utc for r in crl}


class Revocations:
    """A node's view of ``path`` (``ca.crl``), read again when it changes (see the
    module docstring); no file: nothing is revoked. Thread-safe."""

    def __init__(self, path: Path, ca_cert: x509.Certificate) -> None:
        self.path = path
        self._ca = ca_cert
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._serials: frozenset[int] = frozenset()
        self._refresh(strict=True)

    def _refresh(self, *, strict: bool) -> frozenset[int]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            seen = None
        else:
            seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if seen == self._seen:
            return self._serials
        with self._lock:
            if seen == self._seen:
                return self._serials
            try:
                serials = frozenset(_load(self.path, self._ca)) if seen is not None else frozenset()
            except InvalidArgumentError as exc:
                if strict:
                    raise
                # NB: read again only once it changes again (no log line per call)
                self._seen = seen
                log.error("kept the revocations read before: %s", exc)
                return self._serials
            self._serials, self._seen = serials, seen
            return serials

    def is_revoked(self, serial: int) -> bool:
        return serial in self._refresh(strict=False)

    def check(self, user: str, serial: int) -> None:
        """PermissionDeniedError if the certificate numbered ``serial`` (``user``'s) is
        revoked."""
        if self.is_revoked(serial):
            raise PermissionDeniedError(revoked_message(user, serial))


def revoked_message(user: str, serial: int) -> str:
    return (
        f"the certificate of {user!r} (serial {serial:#x}) has been revoked "
        f"({CRL_FILE}): ask for a new one"
    )
