"""``SHOW SESSIONS``, ``SHOW QUERIES`` (``SHOW STATEMENTS``), ``CANCEL QUERY`` and
``CANCEL SESSION`` over the node's :class:`~feedkv.sql.active_sessions.SessionRegistry`,
with CockroachDB's columns and rules: a user sees and cancels their own sessions and
queries, an admin everyone's; another user's is 42501, an id no session or query has
is 42704 (nothing, with ``IF EXISTS``); an id that is no string is 42804."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.active_sessions import ActiveSession, SessionRegistry
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


def _visible(ex: Execution, registry: SessionRegistry) -> list[ActiveSession]:
    admin = ex.is_admin()
    return [s for s in registry.sessions() if admin or s.user == ex.session.user]


def _naive(moment: datetime.datetime | None) -> datetime.datetime | None:
    """A TIMESTAMP (no zone) of a UTC moment, as CockroachDB shows these columns."""
    return None if moment is None else moment.replace(tzinfo=None)


def show_sessions(ex: Execution, s: st.ShowSessions) -> Result:
    registry = _registry(ex)
    node = registry.node_id()
    rows: list[tuple[Any, ...]] = []
    for session in _visible(ex, registry):
        query = session.query
        if s.queries:
            if query is not None:
                rows.append(
                    (
                        query.id,
                        node,
                        session.id,
                        session.user,
                        _naive(query.started),
                        as_written(query.text),
                        session.client_address,
                        session.application_name(),
                        False,
                        "executing",
                    )
                )
            continue
        rows.append(
            (
                node,
                session.id,
                "ACTIVE" if query is not None else "IDLE",
                session.user,
                session.client_address,
                session.application_name(),
                as_written(query.text) if query is not None else "",
                as_written(session.last_query),
                _naive(session.started),
                _naive(query.started) if query is not None else None,
                None,
            )
        )
    if s.queries:
        return Result(QUERIES_COLUMNS, rows, f"SHOW {len(rows)}", _QUERIES_TYPES)
    return Result(SESSIONS_COLUMNS, rows, f"SHOW {len(rows)}", _SESSIONS_TYPES)


def _elsewhere(found_id: str, registry: SessionRegistry) -> str:
    """What to add to "not found" when the id names another node (its last 32 bits):
    feedkv cancels only the sessions of the node the statement runs on."""
    try:
        owner = int(found_id[-8:], 16)
    except ValueError:
        return ""
    here = registry.node_id()
    if len(found_id) != 32 or here is None or owner in (0, here):
        return ""
    return (
        f" on this node (n{here}): its ID names node n{owner}; run CANCEL there "
        "(a node cancels only its own sessions' queries)"
    )


def cancel_activity(ex: Execution, s: st.CancelActivity) -> Result:
    """CANCEL QUERY | QUERIES | SESSION | SESSIONS."""
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
    find: Callable[[str], ActiveSession | None] = (
        registry.by_id if s.sessions else registry.by_query
    )
    for found_id in ids:
        if not isinstance(found_id, str):
            raise SQLError(
                "42804", f"{what} ID must be a string, not {type(found_id).__name__}: {found_id!r}"
            )
        session = find(found_id)
        if session is None:
            if s.if_exists:
                continue
            raise SQLError(
                "42704", f"{what} ID {found_id} not found{_elsewhere(found_id, registry)}"
            )
        if session.user != ex.session.user and not ex.is_admin():
            raise SQLError(
                "42501",
                f"user {ex.session.user} does not have the admin role needed to cancel "
                f"another user's {what}",
            )
        if s.sessions:
            session.end()
        else:
            session.cancel_query()
    return Result(tag="CANCEL SESSIONS" if s.sessions else "CANCEL QUERIES")


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.ShowSessions: show_sessions,
    st.CancelActivity: cancel_activity,
}
