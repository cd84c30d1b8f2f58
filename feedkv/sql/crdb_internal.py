"""The virtual tables of the ``crdb_internal`` schema: the cluster's nodes as SQL rows.

``crdb_internal.gossip_nodes`` (a row per node: address, SQL address, locality, build
tag, start, liveness, ranges) and
``crdb_internal.gossip_liveness`` (a row per node's liveness record: epoch, expiration,
last heartbeat) carry CockroachDB's main columns. Both are built per statement from
the nodes as the session's gateway node sees them (:meth:`feedkv.kv.db.KVClient.nodes`),
the source ``feedkv node status`` reads too, so they agree. A query reads one as it
reads a CTE's rows (joins, WHERE, ORDER BY, aggregates); they are read-only and, as in
CockroachDB, for the admin role only.

A node's ``locality`` is its ``--locality`` tiers in CockroachDB's text
(``region=us-east1,zone=a``; ``''`` without). Columns feedkv has no notion of are left
out (attributes, cluster name, versions); ``sql_address`` is NULL for a node that
serves no SQL port or drains (it takes no new SQL clients); ``draining`` is whether it
drains (SIGTERM, or ``feedkv node drain``); ``membership`` is ``active``,
``decommissioning`` or ``decommissioned`` (:mod:`feedkv.kv.membership`), and
``decommissioning`` is true for either of the last two, as in CockroachDB.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from feedkv.errors import SQLError
from feedkv.kv.node_status import NodeInfo
from feedkv.sql import statements as st
from feedkv.sql.descriptor import Column
from feedkv.sql.relation import Relation
from feedkv.sql.types import ColumnType, Kind

__all__ = ["SCHEMA", "TABLES", "is_virtual", "virtual_table", "wall_time"]

SCHEMA = "crdb_internal"

_INT, _STRING, _BOOL, _TS = (
    ColumnType(k) for k in (Kind.INT, Kind.STRING, Kind.BOOL, Kind.TIMESTAMP)
)


def wall_time(ns: int | None) -> datetime.datetime | None:
    """Wall nanoseconds as a TIMESTAMP value (UTC, microseconds: SQL's precision)."""
    if ns is None:
        return None
    epoch = datetime.datetime(1970, 1, 1)
    return epoch + datetime.timedelta(microseconds=ns // 1000)


def _hlc_text(ns: int | None) -> str | None:
    """CockroachDB's text of an HLC timestamp (``<seconds>.<nanos>,<logical>``)."""
    return None if ns is None else f"{ns // 10**9}.{ns % 10**9:09d},0"


def _gossip_nodes(nodes: list[NodeInfo]) -> list[tuple[Any, ...]]:
    return [
        (
            n.node_id,
            "tcp",
            n.address,
            n.address,
            "tcp",
            n.sql_address or None,
            n.sql_address or None,
            str(n.locality),
            n.build or None,
            wall_time(n.started_at_ns),
            n.live,
            n.ranges,
            n.ranges if n.leases is None else n.leases,
        )
        for n in nodes
    ]


def _gossip_liveness(nodes: list[NodeInfo]) -> list[tuple[Any, ...]]:
    return [
        (
            n.node_id,
            n.epoch,
            _hlc_text(n.expiration_ns),
            n.draining,
            n.membership != "active",
            n.membership,
            wall_time(n.updated_at_ns),
        )
        for n in nodes
    ]


_TABLES: dict[
    str,
    tuple[tuple[tuple[str, ColumnType], ...], Callable[[list[NodeInfo]], list[tuple[Any, ...]]]],
] = {
    "gossip_nodes": (
        (
            ("node_id", _INT),
            ("network", _STRING),
            ("address", _STRING),
            ("advertise_address", _STRING),
            ("sql_network", _STRING),
            ("sql_address", _STRING),
            ("advertise_sql_address", _STRING),
            ("locality", _STRING),
            ("build_tag", _STRING),
            ("started_at", _TS),
            ("is_live", _BOOL),
            ("ranges", _INT),
            ("leases", _INT),
        ),
        _gossip_nodes,
    ),
    "gossip_liveness": (
        (
            ("node_id", _INT),
            ("epoch", _INT),
            ("expiration", _STRING),
            ("draining", _BOOL),
            ("decommissioning", _BOOL),
            ("membership", _STRING),
            ("updated_at", _TS),
        ),
        _gossip_liveness,
    ),
}


TABLES = frozenset(_TABLES)  # the names of the tables built here (crdb_internal.jobs: jobs')


def is_virtual(name: st.TableName) -> bool:
    """Whether ``name`` names a table of the ``crdb_internal`` schema (known or not)."""
    return name.database is not None and name.database.lower() == SCHEMA


def virtual_table(
    name: st.TableName, nodes: Callable[[], list[NodeInfo]], is_admin: Callable[[], bool]
) -> Relation | None:
    """The rows of the virtual table ``name`` names (``None``: it names none);
    ``nodes()`` lists the cluster's nodes; a user without the admin role gets 42501 and
    an unknown ``crdb_internal`` table 42P01 naming the known ones (``is_admin()`` is
    asked only of a virtual table's reader)."""
    if not is_virtual(name):
        return None
    table = _TABLES.get(name.name.lower())
    if table is None:
        known = ", ".join(f"{SCHEMA}.{t}" for t in sorted(_TABLES))
        raise SQLError(
            "42P01", f'relation "{SCHEMA}.{name.name}" does not exist (there are {known})'
        )
    if not is_admin():
        raise SQLError(
            "42501", f"only users with the admin role may read {SCHEMA}.{name.name.lower()}"
        )
    columns, rows = table
    made = tuple(Column(i + 1, c, t) for i, (c, t) in enumerate(columns))
    return Relation(name.name.lower(), made, rows(nodes()))
