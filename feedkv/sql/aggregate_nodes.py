"""Which sqlglot nodes are calls of aggregate functions: what the parser (an aggregate's
FILTER) and the expression compiler (grouping, nesting checks) both need to know,
kept below both."""

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
    exp.Corr, SumInt,
)  # fmt: skip
