"""Which sqlglot nodes are calls of aggregate functions: what the parser (an aggregate's
FILTER) and the expression compiler (grouping, nesting checks) both need to know,
kept below both.

NB: the ordered-set aggregates ``percentile_cont`` and ``percentile_disc`` are sqlglot's
nodes as the parser rebuilds them from ``f(fraction) WITHIN GROUP (ORDER BY v)``:
``this`` the value with its ordering (an ``exp.Order``, as ``f(v ORDER BY ...)``),
``expression`` the fraction (or array of fractions).
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from feedkv.errors import SQLError

__all__ = ["AGGREGATES", "SumInt", "aggregate_name", "outer_nodes", "refuse_aggregates"]


class SumInt(exp.Expression, exp.AggFunc):
    """CockroachDB's ``sum_int(INT)``: a sum that stays an INT (sqlglot has no node)."""

    arg_types = {"this": True}  # noqa: RUF012 (sqlglot's own declaration)
    _sql_names = ["SUM_INT"]  # noqa: RUF012


AGGREGATES = (
    exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg, exp.LogicalAnd, exp.LogicalOr, exp.GroupConcat,
    exp.Variance, exp.VariancePop, exp.Stddev, exp.StddevSamp, exp.StddevPop,
    exp.JSONArrayAgg, exp.ArrayAgg, exp.BitwiseAndAgg, exp.BitwiseOrAgg, exp.BitwiseXorAgg,
    exp.Corr, SumInt, exp.PercentileCont, exp.PercentileDisc,
)  # fmt: skip

# Aggregates whose name as written is not sqlglot's name for the node.
_NAMES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.VariancePop: "var_pop",
    exp.JSONArrayAgg: "jsonb_agg",
    exp.GroupConcat: "string_agg",
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
}

# A query of its own inside an expression (ANY and ALL hold one, maybe bare).
_NESTED = (exp.Subquery, exp.Exists, exp.Select, exp.Any, exp.All)


def aggregate_name(call: exp.Expr) -> str:
    """The name of an aggregate call (one of :data:`AGGREGATES`) as SQL spells it:
    ``count``, ``string_agg``, or the name the parser kept (``json_agg``)."""
    spelled = call.meta.get("spelled")
    if spelled:
        return str(spelled).lower()
    named = _NAMES.get(type(call))
    if named is None and isinstance(call, exp.Func):
        named = call.sql_name().lower()
    return named or ""


def outer_nodes(node: exp.Expr, *types: type[exp.Expr]) -> Iterator[exp.Expr]:
    """The nodes of ``types`` in ``node``, but for those inside its subqueries (whose
    names and aggregates are their own)."""
    for part in node.walk(prune=lambda n: n is not node and isinstance(n, _NESTED)):
        if isinstance(part, types):
            yield part


def refuse_aggregates(node: exp.Expr | None, clause: str) -> None:
    """42803 for an aggregate called in ``node`` (not in its subqueries), which stands in
    ``clause``: CockroachDB's message, ``sum(): aggregate functions are not allowed in
    WHERE`` (a window's function is no aggregate call)."""
    if node is None:
        return
    for call in outer_nodes(node, *AGGREGATES):
        if not (isinstance(call.parent, exp.Window) and call.parent.this is call):
            raise SQLError(
                "42803",
                f"{aggregate_name(call)}(): aggregate functions are not allowed in {clause}",
            )
