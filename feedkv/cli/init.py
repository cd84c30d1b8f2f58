"""``feedkv init``: bootstrap a new cluster on one of its nodes, as ``cockroach init``.

Every node of the cluster was started with the same ``--join`` list and waits, serving
its gRPC port (:mod:`feedkv.server.init_server`); the node at ``--url`` bootstraps the
cluster and the others join it. A node already in a cluster refuses, in CockroachDB's
words: ``cluster has already been initialized``.
"""

from __future__ import annotations

import sys
from typing import TextIO

from feedkv.cli.credentials import Login
from feedkv.errors import InvalidArgumentError
from feedkv.kv.address import host_port, parse_node_url
from feedkv.kv.dialer import call
from feedkv.security.tls import ClientTLS, open_channel
from feedkv.server.init_server import INIT_METHOD

__all__ = ["run_init"]


def run_init(login: Login, stdout: TextIO | None = None) -> int:
    """Ask the node at ``login.url`` to bootstrap the cluster; InvalidArgumentError when
    it is in one already, NodeUnavailableError when it cannot be reached."""
    address = host_port(*parse_node_url(login.url))
    tls = (
        ClientTLS.load(login.certs_dir, login.user, password=login.password)
        if login.certs_dir is not None
        else None
    )
    with open_channel(address, [], tls) as channel:
        answer = call(channel, INIT_METHOD, {})
    if "refused" in answer:
        raise InvalidArgumentError(f"{answer['refused']} (the node at {address} is a member)")
    print("Cluster successfully initialized", file=stdout or sys.stdout, flush=True)
    return 0
