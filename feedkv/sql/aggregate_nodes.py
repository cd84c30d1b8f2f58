"""Which sqlglot nodes are calls of aggregate functions: what the parser (an aggregate's
FILTER) and the expression compiler (grouping, nesting checks) both need to know,
kept below both.

NB: the ordered-set aggregates ``percentile_cont`` and ``percentile_disc`` are sqlglot's
nodes as the parser rebuilds them from ``f(fraction) WITHIN GROUP (ORDER BY v)``:
``this`` the value with its ordering (an ``exp.Order``, as ``f(v ORDER BY ...)``),
``expression`` the fraction (or array of fractions).
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["AGGREGATES", "SumInt"]


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
