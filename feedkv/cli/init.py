"""``feedkv init``: bootstrap a new cluster on one of its nodes, as ``cockroach init``.

Every node of the cluster was started with the same ``--join`` list and waits, serving
its gRPC port (:mod:`feedkv.server.init_server`); the node at ``--url`` bootstraps the
cluster and the others join it. A node already in a cluster refuses, in CockroachDB's
words: ``cluster has already been initialized``; so does a waiting node when another
``feedkv init`` (on another node of its ``--join`` list) took the claim to bootstrap
first, naming that node (:mod:`feedkv.server.init_claim`).
"""

from __future__ import annotations

import sys
from typing import TextIO

from feedkv.cli.credentials import Login, dial
from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.kv.address import host_port, parse_node_url
from feedkv.kv.dialer import call
from feedkv.server.init_server import INIT_CLAIM_S, INIT_METHOD

__all__ = ["run_init"]


def run_init(login: Login, stdout: TextIO | None = None) -> int:
    """Ask the node at ``login.url`` to bootstrap the cluster; InvalidArgumentError when
    a cluster exists already (or another init bootstraps it), NodeUnavailableError when
    the node cannot be reached or no majority of its ``--join`` list granted it the
    claim (try again)."""
    address = host_port(*parse_node_url(login.url))
    with dial(login) as channel:
        # NB: the node takes the claim at its --join list first, for up to INIT_CLAIM_S
        answer = call(channel, INIT_METHOD, {}, INIT_CLAIM_S + 10.0)
    if "failed" in answer:
        raise NodeUnavailableError(f"the node at {address} did not bootstrap: {answer['failed']}")
    here = bool(answer.get("here"))  # the node at ``address`` refused for itself
    if "by" in answer and (here or answer["by"] == address):
        raise InvalidArgumentError(
            f"{answer['refused']}: the node at {address} bootstraps it, as an earlier "
            "`feedkv init` asked"
        )
    if "by" in answer:
        raise InvalidArgumentError(
            f"{answer['refused']}: `feedkv init` reached the node at {answer['by']} first, "
            f"which bootstraps it; the node at {address} joins it"
        )
    member = answer.get("member") or address
    if "refused" in answer and not here and member != address:
        raise InvalidArgumentError(
            f"{answer['refused']} (the node at {member} is a member; the node at "
            f"{address} joins its cluster)"
        )
    if "refused" in answer:
        raise InvalidArgumentError(f"{answer['refused']} (the node at {address} is a member)")
    print("Cluster successfully initialized", file=stdout or sys.stdout, flush=True)
    return 0
