"""Aggregates without GROUP BY: one row of count, sum, min, max and avg over the rows a
SELECT reads, with CockroachDB's types (sum of INTs is a DECIMAL, avg a quotient of 20
significant digits)."""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlglot import exp

from feedkv.errors import (
    SQLError,
)
from feedkv.sql.expr import (
    AGGREGATES,
    Context,
    Scope,
    compile_expr,
    expression_name,
)
from feedkv.sql.plan import unalias
from feedkv.sql.types import (
    DECIMAL_QUOTIENT,
    EXACT_DECIMAL,
)

__all__ = ["aggregate_row"]


def aggregate_row(
    items: Sequence[exp.Expr], scope: Scope, envs: Iterator[tuple[Any, ...]], context: Context
) -> tuple[Any, ...]:
    """One row of aggregates over ``envs`` (SELECT with aggregates and no GROUP BY)."""
    states: list[_Aggregate] = []
    finals: list[Callable[[], Any]] = []
    for item in items:
        node = unalias(item)
        if not isinstance(node, AGGREGATES):
            if any(True for _ in node.find_all(exp.Column)):
                raise SQLError(
                    "42803",
                    f'column "{expression_name(node)}" must appear in an aggregate function '
                    "(GROUP BY is not supported)",
                )
            constant = compile_expr(node, scope)
            finals.append(lambda constant=constant: constant((), context))  # type: ignore[misc]
            continue
        state = _Aggregate(node, scope)
        states.append(state)
        finals.append(state.result)
    for env in envs:
        for state in states:
            state.add(env, context)
    return tuple(final() for final in finals)


class _Aggregate:
    def __init__(self, node: exp.Expr, scope: Scope) -> None:
        self.kind = type(node)
        argument = node.this
        name = self.kind.__name__.lower()
        if argument is None or node.expressions:
            raise SQLError("42883", f"unknown signature: {name}() takes exactly one argument")
        if isinstance(argument, exp.Distinct):
            raise SQLError("0A000", "DISTINCT in aggregates is not supported")
        self.star = isinstance(argument, exp.Star)
        if self.star and self.kind is not exp.Count:
            raise SQLError("42883", f"unknown signature: {name}(*); only count(*) takes *")
        self.value = None if self.star else compile_expr(argument, scope)
        self.count = 0
        self.total: Any = None
        self.best: Any = None

    def add(self, env: tuple[Any, ...], context: Context) -> None:
        if self.star:
            self.count += 1
            return
        assert self.value is not None
        value = self.value(env, context)
        if value is None:
            return
        self.count += 1
        if self.kind in (exp.Sum, exp.Avg):
            if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
                raise SQLError("42883", f"unknown signature: {self.kind.__name__.lower()}()")
            if self.total is None:
                self.total = value
            elif isinstance(value, decimal.Decimal):
                self.total = EXACT_DECIMAL.add(self.total, value)
            else:
                self.total = self.total + value
        elif self.kind is exp.Min:
            self.best = value if self.best is None or value < self.best else self.best
        elif self.kind is exp.Max:
            self.best = value if self.best is None or value > self.best else self.best

    def result(self) -> Any:
        if self.kind is exp.Count:
            return self.count
        if self.kind is exp.Sum:
            return decimal.Decimal(self.total) if isinstance(self.total, int) else self.total
        if self.kind is exp.Avg:
            if not self.count:
                return None
            if isinstance(self.total, float):
                return self.total / self.count
            return DECIMAL_QUOTIENT.divide(self.total, self.count)
        return self.best
