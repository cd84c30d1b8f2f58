"""Plans: what a statement compiles to against one version of its table, made once
per session (``Session.plan``), so a statement run again goes straight to its rows.

Rows are read by scanning the narrowest key span the WHERE clause allows: equality on
every primary key column is a point lookup; equality on a leading part plus a range on
the next column is a key range; ``k IN (values)`` or ``k = ANY (array)`` on the key's
first column (an ORM's batch of lookups) is a span per listed key; anything else scans
the table. The full WHERE clause is then applied to every row read (unless the span
holds exactly the rows it selects).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Any, TypeVar

from sqlglot import exp

from feedkv.errors import (
    SQLError,
)
from feedkv.sql import statements as st
from feedkv.sql.aggregate import Grouping, group_key
from feedkv.sql.arrays import Array
from feedkv.sql.computed import refuse_writes
from feedkv.sql.descriptor import (
    Column,
    Index,
    TableDescriptor,
)
from feedkv.sql.expr import (
    Compiled,
    Context,
    Scope,
    compile_expr,
    condition,
    contains_aggregate,
    expression_name,
    is_constant,
    is_fixed_value,
    outer_nodes,
    placeholder_index,
    qualifier_of,
    refuse_aggregates,
    static_kind,
)
from feedkv.sql.expression_indexes import HIDDEN_QUALIFIER, with_expression_columns
from feedkv.sql.indexes import values_prefix
from feedkv.sql.mvcc_column import MVCC_COLUMN, MVCC_TYPE, names_mvcc, target_column, with_mvcc
from feedkv.sql.ordering import sorted_rows
from feedkv.sql.parser import parse_expression
from feedkv.sql.relation import Relation
from feedkv.sql.row_codec import (
    row_prefix,
    row_span,
    table_span,
)
from feedkv.sql.types import (
    INT64_MAX,
    INT64_MIN,
    ColumnType,
    Kind,
    coerce,
    kind_name,
)
from feedkv.sql.window import WindowPlan
from feedkv.util.keys import Span, prefix_end

__all__ = [
    "unequal_values",
    "DeletePlan",
    "FromTable",
    "ResultPlan",
    "InsertPlan",
    "Planned",
    "Projections",
    "SelectPlan",
    "Selection",
    "Star",
    "UpdatePlan",
    "check_assigned",
    "constraint_target",
    "check_index",
    "check_returning",
    "column_default",
    "key_constraint",
    "env_of",
    "flatten_and",
    "holds",
    "order_keys",
    "sorted_rows",
    "star_of",
    "table_scope",
    "unalias",
]


Planned = st.Select | st.Insert | st.Update | st.Delete


_P = TypeVar("_P")


def table_scope(
    desc: TableDescriptor, database: str, alias: str | None = None, outer: Scope | None = None
) -> Scope:
    """The names of ``desc``'s columns: bare, and qualified by its alias if it has one,
    else by its name (an alias hides the name, as in PostgreSQL and CockroachDB);
    ``outer`` names those of the query around it, for a subquery."""
    scope = Scope(table_name=desc.name, database=database, outer=outer)
    qualifiers = ["", alias or desc.name]
    for index, column in enumerate(desc.columns):
        if column.inaccessible:
            scope.add([HIDDEN_QUALIFIER], column.name, index, column.type)
        elif not column.adding:
            scope.add(qualifiers, column.name, index, column.type)
    scope.rows[alias or desc.name] = lambda: star_of([FromTable.alone(desc, alias)])
    return scope


@dataclass(frozen=True, slots=True)
class FromTable:
    """A table a SELECT reads: its descriptor, the names that qualify its columns, and
    where its columns start in the rows the SELECT reads."""

    desc: TableDescriptor | Relation
    names: tuple[str, ...]
    offset: int = 0

    @property
    def columns(self) -> range:
        return range(self.offset, self.offset + len(self.desc.columns))

    @property
    def primary(self) -> list[int]:
        """Where its primary key's columns are in a row."""
        return [self.offset + self.desc.columns.index(c) for c in self.desc.key_columns]

    @classmethod
    def alone(cls, desc: TableDescriptor, alias: str | None = None) -> FromTable:
        return cls(desc, (alias or desc.name,))


Projections = tuple[tuple[str, ...], list[Compiled]]  # result column names, their values
Star = list[tuple[str, int, ColumnType]]  # what ``*`` selects: name, place in the row, type


def star_of(tables: Sequence[FromTable], qualifier: str = "") -> Star:
    """``*``: every table's visible columns (``t.*``: those of table ``t``)."""
    return [
        (column.name, index, column.type)
        for table in tables
        if not qualifier or qualifier in table.names
        for index, column in zip(table.columns, table.desc.columns, strict=True)
        if column.shown
    ]


def _projections(
    tables: Sequence[FromTable],
    items: Sequence[exp.Expr],
    scope: Scope,
    written: Sequence[exp.Expr] | None = None,
    star: Star | None = None,
) -> Projections:
    """The result columns of SELECT ``items`` (``written``: the items as the statement
    has them, which name the columns, when ``items`` are rewritten over grouped rows).
    ``*`` is ``star`` (by default every table's visible columns), ``t.*`` table ``t``'s."""
    names: list[str] = []
    projections: list[Compiled] = []
    for item, as_written in zip(items, written or items, strict=True):
        if isinstance(item, exp.Alias) and _is_star(item.this):
            raise SQLError("42601", f'"{item.this.sql(dialect="postgres")}" cannot be aliased')
        if _is_star(item):
            if not tables and star is None:
                raise SQLError(
                    "42602", f'cannot use "{item.sql(dialect="postgres")}" without a FROM clause'
                )
            starred = star if star is not None else star_of(tables)
            if isinstance(item, exp.Column):
                try:
                    scope.check_prefix(item)
                    scope.check_qualifier(qualifier_of(item))
                except SQLError as exc:
                    if exc.code != "42P01":
                        raise
                    pattern = item.sql(dialect="postgres")
                    raise SQLError("42P01", f"no data source matches pattern: {pattern}") from None
                starred = star_of(tables, qualifier_of(item))
            for name, index, _type in starred:
                names.append(name)
                projections.append(lambda env, ctx, index=index: env[index])  # type: ignore[misc]
            continue
        names.append(expression_name(as_written))
        projections.append(compile_expr(unalias(item), scope))
    return tuple(names), projections


def _group_by_stars(
    tables: Sequence[FromTable], scope: Scope, group_by: Sequence[exp.Expr]
) -> list[exp.Expr]:
    """GROUP BY's keys with each ``t.*`` as t's visible columns, each a key, as
    CockroachDB groups by the row of them."""
    keys: list[exp.Expr] = []
    for node in group_by:
        if not (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
            keys.append(node)
            continue
        qualifier = qualifier_of(node)
        try:
            scope.check_prefix(node)
            scope.check_qualifier(qualifier)
        except SQLError as exc:
            if exc.code != "42P01":
                raise
            pattern = node.sql(dialect="postgres")
            raise SQLError("42P01", f"no data source matches pattern: {pattern}") from None
        keys.extend(
            exp.column(name, table=qualifier, quoted=True)
            for name, _index, _type in star_of(tables, qualifier)
        )
    return keys


def _is_star(node: exp.Expr) -> bool:
    return isinstance(node, exp.Star) or (
        isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
    )


def _returning(
    desc: TableDescriptor,
    items: tuple[exp.Expr, ...] | None,
    scope: Scope,
    alias: str | None = None,
) -> Projections | None:
    if items is None:
        return None
    check_returning(items)
    return _projections([FromTable.alone(desc, alias)], items, scope)


def check_returning(items: Sequence[exp.Expr]) -> None:
    if any(contains_aggregate(i) for i in items):
        raise SQLError("42803", "aggregate functions are not allowed in RETURNING")


@dataclass
class _Bound:
    value: Compiled
    inclusive: bool


@dataclass
class _KeyPlan:
    """Constraints on the primary key columns found in WHERE; ``complete`` when WHERE is
    nothing but them (then a span built from exact values needs no filter after it)."""

    equal: list[Compiled]
    low: _Bound | None = None
    high: _Bound | None = None
    complete: bool = False


@dataclass(frozen=True, slots=True)
class Selection:
    """The rows a WHERE clause selects: ``span(context)`` is the key span to read and
    whether it holds exactly those rows (it depends on the run's placeholders); else
    ``test``, the whole WHERE clause, filters the rows read."""

    span: Callable[[Context], tuple[Span, bool]]
    test: Compiled | None
    # The primary key of the one row WHERE selects, when it is nothing but the whole
    # key's equality to values that keep their type; else None (then, or when a run's
    # values change type or are NULL, it returns None).
    point: Callable[[Context], list[Any] | None] | None
    # When WHERE constrains no primary key column but a secondary index's leading
    # columns: the spans of the index's entries to read (None for a run whose values do
    # not fit the columns: then the table is read); ``test`` filters the rows found.
    index_span: Callable[[Context], list[Span] | None] | None = None
    # When WHERE constrains no primary key column but holds ``k IN (values...)`` or
    # ``k = ANY (array)`` for the key's first column ``k``: the distinct non-NULL values
    # in key order, each a span to read (None for a run whose values do not keep their
    # type as the column's: then the table is read); ``test`` filters the rows found.
    key_list: Callable[[Context], list[Any] | None] | None = None
    # As ``key_list``, for a secondary index's first column (when WHERE lists no key
    # column's values): the index and its listed values, whose spans ``index_span`` reads.
    listed_index: tuple[Index, Callable[[Context], list[Any] | None]] | None = None
    # Whether the rows read carry their MVCC timestamp last (feedkv.sql.mvcc_column).
    mvcc: bool = False

    @classmethod
    def of(
        cls, desc: TableDescriptor, where: exp.Expr | None, scope: Scope, mvcc: bool = False
    ) -> Selection:
        if where is not None:
            refuse_aggregates(where, "WHERE")
            if desc.computed_columns:
                where = with_expression_columns(desc, where)
            where = condition(where, scope)
        test = compile_expr(where, scope) if where is not None else None  # NB: checks it too
        plan = _key_plan(desc, where, scope) if where is not None else None
        point = None
        if plan is not None and plan.complete and len(plan.equal) == len(desc.key_columns):
            point = _point(desc, plan)
        by_index = key_list = listed_index = None
        if where is not None and plan is None:
            first = desc.key_columns[0]
            key_list = _key_list(where, scope, first, lambda v: row_prefix(desc, [v]))
            if key_list is None and _usable_indexes(desc, where):
                listed_index = _index_key_list(desc, where, scope)
                if listed_index is not None:
                    by_index = _index_spans(desc, *listed_index)
                else:
                    by_index = _index_plan(desc, where, scope)
        span = _span_plan(desc, where, plan)
        return cls(span, test, point, by_index, key_list, listed_index, mvcc)


def _bound(compiled: Compiled, column: Column, context: Context) -> tuple[Any, bool]:
    """A constant as the column's type, and whether it kept its value."""
    return _as_column(compiled((), context), column)


def _as_column(raw: Any, column: Column) -> tuple[Any, bool]:
    ctype = column.type
    # NB: an int for an INT8, the commonest key, is itself (as assign answers it)
    if (
        type(raw) is int
        and ctype.kind is Kind.INT
        and ctype.width is None
        and INT64_MIN <= raw <= INT64_MAX
    ):
        return raw, True
    value = coerce(raw, ctype, column.name)
    return value, type(value) is type(raw) and value == raw


def _as_key(raw: Any, column: Column) -> tuple[Any, bool]:
    """A listed value as the key column's type, and whether a key equal to it is that
    value: a number of another kind that keeps its value (k IN (2.0) for an INT k, not
    2.5), a string read as an INT, an enum label, a time... (as IN reads a string
    constant as its column's type)."""
    value = coerce(raw, column.type, column.name)
    if isinstance(raw, str):
        return value, (type(value) is str and value == raw) or column.type.kind in _READ_AS_KEY
    numbers = all(isinstance(v, int | float | decimal.Decimal) for v in (raw, value))
    same = type(value) is type(raw) or (numbers and not isinstance(raw, bool))
    return value, same and value == raw


def _index_key_list(
    desc: TableDescriptor, where: exp.Expr, scope: Scope
) -> tuple[Index, Callable[[Context], list[Any] | None]] | None:
    """The first secondary index whose first column ``where`` lists values of."""
    for index in _usable_indexes(desc, where):
        column = desc.column_by_id(index.column_ids[0])
        if column is None:
            continue
        keys = _key_list(where, scope, column, partial(_entry_prefix, desc, index))
        if keys is not None:
            return index, keys
    return None


def _entry_prefix(desc: TableDescriptor, index: Index, value: Any) -> bytes:
    return values_prefix(desc, index, [value])


def _index_spans(
    desc: TableDescriptor, index: Index, keys: Callable[[Context], list[Any] | None]
) -> Callable[[Context], list[Span] | None]:
    def spans(context: Context) -> list[Span] | None:
        values = keys(context)
        if values is None:
            return None
        prefixes = (_entry_prefix(desc, index, v) for v in values)
        return [Span(p, prefix_end(p)) for p in prefixes]

    return spans


def _key_list(
    where: exp.Expr, scope: Scope, column: Column, prefix: Callable[[Any], bytes]
) -> Callable[[Context], list[Any] | None] | None:
    """The values of ``column`` a conjunct of ``where`` lists (see
    :attr:`Selection.key_list`), as ORMs write a batch of lookups, in the order of
    their keys' ``prefix``."""
    for conjunct in flatten_and(where):
        listed = _listed(conjunct, column, scope)
        if listed is not None:
            break
    else:
        return None
    empty = Scope(outer=scope.outer)
    compiled = [compile_expr(node, empty) for node in listed]
    array = isinstance(conjunct, exp.EQ)
    array_type = ColumnType(Kind.ARRAY, element=column.type)

    def values(context: Context) -> list[Any] | None:
        raw = [c((), context) for c in compiled]
        try:
            if array:
                (found,) = raw
                if isinstance(found, str):
                    found = coerce(found, array_type, column.name)
                raw = list(found) if isinstance(found, Array) else []  # NB: ANY (NULL)
            keys: dict[bytes, Any] = {}
            for value, kept in (_as_key(r, column) for r in raw if r is not None):
                if not kept:
                    return None  # k IN (1.5) for an INT k: the filter decides
                keys[prefix(value)] = value
        except SQLError:
            return None  # NB: the WHERE clause reports it
        return [keys[k] for k in sorted(keys)]

    return values


def _listed(node: exp.Expr, column: Column, scope: Scope) -> list[exp.Expr] | None:
    """The nodes of ``column IN (...)`` or ``column = ANY (array)`` when each has one
    value for the run (the array as one node); else None."""
    if isinstance(node, exp.In) and node.args.get("query") is None:
        this, listed = node.this, list(node.expressions)
    elif isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any):
        this, listed = node.this, [_unparen(node.expression.this)]
        if isinstance(listed[0], exp.Subquery | exp.Select):
            return None
    else:
        return None
    if (
        not isinstance(this, exp.Column)
        or this.name.lower() != column.name
        or not _own(this, scope)
    ):
        return None
    return listed if listed and all(is_fixed_value(n) for n in listed) else None


_READ_EXACTLY = frozenset(
    {Kind.TIME, Kind.INTERVAL, Kind.INET, Kind.ENUM, Kind.UUID, Kind.DATE, Kind.BIT, Kind.VARBIT}
)
_READ_AS_KEY = _READ_EXACTLY | {Kind.INT}


def _index_bound(compiled: Compiled, column: Column, context: Context) -> tuple[Any, bool]:
    """As :func:`_bound`; a string read as one of the types whose text names one value
    (a time, an address, an enum label...) keeps its value too."""
    raw = compiled((), context)
    value = coerce(raw, column.type, column.name)
    kept = type(value) is type(raw) and value == raw
    return value, kept or (isinstance(raw, str) and column.type.kind in _READ_EXACTLY)


def _point(desc: TableDescriptor, plan: _KeyPlan) -> Callable[[Context], list[Any] | None]:
    keys = desc.key_columns

    def point(context: Context) -> list[Any] | None:
        values = []
        for compiled, column in zip(plan.equal, keys, strict=True):
            try:
                # NB: _bound, without its call: the point of every UPDATE or DELETE by key
                value, kept = _as_column(compiled((), context), column)
            except SQLError:
                return None
            if value is None or not kept:
                return None
            values.append(value)
        return values

    return point


def _usable_indexes(desc: TableDescriptor, where: exp.Expr) -> tuple[Index, ...]:
    """The secondary indexes a read of the rows ``where`` selects may use: every full
    one, and a partial one whose predicate's conjuncts are all conjuncts of ``where``
    (written alike), so that each row ``where`` selects has an entry in it."""
    if desc.readable_indexes == desc.indexes:
        return desc.indexes
    written = {_text(node) for node in flatten_and(where)}
    return tuple(
        index
        for index in desc.indexes
        if index.predicate is None
        or all(_text(node) in written for node in flatten_and(parse_expression(index.predicate)))
    )


def _text(node: exp.Expr) -> str:
    return node.sql(dialect="postgres", normalize_functions="lower")


def _best_index(
    desc: TableDescriptor, where: exp.Expr, scope: Scope
) -> tuple[Index, _KeyPlan] | None:
    """The secondary index whose leading columns ``where`` fixes most (equalities, then
    a range on the next column; a unique index all of whose columns are fixed wins);
    failing that, a partial index ``where`` implies, read whole (it holds only the rows
    of its predicate, so reading it is no full table scan, as CockroachDB counts one)."""
    best: tuple[tuple[int, int, int], Index, _KeyPlan] | None = None
    for index in _usable_indexes(desc, where):
        columns = [c for i in index.column_ids if (c := desc.column_by_id(i)) is not None]
        plan = _key_plan(desc, where, scope, columns)
        if plan is None and index.predicate is not None:
            plan = _KeyPlan([])
        if plan is None:
            continue
        whole = index.unique and len(plan.equal) == len(columns)
        bounded = plan.low is not None or plan.high is not None
        rank = (int(whole), len(plan.equal), int(bounded))
        if not plan.equal and not bounded:
            rank = (-1, 0, 0)  # NB: a whole partial index only when no index narrows more
        if best is None or rank > best[0]:
            best = (rank, index, plan)
    return None if best is None else (best[1], best[2])


def key_constraint(
    desc: TableDescriptor, where: exp.Expr | None, scope: Scope
) -> tuple[Index | None, list[Column], _KeyPlan] | None:
    """What :meth:`Selection.of` narrows a read of ``desc`` by (for EXPLAIN): the index
    (``None``: the primary key), its columns and the constraints ``where`` puts on
    them; ``None`` when the table is read whole."""
    if where is None:
        return None
    if desc.computed_columns:
        where = with_expression_columns(desc, where)
    where = condition(where, scope)
    plan = _key_plan(desc, where, scope)
    if plan is not None:
        return None, list(desc.key_columns), plan
    best = _best_index(desc, where, scope) if _usable_indexes(desc, where) else None
    if best is None:
        return None
    index, plan = best
    return index, [c for i in index.column_ids if (c := desc.column_by_id(i)) is not None], plan


def _index_plan(
    desc: TableDescriptor, where: exp.Expr, scope: Scope
) -> Callable[[Context], list[Span] | None] | None:
    """The span of the best secondary index for ``where``: the one whose leading
    columns it fixes most (equalities, then a range on the next column); a unique
    index all of whose columns are fixed wins."""
    best = _best_index(desc, where, scope)
    if best is None:
        return None
    index, plan = best
    columns = [c for i in index.column_ids if (c := desc.column_by_id(i)) is not None]

    def span(context: Context) -> list[Span] | None:
        try:
            equal = []
            for compiled, column in zip(plan.equal, columns, strict=False):
                value, kept = _index_bound(compiled, column, context)
                if not kept and value is not None:
                    return None  # k = 1.5 for an INT k: the filter decides
                equal.append(value)
            if any(v is None for v in equal):
                return []  # = NULL matches nothing
            prefix = values_prefix(desc, index, equal)
            start, end = prefix, prefix_end(prefix)
            if len(equal) < len(columns):
                column = columns[len(equal)]
                # NB: a DESC column's keys run from its largest value: a low bound ends
                # the span, a high one starts it (NULLs, last, are left to the filter)
                descending = index.is_descending(len(equal))
                for limit, is_low in ((plan.low, True), (plan.high, False)):
                    if limit is None:
                        continue
                    value, kept = _index_bound(limit.value, column, context)
                    if value is None or not kept:
                        continue  # NB: the filter applies every bound anyway
                    key = values_prefix(desc, index, [*equal, value])
                    if is_low != descending:
                        start = max(start, key if limit.inclusive else prefix_end(key))
                    else:
                        end = min(end, prefix_end(key) if limit.inclusive else key)
        except SQLError:
            return None
        if end <= start:
            return []  # nothing: an empty range
        return [Span(start, end)]

    return span


def _span_plan(
    desc: TableDescriptor, where: exp.Expr | None, plan: _KeyPlan | None
) -> Callable[[Context], tuple[Span, bool]]:
    whole = table_span(desc.id)
    if where is None:
        return lambda context: (whole, True)
    if plan is None:
        return lambda context: (whole, False)
    keys = desc.key_columns
    nothing = Span(whole.start, whole.start + b"\x00")

    def span(context: Context) -> tuple[Span, bool]:
        exact = plan.complete
        try:
            equal = []
            for i, compiled in enumerate(plan.equal):
                value, kept = _bound(compiled, keys[i], context)
                equal.append(value)
                exact = exact and kept
        except SQLError:
            return whole, False  # let the WHERE clause report (or filter) it
        if any(v is None for v in equal):
            return nothing, exact  # = NULL matches nothing
        if len(equal) == len(keys) or (plan.low is None and plan.high is None):
            return row_span(desc, equal), exact
        column = keys[len(equal)]
        prefix = row_prefix(desc, equal)
        start, end = prefix, prefix_end(prefix)
        # NB: a bound the column's type changed (1.5 for an INT) says nothing exact
        # about the keys (k > 1.5 wants 2, which k > 2 would miss): it is left to the
        # filter.
        try:
            for limit, is_low in ((plan.low, True), (plan.high, False)):
                if limit is None:
                    continue
                value, kept = _bound(limit.value, column, context)
                if value is None:
                    return nothing, exact
                exact = exact and kept
                if not kept:
                    continue
                key = row_prefix(desc, [*equal, value])
                if is_low != desc.key_descending(len(equal)):  # NB: see _index_plan
                    start = max(start, key if limit.inclusive else prefix_end(key))
                else:
                    end = min(end, prefix_end(key) if limit.inclusive else key)
        except SQLError:
            return (row_span(desc, equal) if equal else whole), False
        if end <= start:
            return Span(start, start + b"\x00"), exact
        return Span(start, end), exact

    return span


@dataclass(frozen=True, slots=True)
class ResultPlan:
    """What a SELECT makes of the rows it reads: grouped by ``grouping`` (and kept by
    ``having``) when it groups or aggregates; then ``order``, ``distinct_on`` and
    ``projections`` (over the rows read, or over the grouped rows) and ``distinct``
    over the result, whose columns are ``names``."""

    names: tuple[str, ...]
    projections: list[Compiled]
    types: tuple[ColumnType | None, ...]  # where the tree tells (else None)
    grouping: Grouping | None
    having: Compiled | None
    windows: WindowPlan | None  # run after grouping and HAVING, before the rest
    order: list[tuple[Compiled, bool]]
    distinct: bool
    distinct_on: list[Compiled]

    @classmethod
    def of(
        cls,
        tables: Sequence[FromTable],
        scope: Scope,
        s: st.Select,
        star: Star | None = None,
        width: int | None = None,
    ) -> ResultPlan:
        """The result of ``s`` over rows of ``tables``' columns, named in ``scope``;
        ``star`` is what ``*`` selects and ``width`` the rows' width when they hold
        more than the tables' columns (those JOIN ... USING merges)."""
        items = [scope.with_whole_rows(item) for item in s.items]
        types = _types(tables, items, scope, star)
        order_by = list(s.order_by)
        on = list(s.distinct_on)
        grouping = having = None
        if (
            s.group_by
            or s.having is not None
            or any(contains_aggregate(node) for node in [*items, *(n for n, _ in order_by)])
        ):
            if s.having is not None:
                # NB: its type first, as CockroachDB: HAVING k is not a bool before k is
                # a column the groups do not have
                condition(s.having, scope, "HAVING")
            others = [*([s.having] if s.having is not None else []), *(n for n, _ in order_by)]
            if width is None:
                width = sum(len(t.columns) for t in tables)
            keys = [(t.columns, t.primary) for t in tables]
            group_by = _group_by_stars(tables, scope, s.group_by)
            grouping = Grouping.of(width, keys, scope, items, group_by, [*others, *on])
            if any(_is_star(item) for item in items):
                grouping.check_star()
            output = {expression_name(item) for item in items if not _is_star(item)}

            def rewrite(node: exp.Expr) -> exp.Expr:
                # NB: a position or a result column's name refers to a projection
                if isinstance(node, exp.Literal) and not node.is_string:
                    return node
                if isinstance(node, exp.Column) and not node.table and node.name in output:
                    return node
                return grouping.rewrite(node)

            items = [grouping.rewrite(item) for item in items]
            order_by = [(rewrite(node), descending) for node, descending in order_by]
            on = [rewrite(node) for node in on]
            scope = grouping.scope
            if s.having is not None:
                rewritten = condition(grouping.rewrite(s.having), scope, "HAVING")
                having = compile_expr(rewritten, scope)
        nodes, scope, windows = WindowPlan.of([*items, *(n for n, _ in order_by), *on], scope)
        ordered = len(items) + len(order_by)
        order_by = [
            (node, descending)
            for node, (_old, descending) in zip(nodes[len(items) : ordered], order_by, strict=True)
        ]
        items, on = nodes[: len(items)], nodes[ordered:]
        names, projections = _projections(tables, items, scope, s.items, star)
        if s.distinct:
            _check_distinct_order(order_by, items, names)
        if on:
            _check_distinct_on(on, order_by, items, names)
        written = None if star is not None or any(_is_star(i) for i in s.items) else s.items
        order = order_keys(order_by, scope, names, projections, written)
        distinct_on = [compile_expr(_output_expression(node, items, names), scope) for node in on]
        return cls(
            names, projections, types, grouping, having, windows, order, s.distinct, distinct_on
        )

    def rows(self, envs: list[tuple[Any, ...]], context: Context) -> list[tuple[Any, ...]]:
        """The result rows of the rows read, ``envs`` (before LIMIT and OFFSET)."""
        if self.grouping is not None:
            envs = self.grouping.rows(envs, context)
            if self.having is not None:
                having = self.having
                envs = [env for env in envs if holds(having(env, context))]
        if self.windows is not None:
            envs = self.windows.rows(envs, context)
        envs = sorted_rows(envs, self.order, context)
        if self.distinct_on:
            envs = _first_of_each(envs, self.distinct_on, context)
        rows = [tuple(f(env, context) for f in self.projections) for env in envs]
        if self.distinct:
            rows = _first_of_each(rows, [_whole], context)
        return rows


def _types(
    tables: Sequence[FromTable], items: Sequence[exp.Expr], scope: Scope, star: Star | None
) -> tuple[ColumnType | None, ...]:
    """The types of SELECT ``items``' result columns where the tree tells (a column, a
    cast, a comparison, a number), else ``None``; ``*`` and ``t.*`` as they expand."""
    out: list[ColumnType | None] = []
    for item in items:
        if _is_star(item):
            if isinstance(item, exp.Column):
                starred = star_of(tables, qualifier_of(item))
            else:
                starred = star if star is not None else star_of(tables)
            out.extend(ctype for _name, _index, ctype in starred)
            continue
        node = unalias(item)
        if isinstance(node, exp.Column):
            try:
                out.append(scope.find(node)[2])
            except SQLError:  # NB: over grouped rows a column may be a GROUP BY key
                out.append(None)
            continue
        if isinstance(node, exp.Count):
            out.append(ColumnType(Kind.INT))
            continue
        try:
            kind = static_kind(node, scope)
        except SQLError:
            kind = None
        out.append(ColumnType(kind) if kind is not None else None)
    return tuple(out)


def _whole(row: Sequence[Any], context: Context) -> Any:
    return row


def _first_of_each(
    rows: list[tuple[Any, ...]], keys: Sequence[Compiled], context: Context
) -> list[tuple[Any, ...]]:
    """The first of ``rows`` with each value of ``keys`` (SQL equality: NULLs alike, as
    DISTINCT has them)."""
    seen: set[Any] = set()
    out = []
    for row in rows:
        key = tuple(group_key(value) for key in keys for value in _values(key(row, context)))
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _values(value: Any) -> tuple[Any, ...]:
    return value if type(value) is tuple else (value,)


@dataclass(frozen=True, slots=True)
class SelectPlan:
    """A single-table SELECT: the rows ``selection`` reads, then ``result``."""

    scope: Scope
    selection: Selection
    result: ResultPlan

    @classmethod
    def of(
        cls, desc: TableDescriptor, s: st.Select, database: str, outer: Scope | None = None
    ) -> SelectPlan:
        check_index(desc, s.index)
        mvcc = names_mvcc(s)
        if mvcc:
            desc = with_mvcc(desc)
        scope = table_scope(desc, database, s.alias, outer)
        selection = Selection.of(desc, s.where, scope, mvcc)
        return cls(scope, selection, ResultPlan.of([FromTable.alone(desc, s.alias)], scope, s))


def _output_expression(node: exp.Expr, items: Sequence[exp.Expr], names: Sequence[str]) -> exp.Expr:
    """What an ORDER BY or DISTINCT ON entry stands for: ``2`` the second SELECT item,
    a result column's name that item, anything else itself."""
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        position = int(node.this)
        if not 1 <= position <= len(items):
            raise SQLError("42P10", f"position {position} is not in select list")
        return unalias(items[position - 1])
    if isinstance(node, exp.Literal | exp.Boolean):
        raise SQLError("42601", f"non-integer constant: {node.sql(dialect='postgres')}")
    if isinstance(node, exp.Column) and not node.table and node.name in names:
        for item in items:
            if isinstance(item, exp.Alias) and item.alias == node.name:
                aliased: exp.Expr = item.this
                return aliased
    return node


def _check_distinct_order(
    order_by: Sequence[tuple[exp.Expr, bool]], items: Sequence[exp.Expr], names: Sequence[str]
) -> None:
    """SELECT DISTINCT sorts by what it selects (42P10 otherwise, as in CockroachDB)."""
    selected = [_unparen(unalias(item)) for item in items]
    for node, _descending in order_by:
        node = _unparen(node)
        if isinstance(node, exp.Literal) or (
            isinstance(node, exp.Column) and not node.table and node.name in names
        ):
            continue
        if not any(node == item for item in selected) and not any(map(_is_star, items)):
            raise SQLError(
                "42P10", "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
            )


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _check_distinct_on(
    on: Sequence[exp.Expr],
    order_by: Sequence[tuple[exp.Expr, bool]],
    items: Sequence[exp.Expr],
    names: Sequence[str],
) -> None:
    """DISTINCT ON keeps the first row of each group in ORDER BY's order, so ORDER BY
    must begin with its expressions (42P10 otherwise)."""
    wanted = [_output_expression(node, items, names) for node in on]
    for node, _descending in order_by[: len(on)]:
        if not any(_output_expression(node, items, names) == w for w in wanted):
            raise SQLError(
                "42P10", "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"
            )


@dataclass(frozen=True, slots=True)
class InsertPlan:
    """``rows``: each proposed row's values for ``targets``; ``sets``: the new values
    of the columns ON CONFLICT DO UPDATE (or UPSERT) assigns, over the existing row
    followed by the proposed one.

    ``blind``: whether a proposed row is written as it is whether or not a row holds
    its key, so it may be written without reading (as CockroachDB's UPSERT fast path):
    the statement is an UPSERT, or ON CONFLICT on the primary key DO UPDATE without
    WHERE that sets every other column to its ``excluded`` value; it names every
    column but key columns left to their DEFAULT (or is an UPSERT without a column
    list, which writes the defaults of those its rows leave out); the table has
    nothing a write must also check or index (``constrained``), and no DECIMAL key
    (whose scale as proposed may differ from the stored row's)."""

    targets: list[Column]
    rows: list[list[Compiled]]
    sets: list[tuple[Column, Compiled]]
    returning: Projections | None
    assigned: frozenset[int]  # the ids of ``sets``' columns
    filled: list[tuple[Column, Compiled | None]]  # the other columns, with their DEFAULT
    where: Compiled | None  # DO UPDATE ... WHERE, over the same rows as ``sets``
    listed: bool  # the statement names its columns
    # ON CONFLICT (cols) naming a unique secondary index's columns: that index
    conflict_index: Index | None = None
    blind: bool = False
    verb: str = "INSERT"  # or UPSERT, as errors name the statement
    key_ids: frozenset[int] = frozenset()  # the primary key's columns
    # ON CONFLICT's: the row's columns, then excluded's; its subqueries may name them
    conflict_scope: Scope | None = None
    # The GENERATED ALWAYS identity columns a SELECT's rows may not fill (none with
    # OVERRIDING SYSTEM VALUE)
    always: frozenset[int] = frozenset()
    # DO UPDATE's SET and WHERE may read the existing row's crdb_internal_mvcc_timestamp,
    # which follows both rows (feedkv.sql.mvcc_column)
    mvcc: bool = False
    # One row of VALUES without subqueries, and no ON CONFLICT or UPSERT: the common
    # INSERT, which has a path of its own (feedkv.sql.dml._insert_one)
    single: bool = False
    # A single row of two or more values, each a bare placeholder (VALUES ($1, $2), a
    # driver's): its values picked from the statement's parameters in one C call, not
    # each made by its compiled closure (None: they are made so)
    picked: Callable[[Sequence[Any]], tuple[Any, ...]] | None = None

    def targets_for(self, width: int) -> tuple[list[Column], list[tuple[Column, Compiled | None]]]:
        """The columns a SELECT's rows of ``width`` values fill, and the others with
        their DEFAULT: without a column list, the table's first ``width`` columns."""
        if width > len(self.targets):
            raise SQLError(
                "42601",
                f"{self.verb} has more expressions than target columns, {width} expressions "
                f"for {len(self.targets)} targets",
            )
        if self.listed and width < len(self.targets):
            raise SQLError(
                "42601",
                f"{self.verb} has more target columns than expressions, {width} expressions "
                f"for {len(self.targets)} targets",
            )
        for column in self.targets[:width]:
            if column.id in self.always:
                raise _identity_insert(column)
        rest = [(c, column_default(c)) for c in self.targets[width:]]
        _require_key_columns(self.key_ids, rest)
        return self.targets[:width], rest + self.filled

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Insert, database: str) -> InsertPlan:
        if s.columns is None:
            # As in PostgreSQL: VALUES shorter than the table fill its leading columns and
            # the rest take their defaults (for a SELECT, see InsertPlan.targets_for).
            # NB: computed columns are not written: an INSERT without a column list
            # names the others
            targets = [c for c in desc.visible_columns if c.computed is None]
            if s.rows and len(s.rows[0]) > len(targets):
                refuse_writes(desc.visible_columns[: len(s.rows[0])])  # 55000, as CockroachDB
            if s.rows and len({len(r) for r in s.rows}) > 1:
                raise unequal_values(s.rows)
            if s.rows and len(s.rows[0]) < len(targets):
                targets = targets[: len(s.rows[0])]
        else:
            targets = [target_column(desc, name) for name in s.columns]
            if len({c.id for c in targets}) != len(targets):
                raise SQLError("42701", "a column is listed more than once in INSERT")
            refuse_writes(targets)
        always = _always_identities(desc, s.overriding)
        empty = Scope()
        rows = []
        verb = "UPSERT" if s.upsert else "INSERT"
        for values in s.rows:
            if len(values) > len(targets):
                raise SQLError(
                    "42601",
                    f"{verb} has more expressions than target columns, {len(values)} "
                    f"expressions for {len(targets)} targets",
                )
            if len(values) < len(targets):
                raise SQLError(
                    "42601",
                    f"{verb} has more target columns than expressions, {len(values)} "
                    f"expressions for {len(targets)} targets",
                )
            row: list[Compiled] = []
            for column, node in zip(targets, values, strict=True):
                if _is_default(node):  # VALUES (DEFAULT): the column's default, else NULL
                    row.append(column_default(column) or _null)
                    continue
                if column.id in always:
                    raise _identity_insert(column)
                refuse_aggregates(node, "VALUES")
                row.append(compile_expr(node, empty))
                _check_assigned_node(node, empty, column)
            rows.append(row)
        _check_string_rows(targets, s.rows, empty)
        scope = table_scope(desc, database, s.alias)
        # ON CONFLICT DO UPDATE sees the existing row, then the proposed one as excluded.*
        if s.on_conflict == "update" and desc.name == "excluded":
            raise SQLError(
                "42P09",
                'ambiguous source name: "excluded" (the table and the proposed row of ON '
                "CONFLICT DO UPDATE have that name)",
            )
        conflict_scope = table_scope(desc, database, s.alias)
        width = len(desc.columns)
        for index, column in enumerate(desc.columns):
            # NB: as in CockroachDB, an unqualified name here is ambiguous (42702)
            if not column.adding:
                conflict_scope.add(["", "excluded"], column.name, width + index, column.type)
        mvcc = s.on_conflict == "update" and names_mvcc(s)
        if mvcc:
            conflict_scope.add(["", s.alias or desc.name], MVCC_COLUMN, 2 * width, MVCC_TYPE)
        _refuse_identity_updates(desc, s.conflict_sets)
        sets = [
            (target_column(desc, n), _conflict_value(desc, n, e, conflict_scope, targets))
            for n, e in s.conflict_sets
        ]
        for (column, _), (_, node) in zip(sets, s.conflict_sets, strict=True):
            _check_assigned_node(node, conflict_scope, column)
        refuse_writes([column for column, _ in sets])
        where = None
        if s.conflict_where is not None:
            where = compile_expr(condition(s.conflict_where, conflict_scope), conflict_scope)
        conflict_index = _check_conflict_target(desc, s.conflict_target)
        key_ids = set(desc.primary_key)
        filled = [
            (c, column_default(c)) for c in desc.columns if c not in targets and c.computed is None
        ]
        if s.query is None:  # NB: for a SELECT, targets_for checks the columns it fills
            _require_key_columns(frozenset(desc.primary_key), filled)
        if s.upsert:
            # As CockroachDB's UPSERT: with a column list, the columns it leaves out keep
            # their values; without one it writes every column, those its rows do not
            # reach taking their DEFAULT (NULL without one).
            written = targets if s.columns is not None else targets + [c for c, _ in filled]
            sets = [
                (c, _proposed(width + desc.columns.index(c)))
                for c in written
                if c.id not in key_ids
            ]
        blind = (
            # NB: a key column left to its DEFAULT (a hidden rowid) is the proposed key:
            # a row found there would be rewritten whole all the same
            (all(c.id in key_ids for c, _ in filled) or (s.upsert and s.columns is None))
            and not desc.constrained
            and all(c.type.kind is not Kind.DECIMAL for c in desc.key_columns)
            and (s.upsert or _sets_excluded(desc, s, conflict_scope, conflict_index))
        )
        single = (
            len(rows) == 1
            and s.query is None
            and not s.subqueries
            and not s.conflict_subqueries
            and s.on_conflict is None
            and not s.upsert
        )
        picked = None
        placeholders = [n for n in s.rows[0] if isinstance(n, exp.Parameter)] if single else []
        if len(placeholders) > 1 and len(placeholders) == len(s.rows[0]):
            picked = itemgetter(*map(placeholder_index, placeholders))
        return cls(
            targets,
            rows,
            sets,
            _returning(desc, s.returning, scope, s.alias),
            frozenset(column.id for column, _ in sets),
            filled,
            where,
            s.columns is not None,
            conflict_index,
            blind,
            verb,
            frozenset(desc.primary_key),
            conflict_scope,
            always if s.query is not None else frozenset(),
            mvcc,
            single=single,
            picked=picked,
        )


def _sets_excluded(
    desc: TableDescriptor, s: st.Insert, conflict_scope: Scope, conflict_index: Index | None
) -> bool:
    """Whether ``s`` is ON CONFLICT on the primary key DO UPDATE, without WHERE, setting
    every column but the key's to its own ``excluded`` value: an UPSERT by another name."""
    if (
        s.on_conflict != "update"
        or not s.conflict_target
        or conflict_index is not None
        or s.conflict_where is not None
    ):
        return False
    width = len(desc.columns)
    assigned = set()
    for name, value in s.conflict_sets:
        column = desc.column(name)
        if not isinstance(value, exp.Column):
            return False
        index, _type = conflict_scope.lookup(value)
        if index != width + desc.columns.index(column):
            return False
        assigned.add(column.id)
    return assigned == {c.id for c in desc.columns} - set(desc.primary_key)


def check_assigned(kind: Kind | None, column: Column) -> None:
    """42804 unless a value of ``kind`` (``None``: the tree does not tell) may be
    assigned to ``column``. As in CockroachDB and PostgreSQL, which have no assignment
    cast from a string but to string types, a typed STRING (a column, a cast; not a
    string literal, which takes the column's type) goes into a string column only. NB:
    checked when the statement is planned, so an empty table refuses it as a full one."""
    if kind is None:
        return
    target = column.type.kind
    # NB: nor is there one to JSONB from anything but JSONB (a number or a BOOL is not
    # a JSON document; its text is: '1')
    if (kind is Kind.STRING and target is not Kind.STRING) or (
        target is Kind.JSONB and kind is not Kind.JSONB
    ):
        raise SQLError(
            "42804",
            f"value type {kind_name(kind)} doesn't match type {column.type.sql()} "
            f'of column "{column.name}"',
        )


def _check_string_rows(
    targets: Sequence[Column], rows: Sequence[Sequence[exp.Expr]], scope: Scope
) -> None:
    """As CockroachDB types a VALUES list's column once, over its rows: a string
    column's string values and others (a number, a BOOL) cannot be matched (42804),
    though one row's number alone goes in by the assignment cast to a string."""
    for at, column in enumerate(targets):
        if column.type.kind is not Kind.STRING or len(rows) < 2:
            continue
        seen: Kind | None = None
        for values in rows:
            node = values[at] if at < len(values) else None
            if node is None or _is_default(node):
                continue
            is_text = isinstance(node, exp.Literal) and node.is_string
            kind = Kind.STRING if is_text else _static_kind_or_none(node, scope)
            if kind is None:
                continue
            if seen is not None and (kind is Kind.STRING) != (seen is Kind.STRING):
                shown = f"{kind_name(kind)} and {kind_name(seen)}"
                raise SQLError("42804", f"VALUES types {shown} cannot be matched")
            seen = seen or kind


def _static_kind_or_none(node: exp.Expr, scope: Scope) -> Kind | None:
    try:
        return static_kind(node, scope)
    except SQLError:
        return None  # NB: compiling it tells what is wrong


def _assigned_value(desc: TableDescriptor, name: str, node: exp.Expr, scope: Scope) -> Compiled:
    """A SET item's value: ``SET c = DEFAULT`` is the column's DEFAULT (NULL without
    one), as in VALUES; any other expression compiled over ``scope``."""
    if _is_default(node):
        return column_default(desc.column(name)) or _null
    return compile_expr(node, scope)


def _conflict_value(
    desc: TableDescriptor, name: str, node: exp.Expr, scope: Scope, targets: Sequence[Column]
) -> Compiled:
    """An ON CONFLICT DO UPDATE SET item's value: as :func:`_assigned_value`, but ``SET
    c = DEFAULT`` of a column the INSERT leaves to its DEFAULT is the value the proposed
    row took (``excluded.c``), not the DEFAULT evaluated again, as CockroachDB's (a
    sequence's DEFAULT is taken once per row)."""
    column = desc.column(name)
    if _is_default(node) and column not in targets:
        return _proposed(len(desc.columns) + desc.columns.index(column))
    return _assigned_value(desc, name, node, scope)


def _check_assigned_node(node: exp.Expr, scope: Scope, column: Column) -> None:
    """:func:`check_assigned` of the value ``node`` gives over rows of ``scope``."""
    if _is_default(node):
        return  # NB: the column's own DEFAULT, of its type
    item = _scalar_item(node)
    while isinstance(item, exp.Paren):
        item = item.this
    if isinstance(item, exp.Tuple):  # NB: no column holds a record
        raise SQLError(
            "42804",
            f"value type {_tuple_type_name(item, scope)} doesn't match type "
            f'{column.type.sql()} of column "{column.name}"',
        )
    try:
        kind = static_kind(item, scope)
    except SQLError:
        return  # NB: compiling it tells what is wrong
    check_assigned(kind, column)


def _tuple_type_name(node: exp.Tuple, scope: Scope) -> str:
    """A row value's type as CockroachDB names it, ``tuple{int, string}``, its elements'
    kinds as the tree tells them (``unknown`` where it does not)."""
    names = []
    for element in node.expressions:
        try:
            kind = static_kind(element, scope)
        except SQLError:
            kind = None
        if kind is None and isinstance(element, exp.Literal) and element.is_string:
            kind = Kind.STRING
        names.append(kind_name(kind) if kind is not None else "unknown")
    return "tuple{" + ", ".join(names) + "}"


def _scalar_item(node: exp.Expr) -> exp.Expr:
    """What a scalar subquery selects, where the tree tells it, for its type: the item
    of ``(SELECT item)`` that reads no table, or the item of a multiple-column UPDATE's
    row that one of its columns reads (parser._expand_row_subqueries); else ``node``."""
    while isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        select = node.this
        source = select.args.get("from_") or select.args.get("from")
        if len(select.expressions) != 1:
            return node
        item: exp.Expr = select.expressions[0]
        if source is None and not select.args.get("where"):
            return item
        derived = source.this if source is not None else None
        alias = derived.args.get("alias") if isinstance(derived, exp.Subquery) else None
        inner = derived.this if isinstance(derived, exp.Subquery) else None
        if (
            alias is None
            or alias.name != st.ROW_ASSIGNMENT
            or not isinstance(inner, exp.Select)
            or not isinstance(item, exp.Column)
        ):
            return node
        names = [c.name for c in alias.columns]
        if item.name not in names or len(inner.expressions) != len(names):
            return node
        found = inner.expressions[names.index(item.name)]
        if not is_constant(found):
            return node  # NB: its columns are the subquery's, not the statement's
        node = found
    return node


def _always_identities(desc: TableDescriptor, overriding: str | None) -> frozenset[int]:
    """The ids of ``desc``'s GENERATED ALWAYS identity columns, which an INSERT may give
    no value but DEFAULT, as CockroachDB's (none with OVERRIDING SYSTEM VALUE)."""
    if overriding == "USER":
        raise SQLError("0A000", "OVERRIDING USER VALUE is not supported")
    if overriding == "SYSTEM":
        return frozenset()
    return frozenset(c.id for c in desc.columns if c.identity == "ALWAYS")


def _identity_insert(column: Column) -> SQLError:
    return SQLError(
        "428C9",
        f'cannot insert into column "{column.name}"',
        detail=f'Column "{column.name}" is an identity column defined as GENERATED ALWAYS.',
    )


def _refuse_identity_updates(desc: TableDescriptor, sets: Sequence[tuple[str, exp.Expr]]) -> None:
    """As CockroachDB's: a GENERATED ALWAYS identity column is set only to DEFAULT."""
    for name, node in sets:
        column = desc.find_column(name)
        if column is not None and column.identity == "ALWAYS" and not _is_default(node):
            raise SQLError(
                "428C9",
                f'column "{name}" can only be updated to DEFAULT',
                detail=f'Column "{name}" is an identity column defined as GENERATED ALWAYS.',
            )


def _is_default(node: exp.Expr) -> bool:
    """The keyword DEFAULT standing for a value (``VALUES (1, DEFAULT)``)."""
    return isinstance(node, exp.Var) and node.name.upper() == "DEFAULT"


def _null(row: Any, ctx: Any) -> None:
    return None


def _require_key_columns(
    key_ids: frozenset[int], filled: Sequence[tuple[Column, Compiled | None]]
) -> None:
    """As CockroachDB, an INSERT or UPSERT must write each primary key column that has
    no DEFAULT (42830, its code for this)."""
    for column, default in filled:
        if default is None and column.id in key_ids:
            raise SQLError("42830", f'missing "{column.name}" primary key column')


def column_default(column: Column) -> Compiled | None:
    """``column``'s DEFAULT expression, compiled (``None``: it has none)."""
    if column.default is None:
        return None
    return compile_expr(parse_expression(column.default), Scope())


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """``blind``, when the statement rewrites one whole row it names by its primary key
    and so may write without reading (:meth:`Execution.update`): its selection's
    ``point``. Every column but the key's is set to a value that reads no column, the
    table has one column family (so the row is one KV pair), and there is no RETURNING."""

    selection: Selection
    sets: list[tuple[Column, Compiled]]
    returning: Projections | None
    assigned: frozenset[int]  # the ids of ``sets``' columns
    blind: Callable[[Context], list[Any] | None] | None
    order: list[tuple[Compiled, bool]]
    scope: Scope  # the table's columns, which its subqueries may name

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Update, database: str) -> UpdatePlan:
        # NB: WHERE, SET and ORDER BY may read crdb_internal_mvcc_timestamp, RETURNING not
        mvcc = names_mvcc(s)
        read = with_mvcc(desc) if mvcc else desc
        scope = table_scope(read, database, s.alias)
        for _name, node in s.sets:
            refuse_aggregates(node, "UPDATE SET")
        _refuse_identity_updates(desc, s.sets)
        sets = [
            (target_column(desc, name), _assigned_value(desc, name, e, scope)) for name, e in s.sets
        ]
        for (column, _), (_, node) in zip(sets, s.sets, strict=True):
            _check_assigned_node(node, scope, column)
        refuse_writes([column for column, _ in sets])
        returning = _returning(desc, s.returning, table_scope(desc, database, s.alias), s.alias)
        selection = Selection.of(read, s.where, scope, mvcc)
        assigned = frozenset(column.id for column, _ in sets)
        whole = (
            not mvcc
            and returning is None
            and s.limit is None
            and len(desc.families) == 1
            # NB: a DECIMAL key as WHERE writes it may differ in scale from the row's
            and all(c.type.kind is not Kind.DECIMAL for c in desc.key_columns)
            and assigned == {c.id for c in desc.columns} - set(desc.primary_key)
            and all(_is_constant(e) for _, e in s.sets)
        )
        order = _mutation_order_keys(desc, s.order_by, scope, "UPDATE")
        blind = selection.point if whole else None
        return cls(selection, sets, returning, assigned, blind, order, scope)


@dataclass(frozen=True, slots=True)
class DeletePlan:
    selection: Selection
    returning: Projections | None
    order: list[tuple[Compiled, bool]]
    scope: Scope  # the table's columns, which its subqueries may name

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Delete, database: str) -> DeletePlan:
        # NB: WHERE and ORDER BY may read crdb_internal_mvcc_timestamp, RETURNING not
        mvcc = names_mvcc(s)
        read = with_mvcc(desc) if mvcc else desc
        scope = table_scope(read, database, s.alias)
        returning = _returning(desc, s.returning, table_scope(desc, database, s.alias), s.alias)
        order = _mutation_order_keys(desc, s.order_by, scope, "DELETE")
        return cls(Selection.of(read, s.where, scope, mvcc), returning, order, scope)


def _mutation_order_keys(
    desc: TableDescriptor, order_by: Sequence[tuple[exp.Expr, bool]], scope: Scope, verb: str
) -> list[tuple[Compiled, bool]]:
    """An UPDATE's or DELETE's ORDER BY, over the table's columns (positions count
    the visible ones, as in ``SELECT *``)."""
    for node, _descending in order_by:
        refuse_aggregates(node, f"ORDER BY in {verb}")
    names, projections = _projections([FromTable.alone(desc)], [exp.Star()], scope)
    return order_keys(order_by, scope, names, projections)


def check_index(desc: TableDescriptor | Relation, index: str | None) -> None:
    """``t@index``: a table's one index is its primary key, ``<table>_pkey`` (also
    ``primary``, as CockroachDB spells it)."""
    if index is None or index in (f"{desc.name}_pkey", "primary"):
        return
    if not isinstance(desc, TableDescriptor) or desc.index(index) is None:
        raise SQLError("42704", f'index "{index}" not found')


def unalias(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def _proposed(index: int) -> Compiled:
    return lambda env, ctx: env[index]


def constraint_target(desc: TableDescriptor, name: str) -> tuple[str, ...]:
    """ON CONFLICT ON CONSTRAINT name: the columns of the primary key (``t_pkey``) or of
    the unique index or constraint of that name; 42704 for no such constraint, 42P10
    for one that is not unique."""
    if name == f"{desc.name}_pkey":
        return tuple(c.name for c in desc.key_columns)
    for index in desc.indexes:
        if index.name == name:
            if not index.unique:
                raise SQLError(
                    "42P10",
                    f'constraint "{name}" for table "{desc.name}" is not a unique constraint',
                )
            return tuple(desc.column_by_id(i).name for i in index.column_ids)  # type: ignore[union-attr]
    raise SQLError("42704", f'constraint "{name}" for table "{desc.name}" does not exist')


def _check_conflict_target(desc: TableDescriptor, target: Sequence[str]) -> Index | None:
    """ON CONFLICT (cols): the columns must exist and be the primary key's (``None``)
    or a unique index's (that index)."""
    if not target:
        return None
    ids = sorted(desc.column(name).id for name in target)  # 42703 names an unknown one
    if ids == sorted(desc.primary_key):
        return None
    for index in desc.readable_indexes:  # NB: a partial index arbitrates no conflict
        if index.unique and sorted(index.column_ids) == ids:
            return index
    raise SQLError(
        "42P10",
        "there is no unique or exclusion constraint matching the ON CONFLICT "
        f"specification ({', '.join(target)}); the primary key is "
        f"({', '.join(c.name for c in desc.key_columns)})",
    )


def holds(verdict: Any) -> bool:
    """Whether a WHERE clause's value keeps its row (NULL does not)."""
    if verdict is None:
        return False
    if not isinstance(verdict, bool):
        raise SQLError("42804", "argument of WHERE must be type bool")
    return verdict


def order_keys(
    order_by: Sequence[tuple[exp.Expr, bool]],
    scope: Scope,
    names: Sequence[str],
    projections: Sequence[Compiled],
    written: Sequence[exp.Expr] | None = None,
) -> list[tuple[Compiled, bool]]:
    """ORDER BY's keys, each ``(value, descending)``: a position in the result columns
    (``ORDER BY 2``), a result column's name (before a table's column of that name, as
    in CockroachDB), or an expression over the table's. ``written``: the select list as
    written, one item a result column (not known with a ``*``): a name that several
    columns of different expressions have is ambiguous (``SELECT a, b AS a ORDER BY
    a``), as in PostgreSQL and CockroachDB."""
    keys: list[tuple[Compiled, bool]] = []
    for node, descending in order_by:
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            position = int(node.this)
            if not 1 <= position <= len(projections):
                raise SQLError("42P10", f"ORDER BY position {position} is not in select list")
            keys.append((projections[position - 1], descending))
        elif isinstance(node, exp.Literal | exp.Boolean):
            shown = node.sql(dialect="postgres")
            shown = shown.lower() if isinstance(node, exp.Boolean) else shown
            raise SQLError("42601", f"non-integer constant in ORDER BY: {shown}")
        elif isinstance(node, exp.Column) and not node.table and node.name in names:
            matches = [i for i, name in enumerate(names) if name == node.name]
            if len(matches) > 1 and written is not None and len(written) == len(names):
                different = {_resolved(unalias(written[i]), scope) for i in matches}
                if len(different) > 1:
                    raise SQLError("42P09", f'ORDER BY "{node.name}" is ambiguous')
                keys.append((projections[matches[0]], descending))
                continue
            if len(matches) > 1 and ("", node.name) in scope.columns:
                # NB: several result columns of a table column's name (SELECT k, k):
                # most likely that column; ordering by it is what each of them holds
                keys.append((compile_expr(node, scope), descending))
                continue
            if len(matches) > 1:
                raise SQLError("42P09", f'ORDER BY "{node.name}" is ambiguous')
            keys.append((projections[matches[0]], descending))
        else:
            keys.append((compile_expr(node, scope), descending))
    return keys


def _resolved(node: exp.Expr, scope: Scope) -> str:
    """``node``'s text with each column named by where it is found (``a`` and ``t.a``
    are the same column) and without parentheses (``(a)`` is ``a``), to tell whether two
    expressions are the same."""

    def position(found: exp.Expr) -> exp.Expr:
        if isinstance(found, exp.Column) and isinstance(found.this, exp.Identifier):
            try:
                depth, index, _type = scope.find(found)
            except SQLError:
                return found
            return exp.column(f"_{depth}_{index}")
        return found

    bare = node.copy()
    while isinstance(bare, exp.Paren):
        bare = bare.this
    for paren in list(bare.find_all(exp.Paren)):
        paren.replace(paren.this)
    # NB: the tree's structure, not its text: without its parentheses (a + 1) * 2 would
    # print as a + 1 * 2
    return repr(bare.transform(position))


def env_of(row: tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]) -> tuple[Any, ...]:
    return row[2]


def flatten_and(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return flatten_and(node.this) + flatten_and(node.expression)
    if isinstance(node, exp.Paren):
        return flatten_and(node.this)
    return [node]


_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.EQ: exp.EQ,
}


def _key_plan(
    desc: TableDescriptor,
    where: exp.Expr,
    scope: Scope,
    key_columns: Sequence[Column] | None = None,
) -> _KeyPlan | None:
    """Equality and range constraints on primary key columns (or ``key_columns``, an
    index's) with constant sides: a side is constant when it names no column, or only
    the outer query's (in a correlated subquery, whose plan is made for each of the
    outer rows)."""
    empty = Scope(outer=scope.outer)

    def fixed(node: exp.Expr) -> bool:
        return _fixed(node, scope)

    equal: dict[str, Compiled] = {}
    lows: dict[str, _Bound] = {}
    highs: dict[str, _Bound] = {}
    conjuncts = list(flatten_and(where))
    source: dict[int, exp.Expr] = {}  # id of each constraint -> the conjunct it came from
    for conjunct in conjuncts:
        if isinstance(conjunct, exp.Between) and isinstance(conjunct.this, exp.Column):
            if not _own(conjunct.this, scope) or conjunct.args.get("symmetric"):
                continue
            name = conjunct.this.name.lower()
            low, high = conjunct.args["low"], conjunct.args["high"]
            if fixed(low) and fixed(high):
                lows[name] = _Bound(compile_expr(low, empty), True)
                highs[name] = _Bound(compile_expr(high, empty), True)
                source[id(lows[name])] = source[id(highs[name])] = conjunct
            continue
        op: type[exp.Expr] = type(conjunct)
        if op not in _FLIP:
            continue
        left, right = conjunct.this, conjunct.expression
        if isinstance(right, exp.Column) and fixed(left):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(left, exp.Column) or not fixed(right) or not _own(left, scope):
            continue
        name = left.name.lower()
        value = compile_expr(right, empty)
        constraint: Compiled | _Bound
        if op is exp.EQ:
            constraint = equal[name] = value
        elif op in (exp.GT, exp.GTE):
            constraint = lows[name] = _Bound(value, op is exp.GTE)
        else:
            constraint = highs[name] = _Bound(value, op is exp.LTE)
        source[id(constraint)] = conjunct
    plan = _KeyPlan([])
    for column in desc.key_columns if key_columns is None else key_columns:
        if column.name in equal:
            plan.equal.append(equal[column.name])
            continue
        plan.low = lows.get(column.name)
        plan.high = highs.get(column.name)
        break
    if not plan.equal and plan.low is None and plan.high is None:
        return None
    used = [*plan.equal, *(b for b in (plan.low, plan.high) if b is not None)]
    plan.complete = {id(source[id(c)]) for c in used} == {id(c) for c in conjuncts}
    return plan


def _own(column: exp.Column, scope: Scope) -> bool:
    """Whether ``column`` names one of the table's own columns (not the query's around
    it, which a correlated subquery names)."""
    try:
        return scope.find(column)[0] == 0
    except SQLError:
        return False  # NB: compiling the WHERE clause reports it


def _fixed(node: exp.Expr, scope: Scope) -> bool:
    """Whether ``node`` has one value for a run of the statement: a constant, or an
    expression of the outer query's columns only (see :func:`_is_constant`)."""
    if contains_aggregate(node) or node.find(*_QUERIES) is not None:
        return False
    for column in outer_nodes(node, exp.Column):
        if not isinstance(column, exp.Column) or not isinstance(column.this, exp.Identifier):
            return False
        try:
            if scope.find(column)[0] == 0:
                return False
        except SQLError:
            return False  # NB: compiling the WHERE clause reports it
    return True


def _is_constant(node: exp.Expr) -> bool:
    """Whether ``node`` has one value for the whole statement, so a key span or a blind
    write may use it. NB: not a subquery, which may be correlated (its value is the
    row's), whatever its own columns; nor SET's DEFAULT, which the plan compiles."""
    return (
        not _is_default(node)
        and is_constant(node)
        and not contains_aggregate(node)
        and node.find(*_QUERIES) is None
    )


_QUERIES = (exp.Subquery, exp.Exists, exp.Select, exp.Any, exp.All)  # maybe correlated


def unequal_values(rows: Sequence[Sequence[Any]]) -> SQLError:
    """42601 for VALUES rows of different lengths, naming the first that differs from
    the first row, as CockroachDB's message does."""
    expected = len(rows[0])
    found = next(len(r) for r in rows if len(r) != expected)
    return SQLError(
        "42601",
        f"VALUES lists must all be the same length, expected {expected} columns, found {found}",
    )
