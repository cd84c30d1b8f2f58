"""``feedkv cert create-ca | create-node HOST... | create-client USER |
create-secrets-key | revoke CERT_OR_SERIAL``: a certs directory as ``cockroach cert``
writes one (:mod:`feedkv.security.certs`), with the key that seals changefeed secrets
(:mod:`feedkv.security.secrets`) and the list of revoked certificates
(:mod:`feedkv.security.revocation`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from feedkv.errors import InvalidArgumentError
from feedkv.security.certs import create_ca, create_client, create_node
from feedkv.security.revocation import CRL_FILE, revoke
from feedkv.security.secrets import KEY_FILE, write_key

__all__ = ["run_cert"]


def run_cert(args: argparse.Namespace) -> int:
    certs_dir = Path(args.certs_dir)
    if args.cert_command == "create-secrets-key":
        key = certs_dir / KEY_FILE
        if not write_key(key):
            raise InvalidArgumentError(
                f"{key} already exists; it is kept (secrets it sealed would not open "
                "with a new key)"
            )
        print(f"wrote {key}: copy it to every node's certs directory")
        return 0
    ca_key = Path(args.ca_key)
    if args.cert_command == "revoke":
        _, what = revoke(certs_dir, ca_key, args.target)
        print(
            f"revoked {what} in {certs_dir / CRL_FILE}: copy it to every node's certs "
            "directory (each node reads it again when it changes)"
        )
        return 0
    if args.cert_command == "create-ca":
        written = create_ca(certs_dir, ca_key, overwrite=args.overwrite)
    elif args.cert_command == "create-node":
        written = create_node(certs_dir, ca_key, args.hosts, overwrite=args.overwrite)
    else:
        written = create_client(
            certs_dir,
            ca_key,
            args.user,
            overwrite=args.overwrite,
            pkcs8=args.also_generate_pkcs8_key,
        )
    print(f"wrote {written} and its key")
    if args.cert_command == "create-client" and args.also_generate_pkcs8_key:
        print(
            f"wrote {certs_dir / f'client.{args.user}.key.pk8'}: the key as Java's "
            "PostgreSQL driver reads it (sslkey=)"
        )
    if args.cert_command == "create-ca":
        print(
            f"{certs_dir / KEY_FILE} seals changefeed secrets: copy it with ca.crt to every "
            "node's certs directory"
        )
    return 0
