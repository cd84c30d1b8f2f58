"""Computed columns: ``b INT AS (a * 2) STORED`` and ``c STRING AS (lower(s)) VIRTUAL``.

A computed column's value is its expression over the other columns of the same row.
The rules are CockroachDB's: the expression names only columns of its own table that
are not computed themselves, calls only immutable functions (nothing that reads the
clock, the session or a random source), and holds no subquery, aggregate or window
function; a computed column has no DEFAULT and is never written directly (55000).

A STORED column is computed on every write of its row (INSERT, UPSERT, UPDATE, ON
CONFLICT, COPY, IMPORT) and stored like any other column, so a changefeed emits it as
one. A VIRTUAL column is in no column family: nothing of it is stored, SQL reads compute
it (:func:`fill_virtual`), and a changefeed leaves it out (or, with
``virtual_columns='null'``, emits NULL), as CockroachDB's changefeeds do.

Compiled expressions are kept on the descriptor version (``TableDescriptor._computed``),
so a statement pays for compiling them once per version, not per row.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.expr import Compiled, Context, Scope, compile_expr
from feedkv.sql.parser import parse_expression
from feedkv.sql.types import coerce
from feedkv.sql.volatility import refuse_non_immutable

__all__ = [
    "check_computed",
    "fill_computed",
    "fill_virtual",
    "has_virtual",
    "refuse_writes",
    "referencing",
    "renamed_in",
]

_WHERE = "computed column"


def _check_expression(desc: TableDescriptor, column: Column, node: exp.Expr) -> None:
    """SQLSTATE errors as CockroachDB's for what a computed column may not hold."""
    for found in node.walk():
        if isinstance(found, exp.Subquery | exp.Select | exp.Exists):
            raise SQLError("0A000", f"subqueries are not allowed in {_WHERE}")
        if isinstance(found, exp.Window):
            raise SQLError("42P20", f"window functions are not allowed in {_WHERE}")
        if isinstance(found, exp.AggFunc):
            raise SQLError("42803", f"aggregate functions are not allowed in {_WHERE}")
        if isinstance(found, exp.Placeholder | exp.Parameter):
            raise SQLError("42P02", f"placeholders are not allowed in {_WHERE}")
        if isinstance(found, exp.Column):
            if found.table and found.table != desc.name:
                raise SQLError(
                    "42P01", f"no data source matches prefix: {found.table} in this context"
                )
            # NB: a column an open transaction is adding too (one ALTER TABLE may add
            # both), which find_column does not name
            other = next((c for c in desc.columns if c.name == found.name), None)
            if other is None:
                raise SQLError("42703", f'column "{found.name}" does not exist')
            if other.computed is not None:
                raise SQLError(
                    "42P16", "computed column expression cannot reference computed columns"
                )
    refuse_non_immutable(node, _WHERE)


def _scope(desc: TableDescriptor) -> Scope:
    scope = Scope(table_name=desc.name)
    for index, column in enumerate(desc.columns):
        scope.add(["", desc.name], column.name, index, column.type)
    return scope


def _compiled(desc: TableDescriptor) -> tuple[list[tuple[int, Column, Compiled]], ...]:
    """``(stored, virtual)``: each computed column with its place in the row and its
    expression compiled over the row's values in column order."""
    cached: tuple[list[tuple[int, Column, Compiled]], ...] | None = desc._computed
    if cached is None:
        scope = _scope(desc)
        stored: list[tuple[int, Column, Compiled]] = []
        virtual: list[tuple[int, Column, Compiled]] = []
        for index, column in enumerate(desc.columns):
            if column.computed is not None:
                made = compile_expr(parse_expression(column.computed), scope)
                (virtual if column.virtual else stored).append((index, column, made))
        cached = (stored, virtual)
        object.__setattr__(desc, "_computed", cached)
    return cached


def check_computed(desc: TableDescriptor) -> None:
    """Refuse a table whose computed columns break CockroachDB's rules (each with its
    SQLSTATE); compile every expression, so a bad one fails at CREATE or ALTER."""
    key = set(desc.primary_key)
    for column in desc.computed_columns:
        if column.default is not None:
            raise SQLError(
                "42P16", f'computed column "{column.name}" cannot also have a DEFAULT expression'
            )
        if column.virtual and column.id in key:
            raise SQLError(
                "0A000",
                f'virtual computed column "{column.name}" cannot be part of the primary key; '
                "make it STORED",
            )
        if column.virtual and any(column.id in f.column_ids for f in desc.families):
            raise SQLError(
                "42P16", f'virtual computed column "{column.name}" cannot be part of a family'
            )
        _check_expression(desc, column, parse_expression(column.computed or ""))
    object.__setattr__(desc, "_computed", None)
    _compiled(desc)


def refuse_writes(columns: Sequence[Column]) -> None:
    """CockroachDB's error for a statement that names a computed column as a target."""
    for column in columns:
        if column.computed is not None:
            raise SQLError("55000", f'cannot write directly to computed column "{column.name}"')


def has_virtual(desc: TableDescriptor) -> bool:
    return bool(_compiled(desc)[1]) if desc.computed_columns else False


def fill_computed(desc: TableDescriptor, row: MutableMapping[int, Any], context: Context) -> None:
    """Set every computed column of ``row`` (column id -> value) from its other
    columns: what a write does before it checks, indexes and encodes the row (a
    VIRTUAL column's value is not stored, but indexes and CHECKs see it)."""
    if not desc.computed_columns:
        return
    stored, virtual = _compiled(desc)
    env = tuple(row.get(c.id) for c in desc.columns)
    for _index, column, make in (*stored, *virtual):
        row[column.id] = coerce(make(env, context), column.type, column.name)


def fill_virtual(desc: TableDescriptor, values: list[Any], context: Context) -> list[Any]:
    """``values`` (a row's values in column order, as read) with its VIRTUAL columns
    computed. The list is changed in place and returned."""
    virtual = _compiled(desc)[1]
    env = tuple(values)
    for index, column, make in virtual:
        values[index] = coerce(make(env, context), column.type, column.name)
    return values


def referencing(desc: TableDescriptor, column: Column) -> Column | None:
    """A computed column whose expression names ``column`` (``None``: none does)."""
    for other in desc.computed_columns:
        node = parse_expression(other.computed or "")
        if any(c.name == column.name for c in node.find_all(exp.Column)):
            return other
    return None


def renamed_in(column: Column, old: str, new: str) -> Column:
    """``column`` with its expression naming column ``old`` as ``new`` (a RENAME
    COLUMN keeps computed columns reading the same column, as in CockroachDB)."""
    if column.computed is None:
        return column
    node = parse_expression(column.computed)
    for found in list(node.find_all(exp.Column)):
        if found.name == old:
            found.set("this", exp.to_identifier(new, quoted=new != new.lower()))
    return replace(column, computed=node.sql(dialect="postgres", normalize_functions="lower"))
