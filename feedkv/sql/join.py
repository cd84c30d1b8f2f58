"""Joins: a SELECT over several tables, joined left to right.

Each table's rows are read whole (in the statement's transaction) and joined to the
rows so far: a hash join on ON's equalities between the two sides where their kinds
hash as SQL compares them (NULL keys match nothing), else ON is evaluated on every
pair; an outer side keeps its unpaired rows, the other side's columns NULL. WHERE then
keeps rows, and :class:`~feedkv.sql.plan.ResultPlan` makes the result.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from feedkv.errors import InvariantViolation, SQLError
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
from feedkv.sql.interrupt import chunked
from feedkv.sql.plan import (
    FromTable,
    ResultPlan,
    Star,
    check_index,
    flatten_and,
    holds,
    star_of,
)
from feedkv.sql.relation import Relation
from feedkv.sql.set_functions import (
    rows_from_of,
    series_of,
    series_shape,
    series_type,
    unnest_of,
)
from feedkv.sql.types import ColumnType, Kind

__all__ = ["JoinPlan", "JoinStep", "LateralQuery", "LateralRows", "Typer", "is_lateral"]

# The type of an expression over a scope (feedkv.sql.describe.type_of), or None
Typer = Callable[[exp.Expr, Scope], ColumnType | None]

# A LATERAL source's rows for one row of the sources to its left
LateralRows = Callable[[tuple[Any, ...], Context], list[tuple[Any, ...]]]

# A LATERAL subquery's columns and its rows for a left row, given the scope of the
# columns to its left (feedkv.sql.query runs it; this module runs no query)
LateralQuery = Callable[[st.Derived, Scope], tuple[Relation, LateralRows]]


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
    # USING's columns, each (left place, right place) in a pair: each pair becomes one
    # column after the two sides, the first non-NULL of them (the row's side of an
    # outer join's unpaired row).
    merged: tuple[tuple[int, int], ...] = ()
    # A LATERAL source's rows for one left row (``right`` is then unused)
    lateral: LateralRows | None = None

    def join(
        self, left: list[tuple[Any, ...]], right: list[tuple[Any, ...]], context: Context
    ) -> list[tuple[Any, ...]]:
        if self.lateral is not None:
            return self._join_lateral(left, self.lateral, context)
        residual = self.residual
        pad_left, pad_right = (None,) * self.left_width, (None,) * self.right_width
        # Each left row's candidates: those of equal keys, or every right row.
        candidates: Callable[[tuple[Any, ...]], list[int]]
        # NB: with a side empty no pair is made, so no key is computed (a key such as
        # ``b.id + 1`` may overflow where ON, evaluated per pair, never runs)
        if self.left_keys and left and right:
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
        return self._with_merged(out)

    def _with_merged(self, out: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``out``'s rows with USING's merged columns after them (see ``merged``)."""
        if not self.merged:
            return out
        merged = self.merged
        return [
            row + tuple(row[a] if row[a] is not None else row[b] for a, b in merged) for row in out
        ]

    def _join_lateral(
        self,
        left: list[tuple[Any, ...]],
        rows_of: LateralRows,
        context: Context,
    ) -> list[tuple[Any, ...]]:
        """Each left row paired with the rows its LATERAL source gives for it (ON's
        keys and residual both checked on the pair); a LEFT join keeps an unpaired
        row, the source's columns NULL."""
        keys = list(zip(self.left_keys, self.right_keys, strict=True))
        residual = self.residual

        def paired(pair: tuple[Any, ...]) -> bool:
            for a, b in keys:
                left_key, right_key = a(pair, context), b(pair, context)
                if left_key is None or right_key is None or left_key != right_key:
                    return False  # NB: a NULL key equals nothing, as in the hash join
            return residual is None or holds(residual(pair, context))

        pad_right = (None,) * self.right_width
        out: list[tuple[Any, ...]] = []
        for row in left:
            matched = False
            for right_row in rows_of(row, context):
                pair = row + right_row
                if paired(pair):
                    out.append(pair)
                    matched = True
            if not matched and self.side == "left":
                out.append(row + pad_right)
        return self._with_merged(out)


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
    scope: Scope
    # WHERE's conjuncts over the columns left of the first LATERAL step, applied before
    # it (by its index), so its function never reads a row WHERE drops (as PostgreSQL,
    # which filters a table before a LATERAL source reads its rows)
    prefilters: dict[int, Compiled] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(
        cls,
        descs: Sequence[TableDescriptor | Relation | None],
        s: st.Select,
        databases: Sequence[str],
        outer: Scope | None = None,
        typer: Typer | None = None,
        subquery: LateralQuery | None = None,
    ) -> JoinPlan:
        """The plan of ``s`` over ``descs``, its sources (``None``: a LATERAL one, see
        :func:`is_lateral`: a function whose columns ``typer`` types, or a subquery
        that ``subquery`` plans); ``outer`` names the columns of the query around it,
        for a subquery."""
        aliases = [s.alias, *(join.alias for join in s.joins)]
        indexes = [s.index, *(join.index for join in s.joins)]
        tables: list[FromTable] = []
        scope = Scope(database=databases[0], outer=outer)
        steps: list[JoinStep] = []
        star: Star = []
        offset = 0
        for n, (found, alias, index) in enumerate(zip(descs, aliases, indexes, strict=True)):
            lateral = None
            desc: TableDescriptor | Relation
            if found is None:  # NB: a LATERAL source, read for each row to its left
                if not n:
                    raise InvariantViolation("a SELECT's first source cannot be LATERAL")
                desc, lateral = _lateral_source(s.joins[n - 1], scope, typer, subquery)
            else:
                desc = found
            check_index(desc, index)
            name = alias or desc.name
            if name and any(name in t.names for t in tables):
                raise SQLError(
                    "42712", f'source name "{name}" specified more than once (missing AS clause)'
                )
            table = FromTable(desc, (name,) if name else (), offset)
            qualifiers = ["", name] if name else [""]
            for i, column in zip(table.columns, desc.columns, strict=True):
                if not column.adding and not column.inaccessible:
                    scope.add(qualifiers, column.name, i, column.type)
            if name:
                scope.rows[name] = functools.partial(star_of, [table])
            offset += len(desc.columns)
            if n:
                join = s.joins[n - 1]
                if join.using or join.natural:
                    step, star = _using_step(join, table, scope, star)
                    offset += len(step.merged)
                else:
                    step = _join_step(join, table, scope)
                    star = star + star_of([table])
                if lateral is not None:
                    step = dataclasses.replace(step, lateral=lateral)
                steps.append(step)
            else:
                star = star_of([table])
            tables.append(table)
        where = None
        prefilters: dict[int, Compiled] = {}
        if s.where is not None:
            checked = condition(s.where, scope)
            where = compile_expr(checked, scope)
            first = next((n for n, step in enumerate(steps) if step.lateral is not None), None)
            if first is not None:
                prefilters = _prefilters(checked, scope, first, steps[first].left_width)
        result = ResultPlan.of(tables, scope, s, star, offset)
        return cls(tables, steps, where, result, scope, prefilters)

    def rows(
        self, tables: Sequence[list[tuple[Any, ...]]], context: Context
    ) -> list[tuple[Any, ...]]:
        """The joined rows WHERE keeps, from each table's rows (in ``self.tables``'
        order)."""
        rows = tables[0]
        for n, (step, right) in enumerate(zip(self.steps, tables[1:], strict=True)):
            if n in self.prefilters:
                kept = self.prefilters[n]
                rows = [row for row in rows if holds(kept(row, context))]
            rows = step.join(rows, right, context)
        if self.where is not None:
            where = self.where
            rows = [
                row
                for chunk in chunked(rows, context.interrupted)
                for row in chunk
                if holds(where(row, context))
            ]
        return rows


def _prefilters(where: exp.Expr, scope: Scope, step: int, width: int) -> dict[int, Compiled]:
    """WHERE's conjuncts that read only the first ``width`` columns (and no subquery),
    as one condition to apply before the join ``step``."""
    early = []
    for conjunct in flatten_and(where):
        if conjunct.find(exp.Subquery, exp.Exists) is not None:
            continue
        places = [scope.find(column) for column in conjunct.find_all(exp.Column)]
        if all(depth or index < width for depth, index, _type in places):
            early.append(conjunct)
    if not early:
        return {}
    return {step: compile_expr(functools.reduce(exp.and_, early), scope)}


def is_lateral(source: st.Source) -> bool:
    """Whether ``source`` is a LATERAL subquery, or a function in FROM whose arguments
    name columns (of the sources to its left, as PostgreSQL reads a function there:
    LATERAL implicitly)."""
    if isinstance(source, st.Derived):
        return source.lateral
    if isinstance(source, st.RowsFrom):
        return any(is_lateral(function) for function in source.functions)
    return isinstance(source, st.Series | st.Unnest) and any(
        arg.find(exp.Column) is not None for arg in source.args
    )


def _lateral_source(
    join: st.Join, scope: Scope, typer: Typer | None, subquery: LateralQuery | None
) -> tuple[Relation, LateralRows]:
    """A LATERAL source's columns and its rows for a left row: a function's (or
    ``ROWS FROM``'s functions', see :func:`_function_rows`), or a subquery's, as
    ``subquery`` finds them over a copy of ``scope`` as it is now (the columns to its
    right are not its to name)."""
    source = join.table
    if not isinstance(source, st.Derived | st.Series | st.Unnest | st.RowsFrom):
        raise InvariantViolation(f"a LATERAL source that is no function or subquery: {source!r}")
    if join.side not in ("inner", "cross", "left"):
        raise SQLError(
            "42P10",
            f"the LATERAL source {source.alias!r} cannot be on the right of a "
            f"{join.side.upper()} JOIN (it names the columns to its left)",
        )
    if isinstance(source, st.Derived):
        if subquery is None:
            raise InvariantViolation("a LATERAL subquery planned without a way to run it")
        return subquery(source, _left_of(scope))
    if isinstance(source, st.Series | st.Unnest):
        shape, relation_of = _function_rows(source, scope, typer)
        return shape, lambda row, ctx: relation_of(row, ctx).rows
    functions = [_function_rows(function, scope, typer) for function in source.functions]
    shape = rows_from_of(source, [function_shape for function_shape, _rows in functions])

    def rows_from(row: tuple[Any, ...], ctx: Context) -> list[tuple[Any, ...]]:
        return rows_from_of(
            source, [relation_of(row, ctx) for _shape, relation_of in functions]
        ).rows

    return shape, rows_from


def _arg_types(
    source: st.Series | st.Unnest, scope: Scope, typer: Typer | None
) -> list[ColumnType | None]:
    """The types of a LATERAL function's arguments, as ``typer`` finds them (``None``:
    not known)."""
    found: list[ColumnType | None] = []
    for arg in source.args:
        try:
            found.append(typer(arg, scope) if typer is not None else None)
        except SQLError:
            found.append(None)
    return found


def _function_rows(
    source: st.Series | st.Unnest, scope: Scope, typer: Typer | None
) -> tuple[Relation, Callable[[tuple[Any, ...], Context], Relation]]:
    """A LATERAL function's columns (its rows empty; an array's element type as
    ``typer`` finds it, else unknown), and its rows for a left row: its arguments
    compiled in ``scope``, which names the columns to its left only."""
    args = [compile_expr(arg, scope) for arg in source.args]
    if isinstance(source, st.Series):

        def series_rows(row: tuple[Any, ...], ctx: Context) -> Relation:
            return series_of(source, [arg(row, ctx) for arg in args], ctx.interrupted)

        shape = series_shape(source, series_type(_arg_types(source, scope, typer)))
        return shape, series_rows
    declared = _arg_types(source, scope, typer)
    empty = unnest_of(source, [None] * len(args), declared)
    names = [column.name for column in empty.columns]
    types = [d.element if d is not None else None for d in declared]
    types += [column.type for column in empty.columns[len(args) :]]
    shape = Relation.of(empty.name, names, types, [])

    def unnest_rows(row: tuple[Any, ...], ctx: Context) -> Relation:
        return unnest_of(source, [arg(row, ctx) for arg in args], declared)

    return shape, unnest_rows


def _using_step(join: st.Join, right: FromTable, scope: Scope, star: Star) -> tuple[JoinStep, Star]:
    """``join ... USING (columns)`` or NATURAL JOIN (the visible columns both sides
    name) of ``right``: a join on the equality of each pair, which becomes one column
    placed after ``right``'s. ``star`` is what ``*`` selects from the left side; the
    result's ``*`` selects the merged columns first, then the rest of the left's and
    the right's, as in PostgreSQL. Returns the step and that ``*``."""
    visible = [
        (c.name, i, c.type)
        for i, c in zip(right.columns, right.desc.columns, strict=True)
        if c.shown
    ]
    if join.natural:
        right_names = {name for name, _i, _t in visible}
        names = list(dict.fromkeys(name for name, _i, _t in star if name in right_names))
    else:
        names = list(join.using)
    on = Scope(columns=dict(scope.columns), database=scope.database, outer=scope.outer)
    pairs: list[tuple[int, int]] = []
    conditions: list[exp.Expr] = []
    for n, name in enumerate(names):
        left = [entry for entry in star if entry[0] == name]
        if not left:
            raise SQLError(
                "42703", f'column "{name}" specified in USING clause does not exist in left table'
            )
        if len(left) > 1:
            raise SQLError(
                "42702", f'common column name "{name}" appears more than once in left table'
            )
        found = [entry for entry in visible if entry[0] == name]
        if not found:
            raise SQLError(
                "42703", f'column "{name}" specified in USING clause does not exist in right table'
            )
        if len(found) > 1:
            raise SQLError(
                "42702", f'common column name "{name}" appears more than once in right table'
            )
        (_, a, a_type), (_, b, b_type) = left[0], found[0]
        on.add([""], f"__using_left_{n}", a, a_type)
        on.add([""], f"__using_right_{n}", b, b_type)
        conditions.append(
            exp.EQ(
                this=exp.column(f"__using_left_{n}"), expression=exp.column(f"__using_right_{n}")
            )
        )
        pairs.append((a, b))
    if not conditions:
        conditions.append(exp.true())  # NB: a NATURAL JOIN with no common column crosses
    written = st.Join(
        join.table, join.alias, join.index, join.side, functools.reduce(exp.and_, conditions)
    )
    step = dataclasses.replace(_join_step(written, right, on), merged=tuple(pairs))
    after = right.offset + len(right.desc.columns)
    merged: Star = []
    for n, (name, (a, _b)) in enumerate(zip(names, pairs, strict=True)):
        ctype = next(t for _name, i, t in star if i == a)
        scope.rebind(name, after + n, ctype)
        merged.append((name, after + n, ctype))
    rest = [entry for entry in star if entry[0] not in names]
    rest += [entry for entry in visible if entry[0] not in names]
    return step, merged + rest


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
        found = [scope.find(c) for c in outer_nodes(side, exp.Column) if isinstance(c, exp.Column)]
        if not found or contains_aggregate(side) or any(depth for depth, _i, _t in found):
            return None  # NB: a correlated reference is the same for every pair
        columns = [index for _depth, index, _type in found]
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
    kinds = (_key_kind(a, scope), _key_kind(b, scope))
    numeric = {Kind.INT, Kind.DECIMAL, Kind.FLOAT}
    if None in kinds or (kinds[0] != kinds[1] and not set(kinds) <= numeric):
        return None  # NB: compared per pair, which converts or refuses as SQL does
    if Kind.JSONB in kinds or Kind.FLOAT in kinds:
        return None  # hashing would differ from SQL's equality for JSON and NaN
    return a, b


_NUMERIC = (Kind.INT, Kind.DECIMAL, Kind.FLOAT)


def _key_kind(node: exp.Expr, scope: Scope) -> Kind | None:
    """The kind of a join key: :func:`static_kind`'s, and for ``+``, ``-``, ``*`` and
    negation of numbers the kind SQL's arithmetic gives (FLOAT over DECIMAL over INT),
    so ``a.id = b.id + 1`` hashes too; ``None`` where it does not follow from the tree."""
    if isinstance(node, exp.Paren):
        return _key_kind(node.this, scope)
    if isinstance(node, exp.Neg):
        kind = _key_kind(node.this, scope)
        return kind if kind in _NUMERIC else None
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        kinds = {_key_kind(node.this, scope), _key_kind(node.expression, scope)}
        if not kinds <= set(_NUMERIC):
            return None
        return max(kinds, key=_NUMERIC.index)
    return static_kind(node, scope)


def _left_of(scope: Scope) -> Scope:
    """A copy of ``scope``'s names as they are, its outer scope shared (a name found
    there counts as the enclosing query's, as for any subquery)."""
    return Scope(
        columns=dict(scope.columns),
        table_name=scope.table_name,
        database=scope.database,
        ambiguous={name: list(found) for name, found in scope.ambiguous.items()},
        outer=scope.outer,
    )
