"""What a statement will return, found without running it: its result columns (names
and types) and the types of its placeholders, as a PostgreSQL client asks for them at
``Describe`` time (asyncpg and JDBC need both before they send a single value).

The statement is planned as it would run (:class:`~feedkv.sql.plan.SelectPlan`,
:class:`~feedkv.sql.join.JoinPlan`, :class:`~feedkv.sql.plan.InsertPlan`, ...) against
the descriptors the caller's reader sees, so a statement that could not run (an unknown
table or column, a type error the planner finds) fails here with the same SQLSTATE. No
row is read and nothing is written.

A type is given where it follows from the tree and the descriptors alone: a column,
a cast, a comparison, a literal, an aggregate over a typed argument, and the functions
whose result type does not depend on their arguments; anything else is ``None`` (the
client sees ``text``, and values are sent in their text form). A placeholder's type
comes from where it stands: compared with a column (or any typed expression), assigned
to one (INSERT, UPDATE's SET, ON CONFLICT's SET), cast (``$1::INT``), or a LIMIT or
OFFSET. NB: never guess: a type given here is promised for every value of the column.

Queries over queries are described from theirs: a set operation's column has the type
both sides give it; a derived table, a CTE, VALUES or ``generate_series`` is read as a
table of the types its query's columns have, when each is known (when one is not, or the
CTE is recursive, the statement's columns are known only when it runs). So is a view,
from its stored query (as PostgreSQL and CockroachDB describe one at Parse), and a
sequence, as the table of one row it reads as: a client that describes the statement
before it binds (asyncpg, pgjdbc) reads a view or a sequence with placeholders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from feedkv.errors import FeedKVError, SQLError
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.aggregate_nodes import SumInt
from feedkv.sql.crdb_internal import is_virtual
from feedkv.sql.descriptor import (
    NamedRelation,
    SequenceDescriptor,
    TableDescriptor,
    ViewDescriptor,
)
from feedkv.sql.expr import Scope, static_kind, subquery_key
from feedkv.sql.join import JoinPlan, is_lateral
from feedkv.sql.mvcc_column import names_mvcc, target_column, with_mvcc
from feedkv.sql.plan import (
    DeletePlan,
    InsertPlan,
    ResultPlan,
    SelectPlan,
    UpdatePlan,
    table_scope,
    unalias,
)
from feedkv.sql.relation import Relation
from feedkv.sql.sequences import as_relation
from feedkv.sql.set_functions import rows_from_of, series_type
from feedkv.sql.types import ColumnType, Kind
from feedkv.sql.views import view_query

__all__ = ["Description", "Origin", "describe"]

Column = tuple[str, ColumnType | None]
Origin = tuple[int, int]  # (table OID, attnum); (0, 0): not a table's column


@dataclass(frozen=True, slots=True)
class Description:
    """``columns``: the result's names and types (``None`` for a type that is only
    known from the values); ``()`` for a statement that returns no rows; ``None`` when
    the result's shape is only known by running it (SHOW statements but SHOW of a
    session variable, which only read).
    ``params``: one type per placeholder ``$1..$n`` (``None``: not known).
    ``origins``: for each column of a SELECT or a RETURNING, the table it reads as is
    (its descriptor id, which is its pg_class OID) and that column's pg_attribute
    attnum (a view's or a sequence's: its id and the column's number in it), ``(0, 0)``
    for a column computed or read from a derived table; ``()`` when not told (as
    PostgreSQL's RowDescription tells them).
    ``records``: the places of a SELECT's columns whose values are row values (``(1,
    'a')``, ``jsonb_each(j)`` in its list), which have no column type: RowDescription
    announces them as ``record``, as CockroachDB does."""

    columns: tuple[Column, ...] | None
    params: tuple[ColumnType | None, ...]
    origins: tuple[Origin, ...] = ()
    records: frozenset[int] = frozenset()


# Statements that never return rows.
_ROWLESS = (
    st.Begin | st.SetTransaction | st.Commit | st.Rollback | st.CreateDatabase
    | st.DropDatabase | st.CreateTable
    | st.DropTable | st.AddColumn | st.AlterTableActions | st.AlterColumn | st.DropColumn
    | st.Truncate | st.CommentOn | st.CreateUser
    | st.DropUser
    | st.GrantRole    | st.ControlJob | st.Savepoint | st.ConfigureZone
    | st.CancelActivity | st.CloseCursor
)  # fmt: skip

_STRING = ColumnType(Kind.STRING)
_INT = ColumnType(Kind.INT)
_BOOL = ColumnType(Kind.BOOL)
_DECIMAL = ColumnType(Kind.DECIMAL)

Resolve = Callable[[st.TableName], NamedRelation]


def describe(
    statement: st.Statement,
    placeholders: int,
    resolve: Resolve,
    database: str,
    param_types: Sequence[ColumnType | None] = (),
) -> Description:
    """``statement``'s :class:`Description`; ``resolve`` finds the descriptor of the
    table, view or sequence a name names (in the caller's transaction or snapshot),
    ``database`` is the session's current one, ``param_types`` the placeholders' types
    the client gave (they are kept)."""
    params = [*param_types[:placeholders], *[None] * (placeholders - len(param_types))]
    columns: tuple[Column, ...] | None
    origins: list[Origin] = []
    records: set[int] = set()
    if isinstance(statement, _ROWLESS):
        columns = ()
    elif isinstance(statement, st.Query | st.Insert | st.Update | st.Delete):
        try:
            columns = (
                _mutation(statement, resolve, database, params, origins)
                if isinstance(statement, st.Insert | st.Update | st.Delete)
                else _query_columns(statement, resolve, database, params, {}, origins, records)
            )
        except _Undescribed:
            columns = None  # known once it runs, from its values
    elif isinstance(statement, st.SessionVariable):
        if statement.action != "show":
            columns = ()
        elif statement.name is None:
            columns = (("variable", _STRING), ("value", _STRING))
        else:
            columns = ((statement.name, _STRING),)
    elif isinstance(statement, st.ClusterSetting) and statement.action == "list":
        columns = tuple((name, _STRING) for name in catalog.SETTINGS_COLUMNS)
    elif isinstance(statement, st.ClusterSetting) and statement.action != "show":
        columns = ()
    elif isinstance(statement, st.DeclareCursor):
        # NB: its placeholders are its query's (FETCH's columns are the cursor's: the
        # session describes FETCH)
        inner = describe(statement.query, placeholders, resolve, database, param_types)
        columns, params = (), list(inner.params)
    elif isinstance(statement, st.Explain):
        columns = (("info", _STRING),)
    elif isinstance(statement, st.CreateChangefeed):
        # As CockroachDB: a sinkless feed's rows, else the new job's id. The key and
        # value are text (JSON) or bytes (Avro), known from the values.
        sinkless = (("table", _STRING), ("key", None), ("value", None))
        columns = sinkless if statement.sink is None else (("job_id", _INT),)
    elif isinstance(statement, st.AlterChangefeed):
        columns = (("job_id", _INT), ("job_description", _STRING))
    else:
        columns = None
    return Description(columns, tuple(params), tuple(origins), frozenset(records))


class _Undescribed(FeedKVError):
    """A query shape described only by running it (a virtual table, a recursive CTE, a
    derived table or CTE of a column whose type follows its values)."""


# The CTEs in scope by name, as relations without rows.
Ctes = dict[str, Relation]


@dataclass(frozen=True, slots=True)
class _Named(Relation):
    """A view (as a derived table of its query's columns) or a sequence, without rows;
    ``oid``: its id, which RowDescription names as its columns' table (as PostgreSQL
    does)."""

    oid: int = 0


Source = TableDescriptor | Relation


def _query_columns(
    q: st.Query,
    resolve: Resolve,
    database: str,
    params: list[ColumnType | None],
    ctes: Ctes,
    origins: list[Origin] | None = None,
    records: set[int] | None = None,
    outer: Scope | None = None,
) -> tuple[Column, ...]:
    """The columns of a query (a SELECT, a set operation or VALUES), its CTEs' and
    ``ctes`` in scope; a SELECT's column origins are added to ``origins`` and the
    places of its row values to ``records``, if given; ``outer``: the columns of the
    query around a subquery, which it may name."""
    ctes = dict(ctes)
    for cte in q.ctes:
        if cte.recursive:
            raise _Undescribed  # NB: its types are those of the rows its runs add
        described = (
            _query_columns(cte.query, resolve, database, params, ctes)
            if isinstance(cte.query, st.Select | st.SetOperation | st.Values)
            else _mutation(cte.query, resolve, database, params, [])
        )
        ctes[cte.name] = _relation(cte.name, described, cte.columns)
    if isinstance(q, st.Select):
        return _select(q, resolve, database, params, ctes, origins, records, outer)
    if isinstance(q, st.Values):
        return tuple(
            (f"column{n}", _shared([_safe_type(row[n - 1], Scope()) for row in q.rows]))
            for n in range(1, len(q.rows[0]) + 1 if q.rows else 1)
        )
    left = _query_columns(q.left, resolve, database, params, ctes)
    right = _query_columns(q.right, resolve, database, params, ctes)
    if len(left) != len(right):
        raise _Undescribed  # NB: it fails as it runs, with its SQLSTATE
    for count in (q.limit, q.offset):
        if isinstance(count, exp.Parameter):
            _param(count, _INT, params)
    return tuple((name, _shared([t, u])) for (name, t), (_, u) in zip(left, right, strict=True))


def _shared(types: Sequence[ColumnType | None]) -> ColumnType | None:
    """The type every one of ``types`` is, else None."""
    first = types[0] if types else None
    return first if all(t == first for t in types) else None


def _relation(name: str, columns: Sequence[Column], renames: Sequence[str]) -> Relation:
    """The described rows of a derived table or a CTE, read as a table."""
    types = [t for _, t in columns]
    if any(t is None for t in types):
        raise _Undescribed  # NB: its column's type follows its values as it runs
    return Relation.of(name, [n for n, _ in columns], types, [], renames)


def _source(
    source: st.Source, resolve: Resolve, database: str, params: list[ColumnType | None], ctes: Ctes
) -> Source:
    """What a FROM or JOIN source reads, as a table without rows."""
    if isinstance(source, st.Derived):
        described = _query_columns(source.query, resolve, database, params, ctes)
        return _relation(source.alias, described, source.columns)
    if isinstance(source, st.Series | st.Unnest):
        return _function(source, params)
    if isinstance(source, st.RowsFrom):
        return rows_from_of(source, [_function(f, params) for f in source.functions])
    if isinstance(source, st.TableName) and source.database is None and source.name in ctes:
        return ctes[source.name]
    found = resolve(_table(source))
    if isinstance(found, ViewDescriptor):
        return _view(found, resolve, _database(source, database))
    if isinstance(found, SequenceDescriptor):
        read = as_relation(found, [])
        return _Named(read.name, read.columns, read.rows, found.id)
    return found


def _function(source: st.Series | st.Unnest, params: list[ColumnType | None]) -> Relation:
    """A set-returning function in FROM, as a table without rows."""
    if isinstance(source, st.Series):
        column = _series_type(source, params)
        extra, extra_types = _ordinality(source)
        return Relation.of(source.alias, [source.column, *extra], [column, *extra_types], [])
    elements = []
    for arg in source.args:
        _params_in(arg, Scope(), params)  # ``unnest($1::INT[])``: $1 an INT[]
        array = type_of(arg, Scope(), params)
        if array is None or array.kind is not Kind.ARRAY or array.element is None:
            raise _Undescribed
        elements.append(array.element)
    extra, extra_types = _ordinality(source)
    return Relation.of(source.alias, [*source.columns, *extra], elements + extra_types, [])


def _series_type(source: st.Series, params: list[ColumnType | None]) -> ColumnType:
    """The type of ``generate_series``' column (:func:`series_type`), its placeholders
    typed as its overload has them: INTs, or the times' type and an INTERVAL step."""
    args = source.args
    for arg in args:
        if not _is_param(arg):
            _params_in(arg, Scope(), params)  # ``$1::TIMESTAMPTZ``: $1 a TIMESTAMPTZ
    column = series_type([None if _is_param(a) else type_of(a, Scope(), params) for a in args])
    if column == _INT:
        for arg in args:
            if _is_param(arg):
                _param(arg, _INT, params)
        if any(type_of(arg, Scope(), params) != _INT for arg in args):
            raise _Undescribed
        return _INT
    for i, arg in enumerate(args):
        if _is_param(arg):
            _param(arg, column if i < 2 else ColumnType(Kind.INTERVAL), params)
    return column


def _view(view: ViewDescriptor, resolve: Resolve, database: str) -> _Named:
    """``view`` (in ``database``) read as the derived table its query makes, as
    :func:`feedkv.sql.query.read_view` reads it: the view's own column names, over the
    first of its query's columns (``SELECT *`` of a table that gained some since)."""
    body = view_query(view.query, database)
    described = _query_columns(body, resolve, database, [], {})  # NB: it has no placeholders
    width = len(view.columns)
    if len(described) < width:
        raise _Undescribed  # NB: it fails as it runs (42P10)
    rows = _relation(view.name, described[:width], view.columns)
    return _Named(rows.name, rows.columns, rows.rows, view.id)


def _ordinality(source: st.Series | st.Unnest) -> tuple[list[str], list[ColumnType]]:
    """The column WITH ORDINALITY adds, if it was asked: its name and type."""
    return ([], []) if source.ordinality is None else ([source.ordinality], [_INT])


def _table(name: st.Source) -> st.TableName:
    if not isinstance(name, st.TableName) or is_virtual(name):
        raise _Undescribed
    return name


def _select(
    s: st.Select,
    resolve: Resolve,
    database: str,
    params: list[ColumnType | None],
    ctes: Ctes,
    origins: list[Origin] | None = None,
    records: set[int] | None = None,
    outer: Scope | None = None,
) -> tuple[Column, ...]:
    sources = [] if s.table is None else [s.table, *(join.table for join in s.joins)]
    if any(isinstance(join.table, st.Derived) and join.table.lateral for join in s.joins):
        raise _Undescribed  # NB: a LATERAL subquery's columns are found by running it
    # NB: a LATERAL function's columns are typed by JoinPlan, from the sources to its left
    found = [
        None if n and is_lateral(source) else _source(source, resolve, database, params, ctes)
        for n, source in enumerate(sources)
    ]
    descs = [d for d in found if d is not None]
    read: dict[int, Origin] = {}  # a row index -> the table column it holds
    if s.table is None:
        scope = Scope(outer=outer)
        names = ResultPlan.of([], scope, s).names
    elif s.joins or not isinstance(found[0], TableDescriptor):
        databases = [_database(source, database) for source in sources]
        if names_mvcc(s):  # NB: as query() reads the tables, each with the column
            found = [with_mvcc(d) if isinstance(d, TableDescriptor) else d for d in found]
        plan = JoinPlan.of(found, s, databases, outer, type_of)
        descs = [table.desc for table in plan.tables]
        names = plan.result.names
        scope = plan.scope  # NB: with the columns JOIN ... USING merges
        for table in plan.tables:
            read.update(_read_origins(table.desc, table.offset))
        for join in s.joins:
            if join.on is not None:
                _params_in(join.on, scope, params)
    else:
        desc = found[0]
        if not isinstance(desc, TableDescriptor):
            raise _Undescribed
        plan_ = SelectPlan.of(desc, s, _database(s.table, database), outer)
        names, scope = plan_.result.names, plan_.scope
        read = _read_origins(desc, 0)
    scalars: dict[str, ColumnType | None] = {}  # the type of each subquery's one column
    for node, inner in s.subqueries:  # NB: a correlated one names this query's columns
        described = _query_columns(inner, resolve, database, params, ctes, outer=scope)
        if isinstance(node, exp.Subquery) and len(described) == 1:
            scalars[subquery_key(node)] = described[0][1]
    for node in [*filter(None, [s.where, s.having]), *s.group_by, *(n for n, _ in s.order_by)]:
        _params_in(node, scope, params)
    for item in s.items:
        _params_in(item, scope, params)
    for count in (s.limit, s.offset):
        if isinstance(count, exp.Parameter):
            _param(count, _INT, params)
    if any(j.using or j.natural for j in s.joins) and any(_is_star(i) for i in s.items):
        raise _Undescribed  # NB: ``*`` shows the columns USING merges once, as it runs
    aliases = [s.alias, *(join.alias for join in s.joins)]
    tables = [(alias or desc.name, desc) for alias, desc in zip(aliases, descs, strict=False)]
    types = _item_types(s.items, scope, tables, params, scalars)
    if origins is not None:
        origins.extend(_item_origins(s.items, scope, tables, read))
    if records is not None:
        records.update(_record_places(s.items, tables))
    return tuple(zip(names, types, strict=True))


def _read_origins(desc: Source, offset: int) -> dict[int, Origin]:
    """Where ``desc``'s columns are in the rows a SELECT reads from ``offset`` on, to
    their table and attnum (numbered as :mod:`feedkv.pgwire.catalog`'s pg_attribute:
    the public columns, hidden ones too, from 1); a view's or a sequence's, to it and
    its column's number from 1; none for a derived table's."""
    if isinstance(desc, _Named):
        return {offset + i: (desc.oid, i + 1) for i in range(len(desc.columns))}
    if not isinstance(desc, TableDescriptor):
        return {}
    public = [i for i, column in enumerate(desc.columns) if not column.adding]
    return {offset + i: (desc.id, n) for n, i in enumerate(public, start=1)}


def _item_origins(
    items: Sequence[exp.Expr],
    scope: Scope,
    tables: Sequence[tuple[str, Source]],
    read: dict[int, Origin],
) -> list[Origin]:
    """The origin of each result column ``items`` make (``*`` expanded as in
    :func:`_item_types`): a bare column's, from ``read``; ``(0, 0)`` for any other."""
    found: list[Origin] = []
    for item in items:
        node = unalias(item)
        if _is_star(node):
            for desc in _starred(node, tables):
                numbers = _read_origins(desc, 0)
                shown = [i for i, c in enumerate(desc.columns) if c.shown]
                found.extend(numbers.get(i, (0, 0)) for i in shown)
        elif isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            found.append(read.get(scope.lookup(node)[0], (0, 0)))
        else:
            found.append((0, 0))
    return found


def _record_places(items: Sequence[exp.Expr], tables: Sequence[tuple[str, Source]]) -> set[int]:
    """The places of the result columns ``items`` make (``*`` expanded as in
    :func:`_item_types`) that are row values."""
    places: set[int] = set()
    place = 0
    for item in items:
        if _is_star(item):
            place += sum(1 for desc in _starred(item, tables) for c in desc.columns if c.shown)
            continue
        if isinstance(unalias(item), exp.Tuple):
            places.add(place)
        place += 1
    return places


def _database(source: st.Source, database: str) -> str:
    return source.database or database if isinstance(source, st.TableName) else database


def _item_types(
    items: Sequence[exp.Expr],
    scope: Scope,
    tables: Sequence[tuple[str, Source]],
    params: Sequence[ColumnType | None],
    scalars: Mapping[str, ColumnType | None] | None = None,
) -> list[ColumnType | None]:
    """The types of the result columns ``items`` make over ``tables`` (each with the
    name that qualifies its columns; ``*`` expands as in
    :func:`feedkv.sql.plan._projections`); ``scalars``: the types of the scalar
    subqueries, by :func:`~feedkv.sql.expr.subquery_key`."""
    types: list[ColumnType | None] = []
    for item in items:
        if not _is_star(item):
            types.append(_Typer(scope, params, scalars or {}).type_of(unalias(item)))
            continue
        for desc in _starred(item, tables):
            types.extend(c.type for c in desc.columns if c.shown)
    return types


def _starred(star: exp.Expr, tables: Sequence[tuple[str, Source]]) -> Iterator[Source]:
    """The tables whose columns ``*`` or ``t.*`` stands for."""
    qualifier = star.table if isinstance(star, exp.Column) else ""
    return (desc for name, desc in tables if not qualifier or qualifier == name)


def _mutation(
    s: st.Insert | st.Update | st.Delete,
    resolve: Resolve,
    database: str,
    params: list[ColumnType | None],
    origins: list[Origin],
) -> tuple[Column, ...]:
    """The RETURNING columns of ``s``, their origins (as PostgreSQL's: a bare column's
    is the table's) added to ``origins``."""
    desc = catalog.of_kind(resolve(s.table), s.table.name, TableDescriptor)
    db_name = s.table.database or database
    scope = table_scope(desc, db_name, s.alias)
    returning: tuple[tuple[str, ...], object] | None
    if isinstance(s, st.Insert):
        insert = InsertPlan.of(desc, s, db_name)
        returning = insert.returning
        for values in s.rows:
            for value, column in zip(values, insert.targets, strict=True):
                _params_in(value, scope, params, column.type)
        for name, value in s.conflict_sets:
            _params_in(value, scope, params, desc.column(name).type)
        if s.conflict_where is not None:
            _params_in(s.conflict_where, scope, params)
        if s.query is not None:
            _query_columns(s.query, resolve, database, params, {})
    elif s.joins:
        return _joined_mutation(s, desc, scope, resolve, database, params, origins)
    else:
        if isinstance(s, st.Update):
            returning = UpdatePlan.of(desc, s, db_name).returning
            for name, value in s.sets:
                _params_in(value, scope, params, desc.column(name).type)
        else:
            returning = DeletePlan.of(desc, s, db_name).returning
        if s.where is not None:
            _params_in(s.where, scope, params)
        if isinstance(s.limit, exp.Parameter):
            _param(s.limit, _INT, params)
    if returning is None or s.returning is None:
        return ()
    tables = [(s.alias or desc.name, desc)]
    types = _item_types(s.returning, scope, tables, params)
    origins.extend(_item_origins(s.returning, scope, tables, _read_origins(desc, 0)))
    return tuple(zip(returning[0], types, strict=True))


def _joined_mutation(
    s: st.Update | st.Delete,
    desc: TableDescriptor,
    scope: Scope,
    resolve: Resolve,
    database: str,
    params: list[ColumnType | None],
    origins: list[Origin],
) -> tuple[Column, ...]:
    """:func:`_mutation` of UPDATE ... FROM or DELETE ... USING: its WHERE and RETURNING
    over the joined rows, as the SELECT of them it runs (``feedkv.sql.dml``)."""
    if isinstance(s, st.Update):
        for name, value in s.sets:
            _params_in(value, scope, params, target_column(desc, name).type)
    items = s.returning or (exp.Star(),)
    select = st.Select(s.text, s.table, s.alias, items, s.where, joins=s.joins)
    columns = _query_columns(select, resolve, database, params, {}, origins)
    return columns if s.returning is not None else ()


def _is_star(node: exp.Expr) -> bool:
    return isinstance(node, exp.Star) or (
        isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
    )


# Placeholders.


def _param(node: exp.Expr, ctype: ColumnType | None, params: list[ColumnType | None]) -> None:
    text = node.this.name if isinstance(node.this, exp.Expr) else str(node.this)
    if ctype is None or not text.isdigit():
        return
    index = int(text) - 1
    if 0 <= index < len(params) and params[index] is None:
        params[index] = ctype


def _is_param(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Parameter)


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_BITWISE = (
    exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseLeftShift, exp.BitwiseRightShift,
)  # fmt: skip
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, *_BITWISE)


def _params_in(
    node: exp.Expr,
    scope: Scope,
    params: list[ColumnType | None],
    assigned: ColumnType | None = None,
) -> None:
    """Type the placeholders in ``node`` from where they stand; ``assigned``: the type of
    the column ``node`` is assigned to."""
    if _is_param(node):
        _param(node, assigned, params)
        return
    if isinstance(node, exp.Paren):
        _params_in(node.this, scope, params, assigned)
        return
    for sub in node.walk():
        if isinstance(sub, _COMPARISONS + _ARITHMETIC):
            left, right = sub.this, sub.expression
            if _is_param(left):
                _param(left, _safe_type(right, scope), params)
            if _is_param(right):
                _param(right, _safe_type(left, scope), params)
            quantified = _quantified_param(right)
            if quantified is not None:  # ``x = ANY($1)``: an array of x's kind
                _param(quantified, _array_of(_safe_type(left, scope)), params)
        elif isinstance(sub, exp.Cast) and _is_param(sub.this):
            _param(sub.this, _safe_type(sub, scope), params)
        elif isinstance(sub, exp.In):
            target = _safe_type(sub.this, scope)
            for option in sub.expressions:
                if _is_param(option):
                    _param(option, target, params)
        elif isinstance(sub, exp.Between):
            target = _safe_type(sub.this, scope)
            for bound in (sub.args.get("low"), sub.args.get("high")):
                if bound is not None and _is_param(bound):
                    _param(bound, target, params)
        elif isinstance(sub, exp.Case | exp.Coalesce):
            _params_beside(_results(sub), scope, params)
        elif isinstance(sub, exp.Like | exp.ILike | exp.SimilarTo):
            for side in (sub.this, sub.expression):
                if _is_param(side):
                    _param(side, _STRING, params)


def _results(node: exp.Case | exp.Coalesce) -> list[exp.Expr]:
    """The expressions whose value a CASE (its THENs and ELSE) or a COALESCE gives."""
    if isinstance(node, exp.Coalesce):
        return [node.this, *node.expressions]
    branches = [branch.args["true"] for branch in node.args.get("ifs") or []]
    default = node.args.get("default")
    return branches if default is None else [*branches, default]


def _params_beside(results: list[exp.Expr], scope: Scope, params: list[ColumnType | None]) -> None:
    """Type the placeholders among ``results`` (which must share a type) as the others
    are typed, when they all are of one kind: ``CASE WHEN c THEN $1 ELSE 1 END`` makes
    ``$1`` an INT, as CockroachDB types it."""
    placeholders = [r for r in results if _is_param(r)]
    others = [r for r in results if not _is_param(r) and not isinstance(r, exp.Null)]
    if not placeholders or not others:
        return
    types = [_safe_type(r, scope) for r in others]
    kinds = {t.kind if t is not None else None for t in types}
    if len(kinds) != 1 or None in kinds:
        return
    for placeholder in placeholders:
        _param(placeholder, types[0], params)


def _quantified_param(node: exp.Expr) -> exp.Expr | None:
    """The placeholder of ``ANY($n)`` or ``ALL($n)`` (which sqlglot reads as a call)."""
    if isinstance(node, exp.Any | exp.All):
        inner = node.this
    elif isinstance(node, exp.Anonymous) and str(node.this).upper() == "ALL":
        inner = node.expressions[0] if len(node.expressions) == 1 else None
    else:
        return None
    while isinstance(inner, exp.Paren):
        inner = inner.this
    return inner if _is_param(inner) else None


def _array_of(element: ColumnType | None) -> ColumnType | None:
    if element is None or element.kind not in _ARRAY_ELEMENTS:
        return None
    return ColumnType(Kind.ARRAY, element=ColumnType(element.kind))


def _safe_type(node: exp.Expr, scope: Scope) -> ColumnType | None:
    try:
        return type_of(node, scope)
    except SQLError:
        return None  # the planner reports a bad expression, not this


# Expression types.

_BOOLEAN = (
    *_COMPARISONS, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike,
    exp.SimilarTo, exp.Escape,
    exp.Boolean, exp.Exists, exp.RegexpLike, exp.RegexpILike, exp.JSONBContainsTopKey,
)  # fmt: skip
_NO_ARGUMENT_STRINGS = (exp.CurrentVersion, exp.CurrentSchema, exp.CurrentDatabase, exp.CurrentUser)
_JSONB = ColumnType(Kind.JSONB)
_FUNCTIONS = {
    "unique_rowid": _INT,
    "nextval": _INT,
    "currval": _INT,
    "lastval": _INT,
    "setval": _INT,
    "gen_random_uuid": ColumnType(Kind.UUID),
    "uuid_generate_v4": ColumnType(Kind.UUID),
    "now": ColumnType(Kind.TIMESTAMPTZ),
    "statement_timestamp": ColumnType(Kind.TIMESTAMPTZ),
    "follower_read_timestamp": ColumnType(Kind.TIMESTAMPTZ),
    "clock_timestamp": ColumnType(Kind.TIMESTAMPTZ),
    "transaction_timestamp": ColumnType(Kind.TIMESTAMPTZ),
    "current_setting": _STRING,
    "cluster_logical_timestamp": _DECIMAL,
    "cardinality": _INT,
    "pg_sleep": ColumnType(Kind.BOOL),
    "pg_backend_pid": _INT,
    "pg_typeof": _STRING,
    **dict.fromkeys(
        ("regexp_replace", "regexp_extract", "encode", "jsonb_pretty", "to_char"), _STRING
    ),
    **dict.fromkeys(("sha1", "sha224", "sha256", "sha384", "sha512"), _STRING),
    **dict.fromkeys(
        (
            "regexp_split_to_array",
            "jsonb_object_keys",
            "json_object_keys",
            "jsonb_array_elements_text",
            "json_array_elements_text",
            "jsonb_each_text",
            "json_each_text",
        ),
        ColumnType(Kind.ARRAY, element=_STRING),
    ),
    "array_to_string": _STRING,
    "array_position": _INT,
    "array_positions": ColumnType(Kind.ARRAY, element=_INT),
    "string_to_array": ColumnType(Kind.ARRAY, element=_STRING),
    # NB: the array the parser unnests (parser._ARRAY_SRFS): its elements are JSONB
    **dict.fromkeys(
        ("jsonb_array_elements", "json_array_elements", "jsonb_each", "json_each"),
        ColumnType(Kind.ARRAY, element=_JSONB),
    ),
    "decode": ColumnType(Kind.BYTES),
    **dict.fromkeys(("bit_length", "octet_length"), _INT),
    **dict.fromkeys(("jsonb_array_length", "json_array_length"), _INT),
    **dict.fromkeys(("jsonb_typeof", "json_typeof", "to_hex", "quote_ident"), _STRING),
    "make_date": ColumnType(Kind.DATE),
    **dict.fromkeys(("format", "overlay"), _STRING),
    "width_bucket": _INT,
    "age": ColumnType(Kind.INTERVAL),
    "to_timestamp": ColumnType(Kind.TIMESTAMPTZ),
}

# The functions that give an array of the type of one of their arguments (its position)
_SAME_ARRAY = {"array_append": 0, "array_cat": 0, "array_remove": 0, "array_prepend": 1}


def _datetime_arithmetic() -> dict[tuple[type, Kind | None, Kind | None], Kind]:
    """PostgreSQL's date and time arithmetic, as feedkv runs it: (operator, left kind,
    right kind) -> the kind of its every value."""
    date, time, interval = Kind.DATE, Kind.TIME, Kind.INTERVAL
    timestamp, timestamptz = Kind.TIMESTAMP, Kind.TIMESTAMPTZ
    table: dict[tuple[type, Kind | None, Kind | None], Kind] = {
        (exp.Add, date, Kind.INT): date,
        (exp.Add, Kind.INT, date): date,
        (exp.Sub, date, Kind.INT): date,
        (exp.Sub, date, date): Kind.INT,
        (exp.Add, date, interval): timestamp,
        (exp.Add, interval, date): timestamp,
        (exp.Sub, date, interval): timestamp,
        (exp.Add, date, time): timestamp,
        (exp.Add, time, date): timestamp,
        (exp.Add, time, interval): time,
        (exp.Add, interval, time): time,
        (exp.Sub, time, interval): time,
        (exp.Sub, time, time): interval,
        (exp.Add, interval, interval): interval,
        (exp.Sub, interval, interval): interval,
    }
    for moment in (timestamp, timestamptz):
        table[exp.Add, moment, interval] = moment
        table[exp.Add, interval, moment] = moment
        table[exp.Sub, moment, interval] = moment
        table[exp.Sub, moment, moment] = interval
        # NB: a DATE beside a moment is its midnight (expr._datetime_arithmetic)
        table[exp.Sub, moment, date] = interval
        table[exp.Sub, date, moment] = interval
    for number in (Kind.INT, Kind.FLOAT, Kind.DECIMAL):
        table[exp.Mul, interval, number] = interval
        table[exp.Mul, number, interval] = interval
        table[exp.Div, interval, number] = interval
    return table


_DATETIME_ARITHMETIC = _datetime_arithmetic()


def type_of(
    node: exp.Expr, scope: Scope, params: Sequence[ColumnType | None] = ()
) -> ColumnType | None:
    """The type of every value ``node`` gives over rows of ``scope``, or ``None`` where
    that does not follow from the tree (see the module docstring); ``params``: the
    placeholders' types so far."""
    return _Typer(scope, params).type_of(node)


class _Typer:
    def __init__(
        self,
        scope: Scope,
        params: Sequence[ColumnType | None],
        scalars: Mapping[str, ColumnType | None] | None = None,
    ) -> None:
        self.scope = scope
        self.params = params
        self.scalars = scalars or {}

    def type_of(self, node: exp.Expr) -> ColumnType | None:
        return _type_of(node, self)


def _type_of(node: exp.Expr, typer: _Typer) -> ColumnType | None:
    scope = typer.scope
    if isinstance(node, exp.Parameter):
        text = node.this.name if isinstance(node.this, exp.Expr) else str(node.this)
        index = int(text) - 1 if text.isdigit() else -1
        return typer.params[index] if 0 <= index < len(typer.params) else None
    if isinstance(node, exp.Paren | exp.Alias):
        return _type_of(node.this, typer)
    if isinstance(node, exp.Window):
        return _window_type(node.this, typer)
    if isinstance(node, exp.Subquery):
        return typer.scalars.get(subquery_key(node))
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return scope.lookup(node)[1]
    if isinstance(node, exp.Cast):
        from feedkv.sql.parser import column_type

        target = column_type(node.args["to"])
        # NB: a cast to a user-defined type: which one (its OID) is known when it runs
        return None if target.kind is Kind.ENUM else target
    if isinstance(node, _BOOLEAN):
        return _BOOL
    if isinstance(node, exp.BitString):
        return ColumnType(Kind.VARBIT)  # as CockroachDB types B'...'
    if isinstance(node, exp.Literal):
        if node.is_string:
            return _STRING
        return _INT if node.this.isdigit() else _DECIMAL
    if isinstance(node, _NO_ARGUMENT_STRINGS):
        return _STRING
    if isinstance(node, exp.CurrentTimestamp):
        return ColumnType(Kind.TIMESTAMPTZ)
    if isinstance(node, exp.CurrentDate):
        return ColumnType(Kind.DATE)
    if isinstance(node, exp.Localtimestamp):
        return ColumnType(Kind.TIMESTAMP)
    if isinstance(node, exp.Localtime):
        return ColumnType(Kind.TIME)
    if isinstance(node, exp.AtTimeZone) or (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "timezone"
        and len(node.expressions) == 2
    ):  # NB: a TIMESTAMPTZ's wall clock time is a TIMESTAMP, a TIMESTAMP's instant a TZ
        value = node.this if isinstance(node, exp.AtTimeZone) else node.expressions[1]
        # NB: an untyped string and a DATE are read as a TIMESTAMPTZ (expr._zoned_constant)
        given = Kind.TIMESTAMPTZ if _is_string_constant(value) else _kind(value, typer)
        if given is None:
            return None
        kind = _ZONE_SHIFTED.get(given)
        return None if kind is None else ColumnType(kind)
    if isinstance(node, exp.JustifyHours | exp.JustifyDays | exp.JustifyInterval):
        return ColumnType(Kind.INTERVAL)
    if isinstance(node, exp.TimestampTrunc):  # date_trunc: of its value's type (a DATE's: TZ)
        kind = _kind(node.this, typer)
        if kind is Kind.DATE:
            return ColumnType(Kind.TIMESTAMPTZ)
        return ColumnType(kind) if kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ) else None
    if isinstance(node, exp.Anonymous):
        if static_kind(node, scope) is Kind.JSONB:  # to_jsonb(), jsonb_build_object(), ...
            return _JSONB
        name = str(node.this).lower()
        if name in _SAME_ARRAY and len(node.expressions) == 2:
            found = typer.type_of(node.expressions[_SAME_ARRAY[name]])
            return found if found is not None and found.kind is Kind.ARRAY else None
        return _FUNCTIONS.get(name)
    if isinstance(node, exp.JSONArrayAgg | exp.JSONExtract | exp.JSONBExtract):  # jsonb_agg, ->
        return _JSONB
    if isinstance(node, exp.JSONExtractScalar | exp.JSONBExtractScalar):  # ->>, #>>
        return _STRING
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        return _INT if str(node.expression.this).lower() == "node_id" else None
    if isinstance(node, exp.Count | SumInt):
        return _INT
    if isinstance(node, exp.Corr):
        return ColumnType(Kind.FLOAT)
    if isinstance(node, exp.PercentileCont | exp.PercentileDisc):
        return _percentile_type(node, typer)
    if isinstance(node, exp.LogicalAnd | exp.LogicalOr):
        return _BOOL
    if isinstance(node, exp.GroupConcat):
        return _STRING
    if isinstance(node, exp.Length | exp.Ascii | exp.StrPosition):
        return _INT
    if isinstance(node, exp.Lower | exp.Upper):
        return _STRING if _kind(node.this, typer) is Kind.STRING else None
    if isinstance(node, exp.Min | exp.Max):
        return _argument_type(node, typer)
    if isinstance(node, exp.Sum | exp.Avg):
        kind = _kind(_argument(node), typer)
        if kind in (Kind.FLOAT, Kind.INTERVAL):
            return ColumnType(kind)
        return _DECIMAL if kind in (Kind.INT, Kind.DECIMAL) else None
    if isinstance(node, exp.DPipe):
        sides = (typer.type_of(node.this), typer.type_of(node.expression))
        arrays = [t for t in sides if t is not None and t.kind is Kind.ARRAY]
        if arrays:  # NB: an array joined to another or to an element is one of its type
            return arrays[0]
        kinds = {t.kind if t is not None else None for t in sides}
        if Kind.JSONB in kinds and Kind.STRING not in kinds:  # NB: a constant is untyped
            return ColumnType(Kind.JSONB)
        return _STRING if kinds == {Kind.STRING} else None
    if isinstance(node, exp.Interval):
        return ColumnType(Kind.INTERVAL)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        operands = (_kind(node.this, typer), _kind(node.expression, typer))
        datetime_kind = _DATETIME_ARITHMETIC.get((type(node), *operands))
        if datetime_kind is not None:
            return ColumnType(datetime_kind)
    if isinstance(node, exp.Round | exp.Floor | exp.Ceil | exp.Trunc | exp.Sqrt):
        kind = _kind(node.this, typer)  # NB: a DECIMAL's stays one; an INT's is a FLOAT
        if kind is Kind.DECIMAL:
            return _DECIMAL
        return ColumnType(Kind.FLOAT) if kind in (Kind.INT, Kind.FLOAT) else None
    if isinstance(node, exp.Ln | exp.Exp | exp.Log):  # NB: DECIMALs (an INT beside one) stay
        kinds = {_kind(n, typer) for n in (node.this, node.args.get("expression")) if n}
        if kinds <= {Kind.INT, Kind.FLOAT}:
            return ColumnType(Kind.FLOAT)
        return _DECIMAL if kinds <= {Kind.INT, Kind.DECIMAL} else None
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.IntDiv | exp.Mod | exp.Pow):
        left, right = _kind(node.this, typer), _kind(node.expression, typer)
        # NB: a string constant beside a number is of its type (expr.untyped_operand_kind)
        if _is_string_constant(node.this) and right in _NUMBER_KINDS:
            left = right
        elif _is_string_constant(node.expression) and left in _NUMBER_KINDS:
            right = left
        kinds = {left, right}
        if not kinds <= _NUMBER_KINDS:
            return None
        # NB: as feedkv evaluates numbers of two kinds: a FLOAT wins, then a DECIMAL;
        # an INT divided by an INT is a DECIMAL (its // an INT), as CockroachDB's
        for wider in (Kind.FLOAT, Kind.DECIMAL):
            if wider in kinds:
                return ColumnType(wider)
        return _DECIMAL if isinstance(node, exp.Div) else _INT
    if isinstance(node, (*_BITWISE, exp.BitwiseNot)):
        kind = _kind(node.this, typer)  # NB: a shift's count is an INT whatever it shifts
        if kind is Kind.INT:
            return _INT
        return ColumnType(Kind.VARBIT) if kind in (Kind.BIT, Kind.VARBIT) else None
    if isinstance(node, exp.Neg | exp.Abs | exp.Sign):  # NB: an INT's sign is an INT
        kind = _kind(node.this, typer)
        if kind is None or kind not in (Kind.INT, Kind.FLOAT, Kind.DECIMAL):
            return None
        return ColumnType(kind)
    if isinstance(node, exp.Bracket):
        found = typer.type_of(node.this)
        return found.element if found is not None and found.kind is Kind.ARRAY else None
    if isinstance(node, exp.ArraySize):
        return _INT
    if isinstance(node, exp.Array | exp.ArrayAgg):
        return _array_type(node, typer)
    if isinstance(node, exp.Extract | exp.Pi | exp.Rand):  # extract, date_part: as they run
        return ColumnType(Kind.FLOAT)
    if isinstance(node, exp.Uuid):  # gen_random_uuid()
        return ColumnType(Kind.UUID)
    if isinstance(node, exp.Case):
        branches = [branch.args["true"] for branch in node.args.get("ifs") or []]
        return _one_kind([*branches, node.args.get("default")], typer)
    if isinstance(node, exp.Greatest | exp.Least):
        return _one_kind([node.this, *node.expressions], typer)
    if isinstance(node, exp.Nullif):
        return _one_kind([node.this], typer)
    if isinstance(node, exp.Coalesce):
        kinds = {_kind(n, typer) for n in [node.this, *node.expressions]}
        kinds.discard(None)
        (only,) = kinds if len(kinds) == 1 else (None,)
        return None if only is None else ColumnType(only)
    return None


_NUMBER_KINDS = frozenset({Kind.INT, Kind.FLOAT, Kind.DECIMAL})
# What AT TIME ZONE makes of a value's kind
_ZONE_SHIFTED = {
    Kind.TIMESTAMP: Kind.TIMESTAMPTZ,
    Kind.TIMESTAMPTZ: Kind.TIMESTAMP,
    Kind.DATE: Kind.TIMESTAMP,  # NB: its midnight as a TIMESTAMPTZ first, as PostgreSQL's
}


def _is_string_constant(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


# The window functions of an INT8 result, of a FLOAT8 one, and of their argument's type
_INT_RANKINGS = (exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile)
_FLOAT_RANKINGS = (exp.PercentRank, exp.CumeDist)
_SHIFTS = (exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue)


def _window_type(function: exp.Expr, typer: _Typer) -> ColumnType | None:
    """The type of ``function() OVER (...)``: a ranking's, a shift's (its value's), or
    the aggregate's."""
    if isinstance(function, _INT_RANKINGS):
        return _INT
    if isinstance(function, _FLOAT_RANKINGS):
        return ColumnType(Kind.FLOAT)
    if isinstance(function, _SHIFTS):
        return typer.type_of(function.this)
    return typer.type_of(function)


# NB: an array's elements are of the plain kind of its values (no width), as the
# executor builds it; of an enum or a nested array or JSON the type is not told here
_ARRAY_ELEMENTS = frozenset(Kind) - {Kind.ENUM, Kind.ARRAY, Kind.JSONB}


def _array_type(node: exp.Array | exp.ArrayAgg, typer: _Typer) -> ColumnType | None:
    """``ARRAY[a, b]`` of elements of one kind, ``ARRAY(query)`` of its column's, or
    ``array_agg(a)``: an array of it."""
    if isinstance(node, exp.Array) and node.meta.get("query"):
        return _array_of(typer.scalars.get(subquery_key(node.expressions[0])))
    items = list(node.expressions) if isinstance(node, exp.Array) else [_argument(node)]
    kinds = {_kind(item, typer) for item in items}
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    return None if kind is None else _array_of(ColumnType(kind))


def _percentile_type(node: exp.Expr, typer: _Typer) -> ColumnType | None:
    """percentile_disc's: its value's type; percentile_cont's: FLOAT or INTERVAL; an
    array of it for an array of fractions."""
    value = node.this.this if isinstance(node.this, exp.Order) else None
    found = typer.type_of(value) if value is not None else None
    if found is None:
        return None
    element = _argument_type(node.this, typer) if isinstance(node, exp.PercentileDisc) else found
    if element is None or (
        isinstance(node, exp.PercentileCont) and element.kind not in (Kind.FLOAT, Kind.INTERVAL)
    ):
        return None
    if isinstance(node, exp.PercentileCont):
        element = ColumnType(element.kind)
    fraction = node.expression
    if isinstance(fraction, exp.Array) or _kind(fraction, typer) is Kind.ARRAY:
        return ColumnType(Kind.ARRAY, element=element)
    return element


def _argument(node: exp.Expr) -> exp.Expr:
    argument = node.this
    if isinstance(argument, exp.Distinct) and argument.expressions:
        return argument.expressions[0]  # type: ignore[no-any-return]
    return argument  # type: ignore[no-any-return]


def _argument_type(node: exp.Expr, typer: _Typer) -> ColumnType | None:
    found = typer.type_of(_argument(node))
    if found is None:
        return None
    if found.kind is Kind.FLOAT or found.fixed:
        # NB: min and max of a REAL or a CHAR(n) are one (float4, bpchar on the wire)
        return ColumnType(found.kind, width=found.width, fixed=found.fixed)
    return ColumnType(found.kind)


def _one_kind(values: Sequence[exp.Expr | None], typer: _Typer) -> ColumnType | None:
    """The type of an expression that gives one of ``values`` (``None``: a missing ELSE,
    NULL) when each that may be other than NULL is of one known kind, the same for all."""
    kinds = {_kind(v, typer) for v in values if v is not None and not isinstance(v, exp.Null)}
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    return None if kind is None or kind in (Kind.ARRAY, Kind.ENUM) else ColumnType(kind)


def _kind(node: exp.Expr, typer: _Typer) -> Kind | None:
    found = typer.type_of(node)
    return found.kind if found is not None else None
