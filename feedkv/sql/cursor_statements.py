"""The cursor statements run: ``DECLARE`` plans its query and keeps its rows'
iterator (:func:`feedkv.sql.query.stream`), ``FETCH`` and ``MOVE`` move the cursor,
``CLOSE`` forgets it (semantics: :mod:`feedkv.sql.cursors`)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import partial
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import query
from feedkv.sql import statements as st
from feedkv.sql.cursors import Cursor, check_declare
from feedkv.sql.describe import describe
from feedkv.sql.execution import Execution, Result
from feedkv.sql.types import ColumnType

__all__ = ["HANDLERS"]


def declare(ex: Execution, s: st.DeclareCursor) -> Result:
    session = ex.session
    explicit = session.in_transaction
    check_declare(
        session.cursors, s.name, binary=s.binary, scroll=s.scroll, hold=s.hold, explicit=explicit
    )
    if s.hold and isinstance(s.query, st.Select) and s.query.locks:
        # NB: as CockroachDB: its locks would outlive the transaction that took them
        raise SQLError(
            "0A000",
            "DECLARE CURSOR WITH HOLD must not contain locking",
            detail="Holdable cursors must be READ ONLY.",
        )
    if explicit and ex.txn is not None:
        ex.reader = ex.txn.view()
    columns, types, rows = query.stream(ex, s.query)
    if len(types) != len(columns):
        types = (None,) * len(columns)
    if None in types:
        types = _described(ex, s.query, types)
    cursor = Cursor(
        s.name,
        s.query.text,
        columns,
        types,
        rows,
        s.hold,
        datetime.datetime.now(datetime.UTC),
        ex,
    )
    if explicit:
        session.cursors.add(cursor)
    else:
        cursor.hold()
        cursor.committed = True
        ex.on_commit(partial(session.cursors.add, cursor))
    return Result(tag="DECLARE CURSOR")


def _described(
    ex: Execution, statement: st.Statement, types: tuple[ColumnType | None, ...]
) -> tuple[ColumnType | None, ...]:
    """``types`` with those the plan leaves to the values (a computed column's: now(),
    1 + 1) taken from the query's description, as a FETCH over the extended protocol
    describes its columns before any value is read (and a driver then reads them so)."""
    try:
        params = len(ex.context.params)
        described = describe(statement, params, ex.relation, ex.session.database).columns
    except SQLError:
        return types  # NB: the values tell them, as before
    if described is None or len(described) != len(types):
        return types
    return tuple(t if t is not None else d for t, (_name, d) in zip(types, described, strict=True))


def fetch(ex: Execution, s: st.FetchCursor) -> Result:
    cursor = ex.session.cursors.get(s.name)
    rows = cursor.motion(s.kind, s.count)
    if s.move:
        return Result(tag=f"MOVE {sum(1 for _ in rows)}")
    fetched = list(rows)
    return Result(cursor.columns, fetched, f"FETCH {len(fetched)}", cursor.types)


def close(ex: Execution, s: st.CloseCursor) -> Result:
    ex.session.cursors.close(s.name)
    return Result(tag="CLOSE")


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.DeclareCursor: declare,
    st.FetchCursor: fetch,
    st.CloseCursor: close,
}
