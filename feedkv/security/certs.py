"""Certificates: a cluster's CA, its nodes' and its clients' certificates, written to a
*certs directory* laid out as CockroachDB's ``cockroach cert`` does::

    ca.crt                  the CA's certificate (every node and client trusts it)
    secrets.key             the key that seals changefeed jobs' secrets, written with
                            the CA and copied with ca.crt to every node
                            (:mod:`feedkv.security.secrets`)
    node.crt, node.key      a node's: CN=node, the node's hosts as SANs, used both to
                            serve and to call other nodes (server and client auth)
    client.USER.crt/.key    a client's: CN=USER (``client.root.crt`` is the admin's)

The CA's key stays outside the certs directory (``--ca-key FILE``), on the machine that
signs. Keys are ECDSA P-256 (quick to make and to handshake; libpq, psycopg and gRPC
take them), written with mode 0600 as libpq insists for a client key.

:func:`load_certs_dir` reads a directory back and checks it is whole and consistent; a
file that is missing, unreadable or not a certificate is an
:class:`~feedkv.errors.InvalidArgumentError` naming it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from feedkv.errors import InvalidArgumentError
from feedkv.security.secrets import KEY_FILE, write_key

__all__ = [
    "CA_CERT",
    "NODE_USER",
    "CertsDir",
    "create_ca",
    "create_client",
    "create_node",
    "load_certs_dir",
    "read_cert",
    "read_key",
]

CA_CERT = "ca.crt"
NODE_USER = "node"  # the CN of node certificates, as CockroachDB's
CA_LIFETIME = datetime.timedelta(days=10 * 366)
CERT_LIFETIME = datetime.timedelta(days=5 * 366)
_USER = re.compile(r"^[a-z_][a-z0-9_\-.$]{0,62}$")


@dataclass(frozen=True)
class CertsDir:
    """A certs directory checked by :func:`load_certs_dir`: its paths, and the users
    it holds client certificates for."""

    path: Path

    @property
    def ca_cert(self) -> Path:
        return self.path / CA_CERT

    @property
    def secrets_key(self) -> Path:
        """The key that seals changefeed jobs' secrets (:mod:`feedkv.security.secrets`)."""
        return self.path / KEY_FILE

    @property
    def node_cert(self) -> Path:
        return self.path / "node.crt"

    @property
    def node_key(self) -> Path:
        return self.path / "node.key"

    def client_cert(self, user: str) -> Path:
        return self.path / f"client.{user}.crt"

    def client_key(self, user: str) -> Path:
        return self.path / f"client.{user}.key"

    def identity(self, user: str) -> tuple[Path, Path]:
        """``(cert, key)`` a client presents as ``user`` (``node``: the node's own)."""
        if user == NODE_USER:
            return self.node_cert, self.node_key
        return self.client_cert(user), self.client_key(user)

    def has_identity(self, user: str) -> bool:
        cert, key = self.identity(user)
        return cert.is_file() and key.is_file()


def create_ca(certs_dir: Path, ca_key: Path, *, overwrite: bool = False) -> Path:
    """Make a CA: its key at ``ca_key``, its certificate at ``certs_dir/ca.crt``."""
    certs_dir.mkdir(parents=True, exist_ok=True)
    cert_path = certs_dir / CA_CERT
    _refuse_overwrite([cert_path, ca_key], overwrite)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "feedkv"),
            x509.NameAttribute(NameOID.COMMON_NAME, "feedkv CA"),
        ]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    ca_key.parent.mkdir(parents=True, exist_ok=True)
    _write_key(ca_key, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    # NB: an existing secrets key is kept, even with overwrite: secrets it sealed
    # would not open with a new one
    write_key(certs_dir / KEY_FILE)
    return cert_path


def create_node(
    certs_dir: Path, ca_key: Path, hosts: Sequence[str], *, overwrite: bool = False
) -> Path:
    """Sign ``node.crt``/``node.key`` for ``hosts`` (names or IP addresses, the SANs a
    client checks the node's address against)."""
    if not hosts:
        raise InvalidArgumentError("create-node needs at least one host (a name or an address)")
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not re.fullmatch(r"[A-Za-z0-9*]([A-Za-z0-9\-.*]{0,252})", host):
                raise InvalidArgumentError(
                    f"{host!r} is neither a host name nor an IP address"
                ) from None
            sans.append(x509.DNSName(host))
    return _sign(certs_dir, ca_key, NODE_USER, "node", sans, overwrite=overwrite)


def create_client(
    certs_dir: Path, ca_key: Path, user: str, *, overwrite: bool = False, pkcs8: bool = False
) -> Path:
    """Sign ``client.USER.crt``/``.key``: a client that presents it is ``user``. With
    ``pkcs8``, the key also as ``client.USER.key.pk8`` (PKCS#8 DER, the form Java's
    PostgreSQL driver reads: ``sslkey=.../client.USER.key.pk8``), as CockroachDB's
    ``--also-generate-pkcs8-key`` writes it."""
    if user == NODE_USER or not _USER.match(user):
        raise InvalidArgumentError(
            f"{user!r} is not a SQL user name (lower case letters, digits, _ . - $; "
            f"and not {NODE_USER!r}, the nodes' own)"
        )
    der_path = certs_dir / f"client.{user}.key.pk8"
    if pkcs8:
        _refuse_overwrite([der_path], overwrite)
    written = _sign(certs_dir, ca_key, user, f"client.{user}", [], overwrite=overwrite)
    if pkcs8:
        key = read_key(certs_dir / f"client.{user}.key")
        _write_key(der_path, key, serialization.Encoding.DER)
    return written


def load_certs_dir(path: Path, *, user: str | None = None) -> CertsDir:
    """Check that ``path`` holds the CA's certificate and (``user``) that identity's
    certificate and key, each parseable and signed by the CA."""
    certs = CertsDir(Path(path))
    if not certs.path.is_dir():
        raise InvalidArgumentError(
            f"the certs directory {str(path)!r} does not exist; make one with "
            "`feedkv cert create-ca` (or start with --insecure)"
        )
    ca = read_cert(certs.ca_cert)
    if user is not None:
        cert_path, key_path = certs.identity(user)
        cert = read_cert(cert_path)
        read_key(key_path)
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature) as exc:
            raise InvalidArgumentError(
                f"{cert_path} was not signed by the CA of {certs.ca_cert}: sign it again "
                "with that CA's key"
            ) from exc
    return certs


def common_name(cert_pem: bytes) -> str:
    """The CN of a PEM certificate ('' when it has none)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def _sign(
    certs_dir: Path,
    ca_key_path: Path,
    cn: str,
    stem: str,
    sans: list[x509.GeneralName],
    *,
    overwrite: bool,
) -> Path:
    ca_cert = read_cert(certs_dir / CA_CERT)
    ca_key = read_key(ca_key_path)
    if ca_key.public_key() != ca_cert.public_key():
        raise InvalidArgumentError(
            f"the CA key {ca_key_path} does not belong to {certs_dir / CA_CERT}"
        )
    cert_path, key_path = certs_dir / f"{stem}.crt", certs_dir / f"{stem}.key"
    _refuse_overwrite([cert_path, key_path], overwrite)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if sans:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "feedkv"),
                    x509.NameAttribute(NameOID.COMMON_NAME, cn),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(min(now + CERT_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path


def read_cert(path: Path) -> x509.Certificate:
    """The PEM certificate at ``path``; InvalidArgumentError names a missing or bad one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot read the certificate {path}: {exc.strerror or exc}"
        ) from exc
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise InvalidArgumentError(f"{path} is not a PEM certificate: {exc}") from exc


def read_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The unencrypted EC key at ``path``; InvalidArgumentError names a missing or bad one,
    or one others may read or write (as CockroachDB refuses a key file whose permissions
    exceed ``-rwx------``)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the key {path}: {exc.strerror or exc}") from exc
    if mode & 0o077:
        raise InvalidArgumentError(
            f"the key file {path} has permissions {stat.filemode(mode)[1:]}, which exceed "
            f"rwx------: others may read it (chmod 600 {path})"
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"{path} is not an unencrypted PEM private key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise InvalidArgumentError(f"{path} is not an EC key (feedkv cert makes P-256 keys)")
    return key


def _write_key(
    path: Path,
    key: ec.EllipticCurvePrivateKey,
    encoding: serialization.Encoding = serialization.Encoding.PEM,
) -> None:
    data = key.private_bytes(
        encoding,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def _refuse_overwrite(paths: list[Path], overwrite: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not overwrite:
        raise InvalidArgumentError(
            f"{', '.join(existing)} already exist(s); pass --overwrite to replace"
        )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
