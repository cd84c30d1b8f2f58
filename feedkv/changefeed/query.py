"""CDC queries: ``CREATE CHANGEFEED ... AS SELECT <items> FROM t [WHERE <predicate>]``.

Each row change is filtered by the predicate and projected by the SELECT list before it
is encoded, so a consumer gets only the rows and columns it asked for. In the
expressions:

- the table's columns hold the row after the change (for a deletion, only the primary
  key columns are set; the others are NULL);
- ``cdc_prev`` is the row before the change as a tuple (NULL when there was none):
  ``cdc_prev.<column>`` or ``(cdc_prev).<column>`` one of its columns, ``cdc_prev``
  itself the whole row (a JSON object in a message, as CockroachDB encodes a tuple);
- ``event_op()`` is ``'insert'``, ``'update'`` or ``'delete'`` when the changefeed has
  the previous row (``diff``, or a query that reads ``cdc_prev``); without it an insert
  cannot be told from an update and it is ``'upsert'`` or ``'delete'``, as the CDC
  queries docs of CockroachDB 26.1 say; ``cdc_is_delete()`` whether the change is a
  deletion;
- ``crdb_internal_mvcc_timestamp`` is the change's MVCC timestamp, ``event_schema_timestamp()``
  when the row's schema (descriptor version) was written and
  ``changefeed_creation_timestamp()`` the changefeed's start, each an HLC DECIMAL
  (``<wall ns>.<logical, 10 digits>``) as CockroachDB's preferred overloads return;
  ``transaction_timestamp()`` and ``statement_timestamp()`` are the change's MVCC
  timestamp as a TIMESTAMPTZ, and ``now()`` (``current_timestamp``) is refused, as
  CockroachDB's CDC queries docs say (a changefeed has no one statement time);
- JSON operators ``->`` and ``->>`` and ``jsonb_build_object()`` work as in SQL.

A change the predicate does not accept (false or NULL) is not emitted. Deletions are
emitted like other changes: in the ``bare`` envelope (the default for CDC queries, as in
CockroachDB) as the projection of the deleted row, whose non-key columns are NULL.
With ``envelope=wrapped, diff``, ``before`` is the whole previous row, not projected
(CockroachDB encodes it with the table's columns). Expressions are compiled once per
descriptor version, so a column that a schema change removes makes the changefeed fail
with SQLSTATE 42703 naming it.
"""

from __future__ import annotations

import datetime
import decimal
import time
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from feedkv.changefeed.rows import Columns, RowEvent
from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.computed import fill_virtual, has_virtual
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.expr import (
    AGGREGATES,
    Compiled,
    Context,
    Scope,
    compile_expr,
    expression_name,
    qualifier_of,
)
from feedkv.sql.mvcc_column import MVCC_COLUMN
from feedkv.sql.parser import parse
from feedkv.sql.types import ColumnType, Kind
from feedkv.sql.volatility import refuse_volatile
from feedkv.util.hlc import Timestamp

__all__ = ["CDCQuery", "EVENT_OP_COLUMN"]

EVENT_OP_COLUMN = "__feedkv_event_op"
PREV = "cdc_prev"
PREV_ROW_COLUMN = "__feedkv_cdc_prev"
IS_DELETE_COLUMN = "__feedkv_cdc_is_delete"
CREATED_COLUMN = "__feedkv_changefeed_creation_timestamp"
SCHEMA_TS_COLUMN = "__feedkv_event_schema_timestamp"
EVENT_TIME_COLUMN = "__feedkv_event_time"

# The functions of a change, each read from a column of its own in the query's row
_FUNCTIONS = {
    "event_op": EVENT_OP_COLUMN,
    "cdc_is_delete": IS_DELETE_COLUMN,
    "changefeed_creation_timestamp": CREATED_COLUMN,
    "event_schema_timestamp": SCHEMA_TS_COLUMN,
    "transaction_timestamp": EVENT_TIME_COLUMN,
    "statement_timestamp": EVENT_TIME_COLUMN,
}
# Those columns, after the row and the previous row, with their types
_EXTRA = (
    (EVENT_OP_COLUMN, Kind.STRING),
    (PREV_ROW_COLUMN, Kind.JSONB),
    (IS_DELETE_COLUMN, Kind.BOOL),
    (MVCC_COLUMN, Kind.DECIMAL),
    (CREATED_COLUMN, Kind.DECIMAL),
    (SCHEMA_TS_COLUMN, Kind.DECIMAL),
    (EVENT_TIME_COLUMN, Kind.TIMESTAMPTZ),
)


def _as_columns(node: exp.Expr) -> exp.Expr:
    """The query with the change's functions and ``cdc_prev`` as columns."""
    if isinstance(node, exp.CurrentTimestamp):
        raise SQLError(
            "0A000",
            "now() is not supported in a changefeed query: use transaction_timestamp() or "
            "crdb_internal_mvcc_timestamp for the change's time, or "
            "changefeed_creation_timestamp() for the changefeed's start",
        )
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in _FUNCTIONS:
        name = str(node.this).lower()
        if node.expressions:
            raise SQLError("42883", f"{name}() takes no arguments")
        # NB: named for the function, as CockroachDB names such an item's column
        return exp.alias_(exp.column(_FUNCTIONS[name], quoted=True), name)
    if (
        isinstance(node, exp.Dot)
        and isinstance(node.this, exp.Paren)
        and isinstance(node.this.this, exp.Column)
        and expression_name(node.this.this).lower() == PREV
        and not qualifier_of(node.this.this)
        and isinstance(node.expression, exp.Identifier)
    ):  # (cdc_prev).qty
        return exp.column(node.expression.this, table=PREV, quoted=node.expression.quoted)
    if (
        isinstance(node, exp.Column)
        and not qualifier_of(node)
        and expression_name(node).lower() == PREV
    ):
        return exp.alias_(exp.column(PREV_ROW_COLUMN, quoted=True), PREV)
    return node


class CDCQuery:
    """A parsed CDC query over one table; :meth:`apply` filters and projects changes."""

    def __init__(
        self,
        text: str,
        *,
        created: Timestamp | None = None,
        diff: bool = False,
        user: str | None = None,
    ) -> None:
        """``created``: the changefeed's start, ``changefeed_creation_timestamp()``;
        ``diff``: the changefeed has the option (see ``event_op()``); ``user``: who
        created it, ``current_user`` (as CockroachDB evaluates session functions with
        the creating session's data)."""
        (statement,) = parse(text)
        if not isinstance(statement, st.Select) or not isinstance(statement.table, st.TableName):
            raise SQLError("42601", "a changefeed query is SELECT ... FROM <table>")
        self.text = text
        self.select = statement
        self._items = [_unaliased(i.transform(_as_columns)) for i in statement.items]
        self._where = (
            _unaliased(statement.where.transform(_as_columns), keep_root=False)
            if statement.where is not None
            else None
        )
        for node in [*self._items, *([self._where] if self._where is not None else [])]:
            if any(True for _ in node.find_all(*AGGREGATES)):
                raise SQLError("42803", "aggregate functions are not allowed in a changefeed query")
            if any(True for _ in node.find_all(exp.Window)):
                raise SQLError("42P20", "window functions are not allowed in a changefeed query")
            # NB: as CockroachDB's CDC queries docs list: a value per call, not per change
            refuse_volatile(node, "a changefeed query")
        nodes = [*self._items, *([self._where] if self._where is not None else [])]
        reads_prev = any(
            (qualifier_of(c) or "").lower() == PREV or expression_name(c) == PREV_ROW_COLUMN
            for node in nodes
            for c in node.find_all(exp.Column)
        )
        # NB: whether an update can be told from an insert (event_op())
        self._with_prev = diff or reads_prev
        self._compiled: dict[
            tuple[int, int], tuple[list[tuple[str, Compiled]], Compiled | None]
        ] = {}
        self._columns: dict[tuple[int, int], Columns] = {}
        # NB: the context's now is the query's creation time (now() itself is refused)
        self._context = Context(
            now=datetime.datetime.now(datetime.UTC),
            variable=lambda name: _session_variable(name, user),
        )
        self._created = _hlc(created or Timestamp(time.time_ns(), 0))
        # When a descriptor version was written (event_schema_timestamp()); set by the
        # changefeed that reads the schema history (None: NULL).
        self.schema_time: Callable[[TableDescriptor], Timestamp | None] | None = None

    def check(self, desc: TableDescriptor) -> None:
        """Raise SQLError now if the query does not fit ``desc`` (unknown columns...)."""
        self._for(desc)

    def columns(self, desc: TableDescriptor) -> Columns:
        """The projection's columns for rows of ``desc`` (:data:`Columns`)."""
        self._for(desc)
        return self._columns[(desc.id, desc.version)]

    def _column(self, node: exp.Expr, desc: TableDescriptor) -> tuple[Kind | None, str | None]:
        """The kind of what item ``node`` reads as is (``None``: computed), and the
        table column of the row after the change it is (``None``: another value)."""
        if not isinstance(node, exp.Column):
            return None, None
        name = expression_name(node)
        for extra, kind in _EXTRA:
            if name == extra:
                return (None if kind is Kind.JSONB else kind), None
        qualifier = qualifier_of(node)
        column = desc.find_column(name)
        if column is None or qualifier not in ("", desc.name, PREV, self.select.alias):
            return None, None
        return column.type.kind, (column.name if qualifier != PREV else None)

    def _for(self, desc: TableDescriptor) -> tuple[list[tuple[str, Compiled]], Compiled | None]:
        found = self._compiled.get((desc.id, desc.version))
        if found is not None:
            return found
        scope = Scope(table_name=desc.name)
        qualifiers = ["", desc.name] + ([self.select.alias] if self.select.alias else [])
        width = len(desc.columns)
        for index, column in enumerate(desc.columns):
            scope.add(qualifiers, column.name, index, column.type)
            scope.add([PREV], column.name, width + index, column.type)
        for offset, (name, kind) in enumerate(_EXTRA):
            scope.add([""], name, 2 * width + offset, ColumnType(kind))
        items: list[tuple[str, Compiled]] = []
        columns: list[tuple[str, Kind | None, str | None]] = []
        for item in self._items:
            if isinstance(item, exp.Star):
                shown = [
                    (i, c)
                    for i, c in enumerate(desc.columns)
                    if not c.hidden or c.id in desc.primary_key
                ]
                items += [(c.name, _column_getter(i)) for i, c in shown]
                columns += [(c.name, c.type.kind, c.name) for _i, c in shown]
            elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                raise SQLError("0A000", "use * (not table.*) in a changefeed query")
            else:
                inner = item.this if isinstance(item, exp.Alias) else item
                name = expression_name(item)
                items.append((name, compile_expr(inner, scope)))
                columns.append((name, *self._column(inner, desc)))
        where = compile_expr(self._where, scope) if self._where is not None else None
        self._compiled[(desc.id, desc.version)] = (items, where)
        self._columns[(desc.id, desc.version)] = tuple(columns)
        return items, where

    def apply(self, event: RowEvent) -> RowEvent | None:
        """``event`` filtered and projected, or ``None`` when the predicate rejects it."""
        desc = event.table
        items, where = self._for(desc)
        names = [c.name for c in desc.columns]
        if event.after is not None:
            after = [event.after.get(n) for n in names]
        else:
            key = dict(zip((c.name for c in desc.key_columns), event.key, strict=True))
            after = [key.get(n) for n in names]
        before = event.before or {}
        if has_virtual(desc):
            # NB: a CDC query computes VIRTUAL columns, which no row change carries
            if event.after is not None:
                fill_virtual(desc, after, self._context)
            if event.before is not None:
                values = fill_virtual(desc, [before.get(n) for n in names], self._context)
                before = dict(zip(names, values, strict=True))
        if event.after is None:
            op = "delete"
        elif not self._with_prev:
            op = "upsert"
        else:
            op = "update" if event.had_before else "insert"
        schema_ts = self.schema_time(desc) if self.schema_time is not None else None
        extra = [
            op,
            before if event.before is not None else None,
            event.after is None,
            _hlc(event.mvcc_ts),
            self._created,
            None if schema_ts is None else _hlc(schema_ts),
            _moment(event.mvcc_ts),
        ]
        env: list[Any] = [*after, *(before.get(n) for n in names), *extra]
        if where is not None and where(env, self._context) is not True:
            return None
        columns = self.columns(desc)
        projected = {name: fn(env, self._context) for name, fn in items}
        if event.after is None:
            return event._replace(columns=columns, deleted=projected)
        # NB: ``before`` stays the whole row: the wrapped envelope's diff shows it so
        return event._replace(after=projected, columns=columns)


def _hlc(ts: Timestamp) -> decimal.Decimal:
    """An HLC timestamp as CockroachDB's DECIMAL form of it."""
    return decimal.Decimal(str(ts))


def _session_variable(name: str, user: str | None) -> str:
    """What a session function reads in a changefeed query: the creating user."""
    if name == "session_user" and user is not None:
        return user
    shown = {"session_user": "current_user", "database": "current_database()"}.get(name, name)
    raise SQLError("0A000", f"{shown} is not available in a changefeed query")


def _moment(ts: Timestamp) -> datetime.datetime:
    """An HLC timestamp as the TIMESTAMPTZ of its wall time (microseconds, as SQL's)."""
    seconds, nanos = divmod(ts.wall, 10**9)
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment + datetime.timedelta(microseconds=nanos // 1000)


def _unaliased(node: exp.Expr, *, keep_root: bool = True) -> exp.Expr:
    """An alias ``_as_columns`` put inside an expression replaced by what it names.
    Only a whole SELECT item (``keep_root``) keeps one, to name its column
    (``cdc_prev``, ``event_op``); a predicate such as ``WHERE cdc_is_delete()`` keeps none."""

    def strip(inner: exp.Expr) -> exp.Expr:
        if isinstance(inner, exp.Alias) and (inner is not node or not keep_root):
            stripped: exp.Expr = inner.this
            return stripped
        return inner

    return node.transform(strip, copy=False)


def _column_getter(index: int) -> Compiled:
    return lambda env, ctx: env[index]
