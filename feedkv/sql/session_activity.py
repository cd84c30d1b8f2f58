"""``SHOW SESSIONS``, ``SHOW QUERIES`` (``SHOW STATEMENTS``), ``CANCEL QUERY`` and
``CANCEL SESSION`` over the node's :class:`~feedkv.sql.active_sessions.SessionRegistry`,
with CockroachDB's columns and rules: ``SHOW SESSIONS`` is ``SHOW CLUSTER SESSIONS``
(every node's; ``LOCAL``: this node's), a user sees and cancels their own sessions and
queries, an admin everyone's; another user's is 42501, an id no session or query has
is 42704 (nothing, with ``IF EXISTS``); an id that is no string is 42804."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.active_sessions import SessionRecord, SessionRegistry, node_of
from feedkv.sql.execution import Execution, Result
from feedkv.sql.parser import as_written, parse
from feedkv.sql.types import ColumnType, Kind

__all__ = ["HANDLERS", "QUERIES_COLUMNS", "SESSIONS_COLUMNS"]

SESSIONS_COLUMNS = (
    "node_id",
    "session_id",
    "status",
    "user_name",
    "client_address",
    "application_name",
    "active_queries",
    "last_active_query",
    "session_start",
    "active_query_start",
    "kv_txn",
)
QUERIES_COLUMNS = (
    "query_id",
    "node_id",
    "session_id",
    "user_name",
    "start",
    "query",
    "client_address",
    "application_name",
    "distributed",
    "phase",
)
_STRING, _INT = ColumnType(Kind.STRING), ColumnType(Kind.INT)
_TIME, _BOOL = ColumnType(Kind.TIMESTAMP), ColumnType(Kind.BOOL)
_SESSIONS_TYPES = (_INT, *[_STRING] * 7, _TIME, _TIME, _STRING)
_QUERIES_TYPES = (_STRING, _INT, _STRING, _STRING, _TIME, *[_STRING] * 3, _BOOL, _STRING)


def _registry(ex: Execution) -> SessionRegistry:
    registry = ex.session.registry
    if registry is None:
        raise SQLError("0A000", "this session belongs to no node: it has no sessions to show")
    return registry


def _records(
    ex: Execution, s: st.ShowSessions
) -> tuple[list[SessionRecord], list[tuple[int, str]]]:
    """The sessions the user may see (an admin everyone's, others their own): this
    node's, and with CLUSTER (the default) every other node's too; and the nodes that
    could not be asked, with why."""
    registry = _registry(ex)
    records = registry.records()
    failed: list[tuple[int, str]] = []
    if not s.local and registry.peers is not None:
        for node_id, answer in registry.peers.sessions():
            if isinstance(answer, str):
                failed.append((node_id, answer))
            else:
                records.extend(answer)
    admin = ex.is_admin()
    visible = [r for r in records if admin or r.user == ex.session.user]
    visible.sort(key=lambda r: (r.node_id or 0, r.id))
    return visible, failed


def _naive(moment: datetime.datetime | None) -> datetime.datetime | None:
    """A TIMESTAMP (no zone) of a UTC moment, as CockroachDB shows these columns."""
    return None if moment is None else moment.replace(tzinfo=None)


def show_sessions(ex: Execution, s: st.ShowSessions) -> Result:
    records, failed = _records(ex, s)
    rows: list[tuple[Any, ...]] = []
    for record in records:
        query = record.query
        if s.queries:
            if query is not None:
                rows.append(
                    (
                        query.id,
                        record.node_id,
                        record.id,
                        record.user,
                        _naive(query.started),
                        as_written(query.text),
                        record.client_address,
                        record.application_name,
                        False,
                        "executing",
                    )
                )
            continue
        rows.append(
            (
                record.node_id,
                record.id,
                "ACTIVE" if query is not None else "IDLE",
                record.user,
                record.client_address,
                record.application_name,
                as_written(query.text) if query is not None else "",
                as_written(record.last_query),
                _naive(record.started),
                _naive(query.started) if query is not None else None,
                None,
            )
        )
    # NB: as CockroachDB's cluster tables, a node that did not answer is a row of its
    # id and the error ("-- " before it) in the query column, the rest NULL
    for node_id, error in failed:
        if s.queries:
            rows.append((None, node_id, *[None] * 3, f"-- {error}", *[None] * 4))
        else:
            rows.append((node_id, *[None] * 5, f"-- {error}", *[None] * 4))
    if s.queries:
        return Result(QUERIES_COLUMNS, rows, f"SHOW {len(rows)}", _QUERIES_TYPES)
    return Result(SESSIONS_COLUMNS, rows, f"SHOW {len(rows)}", _SESSIONS_TYPES)


def cancel_activity(ex: Execution, s: st.CancelActivity) -> Result:
    """CANCEL QUERY | QUERIES | SESSION | SESSIONS: on this node, or on the node the id
    names when another one of the cluster's."""
    registry = _registry(ex)
    what = "session" if s.sessions else "query"
    if s.query is not None:
        if ex.run_nested is None:
            raise SQLError("XX000", f"CANCEL {what.upper()} ran outside the executor")
        [statement] = parse(s.query)
        ids = [row[0] for row in ex.run_nested(ex, statement).rows if row and row[0] is not None]
    else:
        if s.id is None:
            raise SQLError("42601", f"CANCEL {what.upper()} needs an id")
        ids = [ex.constant(s.id)]
    user, admin = ex.session.user, ex.is_admin()
    for found_id in ids:
        if not isinstance(found_id, str):
            raise SQLError(
                "42804", f"{what} ID must be a string, not {type(found_id).__name__}: {found_id!r}"
            )
        owner = node_of(found_id)
        if owner is None or owner == registry.node_id() or registry.peers is None:
            outcome = registry.cancel(found_id, sessions=s.sessions, user=user, admin=admin)
        else:
            outcome = registry.peers.cancel(
                owner, found_id, sessions=s.sessions, user=user, admin=admin
            )
        if outcome == "not found" and not s.if_exists:
            raise SQLError("42704", f"{what} ID {found_id} not found")
        if outcome == "denied":
            raise SQLError(
                "42501",
                f"user {user} does not have the admin role needed to cancel another user's {what}",
            )
    return Result(tag="CANCEL SESSIONS" if s.sessions else "CANCEL QUERIES")


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.ShowSessions: show_sessions,
    st.CancelActivity: cancel_activity,
}
