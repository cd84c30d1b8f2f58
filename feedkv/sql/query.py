"""The queries: SELECT (over a table, joined sources, a derived table or a CTE's rows,
or none), UNION / INTERSECT / EXCEPT and VALUES, each run in the statement's
:class:`~feedkv.sql.execution.Execution`.

A SELECT of one table reads the narrowest key span its WHERE clause allows (its plan,
:class:`~feedkv.sql.plan.SelectPlan`, is kept per session); any other source list is
read whole and joined (:class:`~feedkv.sql.join.JoinPlan`). CTEs run once, before the
query that names them; subqueries get runners (:mod:`feedkv.sql.subquery`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from sqlglot import exp

from feedkv.errors import InvariantViolation, SQLError
from feedkv.sql import analytic, catalog
from feedkv.sql import statements as st
from feedkv.sql.aggregate import group_key
from feedkv.sql.crdb_internal import is_virtual, virtual_table
from feedkv.sql.describe import type_of
from feedkv.sql.descriptor import (
    DatabaseDescriptor,
    SequenceDescriptor,
    TableDescriptor,
    ViewDescriptor,
)
from feedkv.sql.execution import Execution, Result, RowLocking
from feedkv.sql.expr import Context, Scope, compile_expr, condition, static_kind
from feedkv.sql.indexes import primary_key_of, values_prefix
from feedkv.sql.join import JoinPlan, LateralRows, is_lateral
from feedkv.sql.mvcc_column import names_mvcc, with_mvcc
from feedkv.sql.plan import (
    ResultPlan,
    Selection,
    SelectPlan,
    holds,
    sorted_rows,
    unequal_values,
)
from feedkv.sql.relation import Relation
from feedkv.sql.row_codec import row_prefix, row_span, table_span
from feedkv.sql.row_locking import check_locking, source_name, table_locking
from feedkv.sql.sequences import as_relation
from feedkv.sql.set_functions import rows_from_of, series_of, unnest_of
from feedkv.sql.set_ops import SetResult, combine, result_order, union_all
from feedkv.sql.subquery import grouped_context, prepare_subqueries
from feedkv.sql.types import (
    ColumnType,
    Kind,
    coerce,
    logical_decimal,
    timestamp_of,
    wall_instant,
)
from feedkv.sql.views import view_query
from feedkv.util.keys import prefix_end

__all__ = [
    "HANDLERS",
    "check_full_scan",
    "lateral_subquery",
    "query",
    "read_source",
    "read_view",
    "refuse_full_scans",
    "select",
    "stream",
]


def select(ex: Execution, s: st.Select) -> Result:
    if s.as_of is not None:
        modifying = st.modifying_cte(s)
        if modifying is not None:  # NB: a read in the past writes nothing, as CockroachDB's
            verb = type(modifying).__name__.upper()
            raise SQLError("25006", f"cannot execute {verb} in a read-only transaction")
        if ex.session.in_transaction:
            raise SQLError(
                "0A000",
                "AS OF SYSTEM TIME cannot be used inside BEGIN ... COMMIT: a transaction "
                "reads at its own timestamp",
            )
        ts = timestamp_of(ex.constant(s.as_of), ex.session.db.now())
        if ts > ex.session.db.now():
            raise SQLError("22007", f"AS OF SYSTEM TIME: {ts} is in the future")
        ex.reader = catalog.Snapshot(ex.session.db, ts)
        ex.context.logical_timestamp = partial(logical_decimal, ts)
        # NB: now() is the time read at, as CockroachDB's (its transaction's timestamp)
        ex.context.now = wall_instant(ts)
    return query(ex, s)


def query(ex: Execution, q: st.Query) -> Result:
    """The rows of ``q``, its CTEs run first (in order: each sees those before it), in
    the statement's transaction."""
    # NB: a query's subquery runners are its own: one of the same text inside it (which
    # may name other tables by the same names) must not replace them, nor outlive it
    runners = ex.context.subqueries
    ex.context.subqueries = dict(runners)
    try:
        return _with_ctes(ex, q)
    finally:
        ex.context.subqueries = runners


def _with_ctes(ex: Execution, q: st.Query) -> Result:
    if not q.ctes:
        return _query(ex, q)
    outer = ex.ctes
    ex.ctes = ctes = dict(outer)
    try:
        for cte in q.ctes:
            if cte.recursive:
                ctes[cte.name] = _recursive(ex, ctes, cte)
                continue
            result = (
                query(ex, cte.query)
                if isinstance(cte.query, st.Select | st.SetOperation | st.Values)
                else _modify(ex, cte.query)
            )
            ctes[cte.name] = Relation.of(
                cte.name, result.columns, result.types, result.rows, cte.columns
            )
        return _query(ex, q)
    finally:
        ex.ctes = outer


def _modify(ex: Execution, statement: st.Insert | st.Update | st.Delete) -> Result:
    """A data-modifying CTE's change, made in the statement's transaction; its rows are
    those its RETURNING gives (none without one)."""
    if ex.run_nested is None:
        raise SQLError("XX000", "a data-modifying WITH query ran outside the executor")
    return ex.run_nested(ex, statement)


def _recursive(ex: Execution, ctes: dict[str, Relation], cte: st.Cte) -> Relation:
    """A recursive CTE's rows: its non-recursive term's, then the recursive term run
    over the rows the last run added (the CTE's name reads those), until a run adds
    none. UNION keeps a row only the first time it comes (NULLs equal), UNION ALL
    every row. Each run costs the recursive term over the rows added; a term that
    never stops adding never stops (as in PostgreSQL). Each run reads the rows added
    last as the CTE's, in ``ctes`` (the statement's CTEs in scope)."""
    body = cte.query
    if not isinstance(body, st.SetOperation):
        raise InvariantViolation(f"recursive CTE {cte.name!r} is no UNION")
    seed = query(ex, body.left)
    known = SetResult(seed.columns, seed.types, [])
    added = combine("union", body.all, known, SetResult(seed.columns, seed.types, seed.rows))
    seen = {_row_key(row) for row in added.rows}
    rows = list(added.rows)
    types = added.types
    while added.rows:
        ctes[cte.name] = Relation.of(cte.name, seed.columns, types, added.rows, cte.columns)
        step = query(ex, body.right)
        fresh = combine("union", True, SetResult(seed.columns, types, []), _side(step))
        new_rows = fresh.rows
        if not body.all:
            new_rows = []
            for row in fresh.rows:
                key = _row_key(row)
                if key not in seen:
                    seen.add(key)
                    new_rows.append(row)
        added = SetResult(seed.columns, types, new_rows)
        rows.extend(new_rows)
    return Relation.of(cte.name, seed.columns, types, rows, cte.columns)


def _side(result: Result) -> SetResult:
    return SetResult(result.columns, result.types, result.rows)


def _row_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(group_key(value) for value in row)


def _query(ex: Execution, q: st.Query) -> Result:
    if isinstance(q, st.SetOperation):
        return _set_operation(ex, q)
    if isinstance(q, st.Values):
        return _values(ex, q)
    if q.table is None:
        check_locking(q, [], _read_only(ex))  # nothing to lock, but OF names nothing
        return _select_no_table(ex, q)
    if q.joins or not isinstance(q.table, st.TableName) or _is_relation(ex, q.table):
        return _select_sources(ex, q)
    desc = ex.relation(q.table)
    if not isinstance(desc, TableDescriptor):
        return _select_sources(ex, q)
    if _full_scans_disallowed(ex):
        plan = ex.plan(q, desc, partial(SelectPlan.of, outer=ex.outer_scope))
        result = plan.result
        grouped = q.group_by or _aggregates(q) or result.windows
        limited = not (grouped or result.distinct or result.distinct_on)
        check_full_scan(ex, desc, plan.selection, q, limited=limited)
    if q.group_by or (q.items and _aggregates(q)):
        fast = analytic.try_select(ex, q)
        if fast is not None:
            return fast
    plan = ex.plan(q, desc, partial(SelectPlan.of, outer=ex.outer_scope))
    name = source_name(q.table, q.alias)
    check_locking(q, [name], _read_only(ex))
    lock = table_locking(q, name)
    prepare_subqueries(ex, query, q.subqueries, plan.scope, grouped_context(q, plan.result))
    if lock == "skip" and q.limit is not None and _in_key_order(desc, q):
        return _selected(ex, q, plan.result, _first_rows(ex, q, desc, plan.selection))
    return _selected(ex, q, plan.result, ex.selected(desc, plan.selection, lock=lock))


def _first_rows(
    ex: Execution, q: st.Select, desc: TableDescriptor, selection: Selection
) -> list[tuple[Any, ...]]:
    """The rows ``q`` (with a LIMIT, in key order, FOR UPDATE SKIP LOCKED) returns,
    read until its OFFSET and LIMIT are met: what it locks stops there."""
    envs = ex.iter_selected(desc, selection, lock="skip")
    limit = ex.count(q.limit, "LIMIT") if q.limit is not None else None
    if limit is None:
        return list(envs)
    offset = (ex.count(q.offset, "OFFSET") if q.offset is not None else None) or 0
    return list(itertools.islice(envs, offset + limit))


def stream(
    ex: Execution, q: st.Query
) -> tuple[tuple[str, ...], tuple[ColumnType | None, ...], Iterator[tuple[Any, ...]]]:
    """``q``'s columns, their types and its rows as an iterator (a cursor's). A SELECT of
    one table in the order it is stored (no ORDER BY but one a scan gives, see
    :func:`_in_key_order`; no grouping, window, DISTINCT, subquery or locking) reads its
    rows as the iterator is advanced, a page of the scan at a time; any other query runs
    whole now."""
    plan = _streamed(ex, q)
    if plan is None:
        result = select(ex, q) if isinstance(q, st.Select) else query(ex, q)
        return result.columns, result.types, iter(result.rows)
    s, desc, select_plan = plan
    context, projections = ex.context, select_plan.result.projections
    rows: Iterator[tuple[Any, ...]] = (
        tuple(f(env, context) for f in projections)
        for env in ex.iter_selected(desc, select_plan.selection)
    )
    skip = ex.count(s.offset, "OFFSET") if s.offset is not None else None
    kept = ex.count(s.limit, "LIMIT") if s.limit is not None else None
    if skip or kept is not None:
        rows = itertools.islice(rows, skip or 0, None if kept is None else (skip or 0) + kept)
    return select_plan.result.names, select_plan.result.types, rows


def _streamed(ex: Execution, q: st.Query) -> tuple[st.Select, TableDescriptor, SelectPlan] | None:
    """``q`` with its table and plan when :func:`stream` reads it lazily, else None."""
    if (
        not isinstance(q, st.Select)
        or not isinstance(q.table, st.TableName)
        or q.ctes
        or q.joins
        or q.subqueries
        or q.locks
        or q.as_of is not None
        or q.group_by
        or _is_relation(ex, q.table)
        or (q.items and _aggregates(q))
    ):
        return None
    desc = ex.relation(q.table)
    if not isinstance(desc, TableDescriptor):
        return None
    plan = ex.plan(q, desc, partial(SelectPlan.of, outer=ex.outer_scope))
    result = plan.result
    if result.grouping or result.windows or result.distinct or result.distinct_on:
        return None
    if result.order and not _in_key_order(desc, q):
        return None
    return q, desc, plan


# Kinds whose key encoding orders as SQL orders their values (floats are left out for NaN
# and -0.0, decimals for their scales): a scan gives an ORDER BY of key columns of these.
_KEY_ORDERED = frozenset(
    {Kind.INT, Kind.STRING, Kind.BYTES, Kind.BOOL, Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ}
)


def _in_key_order(desc: TableDescriptor, s: st.Select | st.Update | st.Delete) -> bool:
    """Whether ``s``'s ORDER BY is the order a scan of ``desc`` gives: a prefix of its
    primary key's columns, each in its key's direction (a DESC key column's NULLs come
    last, as ORDER BY ... DESC puts them), each named as a column (not a result's
    alias)."""
    keys = desc.key_columns
    items = s.items if isinstance(s, st.Select) else ()
    aliases = {item.alias for item in items if isinstance(item, exp.Alias)}
    if len(s.order_by) > len(keys):
        return False
    for n, ((node, descending), key) in enumerate(zip(s.order_by, keys, strict=False)):
        if (
            descending != desc.key_descending(n)
            or not isinstance(node, exp.Column)
            or node.name != key.name
            or node.name in aliases
            or node.table not in ("", s.alias or desc.name)
            or key.type.kind not in _KEY_ORDERED
        ):
            return False
    return True


def _full_scans_disallowed(ex: Execution) -> bool:
    return ex.session.variable("disallow_full_table_scans") == "on"


def check_full_scan(
    ex: Execution,
    desc: TableDescriptor,
    selection: Selection,
    s: st.Select | st.Update | st.Delete,
    *,
    limited: bool = True,
) -> None:
    """P0003 when the session's ``disallow_full_table_scans`` is on and ``s`` reads the
    whole of ``desc`` through ``selection``, as CockroachDB counts a full scan. A scan
    that stops at ``s``'s LIMIT is none (CockroachDB's optimizer gives it a hard limit):
    one with no WHERE and no ORDER BY but the primary key's order, when ``limited``
    (nothing between the scan and the LIMIT: no grouping, aggregate, window or
    DISTINCT)."""
    if not _full_scans_disallowed(ex) or not _reads_whole(ex, desc, selection):
        return
    if limited and s.limit is not None and s.where is None and _in_key_order(desc, s):
        return
    raise _full_scan(s)


def refuse_full_scans(ex: Execution, s: st.Statement) -> None:
    """P0003 for ``s``, which reads a table whole, when the session's
    ``disallow_full_table_scans`` is on."""
    if _full_scans_disallowed(ex):
        raise _full_scan(s)


def _reads_whole(ex: Execution, desc: TableDescriptor, selection: Selection) -> bool:
    """Whether ``selection`` reads every row of ``desc``: no key span, key list or
    index (a partial one read whole included) narrows it."""
    if selection.index_span is not None or selection.key_list is not None:
        return False
    return selection.span(ex.context)[0] == table_span(desc.id)


def _full_scan(s: st.Statement) -> SQLError:
    """CockroachDB's error for a query that reads a whole table while the session's
    ``disallow_full_table_scans`` is on (feedkv keeps no table statistics, so every
    full scan counts as a large one)."""
    return SQLError(
        "P0003", f"query `{s.text}` contains a full table/index scan which is explicitly disallowed"
    )


def _aggregates(s: st.Select) -> bool:
    """Whether ``s``'s select list calls an aggregate (a query the vectorized path may
    answer; a point read never asks it)."""
    return any(node.find(exp.AggFunc) is not None for node in s.items)


def _read_only(ex: Execution) -> bool:
    return ex.session.variable("transaction_read_only") == "on"


def _selected(
    ex: Execution, s: st.Select, result: ResultPlan, envs: list[tuple[Any, ...]]
) -> Result:
    rows = ex.limited(result.rows(envs, ex.context), s.limit, s.offset)
    return Result(result.names, rows, f"SELECT {len(rows)}", result.types)


def _set_operation(ex: Execution, s: st.SetOperation) -> Result:
    sides = []
    for side in (s.left, s.right):
        result = query(ex, side)
        sides.append(SetResult(result.columns, result.types, result.rows))
    combined = combine(s.op, s.all, *sides)
    keys = result_order(s.op.upper(), s.order_by, combined.columns)
    rows = ex.limited(sorted_rows(combined.rows, keys, ex.context), s.limit, s.offset)
    return Result(combined.columns, rows, f"SELECT {len(rows)}", combined.types)


def _values(ex: Execution, v: st.Values) -> Result:
    """VALUES as a query: each row's values (which may name an outer query's columns,
    in a subquery), of the types all rows share (42804 otherwise, as UNION ALL)."""
    if len({len(row) for row in v.rows}) > 1:
        raise unequal_values(v.rows)
    scope = Scope(outer=ex.outer_scope)
    names = tuple(f"column{i + 1}" for i in range(len(v.rows[0])))
    sides = []
    for row in v.rows:
        values = tuple(compile_expr(node, scope)((), ex.context) for node in row)
        kinds = [static_kind(node, scope) for node in row]
        types = tuple(ColumnType(kind) if kind is not None else None for kind in kinds)
        sides.append(SetResult(names, types, [values]))
    combined = union_all("VALUES", sides)
    return Result(names, combined.rows, f"SELECT {len(combined.rows)}", combined.types)


def _cte(ex: Execution, name: st.TableName) -> Relation | None:
    """The rows ``name`` names that are no table's: a CTE's, or a ``crdb_internal``
    virtual table's (built now)."""
    if name.database is None:
        return ex.ctes.get(name.name)
    return virtual_table(name, ex.session.db.nodes, ex.is_admin)


def _is_relation(ex: Execution, name: st.TableName) -> bool:
    """Whether :func:`_cte` reads ``name`` (without building a virtual table)."""
    return name.name in ex.ctes if name.database is None else is_virtual(name)


def series(ex: Execution, source: st.Series) -> Relation:
    """The rows of ``generate_series(...)`` (:func:`series_of`) of its arguments'
    values (:func:`_function_scope`)."""
    scope = _function_scope(ex)
    args = [compile_expr(a, scope)((), ex.context) for a in source.args]
    return series_of(source, args, ex.context.interrupted)


def unnest(ex: Execution, source: st.Unnest) -> Relation:
    """The rows of ``unnest(...)`` (:func:`unnest_of`) of its arguments' values
    (:func:`_function_scope`); a NULL array's element type is its cast's, if any."""
    scope = _function_scope(ex)
    values = [compile_expr(arg, scope)((), ex.context) for arg in source.args]
    declared = [
        _declared(arg, scope) if v is None else None
        for arg, v in zip(source.args, values, strict=True)
    ]
    return unnest_of(source, values, declared)


def _declared(arg: exp.Expr, scope: Scope) -> ColumnType | None:
    """An argument's type as the tree tells it (a cast's), else unknown: a column of the
    query around (typed by its row's values, not here) included."""
    try:
        return type_of(arg, scope)
    except SQLError:
        return None


def _function_scope(ex: Execution) -> Scope:
    """What the arguments of a function that is a query's first source may name: no
    column of its own query (none is to its left), but those of the query around it,
    in a subquery (``LATERAL (SELECT ... FROM unnest(t.tags))``, a correlated
    ``(SELECT max(x) FROM unnest(t.xs) AS x)``), whose row the runner pushed."""
    return Scope(outer=ex.outer_scope)


def _statement_rows(ex: Execution, source: st.StatementSource) -> Result:
    """The rows of the statement ``source`` holds, run now in ``ex``'s transaction (a
    write in a read-only one is 25006, as the write alone would be)."""
    statement = source.statement
    writes = isinstance(statement, st.Insert | st.Update | st.Delete)
    if writes and ex.session.variable("transaction_read_only") == "on":
        what = type(statement).__name__.upper()
        if isinstance(statement, st.Insert) and statement.upsert:
            what = "UPSERT"
        raise SQLError("25006", f"cannot execute {what} in a read-only transaction")
    if ex.run_nested is None:
        raise InvariantViolation("an execution reads a statement's rows outside the executor")
    return ex.run_nested(ex, statement)


def read_source(
    ex: Execution, source: st.Source, lock: RowLocking | None = None, mvcc: bool = False
) -> tuple[TableDescriptor | Relation, list[tuple[Any, ...]], str]:
    """What a FROM or JOIN source reads: a table (read whole), a CTE's rows or a
    subquery's; its rows; the database that qualifies its columns. ``lock``: a table's
    rows are read with locks (SELECT FOR UPDATE); any other source's cannot be (0A000).
    ``mvcc``: a table's rows carry their MVCC timestamp (:mod:`feedkv.sql.mvcc_column`)."""
    if lock is not None and not _is_table(ex, source):
        raise _unlockable()
    if isinstance(source, st.ShowSource):
        relation = ex.session.show_jobs(source)
        return relation, relation.rows, ex.session.database
    if isinstance(source, st.StatementSource):
        result = _statement_rows(ex, source)
        types = result.types or (None,) * len(result.columns)
        relation = Relation.of(source.alias, result.columns, types, result.rows)
        return relation, relation.rows, ex.session.database
    if isinstance(source, st.Series | st.Unnest):
        relation = series(ex, source) if isinstance(source, st.Series) else unnest(ex, source)
        return relation, relation.rows, ex.session.database
    if isinstance(source, st.RowsFrom):
        relation = rows_from_of(
            source,
            [
                series(ex, f) if isinstance(f, st.Series) else unnest(ex, f)
                for f in source.functions
            ],
        )
        return relation, relation.rows, ex.session.database
    if isinstance(source, st.Derived):
        result = query(ex, source.query)
        if source.alias == st.ROW_ASSIGNMENT and len(source.columns) != len(result.columns):
            raise SQLError(
                "42601",
                f"number of columns ({len(source.columns)}) does not match number of values "
                f"({len(result.columns)})",
            )
        relation = Relation.of(
            source.alias, result.columns, result.types, result.rows, source.columns
        )
        return relation, relation.rows, ex.session.database
    found = _cte(ex, source)
    if found is not None:
        return found, found.rows, ex.session.database
    desc = ex.relation(source)
    if isinstance(desc, ViewDescriptor):
        view = read_view(ex, desc)
        return view, view.rows, source.database or ex.session.database
    if isinstance(desc, SequenceDescriptor):
        sequence = _read_sequence(ex, desc)
        return sequence, sequence.rows, source.database or ex.session.database
    rows = list(ex.envs(desc, table_span(desc.id), lock=lock, mvcc=mvcc))
    return with_mvcc(desc) if mvcc else desc, rows, source.database or ex.session.database


def _unlockable() -> SQLError:
    return SQLError(
        "0A000",
        "FOR UPDATE cannot lock the rows of a subquery, CTE, view or function in FROM; "
        "name the tables to lock with FOR UPDATE OF",
    )


def _is_table(ex: Execution, source: st.Source) -> bool:
    """Whether ``source`` is a stored table (no CTE's name, view or sequence)."""
    if not isinstance(source, st.TableName) or _cte(ex, source) is not None:
        return False
    return isinstance(ex.relation(source), TableDescriptor)


def read_view(ex: Execution, view: ViewDescriptor) -> Relation:
    """The rows of ``view``: its query run in the statement's transaction, its names
    resolved in the view's database (no CTE or column of the statement reading it is
    in its scope)."""
    database = catalog.get_descriptor(ex.read_source, view.database_id)
    if not isinstance(database, DatabaseDescriptor):
        raise InvariantViolation(f"view {view.name!r} has no database {view.database_id}")
    body = view_query(view.query, database.name)
    ctes, scopes = ex.ctes, ex.outer_scopes
    ex.ctes, ex.outer_scopes = {}, ()
    try:
        result = query(ex, body)
    finally:
        ex.ctes, ex.outer_scopes = ctes, scopes
    width = len(view.columns)
    rows, types = result.rows, result.types
    if len(result.columns) > width:  # NB: SELECT * of a table that gained columns since
        rows = [row[:width] for row in rows]
        types = types[:width]
    elif len(result.columns) < width:
        raise SQLError(
            "42P10",
            f'view "{view.name}" has {width} columns but its query now gives {len(result.columns)}',
        )
    return Relation.of(view.name, view.columns, types, rows)


def _read_sequence(ex: Execution, sequence: SequenceDescriptor) -> Relation:
    """A sequence's one row (:func:`feedkv.sql.sequences.as_relation`)."""
    raw = ex.read_source.get(catalog.sequence_value_key(sequence))
    last = int(raw) if raw is not None else sequence.start
    return as_relation(sequence, [(last, 0, raw is not None)])


def _select_sources(ex: Execution, s: st.Select) -> Result:
    """A SELECT over joined sources or a query's rows
    (:class:`~feedkv.sql.join.JoinPlan`), each read whole in the statement's
    transaction."""
    if s.table is None:
        raise InvariantViolation("a SELECT without FROM has no sources to read")
    if _full_scans_disallowed(ex) and any(
        _is_table(ex, t) for t in (s.table, *(j.table for j in s.joins))
    ):
        raise _full_scan(s)  # NB: each table here is read whole
    if (
        not s.locks
        and (s.group_by or _aggregates(s))
        and all(_is_table(ex, t) for t in (s.table, *(j.table for j in s.joins)))
    ):
        fast = analytic.try_select(ex, s)
        if fast is not None:
            return fast
    locks = _source_locking(ex, s)
    mvcc = names_mvcc(s)
    read: list[tuple[TableDescriptor | Relation | None, list[tuple[Any, ...]], str]]
    read = [read_source(ex, s.table, locks[0], mvcc)]
    for n, join in enumerate(s.joins):
        lock = locks[n + 1]
        if is_lateral(join.table):  # NB: read for each row to its left (JoinStep.lateral)
            if lock is not None:
                raise _unlockable()
            read.append((None, [], ex.session.database))
            continue
        first = read[0]
        looked_up = (
            _looked_up(ex, s, join, (first[0], first[1], first[2]), lock)
            if n == 0 and not mvcc and first[0] is not None
            else None
        )
        read.append(looked_up if looked_up is not None else read_source(ex, join.table, lock, mvcc))
    # NB: not kept by Session.plan, which keys a plan by one table
    plan = JoinPlan.of(
        [r[0] for r in read],
        s,
        [r[2] for r in read],
        ex.outer_scope,
        type_of,
        partial(lateral_subquery, ex),
    )
    prepare_subqueries(ex, query, s.subqueries, plan.scope, grouped_context(s, plan.result))
    joined = plan.rows([r[1] for r in read], ex.context)
    return _selected(ex, s, plan.result, joined)


def lateral_subquery(
    ex: Execution, source: st.Derived, left: Scope
) -> tuple[Relation, LateralRows]:
    """A LATERAL subquery's columns and its rows for a row of the sources to its left
    (whose names ``left`` holds): it runs as a correlated subquery does, that row
    pushed as the outer one. A first run over a row of NULLs finds its columns, and
    whether it names any of ``left``: if not, its rows are kept for every row (as
    :mod:`feedkv.sql.subquery`'s runner); if so, it runs again for each left row, a
    nested loop costing a run per row."""

    def run(row: tuple[Any, ...], context: Context) -> Result:
        context.outer.append(row)
        scopes = ex.outer_scopes
        ex.outer_scopes = (*scopes, left)
        try:
            return query(ex, source.query)
        finally:
            context.outer.pop()
            ex.outer_scopes = scopes

    hits = left.hits
    width = 1 + max((index for index, _type in left.columns.values()), default=-1)
    first = run((None,) * width, ex.context)
    shape = Relation.of(source.alias, first.columns, first.types, first.rows, source.columns)
    if left.hits == hits:
        kept = first.rows
        return shape, lambda _row, _context: kept
    return shape, lambda row, context: run(row, context).rows


def _source_locking(ex: Execution, s: st.Select) -> list[RowLocking | None]:
    """How ``s`` reads each of its sources (FROM, then each JOIN's): see
    :mod:`feedkv.sql.row_locking`. As CockroachDB and PostgreSQL, the nullable side of
    an outer join is not locked but refused (0A000)."""
    names = [source_name(s.table, s.alias), *(source_name(j.table, j.alias) for j in s.joins)]
    if not s.locks:
        return [None] * len(names)
    check_locking(s, names, _read_only(ex))
    locks = [table_locking(s, name) for name in names]
    nullable = [False] * len(names)
    for n, join in enumerate(s.joins, start=1):
        if join.side in ("left", "full"):
            nullable[n] = True
        if join.side in ("right", "full"):
            nullable[:n] = [True] * n
    for lock, name, outer in zip(locks, names, nullable, strict=True):
        if lock is not None and outer:
            raise SQLError(
                "0A000",
                f'FOR UPDATE cannot be applied to the nullable side of an outer join ("{name}")',
            )
    return locks


# A lookup join fetches the right table's rows for at most this many distinct values of
# the left side's column, one key span each; past it, it reads the table whole.
_LOOKUP_LIMIT = 256


def lookup_columns(s: st.Select, join: st.Join) -> tuple[exp.Column, exp.Column] | None:
    """``(a, b)`` of ``left [INNER | LEFT] JOIN t ON left.a = t.b`` (either way round),
    the shape a join may look ``t``'s rows up by; ``None`` for any other join."""
    on = join.on
    if join.side not in ("inner", "left") or join.using or join.natural:
        return None
    if not isinstance(on, exp.EQ) or not isinstance(join.table, st.TableName):
        return None
    a, b = on.this, on.expression
    if not isinstance(a, exp.Column) or not isinstance(b, exp.Column):
        return None
    right_name = join.alias or join.table.name
    left_name = s.alias or (s.table.name if isinstance(s.table, st.TableName) else "")
    if a.table == right_name and b.table == left_name:
        a, b = b, a
    if a.table != left_name or b.table != right_name or not left_name or left_name == right_name:
        return None
    return a, b


def _looked_up(
    ex: Execution,
    s: st.Select,
    join: st.Join,
    left: tuple[TableDescriptor | Relation, list[tuple[Any, ...]], str],
    lock: RowLocking | None,
) -> tuple[TableDescriptor, list[tuple[Any, ...]], str] | None:
    """For ``left [INNER | LEFT] JOIN t ON left.a = t.b`` where ``b`` leads ``t``'s
    primary key or one of its indexes: only the rows of ``t`` whose ``b`` is one of
    ``left``'s values of ``a`` (none other can match, so the join gives the same rows,
    and the spans read cover every row it depends on). ``None``: read ``t`` whole."""
    columns = lookup_columns(s, join)
    if columns is None or not isinstance(join.table, st.TableName):
        return None
    if _cte(ex, join.table) is not None:
        return None
    a, b = columns
    desc = ex.relation(join.table)
    if not isinstance(desc, TableDescriptor):
        return None
    column = desc.find_column(b.name)
    if column is None:
        return None
    index = None
    if desc.primary_key[0] != column.id:
        index = next((i for i in desc.readable_indexes if i.column_ids[0] == column.id), None)
        if index is None:
            return None
    source, rows, _database = left
    names = [c.name for c in source.columns]
    if names.count(a.name) != 1:
        return None
    position = names.index(a.name)
    values = {group_key(row[position]) for row in rows if row[position] is not None}
    if len(values) > _LOOKUP_LIMIT:
        return None
    keys = []
    for row in rows:
        raw = row[position]
        if raw is None:
            continue
        try:
            value = coerce(raw, column.type, None)
        except SQLError:
            return None
        if type(value) is not type(raw) or value != raw:
            return None  # NB: a value the column's type changes says nothing exact
        keys.append(value)
    found: dict[bytes, tuple[Any, ...]] = {}
    ids = [c.id for c in desc.columns]
    for value in {group_key(k): k for k in keys}.values():
        if index is None:
            spans = [row_span(desc, [value])]
        else:
            prefix = values_prefix(desc, index, [value])
            entries = ex.read_source.scan(prefix, prefix_end(prefix))
            spans = [row_span(desc, primary_key_of(desc, kv.value)) for kv in entries]
        for span in spans:
            for fetched, _pairs in ex.rows(desc, span, lock=lock):
                key = row_prefix(desc, [fetched[i] for i in desc.primary_key])
                found[key] = tuple(fetched[i] for i in ids)
    return desc, [found[key] for key in sorted(found)], join.table.database or ex.session.database


def _select_no_table(ex: Execution, s: st.Select) -> Result:
    """SELECT without FROM: over one row of no columns (``SELECT count(*)`` is 1)."""
    scope = Scope(outer=ex.outer_scope)
    result = ResultPlan.of([], scope, s)
    prepare_subqueries(ex, query, s.subqueries, scope, grouped_context(s, result))
    envs: list[tuple[Any, ...]] = [()]
    if s.where is not None:
        verdict = compile_expr(condition(s.where, scope), scope)((), ex.context)
        envs = envs if holds(verdict) else []
    return _selected(ex, s, result, envs)


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.Select: select,
    st.SetOperation: query,
    st.Values: query,
}
