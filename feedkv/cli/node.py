"""``feedkv node ls | status | drain | decommission | recommission``: the nodes of a
cluster, through the node at ``--url``.

``ls`` and ``status`` leave out, as CockroachDB's do, the nodes decommissioned and gone
(no longer heard): they left the cluster for good. ``status --decommission`` lists them
too, with the decommission columns; ``status NODE_ID...`` lists those nodes only.

``decommission`` works as ``cockroach node decommission``: it marks the nodes
``decommissioning`` (:mod:`feedkv.kv.membership`), so the lease holders of their ranges
replace their replicas on the other nodes (a dead node's too), reports their replica
counts until none is left, then marks them ``decommissioned``: the cluster refuses them
from then on. ``recommission`` takes back nodes still decommissioning.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

import feedkv
from feedkv.cli.credentials import Login, connect, dial
from feedkv.cli.sql import write_result
from feedkv.db import DB
from feedkv.errors import InvalidArgumentError
from feedkv.kv.dialer import call
from feedkv.kv.membership import Membership, membership_key
from feedkv.kv.node_status import NodeInfo
from feedkv.server.cluster import drain_call_timeout
from feedkv.sql import catalog
from feedkv.sql.crdb_internal import wall_time
from feedkv.sql.session import Result

__all__ = [
    "clock_offset_ms",
    "listed_nodes",
    "run_node_decommission",
    "run_node_drain",
    "run_node_ls",
    "run_node_recommission",
    "run_node_status",
]

COLUMNS = (  # CockroachDB's, in its order; then feedkv's own
    "id",
    "address",
    "sql_address",
    "build",
    "started_at",
    "updated_at",
    "locality",
    "is_available",
    "is_live",
    "epoch",
    "ranges",
    "clock_offset_ms",
    "membership",
    "is_draining",
)
DECOMMISSION_COLUMNS = (
    "id",
    "is_live",
    "replicas",
    "is_decommissioning",
    "membership",
    "is_draining",
)
POLL_S = 1.0  # how often decommission looks at the replicas left
DRAIN_WAIT_S = 600.0  # cockroach node drain's --drain-wait default (10m)


def listed_nodes(
    nodes: Sequence[NodeInfo], node_ids: Sequence[int] = (), *, gone_too: bool = False
) -> list[NodeInfo]:
    """The nodes ``ls`` and ``status`` print, by id: ``node_ids`` (all when empty; an id
    not in the cluster raises :class:`~feedkv.errors.InvalidArgumentError`), less, unless
    ``gone_too`` or named, those decommissioned and no longer heard."""
    by_id = {n.node_id: n for n in nodes}
    _check_members(by_id, node_ids)
    if node_ids:
        return [by_id[n] for n in node_ids]
    return [
        n
        for _, n in sorted(by_id.items())
        if gone_too or n.live or n.membership != Membership.DECOMMISSIONED.value
    ]


def clock_offset_ms(offset_ns: int | None) -> float | None:
    """A node's clock offset as ``node status`` prints it: milliseconds to one decimal
    (``None``: not measured)."""
    if offset_ns is None:
        return None
    # NB: a clock a few microseconds behind rounds to -0.0, which printed as "-0"
    return round(offset_ns / 1e6, 1) or 0.0


def run_node_ls(
    url: str, output: str = "table", stdout: TextIO | None = None, login: Login | None = None
) -> int:
    """Print the id of each node as ``cockroach node ls`` does (see :func:`listed_nodes`)."""
    with connect(url, login) as db:
        rows = [(n.node_id,) for n in listed_nodes(db.nodes())]
    write_result(Result(("id",), rows, f"SELECT {len(rows)}"), output, stdout or sys.stdout)
    return 0


def run_node_status(
    url: str,
    output: str = "table",
    stdout: TextIO | None = None,
    login: Login | None = None,
    *,
    node_ids: Sequence[int] = (),
    decommission: bool = False,
) -> int:
    """Print each node as ``cockroach node status`` does: id, address, SQL address,
    build, start, last heartbeat, locality, whether its liveness record is unexpired
    (``is_available``) and whether it is heard (``is_live``); then feedkv's epoch, ranges
    held, clock offset and membership, as ``crdb_internal.gossip_nodes`` and
    ``gossip_liveness`` show them (the same source: :meth:`feedkv.kv.db.KVClient.nodes`),
    and whether it drains (``is_draining``, last). Which nodes: :func:`listed_nodes`;
    ``decommission`` adds the nodes gone and ``cockroach node status --decommission``'s
    ``is_decommissioning`` (before ``is_draining``)."""
    columns = (*COLUMNS[:-1], "is_decommissioning", COLUMNS[-1]) if decommission else COLUMNS
    with connect(url, login) as db:
        rows = [
            (
                node.node_id,
                node.address,
                node.sql_address or None,
                node.build or None,
                wall_time(node.started_at_ns),
                wall_time(node.updated_at_ns),
                str(node.locality),
                node.available,
                node.live,
                node.epoch,
                node.ranges,
                clock_offset_ms(node.offset_ns),
                node.membership,
                *((node.membership != Membership.ACTIVE.value,) if decommission else ()),
                node.draining,
            )
            for node in listed_nodes(db.nodes(), node_ids, gone_too=decommission)
        ]
    write_result(Result(columns, rows, f"SELECT {len(rows)}"), output, stdout or sys.stdout)
    return 0


def run_node_drain(
    login: Login,
    node_id: int | None = None,
    *,
    shutdown: bool = False,
    drain_wait_s: float = DRAIN_WAIT_S,
    stdout: TextIO | None = None,
) -> int:
    """Drain node ``node_id`` (``None``: the node at ``login.url``) as the module
    docstring says, asking until nothing is left to move; then, with ``shutdown``, it
    stops. Exit 1 when something is left after ``drain_wait_s`` (the node stays
    draining; run the command again to wait on). Raises
    :class:`~feedkv.errors.InvalidArgumentError` for a node not in the cluster, or a
    shutdown of a node that runs inside another program."""
    out = stdout or sys.stdout
    deadline = time.monotonic() + drain_wait_s
    with dial(login) as channel:
        answer = call(channel, "Nodes", {})
        nodes = {n.node_id: n for n in map(NodeInfo.decode, answer["nodes"])}
        _check_members(nodes, [node_id] if node_id is not None else [])
        target = node_id if node_id is not None else int(answer["me"])
        while True:
            left_s = max(deadline - time.monotonic(), 1.0)
            message = {"node": target, "shutdown": shutdown, "wait_s": left_s}
            # NB: a call waits at most the node's --lease-transfer-wait, then says what is
            # left; passed on by the gateway, it takes a little longer
            drained = call(channel, "Drain", message, drain_call_timeout(left_s) + 5.0)
            if "refused" in drained:
                raise InvalidArgumentError(str(drained["refused"]))
            remaining = int(drained["remaining"])
            done = " (complete)" if remaining == 0 else ""
            print(f"node is draining... remaining: {remaining}{done}", file=out, flush=True)
            if remaining == 0:
                break
            if time.monotonic() >= deadline:
                print(
                    f"feedkv: node n{target} still has {remaining} leases or writes to move "
                    f"after {drain_wait_s:g} s; it stays draining (run the command again to "
                    "go on waiting)",
                    file=sys.stderr,
                )
                return 1
    print("drain ok", file=out)
    if shutdown:
        print(f"node n{target} is shutting down", file=out)
    return 0


def run_node_decommission(
    url: str,
    node_ids: Sequence[int],
    *,
    wait: bool = True,
    timeout_s: float | None = None,
    output: str = "table",
    stdout: TextIO | None = None,
    login: Login | None = None,
) -> int:
    """Decommission ``node_ids`` (see the module docstring); with ``wait``, until their
    replicas are gone (at most ``timeout_s``: then exit 1, the nodes left
    decommissioning, as CockroachDB leaves them). Raises
    :class:`~feedkv.errors.InvalidArgumentError` for a node not in the cluster, or when
    no active node would be left."""
    out = stdout or sys.stdout
    with connect(url, login) as db:
        nodes = {n.node_id: n for n in db.nodes()}
        _check_members(nodes, node_ids)
        staying = [
            n for n in nodes.values() if n.node_id not in node_ids and n.membership == "active"
        ]
        if not staying:
            raise InvalidArgumentError(
                "decommissioning these nodes would leave no active node in the cluster"
            )
        _check_room(db, [n for n in staying if n.live])
        _set_membership(db, node_ids, Membership.DECOMMISSIONING, keep_decommissioned=True)
        if not wait:
            _write_status(db, node_ids, output, out)
            return 0
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        shown: list[tuple[object, ...]] = []
        while True:
            rows = _status_rows(db, node_ids)
            if rows != shown:
                write_result(Result(DECOMMISSION_COLUMNS, rows, ""), output, out)
                shown = rows
            if all(row[2] == 0 for row in rows):
                break
            if deadline is not None and time.monotonic() > deadline:
                print(
                    f"feedkv: replicas are still on the nodes after {timeout_s:g} s; "
                    "they stay decommissioning (run the command again to go on waiting)",
                    file=sys.stderr,
                )
                return 1
            time.sleep(POLL_S)  # wait-ok: the nodes' replicas move meanwhile
        _set_membership(db, node_ids, Membership.DECOMMISSIONED, keep_decommissioned=True)
        # NB: as written: the gateway's view of the memberships lags by up to a second
        final = [(*row[:3], True, Membership.DECOMMISSIONED.value, row[5]) for row in rows]
        write_result(Result(DECOMMISSION_COLUMNS, final, f"SELECT {len(final)}"), output, out)
    print(
        "\nNo more data reported on target nodes. "
        "Please verify cluster health before removing the nodes.",
        file=out,
    )
    return 0


def run_node_recommission(
    url: str,
    node_ids: Sequence[int],
    stdout: TextIO | None = None,
    login: Login | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Take back nodes still decommissioning (their replicas may return); a node
    decommissioned already cannot be (:class:`~feedkv.errors.InvalidArgumentError`),
    and one that is active has nothing to take back: a warning says so, as
    ``cockroach node recommission`` warns."""
    with connect(url, login) as db:
        nodes = {n.node_id: n for n in db.nodes()}
        _check_members(nodes, node_ids)
        for node_id in node_ids:
            if nodes[node_id].membership == Membership.DECOMMISSIONED.value:
                raise InvalidArgumentError(
                    f"node n{node_id} is decommissioned: it cannot be recommissioned "
                    "(start a new node on an empty store instead)"
                )
        taken = [n for n in node_ids if nodes[n].membership != Membership.ACTIVE.value]
        for node_id in node_ids:
            if node_id not in taken:
                print(
                    f"warning: node n{node_id} is not decommissioning: nothing to take back",
                    file=stderr or sys.stderr,
                )
        if taken:
            _set_membership(db, taken, Membership.ACTIVE, keep_decommissioned=False)
    if taken:
        print("The affected nodes must be restarted to rejoin the cluster fully.", file=stdout)
    return 0


def _check_members(nodes: dict[int, NodeInfo], node_ids: Sequence[int]) -> None:
    unknown = [n for n in node_ids if n not in nodes]
    if unknown:
        raise InvalidArgumentError(
            f"node{'s' if len(unknown) > 1 else ''} {', '.join(f'n{n}' for n in unknown)} "
            f"not in the cluster; its nodes are {', '.join(f'n{n}' for n in sorted(nodes))}"
        )


def _check_room(db: DB, staying: list[NodeInfo]) -> None:
    """Refuse a decommission after which the live active nodes could not hold the
    replicas a zone asks for (its ranges would stay under-replicated), as CockroachDB's
    pre-checks do."""
    snapshot = catalog.Snapshot(db, db.now())
    default, tables = catalog.zone_replicas(snapshot)
    wanted = max([default or 1, *(n for _, n in tables)])
    if len(staying) < wanted:
        raise InvalidArgumentError(
            f"decommissioning would leave {len(staying)} live active node"
            f"{'s' if len(staying) != 1 else ''}, fewer than the {wanted} replicas a zone "
            "asks for (SHOW ZONE CONFIGURATIONS): add a node first, or lower num_replicas "
            "(ALTER RANGE default CONFIGURE ZONE USING num_replicas = N)"
        )


def _set_membership(
    db: DB, node_ids: Sequence[int], state: Membership, *, keep_decommissioned: bool
) -> None:
    def write(txn: feedkv.Txn) -> None:
        for node_id in node_ids:
            key = membership_key(node_id)
            held = txn.get(key)
            if keep_decommissioned and held == Membership.DECOMMISSIONED.value.encode():
                continue  # NB: never back from decommissioned
            if state is Membership.ACTIVE:
                txn.delete(key)
            else:
                txn.put(key, state.value.encode())

    db.run_transaction(write)


def _status_rows(db: DB, node_ids: Sequence[int]) -> list[tuple[object, ...]]:
    nodes = {n.node_id: n for n in db.nodes()}
    return [
        (
            node_id,
            nodes[node_id].live,
            nodes[node_id].ranges,
            nodes[node_id].membership != "active",
            nodes[node_id].membership,
            nodes[node_id].draining,
        )
        for node_id in node_ids
    ]


def _write_status(db: DB, node_ids: Sequence[int], output: str, out: TextIO) -> None:
    rows = _status_rows(db, node_ids)
    write_result(Result(DECOMMISSION_COLUMNS, rows, f"SELECT {len(rows)}"), output, out)
