"""The statements about rows: SELECT, INSERT (and UPSERT), UPDATE and DELETE, each
run against its plan (:mod:`feedkv.sql.plan`) in the statement's
:class:`~feedkv.sql.execution.Execution`.

A statement that commits on its own may write without reading first: an INSERT of a
new row checks at commit that its key is absent, an UPDATE of one whole row by its key
that it is present (the session turns a failed check into the statement's answer).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from sqlglot import exp

from feedkv.errors import (
    ConditionFailedError,
    FeedKVError,
    InvariantViolation,
    SQLError,
)
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.aggregate import group_key
from feedkv.sql.descriptor import (
    Column,
    TableDescriptor,
)
from feedkv.sql.execution import Execution, Result
from feedkv.sql.expr import (
    Compiled,
    Scope,
    compile_expr,
    condition,
    static_kind,
    subquery_key,
)
from feedkv.sql.join import JoinPlan
from feedkv.sql.plan import (
    DeletePlan,
    InsertPlan,
    Projections,
    ResultPlan,
    SelectPlan,
    UpdatePlan,
    check_returning,
    holds,
    sorted_rows,
)
from feedkv.sql.relation import Relation
from feedkv.sql.row_codec import (
    row_kvs,
    row_span,
    table_span,
)
from feedkv.sql.set_ops import SetResult, combine, result_order, union_all
from feedkv.sql.types import (
    ColumnType,
    coerce,
    logical_decimal,
    timestamp_of,
)

__all__ = ["HANDLERS", "duplicate_key"]


def select(ex: Execution, s: st.Select) -> Result:
    if s.as_of is not None:
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
    ex.ctes = dict(outer)
    try:
        for cte in q.ctes:
            result = query(ex, cte.query)
            ex.ctes[cte.name] = Relation.of(
                cte.name, result.columns, result.types, result.rows, cte.columns
            )
        return _query(ex, q)
    finally:
        ex.ctes = outer


def _query(ex: Execution, q: st.Query) -> Result:
    if isinstance(q, st.SetOperation):
        return _set_operation(ex, q)
    if isinstance(q, st.Values):
        return _values(ex, q)
    if q.table is None:
        return _select_no_table(ex, q)
    if q.joins or not isinstance(q.table, st.TableName) or _cte(ex, q.table) is not None:
        return _select_sources(ex, q)
    desc = ex.table(q.table)
    plan = ex.plan(q, desc, partial(SelectPlan.of, outer=ex.outer_scope))
    _prepare_subqueries(ex, q.subqueries, plan.scope, _grouped_context(q, plan.result))
    envs = [env for _row, _pairs, env in ex.matching(desc, plan.selection)]
    return _selected(ex, q, plan.result, envs)


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
        raise SQLError("42601", "VALUES lists must all be the same length")
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
    return ex.ctes.get(name.name) if name.database is None else None


def _prepare_subqueries(
    ex: Execution,
    subqueries: Sequence[tuple[exp.Expr, st.Query]],
    scope: Scope,
    grouped: dict[str, frozenset[int]] | None = None,
) -> None:
    """Give each of a statement's ``subqueries`` a runner (:class:`_Subquery`), and
    run each once now: it is planned (its errors come whatever the rows), and one that
    turns out uncorrelated keeps its rows for the whole statement. ``grouped``: those
    evaluated over grouped rows, with the places of ``scope`` they may name (see
    :func:`_grouped_context`)."""
    width = 1 + max((index for index, _type in scope.columns.values()), default=-1)
    for node, inner in subqueries:
        key = subquery_key(node)
        runner = _Subquery(ex, node, inner, scope, (grouped or {}).get(key))
        ex.context.subqueries[key] = runner
        runner((None,) * width)


class _Subquery:
    """A subquery's rows for a row of the query around it. The first run tells whether
    it is correlated (it found a name in that query's scope): if not, its rows are
    kept; if so, it runs again for every row, as a nested loop: the subquery's cost
    times the outer query's rows. Evaluated over grouped rows (``determined`` is not
    None), it may name only the columns the grouping determines (42803, as
    PostgreSQL): a grouped row holds its group's first row's values."""

    def __init__(
        self,
        ex: Execution,
        node: exp.Expr,
        inner: st.Query,
        scope: Scope,
        determined: frozenset[int] | None,
    ) -> None:
        self.ex, self.node, self.inner, self.scope = ex, node, inner, scope
        self.determined = determined
        self.kept: list[tuple[Any, ...]] | None = None
        self.probed = False

    def __call__(self, outer: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self.kept is not None:
            return self.kept
        ex, scope = self.ex, self.scope
        hits = scope.hits
        if not self.probed:
            scope.referenced = set()
        ex.context.outer.append(outer)
        ex.outer_scopes.append(scope)
        try:
            rows = _subquery_rows(ex, self.node, self.inner)
        finally:
            ex.context.outer.pop()
            ex.outer_scopes.pop()
        if not self.probed:
            self.probed = True
            if scope.hits == hits:
                self.kept = rows
            elif self.determined is not None:
                self._check_grouped(scope.referenced - self.determined)
        return rows

    def _check_grouped(self, ungrouped: set[int]) -> None:
        if not ungrouped:
            return
        index = min(ungrouped)
        names = [f"{q}.{n}" for (q, n), (i, _t) in self.scope.columns.items() if i == index and q]
        name = names[0] if names else "?"
        raise SQLError("42803", f'subquery uses ungrouped column "{name}" from outer query')


def _grouped_context(s: st.Select, result: ResultPlan) -> dict[str, frozenset[int]]:
    """The subqueries a grouped SELECT evaluates over its grouped rows (in its list,
    HAVING, ORDER BY or DISTINCT ON), each with the table columns the grouping
    determines (those a correlated one may name)."""
    if result.grouping is None:
        return {}
    nodes = [*s.items, *(n for n, _ in s.order_by), *s.distinct_on]
    nodes += [s.having] if s.having is not None else []
    determined = result.grouping.determined
    return {
        subquery_key(found): determined
        for node in nodes
        for found in node.find_all(exp.Subquery, exp.Exists)
    }


def _subquery_rows(ex: Execution, node: exp.Expr, inner: st.Query) -> list[tuple[Any, ...]]:
    result = query(ex, inner)
    if not isinstance(node, exp.Exists) and len(result.columns) != 1:
        raise SQLError("42601", f"subquery must return only one column, not {len(result.columns)}")
    return result.rows


def _source(
    ex: Execution, source: st.Source
) -> tuple[TableDescriptor | Relation, list[tuple[Any, ...]], str]:
    """What a FROM or JOIN source reads: a table (read whole), a CTE's rows or a
    subquery's; its rows; the database that qualifies its columns."""
    if isinstance(source, st.Derived):
        result = query(ex, source.query)
        relation = Relation.of(
            source.alias, result.columns, result.types, result.rows, source.columns
        )
        return relation, relation.rows, ex.session.database
    found = _cte(ex, source)
    if found is not None:
        return found, found.rows, ex.session.database
    desc = ex.table(source)
    rows = [
        tuple(row[c.id] for c in desc.columns) for row, _pairs in ex.rows(desc, table_span(desc.id))
    ]
    return desc, rows, source.database or ex.session.database


def _select_sources(ex: Execution, s: st.Select) -> Result:
    """A SELECT over joined sources or a query's rows
    (:class:`~feedkv.sql.join.JoinPlan`), each read whole in the statement's
    transaction."""
    if s.table is None:
        raise InvariantViolation("a SELECT without FROM has no sources to read")
    read = [_source(ex, source) for source in [s.table, *(join.table for join in s.joins)]]
    # NB: not kept by Session.plan, which keys a plan by one table
    plan = JoinPlan.of([r[0] for r in read], s, [r[2] for r in read], ex.outer_scope)
    _prepare_subqueries(ex, s.subqueries, plan.scope, _grouped_context(s, plan.result))
    joined = plan.rows([r[1] for r in read], ex.context)
    return _selected(ex, s, plan.result, joined)


def _select_no_table(ex: Execution, s: st.Select) -> Result:
    """SELECT without FROM: over one row of no columns (``SELECT count(*)`` is 1)."""
    scope = Scope(outer=ex.outer_scope)
    result = ResultPlan.of([], scope, s)
    _prepare_subqueries(ex, s.subqueries, scope, _grouped_context(s, result))
    envs: list[tuple[Any, ...]] = [()]
    if s.where is not None:
        verdict = compile_expr(condition(s.where, scope), scope)((), ex.context)
        envs = envs if holds(verdict) else []
    return _selected(ex, s, result, envs)


def insert(ex: Execution, s: st.Insert) -> Result:
    desc = ex.table(s.table)
    txn = ex.write_txn
    plan = ex.plan(s, desc, InsertPlan.of)
    targets, sets, returning, filled = plan.targets, plan.sets, plan.returning, plan.filled
    assigned = plan.assigned
    proposed: Iterable[Sequence[Any]]
    if s.query is not None:
        # NB: read whole before the first write, so the rows it inserts are not read
        selected = query(ex, s.query)
        targets, filled = plan.targets_for(len(selected.columns))
        proposed = selected.rows
    else:
        proposed = ([make((), ex.context) for make in compiled] for compiled in plan.rows)
    out_rows = []
    count = 0
    touched: set[bytes] = set()  # rows this statement wrote, for ON CONFLICT DO UPDATE
    for values in proposed:
        row: dict[int, Any] = {}
        for column, value in zip(targets, values, strict=True):
            row[column.id] = coerce(value, column.type, column.name)
        for column, make in filled:
            row[column.id] = (
                coerce(make((), ex.context), column.type, column.name) if make else None
            )
        _check_not_null(desc, row)
        kvs = row_kvs(desc, row)
        first_key = next(iter(kvs))
        if s.on_conflict == "update" or s.upsert:
            if first_key in touched:
                raise SQLError(
                    "21000",
                    "UPSERT or INSERT...ON CONFLICT command cannot affect row a second time: "
                    "two proposed rows have the same primary key",
                )
            touched.add(first_key)
        if s.on_conflict is None and not s.upsert and _insert_blind(ex, desc, row, kvs):
            final = row
        elif txn.get(first_key) is None:
            for key, encoded in kvs.items():
                if encoded is not None:
                    txn.put(key, encoded)
            final = row
        elif s.on_conflict is None and not s.upsert:
            raise duplicate_key(desc, row)
        elif s.on_conflict == "nothing":
            continue
        else:
            old, pairs = _read_row(ex, desc, row)
            both = tuple(old[c.id] for c in desc.columns) + tuple(row[c.id] for c in desc.columns)
            if plan.where is not None and not holds(plan.where(both, ex.context)):
                continue  # the existing row stays as it is, and is not counted
            final = dict(old)
            for column, value in sets:
                final[column.id] = coerce(value(both, ex.context), column.type, column.name)
            _check_not_null(desc, final)
            if any(final[i] != old[i] for i in desc.primary_key):
                touched.add(_move_row(ex, desc, pairs, final))
            else:
                _write_changes(ex, desc, pairs, final, assigned)
        count += 1
        if returning is not None:
            env = tuple(final[c.id] for c in desc.columns)
            out_rows.append(tuple(f(env, ex.context) for f in returning[1]))
    return _result(returning, out_rows, f"INSERT 0 {count}")


def _insert_blind(
    ex: Execution, desc: TableDescriptor, row: dict[int, Any], kvs: dict[bytes, bytes | None]
) -> bool:
    """Write a new row without reading first, when the statement commits on its own:
    the row's first key must be absent at commit (:meth:`Txn.put_if_absent`), and the
    session turns a failed check into the duplicate-key error. ``False``: read first
    (an explicit transaction reports a duplicate at the statement, as PostgreSQL)."""
    first_key, first = next(iter(kvs.items()))
    if not ex.autocommit or first is None:
        return False
    assert ex.txn is not None
    try:
        ex.txn.put_if_absent(first_key, first)
    except ConditionFailedError:
        raise duplicate_key(desc, row) from None
    for key, encoded in kvs.items():
        if key != first_key and encoded is not None:
            ex.txn.put(key, encoded)
    ex.inserted[first_key] = (desc, row)
    return True


def _read_row(
    ex: Execution, desc: TableDescriptor, row: dict[int, Any]
) -> tuple[dict[int, Any], dict[bytes, bytes]]:
    span = row_span(desc, [row[i] for i in desc.primary_key])
    for found in ex.rows(desc, span):
        return found
    raise SQLError("XX000", "a row vanished while it was being updated")


def _write_changes(
    ex: Execution,
    desc: TableDescriptor,
    pairs: dict[bytes, bytes],
    row: dict[int, Any],
    assigned: frozenset[int],
) -> None:
    """Write the families of ``row`` that have an ``assigned`` column or whose value
    differs from ``pairs`` (the row's KV pairs as read), deleting pairs that no longer
    exist. An assignment is a write even when it changes nothing, as in CockroachDB
    and PostgreSQL: it makes a new version, which a changefeed emits."""
    txn = ex.write_txn
    for family, (key, value) in zip(desc.families, row_kvs(desc, row).items(), strict=True):
        old = pairs.get(key)
        if value is None:
            if old is not None:
                txn.delete(key)
        elif value != old or not assigned.isdisjoint(family.column_ids):
            txn.put(key, value)


def update(ex: Execution, s: st.Update) -> Result:
    if s.joins:
        return _update_joined(ex, s)
    desc = ex.table(s.table)
    plan = ex.plan(s, desc, UpdatePlan.of)
    if plan.blind is not None and ex.autocommit:
        key = plan.blind(ex.context)
        pair = _whole_row(ex, desc, plan, key) if key is not None else None
        if pair is not None:
            # Written without reading: the row must exist at commit, and when it
            # does not the session reports UPDATE 0 (nothing was written).
            ex.write_txn.put_if_present(*pair)
            ex.missing[pair[0]] = "UPDATE 0"
            return Result(tag="UPDATE 1")
    _prepare_subqueries(ex, s.subqueries, plan.scope)
    sets, returning, assigned = plan.sets, plan.returning, plan.assigned
    key_ids = set(desc.primary_key)
    out_rows = []
    # NB: every new row (and RETURNING's) is made before the first write, so that
    # a subquery reading the table sees it as the statement found it
    changes = []
    for old, pairs, env in ex.chosen(desc, plan.selection, plan.order, s.limit):
        new = _assigned(ex, desc, old, env, sets)
        changes.append((old, pairs, new))
        if returning is not None:
            new_env = tuple(new[c.id] for c in desc.columns)
            out_rows.append(tuple(f(new_env, ex.context) for f in returning[1]))
    for old, pairs, new in changes:
        if any(new[i] != old[i] for i in key_ids):
            _move_row(ex, desc, pairs, new)
        else:
            _write_changes(ex, desc, pairs, new, assigned)
    return _result(returning, out_rows, f"UPDATE {len(changes)}")


def _assigned(
    ex: Execution,
    desc: TableDescriptor,
    old: dict[int, Any],
    env: tuple[Any, ...],
    sets: Sequence[tuple[Column, Compiled]],
) -> dict[int, Any]:
    """The row ``old`` with SET's values, computed over ``env``."""
    new = dict(old)
    for column, value in sets:
        new[column.id] = coerce(value(env, ex.context), column.type, column.name)
    _check_not_null(desc, new)
    return new


def _update_joined(ex: Execution, s: st.Update) -> Result:
    """UPDATE ... FROM: each row of the table that a joined row pairs with (kept by
    WHERE) is written once, with SET computed over the first such joined row (as in
    PostgreSQL, which one is not defined when several pair with it)."""
    desc, plan, chosen = _joined_targets(ex, s, s.returning)
    sets = [(desc.column(name), compile_expr(e, plan.scope)) for name, e in s.sets]
    assigned = frozenset(column.id for column, _ in sets)
    out_rows = []
    width = len(desc.columns)
    changes = []  # NB: all made before the first write, as in update()
    for old, pairs, env in chosen:
        new = _assigned(ex, desc, old, env, sets)
        changes.append((old, pairs, new))
        if s.returning is not None:
            after = tuple(new[c.id] for c in desc.columns) + env[width:]
            out_rows.append(tuple(f(after, ex.context) for f in plan.result.projections))
    for old, pairs, new in changes:
        if any(new[i] != old[i] for i in desc.primary_key):
            _move_row(ex, desc, pairs, new)
        else:
            _write_changes(ex, desc, pairs, new, assigned)
    return _result(_joined_returning(s, plan), out_rows, f"UPDATE {len(chosen)}")


def _joined_returning(s: st.Update | st.Delete, plan: JoinPlan) -> Projections | None:
    return (plan.result.names, plan.result.projections) if s.returning is not None else None


Targets = list[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]


def _joined_targets(
    ex: Execution, s: st.Update | st.Delete, returning: tuple[exp.Expr, ...] | None
) -> tuple[TableDescriptor, JoinPlan, Targets]:
    """The rows of ``s``'s table that its joins pair with a row WHERE keeps: each once,
    in key order, with its KV pairs and the first joined row it is in. The table and
    the sources are read whole; the plan's result is RETURNING's, over joined rows."""
    if returning is not None:
        check_returning(returning)
    desc = ex.table(s.table)
    targets = list(ex.rows(desc, table_span(desc.id)))
    envs = [tuple(row[c.id] for c in desc.columns) for row, _pairs in targets]
    read = [_source(ex, join.table) for join in s.joins]
    items = returning or (exp.Star(),)
    select = st.Select(s.text, s.table, s.alias, items, s.where, joins=s.joins)
    database = s.table.database or ex.session.database
    plan = JoinPlan.of([desc, *(r[0] for r in read)], select, [database, *(r[2] for r in read)])
    _prepare_subqueries(ex, s.subqueries, plan.scope)
    primary = [desc.columns.index(c) for c in desc.key_columns]
    position: dict[tuple[Any, ...], int] = {}
    for i, env in enumerate(envs):
        position[tuple(group_key(env[j]) for j in primary)] = i
    first: dict[int, tuple[Any, ...]] = {}
    for joined in plan.rows([envs, *(r[1] for r in read)], ex.context):
        first.setdefault(position[tuple(group_key(joined[j]) for j in primary)], joined)
    chosen = [(targets[i][0], targets[i][1], joined) for i, joined in sorted(first.items())]
    return desc, plan, chosen


def _whole_row(
    ex: Execution, desc: TableDescriptor, plan: UpdatePlan, key: list[Any]
) -> tuple[bytes, bytes] | None:
    """The KV pair of the row with primary key ``key`` as a blind UPDATE rewrites it;
    ``None`` when making it fails: the statement then reads the row, and the error
    comes only if there is a row (a missing row is ``UPDATE 0``, whatever the SET)."""
    row = dict(zip(desc.primary_key, key, strict=True))
    try:
        for column, value in plan.sets:
            row[column.id] = coerce(value((), ex.context), column.type, column.name)
        _check_not_null(desc, row)
        ((first_key, encoded),) = row_kvs(desc, row).items()
    except (FeedKVError, decimal.DecimalException):  # NB: raised again on the read path
        return None
    if encoded is None:
        raise InvariantViolation(f"the primary family of {desc.name!r} encoded no value")
    return first_key, encoded


def _move_row(
    ex: Execution, desc: TableDescriptor, pairs: Iterable[bytes], new: dict[int, Any]
) -> bytes:
    """Replace the row at ``pairs`` by ``new``, whose primary key differs: 23505 if
    that key holds a row. Returns the new row's first key."""
    txn = ex.write_txn
    for key in pairs:
        txn.delete(key)
    new_pairs = row_kvs(desc, new)
    first = next(iter(new_pairs))
    if txn.get(first) is not None:
        raise duplicate_key(desc, new)
    for key, encoded in new_pairs.items():
        if encoded is not None:
            txn.put(key, encoded)
    return first


def delete(ex: Execution, s: st.Delete) -> Result:
    if s.joins:
        return _delete_joined(ex, s)
    desc = ex.table(s.table)
    plan = ex.plan(s, desc, DeletePlan.of)
    _prepare_subqueries(ex, s.subqueries, plan.scope)
    returning = plan.returning
    chosen = ex.chosen(desc, plan.selection, plan.order, s.limit)
    out_rows = []
    if returning is not None:  # NB: before the first delete, as in update()
        out_rows = [tuple(f(env, ex.context) for f in returning[1]) for _o, _p, env in chosen]
    txn = ex.write_txn
    for _old, pairs, _env in chosen:
        for key in pairs:
            txn.delete(key)
    return _result(returning, out_rows, f"DELETE {len(chosen)}")


def _delete_joined(ex: Execution, s: st.Delete) -> Result:
    """DELETE ... USING: each row of the table that a joined row pairs with (kept by
    WHERE) is deleted once."""
    _desc, plan, chosen = _joined_targets(ex, s, s.returning)
    out_rows = []
    if s.returning is not None:  # NB: before the first delete, as in update()
        projections = plan.result.projections
        out_rows = [tuple(f(env, ex.context) for f in projections) for _o, _p, env in chosen]
    txn = ex.write_txn
    for _old, pairs, _env in chosen:
        for key in pairs:
            txn.delete(key)
    return _result(_joined_returning(s, plan), out_rows, f"DELETE {len(chosen)}")


def _result(returning: Projections | None, rows: list[tuple[Any, ...]], tag: str) -> Result:
    """A write's result: its RETURNING rows if it has the clause, else its tag alone."""
    if returning is None:
        return Result(tag=tag)
    return Result(returning[0], rows, tag)


def _check_not_null(desc: TableDescriptor, row: dict[int, Any]) -> None:
    for column in desc.columns:
        if row.get(column.id) is None and not column.nullable:
            raise SQLError(
                "23502", f'null value in column "{column.name}" violates not-null constraint'
            )


def duplicate_key(desc: TableDescriptor, row: dict[int, Any]) -> SQLError:
    names = ", ".join(c.name for c in desc.key_columns)
    values = ", ".join(str(row[i]) for i in desc.primary_key)
    return SQLError(
        "23505",
        f'duplicate key value violates unique constraint "{desc.name}_pkey": '
        f"Key ({names})=({values}) already exists.",
    )


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.Select: select,
    st.SetOperation: query,
    st.Values: query,
    st.Insert: insert,
    st.Update: update,
    st.Delete: delete,
}
