"""GROUP BY and aggregate functions, as CockroachDB runs them.

A grouped SELECT (one with GROUP BY, HAVING or an aggregate) reads its rows once: each
row's GROUP BY values pick its group, and the group's aggregates take the row's
arguments. Each group then becomes one *grouped row*: the group's first row (its table
columns, for the columns the grouping determines), then its GROUP BY values, then its
aggregates' results. The SELECT list, HAVING and ORDER BY are compiled over that row
(:meth:`Grouping.rewrite` turns each aggregate call and each GROUP BY expression into a
reference to its place); a column they name outside an aggregate must be a GROUP BY
column, or every primary key column must be one (then the row's other columns are
determined), else 42803 as in CockroachDB. Without GROUP BY there is exactly one group,
even over no rows.

The aggregates and their types: ``count`` (INT), ``sum`` (DECIMAL over INT or DECIMAL,
FLOAT over FLOAT, INTERVAL over INTERVAL), ``avg`` (the same types; a DECIMAL quotient
of 20 significant digits), ``sum_int`` (INT over INT, 22003 past INT8), ``min``,
``max``, ``bool_and``, ``bool_or``, ``bit_and``, ``bit_or`` (INT, or bit strings of one
length), ``corr(y, x)`` (FLOAT, over the rows where neither is NULL), ``string_agg``,
``array_agg`` and ``jsonb_agg``; each takes ``DISTINCT`` and an ``ORDER BY`` of its own
(``string_agg(v, ',' ORDER BY k)``: the values are taken in that order). NULL arguments
are skipped (but by ``array_agg`` and ``jsonb_agg``); over no rows, ``count`` is 0 and
the others NULL. The ordered-set aggregates ``percentile_disc`` and ``percentile_cont``
(``f(fraction) WITHIN GROUP (ORDER BY v)``) take their values in the ordering, as
``f(v ORDER BY ...)`` does, and the fraction as a second argument.
"""

from __future__ import annotations

import decimal
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.aggregate_nodes import SumInt
from feedkv.sql.arrays import Array
from feedkv.sql.as_json import as_json
from feedkv.sql.bits import BitString
from feedkv.sql.enums import EnumValue
from feedkv.sql.expr import (
    AGGREGATES,
    Compiled,
    Context,
    Scope,
    compile_expr,
    contains_aggregate,
    expression_name,
    outer_nodes,
    static_kind,
)
from feedkv.sql.interrupt import chunked
from feedkv.sql.interval import Interval
from feedkv.sql.ordering import sorted_rows
from feedkv.sql.types import (
    DECIMAL_QUOTIENT,
    EXACT_DECIMAL,
    INT64_MAX,
    INT64_MIN,
    ColumnType,
    Kind,
    enum_type_of,
    is_nan,
    kind_of_value,
    type_of_value,
)
from feedkv.sql.variance import Spread

__all__ = ["AggregateCall", "Grouping", "group_key", "is_window_function"]

_NESTED_QUERY = (exp.Subquery, exp.Exists, exp.Select, exp.Any, exp.All)
_KEY = "__key_{}"  # names of the grouped row's places; no SQL name starts with __
_AGG = "__agg_{}"


def group_key(value: Any) -> Any:
    """``value`` as a dict key that is equal exactly when SQL calls the values equal for
    grouping: NaNs are one group (Python's NaNs are unequal), JSON by JSONB's equality
    (its order's key: dicts and lists do not hash, and ``{"a": 1.10}`` is ``{"a": 1.1}``
    though their text differs)."""
    if is_nan(value):
        return _NAN
    if jsonb.is_json(value):
        return ("json", jsonb.sort_key(value))
    return value


_NAN = ("nan",)


@dataclass(frozen=True, slots=True)
class Grouping:
    """A grouped SELECT's grouping (see the module docstring): ``keys`` compute a row's
    GROUP BY values, ``aggregates`` are the calls to run per group; ``scope`` resolves
    the names of the grouped row."""

    width: int  # the table's columns, at the start of a grouped row
    keys: list[Compiled]
    key_nodes: list[exp.Expr]
    aggregates: list[AggregateCall]
    scope: Scope
    determined: frozenset[int]  # table columns a grouped row may name outside aggregates
    grouped: bool  # GROUP BY was given (else one group, even over no rows)

    @classmethod
    def of(
        cls,
        width: int,
        tables: Sequence[tuple[range, Sequence[int]]],
        scope: Scope,
        items: Sequence[exp.Expr],
        group_by: Sequence[exp.Expr],
        others: Sequence[exp.Expr],
    ) -> Grouping:
        """The grouping of a SELECT of ``items`` from rows of ``width`` columns (names
        in ``scope``; 0: a SELECT without FROM, over one row of no columns) grouped by
        ``group_by``; ``others`` are HAVING's and ORDER BY's expressions, whose
        aggregates run too. ``tables`` gives each table's columns in the row and its
        primary key's: a table whose whole key is grouped by determines its columns."""
        key_nodes = [_group_expression(node, items, scope) for node in group_by]
        keys = []
        columns: set[int] = set()
        for node in key_nodes:
            if contains_aggregate(node):
                raise SQLError("42803", "aggregate functions are not allowed in GROUP BY")
            keys.append(compile_expr(node, scope))
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
                columns.add(scope.lookup(node)[0])
        for table_columns, primary in tables:
            if all(i in columns for i in primary):
                columns |= set(table_columns)  # the primary key determines the rest
        calls: list[exp.Expr] = []
        for node in [*items, *others]:
            for call in _aggregate_calls(node):
                if not any(call == seen for seen in calls):
                    calls.append(call)
        aggregates = [AggregateCall.of(call, scope) for call in calls]
        grouped_scope = Scope(
            columns=dict(scope.columns),
            table_name=scope.table_name,
            database=scope.database,
            ambiguous=dict(scope.ambiguous),
            outer=scope.outer,
        )
        any_type = ColumnType(Kind.STRING)  # NB: only a constant's conversion reads it
        for j in range(len(keys)):
            grouped_scope.add([""], _KEY.format(j), width + j, any_type)
        for i in range(len(aggregates)):
            grouped_scope.add([""], _AGG.format(i), width + len(keys) + i, any_type)
        return cls(
            width,
            keys,
            key_nodes,
            aggregates,
            grouped_scope,
            frozenset(columns),
            bool(group_by),
        )

    def rewrite(self, node: exp.Expr) -> exp.Expr:
        """``node`` over the grouped row: its aggregate calls and GROUP BY expressions
        become references to their places. 42803 if it names a column the grouping
        does not determine."""

        def replace(part: exp.Expr) -> exp.Expr:
            if isinstance(part, _NESTED_QUERY):
                return part.copy()  # NB: a new node: transform leaves a subquery's own
            if is_window_function(part):
                return part  # the window's own; its arguments are grouped rows' values
            for i, call in enumerate(self.aggregates):
                if part == call.node:
                    return exp.column(_AGG.format(i))
            if not isinstance(part, exp.Column):
                for j, key in enumerate(self.key_nodes):
                    if part == key:
                        return exp.column(_KEY.format(j))
            return part

        rewritten = node.transform(replace)
        for column in outer_nodes(rewritten, exp.Column):
            if not isinstance(column, exp.Column):
                continue
            if isinstance(column.this, exp.Star):
                self.check_star()
            elif not column.name.startswith("__"):
                depth, index, _type = self.scope.find(column)
                if not depth and index < self.width and index not in self.determined:
                    raise SQLError(
                        "42803",
                        f'column "{expression_name(column)}" must appear in the GROUP BY '
                        "clause or be used in an aggregate function",
                    )
        return rewritten

    def check_star(self) -> None:
        """``*`` over a grouped row: every column must be determined."""
        missing = [i for i in range(self.width) if i not in self.determined]
        if missing:
            raise SQLError(
                "42803",
                "SELECT * with GROUP BY needs every column in the GROUP BY clause or the "
                "whole primary key in it",
            )

    def rows(self, envs: Iterable[tuple[Any, ...]], context: Context) -> list[tuple[Any, ...]]:
        """The grouped rows of ``envs``, in the order their groups first appear."""
        groups: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[Any], list[_State]]] = {}
        keys, aggregates = self.keys, self.aggregates
        for chunk in chunked(envs, context.interrupted):
            for env in chunk:
                values = [key(env, context) for key in keys]
                found = groups.get(tuple(map(group_key, values)))
                if found is None:
                    found = (env, values, [call.state() for call in aggregates])
                    groups[tuple(map(group_key, values))] = found
                for state in found[2]:
                    state.add(env, context)
        if not groups and not self.grouped:
            groups[()] = ((None,) * self.width, [], [call.state() for call in aggregates])
        return [
            (*first, *values, *(state.result() for state in states))
            for first, values, states in groups.values()
        ]


def _group_expression(node: exp.Expr, items: Sequence[exp.Expr], scope: Scope) -> exp.Expr:
    """A GROUP BY entry as the expression it groups by: ``GROUP BY 2`` is the second
    SELECT item, and a name that is no column of the table the item it names."""
    while isinstance(node, exp.Paren):  # NB: GROUP BY (x) is GROUP BY x, as in PostgreSQL
        node = node.this
    if (isinstance(node, exp.Literal) and (node.is_string or not node.this.isdigit())) or (
        isinstance(node, exp.Boolean)
    ):
        shown = node.sql(dialect="postgres")
        shown = shown.lower() if isinstance(node, exp.Boolean) else shown
        raise SQLError("42601", f"non-integer constant in GROUP BY: {shown}")
    if isinstance(node, exp.Literal):
        if not 1 <= int(node.this) <= len(items):
            raise SQLError("42P10", f"GROUP BY position {node.this} is not in select list")
        item = items[int(node.this) - 1]
        if contains_aggregate(item):
            raise SQLError("42803", "aggregate functions are not allowed in GROUP BY")
        return item.this if isinstance(item, exp.Alias) else item
    if (
        isinstance(node, exp.Column)
        and not node.table
        and ("", node.name) not in scope.columns
        and ("", node.name.lower()) not in scope.columns
    ):
        for item in items:
            if isinstance(item, exp.Alias) and item.alias == node.name:
                aliased: exp.Expr = item.this
                return aliased
    return node


def _aggregate_calls(node: exp.Expr) -> list[exp.Expr]:
    """The outermost aggregate calls in ``node`` (not a window's function, which
    :mod:`feedkv.sql.window` runs, though its arguments may hold some); 42803 for one
    inside another."""
    calls: list[exp.Expr] = []
    for call in outer_nodes(node, *AGGREGATES):
        if is_window_function(call):
            continue
        for parent in _ancestors(call, node):
            if is_window_function(parent):
                break
            if isinstance(parent, AGGREGATES):
                raise SQLError("42803", "aggregate function calls cannot be nested")
        calls.append(call)
    return calls


def _check_own(name: str, argument: exp.Expr, scope: Scope) -> None:
    """0A000 for an aggregate in a subquery whose argument names only the outer
    query's columns: SQL makes it the outer query's aggregate, which is not built."""
    columns = [
        c
        for c in outer_nodes(argument, exp.Column)
        if isinstance(c, exp.Column) and isinstance(c.this, exp.Identifier)
    ]
    try:
        outer = bool(columns) and all(scope.find(c)[0] > 0 for c in columns)
    except SQLError:
        return  # NB: compiling the argument reports it
    if outer:
        raise SQLError(
            "0A000",
            f"{name}() of the outer query's columns inside a subquery is not supported",
        )


def is_window_function(node: exp.Expr) -> bool:
    """Whether ``node`` is the function of a window call (``sum(x)`` of ``sum(x) OVER
    (...)``)."""
    return isinstance(node.parent, exp.Window) and node.parent.this is node


def _ancestors(node: exp.Expr, root: exp.Expr) -> list[exp.Expr]:
    out = []
    parent = node.parent
    while parent is not None and node is not root:
        out.append(parent)
        if parent is root:
            break
        node, parent = parent, parent.parent
    return out


# One aggregate call: its argument compiled, and a state per group.


@dataclass(frozen=True, slots=True)
class AggregateCall:
    node: exp.Expr
    name: str
    argument: Compiled | None  # None: count(*)
    distinct: bool
    separator: Compiled | None  # string_agg's separator; a percentile's fraction
    make: Callable[[], _Accumulator | Spread]

    # ``f(x ORDER BY ...)``: the order the values are taken in (sort key, descending)
    order: tuple[tuple[Compiled, bool], ...] = ()

    @classmethod
    def of(cls, node: exp.Expr, scope: Scope) -> AggregateCall:
        name = _NAMES[type(node)]
        argument = node.this
        fraction: exp.Expr | None = None
        if isinstance(node, _PERCENTILES):
            if not isinstance(argument, exp.Order):
                raise SQLError(
                    "42809", f"WITHIN GROUP is required for ordered-set aggregate {name}"
                )
            fraction = node.expression
        order: tuple[tuple[Compiled, bool], ...] = ()
        if isinstance(argument, exp.Order):
            for ordered in argument.expressions:
                if contains_aggregate(ordered.this):
                    raise SQLError("42803", "aggregate function calls cannot be nested")
                # NB: the dialect marks nulls_first only where NULLS FIRST/LAST changes it
                if bool(ordered.args.get("nulls_first")) == bool(ordered.args.get("desc")):
                    raise SQLError(
                        "0A000", f"NULLS FIRST/LAST in {name}'s ORDER BY is not supported"
                    )
            order = tuple(
                (compile_expr(o.this, scope), bool(o.args.get("desc")))
                for o in argument.expressions
            )
            argument = argument.this
        distinct = isinstance(argument, exp.Distinct)
        if distinct:
            if len(argument.expressions) != 1:
                raise SQLError("42883", f"unknown signature: {name}(DISTINCT ...) takes one value")
            argument = argument.expressions[0]
        extra = [e for e in node.expressions] if not isinstance(node, exp.GroupConcat) else []
        if isinstance(argument, exp.Star) and extra:
            # NB: as CockroachDB's grammar, where count(*) is a form of its own
            raise SQLError("42601", 'at or near ",": syntax error')
        if argument is None or extra:
            raise SQLError("42883", f"unknown signature: {name}() takes exactly one argument")
        if contains_aggregate(argument):
            raise SQLError("42803", "aggregate function calls cannot be nested")
        separator = None if fraction is None else _fraction(name, fraction, argument, scope)
        if isinstance(node, exp.GroupConcat):
            given = node.args.get("separator")
            if given is None:
                raise SQLError("42883", "unknown signature: string_agg() takes a separator")
            if isinstance(argument, exp.Null) and isinstance(given, exp.Null):
                _ambiguous(name, 2)
            separator = compile_expr(given, scope)
        elif isinstance(argument, exp.Null) and name in _OVERLOADS:
            _ambiguous(name, 1)
        arguments = [argument, node.expression] if isinstance(node, exp.Corr) else [argument]
        for each in arguments:
            _check_own(name, each, scope)
            _check_argument(name, _static_kind(each, scope))
        if isinstance(argument, exp.Star):
            if distinct:
                raise SQLError("42601", f"syntax error: {name}(DISTINCT *) counts no value")
            if not isinstance(node, exp.Count):
                raise SQLError("42883", f"unknown signature: {name}(*); only count(*) takes *")
            return cls(node, name, None, False, None, _Count, order)
        compiled = compile_expr(argument, scope)
        if isinstance(node, exp.Corr):
            compiled = _pair(compiled, compile_expr(node.expression, scope))
        return cls(node, name, compiled, distinct, separator, _MAKERS[name], order)

    def state(self) -> _State:
        return _State(self)


def _fraction(name: str, fraction: exp.Expr, value: exp.Expr, scope: Scope) -> Compiled:
    """A percentile's fraction compiled (it is the aggregate's first argument); 42883
    for a fraction that is no number or array, or for percentile_cont of a value that
    is neither FLOAT nor INTERVAL (as CockroachDB, which does not cast an INT there)."""
    if contains_aggregate(fraction):
        raise SQLError("42803", "aggregate function calls cannot be nested")
    _check_own(name, fraction, scope)
    fraction_kind = _static_kind(fraction, scope)
    value_kind = _static_kind(value, scope)
    continuous = name == "percentile_cont"
    if (fraction_kind is not None and fraction_kind not in _NUMBERS | {Kind.ARRAY}) or (
        continuous and value_kind is not None and value_kind not in (Kind.FLOAT, Kind.INTERVAL)
    ):
        kinds = (fraction_kind, value_kind)
        shown = ", ".join((k.value.lower() if k else "unknown") for k in kinds)
        raise SQLError("42883", f"unknown signature: {name}_impl({shown})")
    return compile_expr(fraction, scope)


def _static_kind(argument: exp.Expr, scope: Scope) -> Kind | None:
    # NB: a grouped row's places (a window's sum(count(*))) have no kind to check
    placeholder = any(
        isinstance(c, exp.Column) and c.name.startswith("__")
        for c in outer_nodes(argument, exp.Column)
    )
    return None if placeholder else static_kind(argument, scope)


def _pair(first: Compiled, second: Compiled) -> Compiled:
    """A two-argument aggregate's value of a row: both arguments, or NULL (the row is
    skipped) when either is NULL."""

    def both(env: Sequence[Any], context: Context) -> tuple[Any, Any] | None:
        a, b = first(env, context), second(env, context)
        return None if a is None or b is None else (a, b)

    return both


class _State:
    """One group's state of one aggregate call."""

    __slots__ = ("accumulator", "call", "context", "held", "seen")

    def __init__(self, call: AggregateCall) -> None:
        self.call = call
        self.accumulator = call.make()
        self.seen: set[Any] | None = set() if call.distinct else None
        # f(x ORDER BY ...): the rows, taken in order when the result is asked for
        self.held: list[tuple[Any, ...]] | None = [] if call.order else None
        self.context: Context | None = None

    def add(self, env: tuple[Any, ...], context: Context) -> None:
        if self.held is not None:
            self.held.append(env)
            self.context = context
            return
        self._take(env, context)

    def _take(self, env: tuple[Any, ...], context: Context) -> None:
        call = self.call
        if call.argument is None:
            self.accumulator.add(True, None)
            return
        value = call.argument(env, context)
        if value is None and not self.accumulator.keeps_nulls:
            return
        if self.seen is not None:
            key = group_key(value)
            if key in self.seen:
                return
            self.seen.add(key)
        separator = call.separator(env, context) if call.separator is not None else None
        try:
            self.accumulator.add(value, separator)
        except TypeError:
            values = value if isinstance(value, tuple) else (value,)  # corr's pair
            shown = ", ".join(type_of_value(v) for v in values)
            raise SQLError("42883", f"unknown signature: {call.name}({shown})") from None

    def result(self) -> Any:
        held, context = self.held, self.context
        if held and context is not None:
            self.held = []  # NB: a window's running aggregate asks again after more rows
            for env in sorted_rows(held, self.call.order, context):
                self._take(env, context)
        return self.accumulator.result()


class _Accumulator:
    keeps_nulls = False  # NULL values are skipped (all but jsonb_agg)

    def add(self, value: Any, separator: Any) -> None:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError


class _Count(_Accumulator):
    def __init__(self) -> None:
        self.count = 0

    def add(self, value: Any, separator: Any) -> None:
        self.count += 1

    def result(self) -> Any:
        return self.count


_NUMBERS = {Kind.INT, Kind.FLOAT, Kind.DECIMAL}
_ARGUMENT_KINDS = {
    "sum": {Kind.INT, Kind.FLOAT, Kind.DECIMAL, Kind.INTERVAL},
    "avg": {Kind.INT, Kind.FLOAT, Kind.DECIMAL, Kind.INTERVAL},
    "sum_int": {Kind.INT},
    "bool_and": {Kind.BOOL},
    "bool_or": {Kind.BOOL},
    "string_agg": {Kind.STRING, Kind.BYTES},
    "bit_and": {Kind.INT, Kind.BIT, Kind.VARBIT},
    "bit_or": {Kind.INT, Kind.BIT, Kind.VARBIT},
    "xor_agg": {Kind.INT, Kind.BYTES},
    **{
        name: _NUMBERS
        for name in ("variance", "var_pop", "stddev", "stddev_samp", "stddev_pop", "corr")
    },
}


# The aggregates whose overloads leave an untyped NULL argument ambiguous in CockroachDB
# (string_agg only when its separator is an untyped NULL too): their candidates
_OVERLOADS = {
    "string_agg": "string_agg(string, string), string_agg(bytes, bytes)",
    "array_agg": "array_agg(T) for each element type T",
    "bit_and": "bit_and(int), bit_and(varbit)",
    "bit_or": "bit_or(int), bit_or(varbit)",
}


def _ambiguous(name: str, arity: int) -> NoReturn:
    """42725 for an aggregate given only untyped NULLs where more than one overload
    fits (as CockroachDB: ``string_agg(NULL, NULL)``, ``array_agg(NULL)``); a cast
    (``NULL::STRING``) picks one."""
    unknown = ", ".join(["unknown"] * arity)
    raise SQLError(
        "42725",
        f"ambiguous call: {name}({unknown}), candidates are: {_OVERLOADS[name]} "
        "(cast the NULL to the type meant, as NULL::<type>)",
    )


def _check_argument(name: str, kind: Kind | None) -> None:
    """42883 for an argument whose kind the aggregate does not take, whatever the rows
    (found when the kind shows in the tree; else from the first value)."""
    allowed = _ARGUMENT_KINDS.get(name)
    if kind is not None and allowed is not None and kind not in allowed:
        raise SQLError("42883", f"unknown signature: {name}({kind.value.lower()})")


def _number(value: Any) -> int | float | decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise TypeError(value)
    return value


class _Sum(_Accumulator):
    """sum: a DECIMAL over INT or DECIMAL (exact), a FLOAT over FLOAT, an INTERVAL over
    INTERVAL (months, days and microseconds each summed, as PostgreSQL)."""

    def __init__(self) -> None:
        self.total: Any = None
        self.count = 0

    def add(self, value: Any, separator: Any) -> None:
        if isinstance(value, Interval) or isinstance(self.total, Interval):
            if not isinstance(value, Interval) or not isinstance(self.total, Interval | None):
                raise TypeError(value)
            self.count += 1
            self.total = value if self.total is None else self.total + value
            return
        value = _number(value)
        self.count += 1
        if self.total is None:
            # NB: a sum of FLOAT4s is a FLOAT (FLOAT8), as in CockroachDB, from its first
            self.total = float(value) if isinstance(value, float) else value
        elif isinstance(self.total, float) != isinstance(value, float):
            raise TypeError(value)  # one column has one type: only a mix of expressions
        elif isinstance(value, decimal.Decimal) or isinstance(self.total, decimal.Decimal):
            self.total = EXACT_DECIMAL.add(self.total, value)
        else:
            self.total = self.total + value

    def result(self) -> Any:
        return decimal.Decimal(self.total) if type(self.total) is int else self.total


class _Avg(_Sum):
    def result(self) -> Any:
        if not self.count:
            return None
        if isinstance(self.total, Interval):
            return self.total.times(1 / decimal.Decimal(self.count))
        if isinstance(self.total, float):
            return self.total / self.count
        return DECIMAL_QUOTIENT.divide(self.total, self.count)


class _SumInt(_Accumulator):
    """sum_int(INT): an INT, 22003 once the sum leaves INT8's range."""

    def __init__(self) -> None:
        self.total: int | None = None

    def add(self, value: Any, separator: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(value)
        self.total = value if self.total is None else self.total + value
        if not INT64_MIN <= self.total <= INT64_MAX:
            raise SQLError("22003", "integer out of range")

    def result(self) -> Any:
        return self.total


class _Corr(_Accumulator):
    """corr(y, x): the Pearson correlation of the pairs, a FLOAT; NULL over fewer than
    two pairs or when either side does not vary. The sums are kept in decimals of 60
    digits (a float converts exactly), so the result is the float nearest the true
    value, as CockroachDB's; a sum of squares beyond FLOAT8's range is 22003, as where
    PostgreSQL and CockroachDB keep those sums in floats."""

    def __init__(self) -> None:
        self.count = 0
        self.sx = self.sy = self.sxx = self.syy = self.sxy = decimal.Decimal(0)

    def add(self, value: Any, separator: Any) -> None:
        y, x = (_exact(v) for v in value)
        add, mul = _CORR.add, _CORR.multiply
        self.count += 1
        self.sx, self.sy = add(self.sx, x), add(self.sy, y)
        self.sxx = add(self.sxx, mul(x, x))
        self.syy = add(self.syy, mul(y, y))
        self.sxy = add(self.sxy, mul(x, y))
        if max(self.sxx, self.syy, abs(self.sxy)) > _FLOAT_MAX:
            raise SQLError("22003", "float out of range")

    def result(self) -> Any:
        n, c = decimal.Decimal(self.count), _CORR
        vx = c.subtract(c.multiply(n, self.sxx), c.multiply(self.sx, self.sx))
        vy = c.subtract(c.multiply(n, self.syy), c.multiply(self.sy, self.sy))
        if self.count < 2 or vx <= 0 or vy <= 0:
            return None
        covariance = c.subtract(c.multiply(n, self.sxy), c.multiply(self.sx, self.sy))
        return float(c.divide(covariance, c.sqrt(c.multiply(vx, vy))))


_CORR = decimal.Context(prec=60, Emax=999_999, Emin=-999_999)
_FLOAT_MAX = decimal.Decimal(sys.float_info.max)


def _exact(value: Any) -> decimal.Decimal:
    number = _number(value)
    if isinstance(number, float) and not math.isfinite(number):
        raise SQLError("22003", "float out of range")
    return decimal.Decimal(number)


class _Min(_Accumulator):
    def __init__(self) -> None:
        self.best: Any = None

    def add(self, value: Any, separator: Any) -> None:
        if self.best is None or _before(value, self.best):
            self.best = value

    def result(self) -> Any:
        return self.best


class _Max(_Min):
    def add(self, value: Any, separator: Any) -> None:
        if self.best is None or _before(self.best, value):
            self.best = value


def _before(a: Any, b: Any) -> bool:
    """SQL order, where NaN sorts below every other number (as in CockroachDB)."""
    if is_nan(a):
        return not is_nan(b)
    if is_nan(b):
        return False
    return bool(a < b)


class _BoolAnd(_Accumulator):
    def __init__(self) -> None:
        self.value: bool | None = None

    def add(self, value: Any, separator: Any) -> None:
        if not isinstance(value, bool):
            raise TypeError(value)
        self.value = value if self.value is None else self.value and value

    def result(self) -> Any:
        return self.value


class _BoolOr(_BoolAnd):
    def add(self, value: Any, separator: Any) -> None:
        if not isinstance(value, bool):
            raise TypeError(value)
        self.value = value if self.value is None else self.value or value


class _StringAgg(_Accumulator):
    """string_agg(value, separator): the values in the order read, each after the
    separator given with it (none before the first); STRING or BYTES, not both."""

    def __init__(self) -> None:
        self.parts: list[Any] = []

    def add(self, value: Any, separator: Any) -> None:
        if not isinstance(value, str | bytes) or (
            separator is not None and type(separator) is not type(value)
        ):
            raise TypeError(value)
        if self.parts and type(self.parts[-1]) is not type(value):
            raise TypeError(value)
        if self.parts and separator is not None:
            self.parts.append(separator)
        self.parts.append(value)

    def result(self) -> Any:
        if not self.parts:
            return None
        return type(self.parts[0])().join(self.parts)


class _ArrayAgg(_Accumulator):
    """array_agg(value): an array of the values in the order taken, NULLs included, of
    the first non-NULL value's type; over no rows NULL."""

    keeps_nulls = True

    def __init__(self) -> None:
        self.values: list[Any] | None = None

    def add(self, value: Any, separator: Any) -> None:
        if isinstance(value, Array) or jsonb.is_json(value):
            raise SQLError("0A000", f"array_agg of {type_of_value(value)} values is not supported")
        if self.values is None:
            self.values = []
        self.values.append(value)

    def result(self) -> Any:
        if self.values is None:
            return None
        first = next((v for v in self.values if v is not None), None)
        if isinstance(first, EnumValue):
            element = enum_type_of(first)
        else:
            element = ColumnType(kind_of_value(first) or Kind.STRING)
        if any(v is not None and type(v) is not type(first) for v in self.values):
            raise SQLError("42804", "array_agg of values of more than one type")
        return Array(tuple(self.values), element)


class _BitAnd(_Accumulator):
    """bit_and(INT) and bit_and(VARBIT): every value's bits ANDed (bit strings must be
    of one length, 22026 else, as in PostgreSQL); over no values NULL."""

    operation = "AND"

    def __init__(self) -> None:
        self.value: int | BitString | None = None

    def add(self, value: Any, separator: Any) -> None:
        if isinstance(value, BitString):
            if self.value is None:
                self.value = value
                return
            if not isinstance(self.value, BitString):
                raise TypeError(value)
            if len(value.bits) != len(self.value.bits):
                raise SQLError("22026", f"cannot {self.operation} bit strings of different sizes")
            pairs = zip(self.value.bits, value.bits, strict=True)
            self.value = BitString("".join(str(self.combine(int(a), int(b))) for a, b in pairs))
            return
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or isinstance(self.value, BitString)
        ):
            raise TypeError(value)
        self.value = value if self.value is None else self.combine(self.value, value)

    @staticmethod
    def combine(a: int, b: int) -> int:
        return a & b

    def result(self) -> Any:
        return self.value


class _BitOr(_BitAnd):
    operation = "OR"

    @staticmethod
    def combine(a: int, b: int) -> int:
        return a | b


class _XorAgg(_Accumulator):
    """xor_agg(INT) and xor_agg(BYTES), CockroachDB's: every value XORed (byte strings
    of one length, 22023 else); over no values NULL."""

    def __init__(self) -> None:
        self.value: int | bytes | None = None

    def add(self, value: Any, separator: Any) -> None:
        if isinstance(value, bytes) and (self.value is None or isinstance(self.value, bytes)):
            if self.value is None:
                self.value = value
            elif len(value) != len(self.value):
                raise SQLError(
                    "22023",
                    "arguments to xor must all be the same length "
                    f"{len(self.value)} vs {len(value)}",
                )
            else:
                self.value = bytes(a ^ b for a, b in zip(self.value, value, strict=True))
            return
        if isinstance(value, bool) or not isinstance(value, int) or isinstance(self.value, bytes):
            raise TypeError(value)
        self.value = value if self.value is None else self.value ^ value

    def result(self) -> Any:
        return self.value


class _JsonbAgg(_Accumulator):
    """jsonb_agg(value): a JSON array of the values in the order read, NULLs as JSON
    null; over no rows NULL. Each value in its JSON form (:func:`as_json`)."""

    keeps_nulls = True

    def __init__(self) -> None:
        self.values: list[Any] | None = None

    def add(self, value: Any, separator: Any) -> None:
        if self.values is None:
            self.values = []
        self.values.append(as_json(value))

    def result(self) -> Any:
        # NB: a copy: a window's running aggregate takes a result, then adds more
        return list(self.values) if self.values is not None else None


class _Percentile(_Accumulator):
    """percentile_disc and percentile_cont ``WITHIN GROUP (ORDER BY v)``, as CockroachDB:
    the values arrive in the ordering's order and are kept; the fraction (a number, or
    an array of them: an array of results) is the first non-NULL one given, each in
    [0, 1] (22003 else). percentile_disc gives the first value whose position (from 1)
    reaches ``fraction * n``; percentile_cont the value at position
    ``1 + fraction * (n - 1)``, interpolated between its neighbours (FLOAT or
    INTERVAL). Over no values NULL."""

    def __init__(self, continuous: bool) -> None:
        self.continuous = continuous
        self.values: list[Any] = []
        self.fractions: list[float | None] | None = None
        self.single = True

    def add(self, value: Any, fraction: Any) -> None:
        if self.fractions is None and fraction is not None:
            self.single = not isinstance(fraction, Array)
            given = (fraction,) if self.single else fraction.values
            name = "percentile_cont" if self.continuous else "percentile_disc"
            self.fractions = [_checked_fraction(f, name) for f in given]
        if self.continuous and not isinstance(value, float | Interval):
            raise TypeError(value)
        self.values.append(value)

    def result(self) -> Any:
        if not self.values or self.fractions is None:
            return None
        results = [None if f is None else self._at(f) for f in self.fractions]
        if self.single:
            return results[0]
        first = self.values[0]
        if self.continuous:
            element = ColumnType(Kind.FLOAT if isinstance(first, float) else Kind.INTERVAL)
        elif isinstance(first, EnumValue):
            element = enum_type_of(first)
        else:
            element = ColumnType(kind_of_value(first) or Kind.STRING)
        return Array(tuple(results), element)

    def _at(self, fraction: float) -> Any:
        values, n = self.values, len(self.values)
        if not self.continuous:
            return values[0] if fraction == 0 else values[math.ceil(fraction * n) - 1]
        position = 1 + fraction * (n - 1)
        low, high = math.floor(position), math.ceil(position)
        if low == high:
            return values[low - 1]
        a, b = values[low - 1], values[high - 1]
        if isinstance(a, float):
            return (high - position) * a + (position - low) * b
        span = (high - position) * a.span() + (position - low) * b.span()
        return _interval_of_span(span)


def _checked_fraction(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise SQLError("42883", f"unknown signature: {name}_impl({type_of_value(value)}, ...)")
    fraction = float(value)
    if not 0 <= fraction <= 1:
        raise SQLError("22003", f"percentile value {fraction:f} is not between 0 and 1")
    return fraction


def _interval_of_span(micros: float) -> Interval:
    """An interval of ``micros``, in months of 30 days and days of 24 hours, as
    CockroachDB makes one from a number of seconds."""
    month, day = 30 * 86_400_000_000, 86_400_000_000
    months = int(micros / month)
    rest = math.fmod(micros, month)
    days = int(rest / day)
    return Interval(months, days, int(math.fmod(rest, day)))


_PERCENTILES = (exp.PercentileCont, exp.PercentileDisc)

_NAMES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.GroupConcat: "string_agg",
    exp.Variance: "variance",
    exp.VariancePop: "var_pop",
    exp.Stddev: "stddev",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.JSONArrayAgg: "jsonb_agg",
    exp.ArrayAgg: "array_agg",
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
    exp.BitwiseXorAgg: "xor_agg",
    exp.Corr: "corr",
    SumInt: "sum_int",
    exp.PercentileCont: "percentile_cont",
    exp.PercentileDisc: "percentile_disc",
}
_MAKERS: dict[str, Callable[[], _Accumulator | Spread]] = {
    "count": _Count,
    "sum": _Sum,
    "avg": _Avg,
    "min": _Min,
    "max": _Max,
    "bool_and": _BoolAnd,
    "bool_or": _BoolOr,
    "string_agg": _StringAgg,
    "variance": lambda: Spread(sample=True, root=False),
    "var_pop": lambda: Spread(sample=False, root=False),
    "stddev": lambda: Spread(sample=True, root=True),
    "stddev_samp": lambda: Spread(sample=True, root=True),
    "stddev_pop": lambda: Spread(sample=False, root=True),
    "jsonb_agg": _JsonbAgg,
    "array_agg": _ArrayAgg,
    "bit_and": _BitAnd,
    "bit_or": _BitOr,
    "xor_agg": _XorAgg,
    "corr": _Corr,
    "sum_int": _SumInt,
    "percentile_cont": lambda: _Percentile(continuous=True),
    "percentile_disc": lambda: _Percentile(continuous=False),
}
