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
from feedkv.sql.descriptor import (
    TableDescriptor,
)
from feedkv.sql.execution import Execution, Result
from feedkv.sql.expr import (
    Scope,
    compile_expr,
    condition,
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
    holds,
)
from feedkv.sql.row_codec import (
    row_kvs,
    row_span,
    table_span,
)
from feedkv.sql.types import (
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
    for node, inner in s.subqueries:
        ex.context.subqueries[subquery_key(node)] = _subquery(ex, node, inner)
    if s.table is None:
        return _select_no_table(ex, s)
    if s.joins:
        return _select_joined(ex, s, s.table)
    desc = ex.table(s.table)
    plan = ex.plan(s, desc, SelectPlan.of)
    envs = [env for _row, _pairs, env in ex.matching(desc, plan.selection)]
    rows = ex.limited(plan.result.rows(envs, ex.context), s.limit, s.offset)
    return Result(plan.result.names, rows, f"SELECT {len(rows)}")


def _subquery(ex: Execution, node: exp.Expr, inner: st.Select) -> list[tuple[Any, ...]]:
    """The rows of a subquery (uncorrelated: it runs once, before the statement reads its
    own rows, in the same transaction)."""
    try:
        result = select(ex, inner)
    except SQLError as exc:
        if exc.code not in ("42703", "42P01"):
            raise
        raise SQLError(
            exc.code,
            f"{exc.message} (a subquery cannot name the outer query's columns yet: "
            "correlated subqueries are not supported)",
        ) from None
    if not isinstance(node, exp.Exists) and len(result.columns) != 1:
        raise SQLError("42601", f"subquery must return only one column, not {len(result.columns)}")
    return result.rows


def _select_joined(ex: Execution, s: st.Select, first: st.TableName) -> Result:
    """A SELECT over joined tables (:class:`~feedkv.sql.join.JoinPlan`), ``first`` and
    those of ``s.joins``, each read whole in the statement's transaction."""
    names = [first, *(join.table for join in s.joins)]
    descs = [ex.table(name) for name in names]
    databases = [name.database or ex.session.database for name in names]
    # NB: not kept by Session.plan, which keys a plan by one table
    plan = JoinPlan.of(descs, s, databases)
    tables = [
        [
            tuple(row[c.id] for c in desc.columns)
            for row, _pairs in ex.rows(desc, table_span(desc.id))
        ]
        for desc in descs
    ]
    joined = plan.rows(tables, ex.context)
    rows = ex.limited(plan.result.rows(joined, ex.context), s.limit, s.offset)
    return Result(plan.result.names, rows, f"SELECT {len(rows)}")


def _select_no_table(ex: Execution, s: st.Select) -> Result:
    """SELECT without FROM: over one row of no columns (``SELECT count(*)`` is 1)."""
    scope = Scope()
    envs: list[tuple[Any, ...]] = [()]
    if s.where is not None:
        verdict = compile_expr(condition(s.where, scope), scope)((), ex.context)
        envs = envs if holds(verdict) else []
    result = ResultPlan.of([], scope, s)
    rows = ex.limited(result.rows(envs, ex.context), s.limit, s.offset)
    return Result(result.names, rows, f"SELECT {len(rows)}")


def insert(ex: Execution, s: st.Insert) -> Result:
    desc = ex.table(s.table, "INSERT")
    txn = ex.write_txn
    plan = ex.plan(s, desc, InsertPlan.of)
    targets, sets, returning, filled = plan.targets, plan.sets, plan.returning, plan.filled
    assigned = plan.assigned
    proposed: Iterable[Sequence[Any]]
    if s.query is not None:
        # NB: read whole before the first write, so the rows it inserts are not read
        selected = select(ex, s.query)
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
    desc = ex.table(s.table, "UPDATE")
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
    sets, returning, assigned = plan.sets, plan.returning, plan.assigned
    key_ids = set(desc.primary_key)
    out_rows = []
    count = 0
    for old, pairs, env in ex.chosen(desc, plan.selection, plan.order, s.limit):
        new = dict(old)
        for column, value in sets:
            new[column.id] = coerce(value(env, ex.context), column.type, column.name)
        _check_not_null(desc, new)
        if any(new[i] != old[i] for i in key_ids):
            _move_row(ex, desc, pairs, new)
        else:
            _write_changes(ex, desc, pairs, new, assigned)
        count += 1
        if returning is not None:
            new_env = tuple(new[c.id] for c in desc.columns)
            out_rows.append(tuple(f(new_env, ex.context) for f in returning[1]))
    return _result(returning, out_rows, f"UPDATE {count}")


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
    desc = ex.table(s.table, "DELETE")
    plan = ex.plan(s, desc, DeletePlan.of)
    returning = plan.returning
    out_rows = []
    count = 0
    txn = ex.write_txn
    for _old, pairs, env in ex.chosen(desc, plan.selection, plan.order, s.limit):
        for key in pairs:
            txn.delete(key)
        count += 1
        if returning is not None:
            out_rows.append(tuple(f(env, ex.context) for f in returning[1]))
    return _result(returning, out_rows, f"DELETE {count}")


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
    st.Insert: insert,
    st.Update: update,
    st.Delete: delete,
}
