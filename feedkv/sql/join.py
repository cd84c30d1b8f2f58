"""Joins: a SELECT over several tables, joined left to right.

Each table's rows are read whole (in the statement's transaction) and joined to the
rows so far: a hash join on ON's equalities between the two sides where their kinds
hash as SQL compares them (NULL keys match nothing), else ON is evaluated on every
pair; an outer side keeps its unpaired rows, the other side's columns NULL. WHERE then
keeps rows, and :class:`~feedkv.sql.plan.ResultPlan` makes the result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.aggregate import group_key
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.expr import (
    Compiled,
    Context,
    Scope,
    compile_expr,
    condition,
    contains_aggregate,
    outer_nodes,
    static_kind,
)
from feedkv.sql.plan import FromTable, ResultPlan, check_index, flatten_and, holds
from feedkv.sql.types import Kind

__all__ = ["JoinPlan", "JoinStep"]


@dataclass(frozen=True, slots=True)
class JoinStep:
    """Joining one more table to the rows so far: rows pair where ``left_keys`` (over the
    rows so far) equal ``right_keys`` (over the table's row, placed after them) and
    ``residual`` (the rest of ON, over the pair) holds; an outer side keeps its
    unpaired rows, the other side's columns NULL."""

    side: str
    left_width: int
    right_width: int
    left_keys: list[Compiled]
    right_keys: list[Compiled]
    residual: Compiled | None

    def join(
        self, left: list[tuple[Any, ...]], right: list[tuple[Any, ...]], context: Context
    ) -> list[tuple[Any, ...]]:
        residual = self.residual
        pad_left, pad_right = (None,) * self.left_width, (None,) * self.right_width
        # Each left row's candidates: those of equal keys, or every right row.
        candidates: Callable[[tuple[Any, ...]], list[int]]
        if self.left_keys:
            by_key: dict[tuple[Any, ...], list[int]] = {}
            for j, row in enumerate(right):
                key = _join_key(self.right_keys, pad_left + row, context)
                if key is not None:
                    by_key.setdefault(key, []).append(j)
            left_keys = self.left_keys

            def candidates(row: tuple[Any, ...]) -> list[int]:
                key = _join_key(left_keys, row, context)
                return by_key.get(key, []) if key is not None else []

        else:
            every = list(range(len(right)))

            def candidates(row: tuple[Any, ...]) -> list[int]:
                return every

        out: list[tuple[Any, ...]] = []
        paired = [False] * len(right)
        keep_left = self.side in ("left", "full")
        for row in left:
            matched = False
            for j in candidates(row):
                pair = row + right[j]
                if residual is None or holds(residual(pair, context)):
                    out.append(pair)
                    matched = paired[j] = True
            if not matched and keep_left:
                out.append(row + pad_right)
        if self.side in ("right", "full"):
            out.extend(pad_left + row for j, row in enumerate(right) if not paired[j])
        return out


def _join_key(
    keys: Sequence[Compiled], row: tuple[Any, ...], context: Context
) -> tuple[Any, ...] | None:
    """The values of ``keys`` over ``row`` as a dict key; ``None`` if one is NULL (which
    equals nothing)."""
    values = []
    for key in keys:
        value = key(row, context)
        if value is None:
            return None
        values.append(group_key(value))
    return tuple(values)


@dataclass(frozen=True, slots=True)
class JoinPlan:
    """A SELECT over joined tables: each table's rows read whole, joined left to right
    (a hash join on ON's equalities of the two sides, else every pair), kept by
    ``where``, then ``result``."""

    tables: list[FromTable]
    steps: list[JoinStep]
    where: Compiled | None
    result: ResultPlan

    @classmethod
    def of(
        cls, descs: Sequence[TableDescriptor], s: st.Select, databases: Sequence[str]
    ) -> JoinPlan:
        aliases = [s.alias, *(join.alias for join in s.joins)]
        indexes = [s.index, *(join.index for join in s.joins)]
        tables: list[FromTable] = []
        scope = Scope(database=databases[0])
        steps: list[JoinStep] = []
        offset = 0
        for n, (desc, alias, index) in enumerate(zip(descs, aliases, indexes, strict=True)):
            check_index(desc, index)
            name = alias or desc.name
            if any(name in t.names for t in tables):
                raise SQLError(
                    "42712", f'source name "{name}" specified more than once (missing AS clause)'
                )
            table = FromTable(desc, (name,), offset)
            for i, column in zip(table.columns, desc.columns, strict=True):
                scope.add(["", name], column.name, i, column.type)
            if n:
                steps.append(_join_step(s.joins[n - 1], table, scope))
            tables.append(table)
            offset += len(desc.columns)
        where = None
        if s.where is not None:
            where = compile_expr(condition(s.where, scope), scope)
        return cls(tables, steps, where, ResultPlan.of(tables, scope, s))

    def rows(
        self, tables: Sequence[list[tuple[Any, ...]]], context: Context
    ) -> list[tuple[Any, ...]]:
        """The joined rows WHERE keeps, from each table's rows (in ``self.tables``'
        order)."""
        rows = tables[0]
        for step, right in zip(self.steps, tables[1:], strict=True):
            rows = step.join(rows, right, context)
        if self.where is not None:
            where = self.where
            rows = [row for row in rows if holds(where(row, context))]
        return rows


def _join_step(join: st.Join, right: FromTable, scope: Scope) -> JoinStep:
    """``join`` of ``right`` to the tables before it, its ON compiled in ``scope`` (which
    names their columns and ``right``'s only, so ON cannot name a later table)."""
    left_width = right.offset
    left_keys: list[Compiled] = []
    right_keys: list[Compiled] = []
    rest: list[exp.Expr] = []
    if join.on is not None:
        on = condition(join.on, scope, "ON")
        for conjunct in flatten_and(on):
            sides = _equi_sides(conjunct, right, scope)
            if sides is None:
                rest.append(conjunct)
                continue
            left_keys.append(compile_expr(sides[0], scope))
            right_keys.append(compile_expr(sides[1], scope))
    residual = None
    if rest:
        residual = compile_expr(functools.reduce(lambda a, b: exp.and_(a, b), rest), scope)
    return JoinStep(join.side, left_width, len(right.desc.columns), left_keys, right_keys, residual)


def _equi_sides(node: exp.Expr, right: FromTable, scope: Scope) -> tuple[exp.Expr, exp.Expr] | None:
    """``(left side, right side)`` when ``node`` is ``a = b`` with ``a`` over the tables
    before ``right`` and ``b`` over ``right`` alone (or the other way round), of kinds
    that compare as they hash; else ``None`` (ON evaluates it on each pair)."""
    if not isinstance(node, exp.EQ):
        return None

    def place(side: exp.Expr) -> str | None:
        columns = [
            scope.lookup(c)[0] for c in outer_nodes(side, exp.Column) if isinstance(c, exp.Column)
        ]
        if not columns or contains_aggregate(side):
            return None
        if all(i in right.columns for i in columns):
            return "right"
        if all(i < right.offset for i in columns):
            return "left"
        return None

    a, b = node.this, node.expression
    places = (place(a), place(b))
    if places == ("right", "left"):
        a, b = b, a
    elif places != ("left", "right"):
        return None
    kinds = (static_kind(a, scope), static_kind(b, scope))
    numeric = {Kind.INT, Kind.DECIMAL, Kind.FLOAT}
    if None in kinds or (kinds[0] != kinds[1] and not set(kinds) <= numeric):
        return None  # NB: compared per pair, which converts or refuses as SQL does
    if Kind.JSONB in kinds or Kind.FLOAT in kinds:
        return None  # hashing would differ from SQL's equality for JSON and NaN
    return a, b
