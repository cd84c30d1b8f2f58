"""``feedkv cert create-ca | create-node HOST... | create-client USER``: a certs
directory as ``cockroach cert`` writes one (:mod:`feedkv.security.certs`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from feedkv.security.certs import create_ca, create_client, create_node

__all__ = ["run_cert"]


def run_cert(args: argparse.Namespace) -> int:
    certs_dir, ca_key = Path(args.certs_dir), Path(args.ca_key)
    if args.cert_command == "create-ca":
        written = create_ca(certs_dir, ca_key, overwrite=args.overwrite)
    elif args.cert_command == "create-node":
        written = create_node(certs_dir, ca_key, args.hosts, overwrite=args.overwrite)
    else:
        written = create_client(certs_dir, ca_key, args.user, overwrite=args.overwrite)
    print(f"wrote {written} and its key")
    return 0
