"""The queries: SELECT (over a table, joined sources, a derived table or a CTE's rows,
or none), UNION / INTERSECT / EXCEPT and VALUES, each run in the statement's
:class:`~feedkv.sql.execution.Execution`.

A SELECT of one table reads the narrowest key span its WHERE clause allows (its plan,
:class:`~feedkv.sql.plan.SelectPlan`, is kept per session); any other source list is
read whole and joined (:class:`~feedkv.sql.join.JoinPlan`). CTEs run once, before the
query that names them; subqueries get runners (:mod:`feedkv.sql.subquery`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from feedkv.errors import InvariantViolation, SQLError
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.aggregate import group_key
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.execution import Execution, Result
from feedkv.sql.expr import Scope, compile_expr, condition, static_kind
from feedkv.sql.join import JoinPlan
from feedkv.sql.plan import ResultPlan, SelectPlan, holds, sorted_rows
from feedkv.sql.relation import Relation
from feedkv.sql.row_codec import table_span
from feedkv.sql.set_ops import SetResult, combine, result_order, union_all
from feedkv.sql.subquery import grouped_context, prepare_subqueries
from feedkv.sql.types import ColumnType, logical_decimal, timestamp_of

__all__ = ["HANDLERS", "query", "read_source", "select"]


def select(ex: Execution, s: st.Select) -> Result:
    if s.as_of is not None:
        if ex.session.in_transaction:
            raise SQLError(
                "0A000",
                "AS OF SYSTEM TIME cannot be used inside BEGIN ... COMMIT: a transaction "
                "reads at its own timestamp",
            )
        ts = timestamp_of(ex.constant(s.as_of), ex.session.db.now())
        if ts > ex.session.db.now():
            raise SQLError("22007", f"AS OF SYSTEM TIME: {ts} is in the future")
        ex.reader = catalog.Snapshot(ex.session.db, ts)
        ex.context.logical_timestamp = partial(logical_decimal, ts)
    return query(ex, s)


def query(ex: Execution, q: st.Query) -> Result:
    """The rows of ``q``, its CTEs run first (in order: each sees those before it), in
    the statement's transaction."""
    # NB: a query's subquery runners are its own: one of the same text inside it (which
    # may name other tables by the same names) must not replace them, nor outlive it
    runners = ex.context.subqueries
    ex.context.subqueries = dict(runners)
    try:
        return _with_ctes(ex, q)
    finally:
        ex.context.subqueries = runners


def _with_ctes(ex: Execution, q: st.Query) -> Result:
    if not q.ctes:
        return _query(ex, q)
    outer = ex.ctes
    ex.ctes = dict(outer)
    try:
        for cte in q.ctes:
            if cte.recursive:
                ex.ctes[cte.name] = _recursive(ex, cte)
                continue
            result = query(ex, cte.query)
            ex.ctes[cte.name] = Relation.of(
                cte.name, result.columns, result.types, result.rows, cte.columns
            )
        return _query(ex, q)
    finally:
        ex.ctes = outer


def _recursive(ex: Execution, cte: st.Cte) -> Relation:
    """A recursive CTE's rows: its non-recursive term's, then the recursive term run
    over the rows the last run added (the CTE's name reads those), until a run adds
    none. UNION keeps a row only the first time it comes (NULLs equal), UNION ALL
    every row. Each run costs the recursive term over the rows added; a term that
    never stops adding never stops (as in PostgreSQL)."""
    body = cte.query
    if not isinstance(body, st.SetOperation):
        raise InvariantViolation(f"recursive CTE {cte.name!r} is no UNION")
    seed = query(ex, body.left)
    known = SetResult(seed.columns, seed.types, [])
    added = combine("union", body.all, known, SetResult(seed.columns, seed.types, seed.rows))
    seen = {_row_key(row) for row in added.rows}
    rows = list(added.rows)
    types = added.types
    while added.rows:
        ex.ctes[cte.name] = Relation.of(cte.name, seed.columns, types, added.rows, cte.columns)
        step = query(ex, body.right)
        fresh = combine("union", True, SetResult(seed.columns, types, []), _side(step))
        new_rows = fresh.rows
        if not body.all:
            new_rows = []
            for row in fresh.rows:
                key = _row_key(row)
                if key not in seen:
                    seen.add(key)
                    new_rows.append(row)
        added = SetResult(seed.columns, types, new_rows)
        rows.extend(new_rows)
    return Relation.of(cte.name, seed.columns, types, rows, cte.columns)


def _side(result: Result) -> SetResult:
    return SetResult(result.columns, result.types, result.rows)


def _row_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(group_key(value) for value in row)


def _query(ex: Execution, q: st.Query) -> Result:
    if isinstance(q, st.SetOperation):
        return _set_operation(ex, q)
    if isinstance(q, st.Values):
        return _values(ex, q)
    if q.table is None:
        return _select_no_table(ex, q)
    if q.joins or not isinstance(q.table, st.TableName) or _cte(ex, q.table) is not None:
        return _select_sources(ex, q)
    desc = ex.table(q.table)
    plan = ex.plan(q, desc, partial(SelectPlan.of, outer=ex.outer_scope))
    prepare_subqueries(ex, query, q.subqueries, plan.scope, grouped_context(q, plan.result))
    envs = [env for _row, _pairs, env in ex.matching(desc, plan.selection)]
    return _selected(ex, q, plan.result, envs)


def _selected(
    ex: Execution, s: st.Select, result: ResultPlan, envs: list[tuple[Any, ...]]
) -> Result:
    rows = ex.limited(result.rows(envs, ex.context), s.limit, s.offset)
    return Result(result.names, rows, f"SELECT {len(rows)}", result.types)


def _set_operation(ex: Execution, s: st.SetOperation) -> Result:
    sides = []
    for side in (s.left, s.right):
        result = query(ex, side)
        sides.append(SetResult(result.columns, result.types, result.rows))
    combined = combine(s.op, s.all, *sides)
    keys = result_order(s.op.upper(), s.order_by, combined.columns)
    rows = ex.limited(sorted_rows(combined.rows, keys, ex.context), s.limit, s.offset)
    return Result(combined.columns, rows, f"SELECT {len(rows)}", combined.types)


def _values(ex: Execution, v: st.Values) -> Result:
    """VALUES as a query: each row's values (which may name an outer query's columns,
    in a subquery), of the types all rows share (42804 otherwise, as UNION ALL)."""
    if len({len(row) for row in v.rows}) > 1:
        raise SQLError("42601", "VALUES lists must all be the same length")
    scope = Scope(outer=ex.outer_scope)
    names = tuple(f"column{i + 1}" for i in range(len(v.rows[0])))
    sides = []
    for row in v.rows:
        values = tuple(compile_expr(node, scope)((), ex.context) for node in row)
        kinds = [static_kind(node, scope) for node in row]
        types = tuple(ColumnType(kind) if kind is not None else None for kind in kinds)
        sides.append(SetResult(names, types, [values]))
    combined = union_all("VALUES", sides)
    return Result(names, combined.rows, f"SELECT {len(combined.rows)}", combined.types)


def _cte(ex: Execution, name: st.TableName) -> Relation | None:
    return ex.ctes.get(name.name) if name.database is None else None


def read_source(
    ex: Execution, source: st.Source
) -> tuple[TableDescriptor | Relation, list[tuple[Any, ...]], str]:
    """What a FROM or JOIN source reads: a table (read whole), a CTE's rows or a
    subquery's; its rows; the database that qualifies its columns."""
    if isinstance(source, st.ShowSource):
        relation = ex.session.show_jobs(source)
        return relation, relation.rows, ex.session.database
    if isinstance(source, st.Derived):
        result = query(ex, source.query)
        relation = Relation.of(
            source.alias, result.columns, result.types, result.rows, source.columns
        )
        return relation, relation.rows, ex.session.database
    found = _cte(ex, source)
    if found is not None:
        return found, found.rows, ex.session.database
    desc = ex.table(source)
    rows = [
        tuple(row[c.id] for c in desc.columns) for row, _pairs in ex.rows(desc, table_span(desc.id))
    ]
    return desc, rows, source.database or ex.session.database


def _select_sources(ex: Execution, s: st.Select) -> Result:
    """A SELECT over joined sources or a query's rows
    (:class:`~feedkv.sql.join.JoinPlan`), each read whole in the statement's
    transaction."""
    if s.table is None:
        raise InvariantViolation("a SELECT without FROM has no sources to read")
    read = [read_source(ex, source) for source in [s.table, *(join.table for join in s.joins)]]
    # NB: not kept by Session.plan, which keys a plan by one table
    plan = JoinPlan.of([r[0] for r in read], s, [r[2] for r in read], ex.outer_scope)
    prepare_subqueries(ex, query, s.subqueries, plan.scope, grouped_context(s, plan.result))
    joined = plan.rows([r[1] for r in read], ex.context)
    return _selected(ex, s, plan.result, joined)


def _select_no_table(ex: Execution, s: st.Select) -> Result:
    """SELECT without FROM: over one row of no columns (``SELECT count(*)`` is 1)."""
    scope = Scope(outer=ex.outer_scope)
    result = ResultPlan.of([], scope, s)
    prepare_subqueries(ex, query, s.subqueries, scope, grouped_context(s, result))
    envs: list[tuple[Any, ...]] = [()]
    if s.where is not None:
        verdict = compile_expr(condition(s.where, scope), scope)((), ex.context)
        envs = envs if holds(verdict) else []
    return _selected(ex, s, result, envs)


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.Select: select,
    st.SetOperation: query,
    st.Values: query,
}
