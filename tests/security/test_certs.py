"""``feedkv cert``: a certs directory as ``cockroach cert`` writes one, checked when it
is loaded, and bad files refused with errors naming them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from feedkv.cli.main import main
from feedkv.errors import InvalidArgumentError
from feedkv.security.certs import (
    create_ca,
    create_client,
    create_node,
    load_certs_dir,
)
from feedkv.security.tls import ClientTLS, ServerTLS
from feedkv.testing.certs import make_certs_dir


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_cert_commands_write_a_certs_directory(tmp_path: Path) -> None:
    certs, ca_key = str(tmp_path / "certs"), str(tmp_path / "safe" / "ca.key")
    assert main(["cert", "create-ca", "--certs-dir", certs, "--ca-key", ca_key]) == 0
    node_args = ["127.0.0.1", "db.example", "--certs-dir", certs, "--ca-key", ca_key]
    assert main(["cert", "create-node", *node_args]) == 0
    assert main(["cert", "create-client", "root", "--certs-dir", certs, "--ca-key", ca_key]) == 0
    directory = Path(certs)
    assert sorted(p.name for p in directory.iterdir()) == [
        "ca.crt",
        "client.root.crt",
        "client.root.key",
        "node.crt",
        "node.key",
        "secrets.key",  # the key that seals changefeed secrets (test_secrets_key.py)
    ]
    node = _cert(directory / "node.crt")
    assert node.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "node"
    sans = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["db.example"]
    usages = node.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    client = _cert(directory / "client.root.crt")
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "root"
    for key in (directory / "node.key", directory / "client.root.key", Path(ca_key)):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    load_certs_dir(directory, user="node")
    load_certs_dir(directory, user="root")


def test_a_client_key_is_also_written_as_pkcs8_der_for_java(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--also-generate-pkcs8-key`` (CockroachDB's flag) writes client.USER.key.pk8:
    the same key in PKCS#8 DER, private to its owner, as pgJDBC's ``sslkey`` reads it."""
    certs, ca_key = str(tmp_path / "certs"), str(tmp_path / "ca.key")
    assert main(["cert", "create-ca", "--certs-dir", certs, "--ca-key", ca_key]) == 0
    flags = ["--certs-dir", certs, "--ca-key", ca_key, "--also-generate-pkcs8-key"]
    assert main(["cert", "create-client", "ann", *flags]) == 0
    der = Path(certs) / "client.ann.key.pk8"
    pem = serialization.load_pem_private_key((Path(certs) / "client.ann.key").read_bytes(), None)
    # NB: load_der_private_key reads PKCS#8 (and no PEM armour)
    assert serialization.load_der_private_key(der.read_bytes(), None).private_numbers() == (
        pem.private_numbers()  # type: ignore[union-attr]
    )
    assert stat.S_IMODE(der.stat().st_mode) == 0o600
    assert main(["cert", "create-client", "ann", *flags]) != 0
    assert "client.ann.key.pk8" in capsys.readouterr().err
    assert main(["cert", "create-client", "ann", *flags, "--overwrite"]) == 0


def test_a_key_others_may_read_is_refused(tmp_path: Path) -> None:
    """As CockroachDB: a key file whose permissions exceed rwx------ is refused, naming
    the file, its permissions and the fix; a node does not start with it."""
    certs = make_certs_dir(tmp_path)
    (certs / "node.key").chmod(0o644)
    with pytest.raises(InvalidArgumentError) as refused:
        load_certs_dir(certs, user="node")
    assert str(refused.value) == (
        f"the key file {certs / 'node.key'} has permissions rw-r--r--, which exceed "
        f"rwx------: others may read it (chmod 600 {certs / 'node.key'})"
    )
    (certs / "node.key").chmod(0o600)
    load_certs_dir(certs, user="node")


def test_existing_files_are_kept_without_overwrite(tmp_path: Path) -> None:
    create_ca(tmp_path / "certs", tmp_path / "ca.key")
    before = (tmp_path / "certs" / "ca.crt").read_bytes()
    with pytest.raises(InvalidArgumentError, match="--overwrite"):
        create_ca(tmp_path / "certs", tmp_path / "ca.key")
    assert (tmp_path / "certs" / "ca.crt").read_bytes() == before
    create_ca(tmp_path / "certs", tmp_path / "ca.key", overwrite=True)
    assert (tmp_path / "certs" / "ca.crt").read_bytes() != before


def test_a_certificate_of_another_ca_is_refused(tmp_path: Path) -> None:
    ours = make_certs_dir(tmp_path / "ours")
    theirs = make_certs_dir(tmp_path / "theirs", users=("root",))
    (ours / "client.root.crt").write_bytes((theirs / "client.root.crt").read_bytes())
    (ours / "client.root.key").write_bytes((theirs / "client.root.key").read_bytes())
    with pytest.raises(InvalidArgumentError, match=r"client\.root\.crt was not signed by the CA"):
        ClientTLS.load(ours, "root")


def test_signing_with_a_key_that_is_not_the_cas_is_refused(tmp_path: Path) -> None:
    make_certs_dir(tmp_path / "a")
    make_certs_dir(tmp_path / "b")
    with pytest.raises(InvalidArgumentError, match="does not belong to"):
        create_client(tmp_path / "a" / "certs", tmp_path / "b" / "ca.key", "bob")


@pytest.mark.parametrize("user", ["", "node", "Root", "a b", "../x", "x" * 70])
def test_bad_client_names_are_refused(tmp_path: Path, user: str) -> None:
    make_certs_dir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="not a SQL user name"):
        create_client(tmp_path / "certs", tmp_path / "ca.key", user)


@pytest.mark.parametrize("host", ["", "a b", "x/y", "-bad"])
def test_bad_node_hosts_are_refused(tmp_path: Path, host: str) -> None:
    make_certs_dir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="neither a host name nor an IP"):
        create_node(tmp_path / "certs", tmp_path / "ca.key", [host], overwrite=True)


def test_missing_directory_and_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"does not exist.*--insecure"):
        ServerTLS.load(tmp_path / "nowhere")
    certs = make_certs_dir(tmp_path)
    (certs / "node.key").unlink()
    with pytest.raises(InvalidArgumentError, match=r"cannot read the key .*node\.key"):
        ServerTLS.load(certs)
    with pytest.raises(InvalidArgumentError, match=r"client\.alice\.crt"):
        ClientTLS.load(certs, "alice")


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    target=hs.sampled_from(["ca.crt", "node.crt", "node.key"]),
    data=hs.one_of(
        hs.binary(max_size=2000),
        hs.text(max_size=500).map(str.encode),
        hs.integers(0, 600).map(lambda n: b"-----BEGIN CERTIFICATE-----\n" + b"A" * n),
    ),
)
def test_corrupt_certificate_files_raise_a_clear_error(
    tmp_path_factory: pytest.TempPathFactory, target: str, data: bytes
) -> None:
    certs = make_certs_dir(tmp_path_factory.mktemp("fuzz"))
    (certs / target).write_bytes(data)
    with pytest.raises(InvalidArgumentError, match=target.replace(".", r"\.")):
        ServerTLS.load(certs)


def test_a_truncated_certificate_is_named(tmp_path: Path) -> None:
    certs = make_certs_dir(tmp_path)
    whole = (certs / "node.crt").read_bytes()
    for cut in range(0, len(whole), 37):
        (certs / "node.crt").write_bytes(whole[:cut])
        with pytest.raises(InvalidArgumentError, match=r"node\.crt"):
            ServerTLS.load(certs)
