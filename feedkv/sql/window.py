"""Window calls: ``f(...) OVER ([PARTITION BY ...] [ORDER BY ...] [frame])``, as
PostgreSQL and CockroachDB run them (the functions themselves, rankings, lag/lead,
first/last/nth_value and the aggregates, and frames: :mod:`feedkv.sql.window_functions`).

They run after WHERE, GROUP BY and HAVING, over the rows those keep, and before
DISTINCT, ORDER BY and LIMIT. Each window call becomes a column appended to every row
(:meth:`WindowPlan.rows`), which the SELECT list and ORDER BY read by name
(``__win_<i>``). A partition's rows are put in the window's ORDER BY order (NULLs
first ascending, as every ORDER BY here); rows equal in it are *peers*. Named windows
(WINDOW w AS ...) are copied into their calls by the parser. DISTINCT, GROUPS frames,
EXCLUDE and RANGE offsets are refused with 0A000.

Cost: one pass to partition, a sort per partition, then each window call's function
over each partition (see :mod:`feedkv.sql.window_functions` for frames).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql.aggregate import AggregateCall, group_key
from feedkv.sql.expr import (
    AGGREGATES,
    Compiled,
    Context,
    Scope,
    compile_expr,
    expression_name,
    outer_nodes,
)
from feedkv.sql.ordering import sorted_rows
from feedkv.sql.parser import ordered
from feedkv.sql.types import ColumnType, Kind
from feedkv.sql.window_functions import DEFAULT_FRAME, Bound, Frame, Function, Partition

__all__ = ["WindowPlan", "contains_window"]

_NAME = "__win_{}"  # no SQL name starts with __
_NESTED = (exp.Subquery, exp.Exists, exp.Select, exp.Any, exp.All)  # queries of their own


def contains_window(node: exp.Expr) -> bool:
    return any(True for _ in outer_nodes(node, exp.Window))


@dataclass(frozen=True, slots=True)
class _Window:
    """One window call: its partition's and order's keys, and its function."""

    partition: list[Compiled]
    order: list[tuple[Compiled, bool]]
    function: Function

    def values(self, envs: Sequence[tuple[Any, ...]], context: Context) -> list[Any]:
        """The call's value at each of ``envs``."""
        out: list[Any] = [None] * len(envs)
        partitions: dict[tuple[Any, ...], list[int]] = {}
        for i, env in enumerate(envs):
            key = tuple(group_key(p(env, context)) for p in self.partition)
            partitions.setdefault(key, []).append(i)
        for indices in partitions.values():
            ordered_rows = sorted_rows(indices, self.order, context, lambda i: envs[i])
            keys = [
                tuple(group_key(o(envs[i], context)) for o, _descending in self.order)
                for i in ordered_rows
            ]
            peers: list[tuple[int, int]] = []
            start = 0
            for position in range(len(keys) + 1):
                if position == len(keys) or keys[position] != keys[start]:
                    peers.extend([(start, position - 1)] * (position - start))
                    start = position
            part = Partition([envs[i] for i in ordered_rows], peers)
            for i, value in zip(ordered_rows, self.function.values(part, context), strict=True):
                out[i] = value
        return out


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
        if name in ("this", "partition_by", "order", "over", "spec") or value in (
            None,
            False,
            [],
        ):
            continue
        what = {"alias": "named windows"}.get(name, name.upper())
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
    frame = _frame(node.args.get("spec"))
    return _Window(partition, order, _function(function, scope, frame))


def _function(function: exp.Expr, scope: Scope, frame: Frame) -> Function:
    if isinstance(function, AGGREGATES):
        if isinstance(function.this, exp.Distinct):
            raise SQLError("0A000", "DISTINCT is not implemented for window functions")
        return Function(_name(function), [], AggregateCall.of(function, scope), frame)
    arguments = _ARGUMENTS.get(type(function))
    name = _name(function)
    if arguments is None:
        raise SQLError("0A000", f"window function {name}() is not supported")
    written = [function.args.get(a) for a in ("this", "offset", "default")]
    given = [part for part in [*written, *function.expressions] if isinstance(part, exp.Expr)]
    low, high = arguments
    if not low <= len(given) <= high:
        raise SQLError("42883", f"unknown signature: {name}() with {len(given)} arguments")
    return Function(name, [compile_expr(g, scope) for g in given], None, frame)


def _name(function: exp.Expr) -> str:
    if isinstance(function, exp.Anonymous):
        return str(function.this).lower()
    return expression_name(function)


# The window functions that are no aggregates: how many arguments each takes.
_ARGUMENTS: dict[type[exp.Expr], tuple[int, int]] = {
    exp.RowNumber: (0, 0),
    exp.Rank: (0, 0),
    exp.DenseRank: (0, 0),
    exp.PercentRank: (0, 0),
    exp.CumeDist: (0, 0),
    exp.Ntile: (1, 1),
    exp.Lag: (1, 3),
    exp.Lead: (1, 3),
    exp.FirstValue: (1, 1),
    exp.LastValue: (1, 1),
    exp.NthValue: (2, 2),
}


def _frame(spec: exp.Expr | None) -> Frame:
    """``ROWS`` or ``RANGE BETWEEN start AND end`` (``ROWS start``: up to the current
    row); the default without a spec. GROUPS, EXCLUDE and RANGE offsets are 0A000."""
    if spec is None:
        return DEFAULT_FRAME
    kind = str(spec.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE"):
        raise SQLError("0A000", f"{kind} window frames are not supported")
    if spec.args.get("exclude"):
        raise SQLError("0A000", "EXCLUDE in window frames is not supported")
    rows = kind == "ROWS"
    start, start_side = _bound(spec.args.get("start"), spec.args.get("start_side"), rows)
    end: Bound = ("current", 0)
    end_side = ""
    if spec.args.get("end") is not None:
        end, end_side = _bound(spec.args.get("end"), spec.args.get("end_side"), rows)
    if (start[0] == "unbounded" and start_side == "FOLLOWING") or (
        end[0] == "unbounded" and end_side == "PRECEDING"
    ):
        raise SQLError(
            "42P20", "a frame cannot start at UNBOUNDED FOLLOWING or end at UNBOUNDED PRECEDING"
        )
    rank = {"unbounded": -1, "preceding": 0, "current": 1, "following": 2}
    if start[0] != "unbounded" and end[0] != "unbounded" and rank[start[0]] > rank[end[0]]:
        raise SQLError("42P20", "a frame cannot start after its end")
    return Frame(rows, start, end)


def _bound(value: Any, side: Any, rows: bool) -> tuple[Bound, str]:
    """A frame bound as written, and its side (PRECEDING or FOLLOWING, if any)."""
    side_word = str(side or "").upper()
    if isinstance(value, str) and value.upper() == "UNBOUNDED":
        return ("unbounded", 0), side_word
    if isinstance(value, str) and value.upper() == "CURRENT ROW":
        return ("current", 0), side_word
    if not rows:
        raise SQLError("0A000", "RANGE with an offset is not supported in window frames")
    if not isinstance(value, exp.Literal) or value.is_string or not value.this.isdigit():
        raise SQLError("0A000", "a window frame's offset must be a non-negative integer constant")
    offset = int(value.this)
    return (("following", offset) if side_word == "FOLLOWING" else ("preceding", offset)), side_word
