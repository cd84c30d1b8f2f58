"""Window functions: ``row_number()``, ``rank()``, ``dense_rank()`` and the aggregates
(``sum``, ``count``, ``avg``, ``min``, ``max``, ...) ``OVER ([PARTITION BY ...] [ORDER
BY ...])``, as PostgreSQL and CockroachDB run them.

They run after WHERE, GROUP BY and HAVING, over the rows those keep, and before
DISTINCT, ORDER BY and LIMIT. Each window call becomes a column appended to every row
(:meth:`WindowPlan.rows`), which the SELECT list and ORDER BY read by name
(``__win_<i>``). A partition's rows are put in the window's ORDER BY order (NULLs
first ascending, as every ORDER BY here); rows equal in it are *peers*. With ORDER BY,
an aggregate's frame is the default ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT
ROW``: every row up to the current one and its peers; without, the whole partition.
``rank`` counts the rows before the current one's peers, plus one; ``dense_rank`` the
peer groups so far. Explicit frames, named windows, DISTINCT and the other window
functions (lag, lead, ntile, ...) are refused with 0A000.

Cost: one pass to partition, a sort per partition, one pass per window call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql.aggregate import AggregateCall, group_key
from feedkv.sql.expr import AGGREGATES, Compiled, Context, Scope, compile_expr, outer_nodes
from feedkv.sql.ordering import sorted_rows
from feedkv.sql.parser import ordered
from feedkv.sql.types import ColumnType, Kind

__all__ = ["WindowPlan", "contains_window"]

_NAME = "__win_{}"  # no SQL name starts with __
_RANKS = (exp.RowNumber, exp.Rank, exp.DenseRank)
_NESTED = (exp.Subquery, exp.Exists, exp.Select, exp.Any, exp.All)  # queries of their own


def contains_window(node: exp.Expr) -> bool:
    return any(True for _ in outer_nodes(node, exp.Window))


@dataclass(frozen=True, slots=True)
class _Window:
    """One window call: its partition's and order's keys, and its function (a ranking,
    or an aggregate call run over the frame)."""

    partition: list[Compiled]
    order: list[tuple[Compiled, bool]]
    ranking: type[exp.Expr] | None
    call: AggregateCall | None

    def values(self, envs: Sequence[tuple[Any, ...]], context: Context) -> list[Any]:
        """The call's value at each of ``envs``."""
        out: list[Any] = [None] * len(envs)
        partitions: dict[tuple[Any, ...], list[int]] = {}
        for i, env in enumerate(envs):
            key = tuple(group_key(p(env, context)) for p in self.partition)
            partitions.setdefault(key, []).append(i)
        for indices in partitions.values():
            ordered = sorted_rows(indices, self.order, context, lambda i: envs[i])
            peers: list[list[int]] = []
            last: tuple[Any, ...] | None = None
            for i in ordered:
                key = tuple(group_key(o(envs[i], context)) for o, _descending in self.order)
                if not peers or key != last:
                    peers.append([])
                    last = key
                peers[-1].append(i)
            self._fill(out, peers, envs, context)
        return out

    def _fill(
        self,
        out: list[Any],
        peers: list[list[int]],
        envs: Sequence[tuple[Any, ...]],
        context: Context,
    ) -> None:
        """``out``'s values for one partition, its rows in groups of peers."""
        position = 1
        for number, group in enumerate(peers, start=1):
            for offset, i in enumerate(group):
                if self.ranking is exp.RowNumber:
                    out[i] = position + offset
                elif self.ranking is exp.Rank:
                    out[i] = position
                elif self.ranking is exp.DenseRank:
                    out[i] = number
            position += len(group)
        if self.call is None:
            return
        state = self.call.state()
        if not self.order:  # the frame is the whole partition
            for group in peers:
                for i in group:
                    state.add(envs[i], context)
        for group in peers:
            if self.order:
                for i in group:
                    state.add(envs[i], context)
            value = state.result()
            for i in group:
                out[i] = value


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """The window calls of a SELECT, each a column appended to its rows after the
    first ``width`` (the places its scope names)."""

    width: int
    windows: list[_Window]

    @classmethod
    def of(
        cls, nodes: Sequence[exp.Expr], scope: Scope
    ) -> tuple[list[exp.Expr], Scope, WindowPlan | None]:
        """``nodes`` (the SELECT list, ORDER BY and DISTINCT ON, over rows named in
        ``scope``) with each window call a reference to its column, the scope that
        names those columns too, and the plan (``None``: no window call)."""
        calls: list[exp.Window] = []
        for node in nodes:
            for found in outer_nodes(node, exp.Window):
                if isinstance(found, exp.Window) and not any(found == c for c in calls):
                    calls.append(found)
        if not calls:
            return list(nodes), scope, None
        width = 1 + max((index for index, _type in scope.columns.values()), default=-1)
        windows = [_window(call, scope) for call in calls]
        extended = Scope(
            columns=dict(scope.columns),
            table_name=scope.table_name,
            database=scope.database,
            ambiguous=dict(scope.ambiguous),
            outer=scope.outer,
        )
        for i in range(len(calls)):
            extended.add([""], _NAME.format(i), width + i, ColumnType(Kind.STRING))

        def replace(part: exp.Expr) -> exp.Expr:
            if isinstance(part, _NESTED):
                return part.copy()  # NB: a new node: transform leaves a subquery's own
            if isinstance(part, exp.Window):
                for i, call in enumerate(calls):
                    if part == call:
                        return exp.column(_NAME.format(i))
            return part

        return [node.transform(replace) for node in nodes], extended, cls(width, windows)

    def rows(self, envs: list[tuple[Any, ...]], context: Context) -> list[tuple[Any, ...]]:
        """``envs`` with each window call's value appended."""
        width = self.width
        padded = [env[:width] + (None,) * (width - len(env)) for env in envs]
        columns = [window.values(padded, context) for window in self.windows]
        return [
            env + tuple(values)
            for env, values in zip(padded, zip(*columns, strict=True), strict=True)
        ]


def _window(node: exp.Window, scope: Scope) -> _Window:
    for name, value in node.args.items():
        if name in ("this", "partition_by", "order", "over") or value in (None, False, []):
            continue
        what = {"spec": "window frames", "alias": "named windows"}.get(name, name.upper())
        raise SQLError("0A000", f"{what} are not supported in window functions")
    function = node.this
    if any(True for _ in outer_nodes(function, exp.Window)) or any(
        True for part in node.args.get("partition_by") or [] for _ in outer_nodes(part, exp.Window)
    ):
        raise SQLError("42P20", "window function calls cannot be nested")
    partition = [compile_expr(p, scope) for p in node.args.get("partition_by") or []]
    order_node = node.args.get("order")
    order = [
        (compile_expr(node, scope), descending)
        for node, descending in map(ordered, order_node.expressions if order_node else [])
    ]
    if isinstance(function, _RANKS):
        if function.args.get("this") is not None or function.expressions:
            raise SQLError(
                "42883", f"unknown signature: {function.sql_name().lower()}() takes no arguments"
            )
        return _Window(partition, order, type(function), None)
    if isinstance(function, AGGREGATES):
        if isinstance(function.this, exp.Distinct):
            raise SQLError("0A000", "DISTINCT is not implemented for window functions")
        return _Window(partition, order, None, AggregateCall.of(function, scope))
    name = function.sql_name().lower() if isinstance(function, exp.Func) else "?"
    if isinstance(function, exp.Anonymous):
        name = str(function.this).lower()
    raise SQLError("0A000", f"window function {name}() is not supported")
