"""CDC queries: ``CREATE CHANGEFEED ... AS SELECT <items> FROM t [WHERE <predicate>]``.

Each row change is filtered by the predicate and projected by the SELECT list before it
is encoded, so a consumer gets only the rows and columns it asked for. In the
expressions:

- the table's columns hold the row after the change (for a deletion, only the primary
  key columns are set; the others are NULL);
- ``cdc_prev.<column>`` holds the row before the change (NULL when there was none);
- ``event_op()`` is ``'insert'``, ``'update'`` or ``'delete'``.

A change the predicate does not accept (false or NULL) is not emitted. Deletions are
emitted like other changes, as tombstones in the ``bare`` envelope (the default for
CDC queries, as in CockroachDB). Expressions are compiled once per descriptor version,
so a column that a schema change removes makes the changefeed fail with SQLSTATE 42703
naming it.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlglot import exp

from feedkv.changefeed.rows import Columns, RowEvent
from feedkv.errors import SQLError
from feedkv.sql import statements as st
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
from feedkv.sql.parser import parse
from feedkv.sql.types import ColumnType, Kind

__all__ = ["CDCQuery", "EVENT_OP_COLUMN"]

EVENT_OP_COLUMN = "__feedkv_event_op"
PREV = "cdc_prev"


def _event_op_as_column(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "event_op":
        if node.expressions:
            raise SQLError("42883", "event_op() takes no arguments")
        return exp.column(EVENT_OP_COLUMN, quoted=True)
    return node


class CDCQuery:
    """A parsed CDC query over one table; :meth:`apply` filters and projects changes."""

    def __init__(self, text: str) -> None:
        (statement,) = parse(text)
        if not isinstance(statement, st.Select) or not isinstance(statement.table, st.TableName):
            raise SQLError("42601", "a changefeed query is SELECT ... FROM <table>")
        self.text = text
        self.select = statement
        self._items = [i.transform(_event_op_as_column) for i in statement.items]
        self._where = (
            statement.where.transform(_event_op_as_column) if statement.where is not None else None
        )
        for node in [*self._items, *([self._where] if self._where is not None else [])]:
            if any(True for _ in node.find_all(*AGGREGATES)):
                raise SQLError("42803", "aggregate functions are not allowed in a changefeed query")
        self._compiled: dict[
            tuple[int, int], tuple[list[tuple[str, Compiled]], Compiled | None]
        ] = {}
        self._columns: dict[tuple[int, int], Columns] = {}
        # NB: now() is the query's creation time for every row (not each row's own).
        self._context = Context(now=datetime.datetime.now(datetime.UTC))

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
        if name == EVENT_OP_COLUMN:
            return Kind.STRING, None
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
        scope.add([""], EVENT_OP_COLUMN, 2 * width, ColumnType(Kind.STRING))
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
        op = "delete" if event.after is None else ("update" if event.had_before else "insert")
        env: list[Any] = [*after, *(before.get(n) for n in names), op]
        if where is not None and where(env, self._context) is not True:
            return None
        columns = self.columns(desc)
        if event.after is None:
            return event._replace(columns=columns)
        projected = {name: fn(env, self._context) for name, fn in items}
        return event._replace(after=projected, before=None, columns=columns)


def _column_getter(index: int) -> Compiled:
    return lambda env, ctx: env[index]
