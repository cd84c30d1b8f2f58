"""Subqueries in expressions (scalar, IN, EXISTS), correlated or not.

Each subquery of a statement gets a runner (:func:`prepare_subqueries`) that
:mod:`feedkv.sql.expr`'s compiled closures call through
:attr:`~feedkv.sql.expr.Context.subqueries` with the row of the query around it. The
runner runs the subquery once when the statement starts: that plans it (its errors
come whatever the rows) and tells whether it is correlated, i.e. whether it found a
name in the outer query's scope (:meth:`~feedkv.sql.expr.Scope.find`). An
uncorrelated subquery keeps its rows for the statement; a correlated one runs again
for every outer row, with the row pushed on :attr:`~feedkv.sql.expr.Context.outer`: a
nested loop whose cost is the subquery's run (planning included) times the outer rows;
a WHERE on the subquery's primary key against the outer row's columns reads a key span
(:mod:`feedkv.sql.plan`), anything else scans its tables per row.

The runner runs a query through ``run`` (:func:`feedkv.sql.query.query`), handed in
so this module does not import the one that imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.execution import Execution, Result
from feedkv.sql.expr import Scope, subquery_key
from feedkv.sql.plan import ResultPlan
from feedkv.sql.records import Record
from feedkv.sql.types import ColumnType

__all__ = ["Run", "grouped_context", "prepare_subqueries"]

Run = Callable[[Execution, st.Query], Result]


def prepare_subqueries(
    ex: Execution,
    run: Run,
    subqueries: Sequence[tuple[exp.Expr, st.Query]],
    scope: Scope,
    grouped: dict[str, frozenset[int]] | None = None,
) -> None:
    """Give each of a statement's ``subqueries`` a runner (:class:`_Subquery`), and
    run each once now: it is planned (its errors come whatever the rows), and one that
    turns out uncorrelated keeps its rows for the whole statement. ``grouped``: those
    evaluated over grouped rows, with the places of ``scope`` they may name (see
    :func:`grouped_context`)."""
    width = 1 + max((index for index, _type in scope.columns.values()), default=-1)
    for node, inner in subqueries:
        key = subquery_key(node)
        runner = _Subquery(ex, run, node, inner, scope, (grouped or {}).get(key))
        ex.context.subqueries[key] = runner
        runner((None,) * width)


class _Subquery:
    """A subquery's rows for a row of the query around it. The first run tells whether
    it is correlated (it found a name in that query's scope): if not, its rows are
    kept; if so, it runs again for every row, as a nested loop: the subquery's cost
    times the outer query's rows. Evaluated over grouped rows (``determined`` is not
    None), it may name only the columns the grouping determines (42803, as
    PostgreSQL): a grouped row holds its group's first row's values."""

    def __init__(
        self,
        ex: Execution,
        run: Run,
        node: exp.Expr,
        inner: st.Query,
        scope: Scope,
        determined: frozenset[int] | None,
    ) -> None:
        self.ex, self.run, self.node, self.inner, self.scope = ex, run, node, inner, scope
        self.determined = determined
        self.kept: list[tuple[Any, ...]] | None = None
        self.probed = False
        self.types: tuple[ColumnType | None, ...] = ()  # as its plan gives them

    def __call__(self, outer: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self.kept is not None:
            return self.kept
        ex, scope = self.ex, self.scope
        hits = scope.hits
        if not self.probed:
            scope.referenced = set()
        ex.context.outer.append(outer)
        scopes = ex.outer_scopes
        ex.outer_scopes = (*scopes, scope)
        try:
            result = _subquery_result(ex, self.run, self.node, self.inner)
        finally:
            ex.context.outer.pop()
            ex.outer_scopes = scopes
        rows = result.rows
        if not self.probed:
            self.probed = True
            self.types = result.types
            if scope.hits == hits:
                self.kept = rows
            elif self.determined is not None:
                self._check_grouped(scope.referenced - self.determined)
        return rows

    def _check_grouped(self, ungrouped: set[int]) -> None:
        if not ungrouped:
            return
        index = min(ungrouped)
        names = [f"{q}.{n}" for (q, n), (i, _t) in self.scope.columns.items() if i == index and q]
        name = names[0] if names else "?"
        raise SQLError("42803", f'subquery uses ungrouped column "{name}" from outer query')


def grouped_context(s: st.Select, result: ResultPlan) -> dict[str, frozenset[int]]:
    """The subqueries a grouped SELECT evaluates over its grouped rows (in its list,
    HAVING, ORDER BY or DISTINCT ON), each with the table columns the grouping
    determines (those a correlated one may name)."""
    if result.grouping is None:
        return {}
    nodes = [*s.items, *(n for n, _ in s.order_by), *s.distinct_on]
    nodes += [s.having] if s.having is not None else []
    determined = result.grouping.determined
    return {
        subquery_key(found): determined
        for node in nodes
        for found in node.find_all(exp.Subquery, exp.Exists, exp.Any, exp.All)
    }


def _subquery_result(ex: Execution, run: Run, node: exp.Expr, inner: st.Query) -> Result:
    result = run(ex, inner)
    width = 1  # a value's; a row's for (a, b) IN (SELECT ...)
    if isinstance(node.parent, exp.In) and isinstance(node.parent.this, exp.Tuple):
        width = len(node.parent.this.expressions)
    if width > 1 and len(result.columns) == 1 and _gives_records(inner, result, width):
        # NB: (a, b) IN (SELECT (x, y)): a row value of the width stands for its
        # elements, as CockroachDB compares the tuples (a NULL record: each one NULL)
        rows = [(None,) * width if r is None else tuple(r) for (r,) in result.rows]
        return Result(("?column?",) * width, rows, result.tag)
    if not isinstance(node, exp.Exists) and len(result.columns) != width:
        raise SQLError(
            "42601",
            f"subquery must return {'only one column' if width == 1 else f'{width} columns'}, "
            f"not {len(result.columns)}",
        )
    return result


def _gives_records(inner: st.Query, result: Result, width: int) -> bool:
    """Whether the one column of ``inner``'s ``result`` holds row values of ``width``
    elements: its SELECT list's item is one (``SELECT (x, y)``), or every value is."""
    if isinstance(inner, st.Select) and len(inner.items) == 1:
        item = inner.items[0]
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Tuple):
            return len(node.expressions) == width
    present = [r for (r,) in result.rows if r is not None]
    return bool(present) and all(isinstance(r, Record) and len(r) == width for r in present)
