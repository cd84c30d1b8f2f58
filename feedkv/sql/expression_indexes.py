"""Expression indexes (``CREATE INDEX ON t (lower(a))``), as CockroachDB makes them: each
expression becomes a hidden, inaccessible VIRTUAL computed column of the table
(``crdb_internal_idx_expr``, ``crdb_internal_idx_expr_1``, ...) and the index keys on
that column, so writing, backfilling and enforcing UNIQUE are a virtual column's index's.

- SHOW CREATE TABLE leaves the column out and shows the index with its expression
  (:meth:`~feedkv.sql.descriptor.TableDescriptor.index_key_sql`); ``SELECT *`` leaves
  it out (it is hidden); dropping the last index on it drops it.
- A query's WHERE that holds an indexed expression, as written in the index (up to the
  normalisation of its text), reads it as the column (:func:`with_expression_columns`),
  so the planner picks the index as it would for a column. Only tables with a computed
  column look for one.
- As CockroachDB's, no statement can name the column (42703): a scope holds it under
  :data:`HIDDEN_QUALIFIER` alone, which only :func:`with_expression_columns` writes.
- An expression must be immutable and over the table's columns (as a computed
  column's); its type is what it gives (42804 where that does not follow from it). The
  columns are made by :func:`feedkv.sql.ddl_constraints.create_index`.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from feedkv.sql.descriptor import Column, TableDescriptor

__all__ = [
    "EXPRESSION_COLUMN",
    "HIDDEN_QUALIFIER",
    "drop_unused",
    "expression_sql",
    "free_name",
    "with_expression_columns",
]

EXPRESSION_COLUMN = "crdb_internal_idx_expr"
# What qualifies an inaccessible column in a scope: no identifier a statement can write
# (PostgreSQL's have no NUL).
HIDDEN_QUALIFIER = "\x00index expression"


def expression_sql(node: exp.Expr) -> str:
    """An expression's text as a computed column keeps it (and as it is compared)."""
    return node.sql(dialect="postgres", normalize_functions="lower")


def free_name(desc: TableDescriptor, added: list[Column]) -> str:
    """The first of ``crdb_internal_idx_expr``, ``crdb_internal_idx_expr_1``, ... that
    no column of ``desc`` nor of ``added`` is called."""
    taken = {c.name for c in (*desc.columns, *added)}
    name, n = EXPRESSION_COLUMN, 0
    while name in taken:
        n += 1
        name = f"{EXPRESSION_COLUMN}_{n}"
    return name


def drop_unused(desc: TableDescriptor) -> TableDescriptor:
    """``desc`` without the inaccessible columns no index keys on any more."""
    used = {i for index in desc.indexes for i in index.column_ids}
    kept = tuple(c for c in desc.columns if not c.inaccessible or c.id in used)
    return desc if len(kept) == len(desc.columns) else replace(desc, columns=kept)


def with_expression_columns(desc: TableDescriptor, node: exp.Expr) -> exp.Expr:
    """``node`` with each part that is an indexed expression of ``desc`` read as its
    inaccessible column (``lower(a) = 'x'`` as ``crdb_internal_idx_expr = 'x'``)."""
    held = {c.computed: c.name for c in desc.columns if c.inaccessible and c.computed}
    if not held:
        return node

    def swap(part: exp.Expr) -> exp.Expr:
        if isinstance(part, exp.Column | exp.Literal):
            return part
        if isinstance(part, exp.Query):
            # NB: a subquery's expressions are over its own tables: not looked into (a
            # node other than ``part`` ends the transform's descent there)
            return part.copy()
        name = held.get(expression_sql(part))
        return exp.column(name, table=HIDDEN_QUALIFIER) if name is not None else part

    return node.transform(swap)
