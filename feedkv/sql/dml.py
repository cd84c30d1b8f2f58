"""The statements that write rows: INSERT (and UPSERT), UPDATE and DELETE, each
run against its plan (:mod:`feedkv.sql.plan`) in the statement's
:class:`~feedkv.sql.execution.Execution`.

A statement that commits on its own may write without reading first: an INSERT of a
new row checks at commit that its key is absent, an UPDATE of one whole row by its key
that it is present (the session turns a failed check into the statement's answer). An
UPSERT that writes whole rows (``InsertPlan.blind``) never reads, in any transaction:
the row it writes is the same whether or not one held the key.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from sqlglot import exp

from feedkv.errors import (
    ConditionFailedError,
    FeedKVError,
    InvariantViolation,
    SQLError,
)
from feedkv.kv.txn import Txn
from feedkv.sql import statements as st
from feedkv.sql.aggregate import group_key
from feedkv.sql.columnar import note_written
from feedkv.sql.computed import fill_computed, refuse_writes
from feedkv.sql.constraints import duplicate_key, row_written, rows_written, unique_conflict
from feedkv.sql.descriptor import (
    ROWID,
    Column,
    TableDescriptor,
)
from feedkv.sql.execution import Execution, Result, tagged
from feedkv.sql.expr import (
    Compiled,
    Scope,
    compile_expr,
)
from feedkv.sql.join import JoinPlan, LateralRows, is_lateral
from feedkv.sql.mvcc_column import names_mvcc, target_column, with_mvcc
from feedkv.sql.ordering import sorted_rows
from feedkv.sql.plan import (
    DeletePlan,
    InsertPlan,
    Projections,
    UpdatePlan,
    check_assigned,
    check_returning,
    constraint_target,
    holds,
)
from feedkv.sql.query import (
    check_full_scan,
    lateral_subquery,
    query,
    read_source,
    refuse_full_scans,
)
from feedkv.sql.relation import Relation
from feedkv.sql.row_codec import (
    decode_row_key,
    row_kvs,
    row_span,
    table_span,
)
from feedkv.sql.subquery import prepare_subqueries
from feedkv.sql.types import (
    assign,
    coerce,
)

__all__ = ["HANDLERS", "duplicate_key", "duplicate_key_at"]


def insert(ex: Execution, s: st.Insert) -> Result:
    desc = ex.table(s.table, "INSERT")
    if s.conflict_constraint is not None:
        s = replace(s, conflict_target=constraint_target(desc, s.conflict_constraint))
    for privilege in _privileges_beyond_insert(s):
        ex.require_privilege(desc, privilege)
    plan = ex.plan(s, desc, InsertPlan.of)
    if plan.single and ex.autocommit and not desc.constrained:
        return _insert_one(ex, desc, plan)
    txn = ex.write_txn
    targets, returning, filled = plan.targets, plan.returning, plan.filled
    assigned = plan.assigned
    proposed: Iterable[Sequence[Any]]
    if s.query is not None:
        # NB: read whole before the first write, so the rows it inserts are not read
        selected = query(ex, s.query)
        targets, filled = plan.targets_for(len(selected.columns))
        # NB: zip, not strict: a query whose tree does not tell its types has none
        for column, ctype in zip(targets, selected.types, strict=False):
            check_assigned(ctype.kind if ctype is not None else None, column)
        proposed = selected.rows
    else:
        # NB: the subqueries run (and keep their rows) before the first row is written
        if s.subqueries:
            prepare_subqueries(ex, query, s.subqueries, Scope())
        proposed = ([make((), ex.context) for make in compiled] for compiled in plan.rows)
    if s.conflict_subqueries:
        # NB: before the first write too: an uncorrelated one sees the table as it was
        prepare_subqueries(ex, query, s.conflict_subqueries, plan.conflict_scope or Scope())
    out_rows = []
    count = 0
    touched: set[bytes] = set()  # rows this statement wrote, for ON CONFLICT DO UPDATE
    # NB: a statement alone writes blind whatever its key (see _insert_blind)
    generated = not ex.autocommit and _key_generated(desc, targets)
    for values in proposed:
        row = _proposed_row(ex, desc, targets, values, filled)
        kvs = row_kvs(desc, row)
        first_key = next(iter(kvs))
        proposed_now = False  # whether this row's key went into touched just now
        if s.on_conflict == "update" or s.upsert:
            # NB: as CockroachDB's UPSERT into a table without secondary indexes (its
            # fast path), a later proposed row with the same key overwrites an earlier
            # one, each counted; with them, or ON CONFLICT DO UPDATE, it is refused
            if first_key in touched and not (s.upsert and not desc.indexes):
                raise SQLError(
                    "21000",
                    "UPSERT or INSERT...ON CONFLICT command cannot affect row a second time: "
                    "two proposed rows have the same primary key",
                )
            touched.add(first_key)
            proposed_now = True
        elsewhere = None  # the key of a row holding this one's unique values
        if s.on_conflict is not None and desc.indexes and not s.upsert:
            elsewhere = unique_conflict(ex, desc, row, plan.conflict_index)
            if elsewhere is not None and plan.conflict_index is None and s.conflict_target:
                elsewhere = None  # ON CONFLICT (pk): another unique index's clash is 23505
        if elsewhere is not None and s.on_conflict == "nothing":
            continue
        final: dict[int, Any] | None
        if plan.blind and _write_blind(txn, kvs):
            final = row
        elif elsewhere is not None:
            old, pairs = _read_row(ex, desc, dict(zip(desc.primary_key, elsewhere, strict=True)))
            existing = next(iter(pairs))
            # NB: the row found may be the one of this row's own key (put in touched
            # above): that is its first update, not a second
            if existing in touched and not (proposed_now and existing == first_key):
                raise SQLError(
                    "21000",
                    "UPSERT or INSERT...ON CONFLICT command cannot affect row a second time: "
                    "two proposed rows have the same unique values",
                )
            touched.add(existing)
            final = _conflict_update(ex, desc, plan, old, pairs, row, assigned, touched)
            if final is None:
                continue
        elif (
            s.on_conflict is None
            and not s.upsert
            and _insert_blind(ex, desc, row, kvs, generated=generated)
        ):
            final = row
        elif (
            (s.on_conflict == "update" or s.upsert)
            and plan.conflict_index is None
            and ex.locks_rows()
        ):
            # NB: the row this one would update, read with a lock as UPDATE reads its
            # rows: another writer of it waits for this transaction (no row, no lock)
            found = ex.row_for_update(desc, [row[i] for i in desc.primary_key])
            if found is None:
                _insert_row(txn, ex, desc, kvs, row)
                final = row
            else:
                final = _conflict_update(ex, desc, plan, *found, row, assigned, touched)
                if final is None:
                    continue
        elif txn.get(first_key) is None:
            _insert_row(txn, ex, desc, kvs, row)
            final = row
        elif (s.on_conflict is None and not s.upsert) or plan.conflict_index is not None:
            raise duplicate_key(desc, row)  # NB: ON CONFLICT (u) lets only u's clash pass
        elif s.on_conflict == "nothing":
            continue
        else:
            old, pairs = _read_row(ex, desc, row)
            final = _conflict_update(ex, desc, plan, old, pairs, row, assigned, touched)
            if final is None:
                continue  # the existing row stays as it is, and is not counted
        count += 1
        if returning is not None:
            env = tuple(final[c.id] for c in desc.columns)
            out_rows.append(tuple(f(env, ex.context) for f in returning[1]))
    note_written(ex, desc, count)
    return _result(returning, out_rows, f"INSERT 0 {count}")


def _proposed_row(
    ex: Execution,
    desc: TableDescriptor,
    targets: Sequence[Column],
    values: Sequence[Any],
    filled: Sequence[tuple[Column, Compiled | None]],
) -> dict[int, Any]:
    """The row an INSERT proposes: ``values`` assigned to ``targets``, the ``filled``
    columns' defaults, the computed columns; 23502 for a NULL in a NOT NULL column."""
    row: dict[int, Any] = {}
    for column, value in zip(targets, values, strict=True):
        row[column.id] = assign(value, column.type, column.name)
    for column, make in filled:
        row[column.id] = coerce(make((), ex.context), column.type, column.name) if make else None
    fill_computed(desc, row, ex.context)
    _check_not_null(desc, row)
    return row


def _insert_one(ex: Execution, desc: TableDescriptor, plan: InsertPlan) -> Result:
    """The common INSERT: one row of VALUES (``plan.single``), by a statement alone,
    into a table with nothing a write must also check or index: the general path's
    steps for it, without its branches for the cases this is not (a few microseconds
    of a statement's). Written blind (see _insert_blind) unless its primary family
    encodes no value."""
    context = ex.context
    picked = plan.picked
    # NB: the session checked that the parameters number the statement's placeholders
    values = picked(context.params) if picked else [make((), context) for make in plan.rows[0]]
    row = _proposed_row(ex, desc, plan.targets, values, plan.filled)
    kvs = row_kvs(desc, row)
    if not _insert_blind(ex, desc, row, kvs, generated=False):
        txn = ex.write_txn
        if txn.get(next(iter(kvs))) is not None:
            raise duplicate_key(desc, row)
        _insert_row(txn, ex, desc, kvs, row)
    returning = plan.returning
    if returning is None:
        return tagged("INSERT 0 1")
    env = tuple(row[c.id] for c in desc.columns)
    return Result(returning[0], [tuple(f(env, context) for f in returning[1])], "INSERT 0 1")


def _reads_rows(s: st.Insert) -> bool:
    """Whether the INSERT reads the table's rows (ON CONFLICT, UPSERT, RETURNING)."""
    return s.on_conflict is not None or s.upsert or s.returning is not None


def _privileges_beyond_insert(s: st.Insert) -> tuple[str, ...]:
    """What an INSERT or UPSERT needs on its table besides INSERT (which
    :meth:`Execution.table` checks), as CockroachDB's: SELECT when it reads the table's
    rows (:func:`_reads_rows`: each tells what a row holds); UPDATE too when it may
    change a row (ON CONFLICT DO UPDATE, UPSERT). A plain INSERT needs none."""
    if not _reads_rows(s):
        return ()
    return ("SELECT", "UPDATE") if s.on_conflict == "update" or s.upsert else ("SELECT",)


def _insert_row(
    txn: Txn,
    ex: Execution,
    desc: TableDescriptor,
    kvs: dict[bytes, bytes | None],
    row: dict[int, Any],
) -> None:
    """Write the new ``row`` (its key read and found free)."""
    for key, encoded in kvs.items():
        if encoded is not None:
            txn.put(key, encoded)
    row_written(ex, desc, None, row)


def _conflict_update(
    ex: Execution,
    desc: TableDescriptor,
    plan: InsertPlan,
    old: dict[int, Any],
    pairs: dict[bytes, bytes],
    row: dict[int, Any],
    assigned: frozenset[int],
    touched: set[bytes],
) -> dict[int, Any] | None:
    """ON CONFLICT DO UPDATE (or UPSERT) of the existing row ``old`` with the proposed
    ``row``: the row written, or ``None`` when DO UPDATE's WHERE keeps ``old``."""
    both = tuple(old[c.id] for c in desc.columns) + tuple(row[c.id] for c in desc.columns)
    if plan.mvcc:  # NB: read again for its timestamp, only by a statement that names it
        span = row_span(desc, [old[i] for i in desc.primary_key])
        both += (next(iter(ex.envs(desc, span, mvcc=True)))[-1],)
    if plan.where is not None and not holds(plan.where(both, ex.context)):
        return None
    final = dict(old)
    for column, value in plan.sets:
        final[column.id] = assign(value(both, ex.context), column.type, column.name)
    fill_computed(desc, final, ex.context)
    _check_not_null(desc, final)
    if any(final[i] != old[i] for i in desc.primary_key):
        touched.add(_move_row(ex, desc, pairs, final))
    else:
        _write_changes(ex, desc, pairs, final, assigned)
    row_written(ex, desc, old, final)
    return final


def _key_generated(desc: TableDescriptor, targets: Sequence[Column]) -> bool:
    """Whether each row's key is a new ``unique_rowid()``: the table is keyed by its
    hidden rowid and the statement does not give it."""
    if len(desc.primary_key) != 1:
        return False
    key = desc.column_by_id(desc.primary_key[0])
    return (
        key is not None
        and key.hidden
        and key.name == ROWID
        and all(column.id != key.id for column in targets)
    )


def _insert_blind(
    ex: Execution,
    desc: TableDescriptor,
    row: dict[int, Any],
    kvs: dict[bytes, bytes | None],
    *,
    generated: bool,
) -> bool:
    """Write a new row without reading first, when the statement commits on its own or
    its key is ``generated`` (a new rowid, which no row holds: a COPY into a table
    without a primary key, in a transaction, reads nothing): the row's first key must
    be absent at commit (:meth:`Txn.put_if_absent`), and the session turns a failed
    check into the duplicate-key error (or, for a rowid, a retry). ``False``: read
    first (an explicit transaction reports a duplicate at the statement, as
    PostgreSQL)."""
    first_key, first = next(iter(kvs.items()))
    if not (ex.autocommit or generated) or first is None or desc.constrained:
        return False
    assert ex.txn is not None
    try:
        ex.txn.put_if_absent(first_key, first)
    except ConditionFailedError:
        raise duplicate_key(desc, row) from None
    for key, encoded in kvs.items():
        if key != first_key and encoded is not None:
            ex.txn.put(key, encoded)
    ex.inserted[first_key] = desc
    return True


def _write_blind(txn: Txn, kvs: dict[bytes, bytes | None]) -> bool:
    """Write the row ``kvs`` encode as it is, whatever the keys hold now; ``False``
    (nothing written) when a column family of it encodes no value, whose pair the row
    as stored may have, and which only a read can tell to delete."""
    pairs = [(key, encoded) for key, encoded in kvs.items() if encoded is not None]
    if len(pairs) != len(kvs):
        return False
    for key, encoded in pairs:
        txn.put(key, encoded)
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
    desc = ex.table(s.table, "UPDATE")
    ex.require_privilege(desc, "SELECT")  # NB: it reads the rows it changes (CockroachDB's)
    plan = ex.plan(s, desc, UpdatePlan.of)
    # NB: a blind UPDATE writes one row by its key, which is no full scan
    if plan.blind is not None and ex.autocommit and not desc.constrained:
        key = plan.blind(ex.context)
        pair = _whole_row(ex, desc, plan, key) if key is not None else None
        if pair is not None:
            # Written without reading: the row must exist at commit, and when it
            # does not the session reports UPDATE 0 (nothing was written).
            ex.write_txn.put_if_present(*pair)
            ex.missing[pair[0]] = "UPDATE 0"
            return tagged("UPDATE 1")
    check_full_scan(ex, desc, plan.selection, s)
    prepare_subqueries(ex, query, s.subqueries, plan.scope)
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
    rows_written(ex, desc, [(old, new) for old, _pairs, new in changes])
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
        new[column.id] = assign(value(env, ex.context), column.type, column.name)
    fill_computed(desc, new, ex.context)
    _check_not_null(desc, new)
    return new


def _update_joined(ex: Execution, s: st.Update) -> Result:
    """UPDATE ... FROM: each row of the table that a joined row pairs with (kept by
    WHERE) is written once, with SET computed over the first such joined row (as in
    PostgreSQL, which one is not defined when several pair with it)."""
    desc, plan, chosen = _joined_targets(ex, s, s.returning)
    sets = [(target_column(desc, name), compile_expr(e, plan.scope)) for name, e in s.sets]
    refuse_writes([column for column, _ in sets])
    assigned = frozenset(column.id for column, _ in sets)
    out_rows = []
    width = len(with_mvcc(desc).columns if names_mvcc(s) else desc.columns)
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
    rows_written(ex, desc, [(old, new) for old, _pairs, new in changes])
    return _result(_joined_returning(s, plan), out_rows, f"UPDATE {len(chosen)}")


def _joined_returning(s: st.Update | st.Delete, plan: JoinPlan) -> Projections | None:
    return (plan.result.names, plan.result.projections) if s.returning is not None else None


Targets = list[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]


def _lateral_beside_target(
    ex: Execution, width: int, source: st.Derived, left: Scope
) -> tuple[Relation, LateralRows]:
    """A LATERAL subquery of UPDATE's FROM or DELETE's USING
    (:func:`~feedkv.sql.query.lateral_subquery`), which names the sources to its left
    but not the table written (its columns, the first ``width`` places), as PostgreSQL
    (42P10 there; here no such name is found, 42P01)."""
    columns = {key: place for key, place in left.columns.items() if place[0] >= width}
    ambiguous: dict[str, list[str]] = {}
    for name in {n for q, n in columns if q}:
        named = {f"{q}.{n}": columns[q, n] for q, n in columns if q and n == name}
        if len(named) > 1:
            ambiguous[name] = sorted(named)
        elif ("", name) not in columns:  # NB: unqualified, it meant the written table's
            columns["", name] = next(iter(named.values()))
    visible = Scope(columns, database=left.database, ambiguous=ambiguous, outer=left.outer)
    return lateral_subquery(ex, source, visible)


def _joined_targets(
    ex: Execution, s: st.Update | st.Delete, returning: tuple[exp.Expr, ...] | None
) -> tuple[TableDescriptor, JoinPlan, Targets]:
    """The rows of ``s``'s table that its joins pair with a row WHERE keeps: each once,
    in key order, with its KV pairs and the first joined row it is in. The table and
    the sources are read whole; the plan's result is RETURNING's, over joined rows."""
    if returning is not None:
        check_returning(returning)
    desc = ex.table(s.table, "UPDATE" if isinstance(s, st.Update) else "DELETE")
    ex.require_privilege(desc, "SELECT")
    refuse_full_scans(ex, s)  # NB: the table is read whole
    # NB: WHERE, SET and ORDER BY may read crdb_internal_mvcc_timestamp (each table's,
    # after its columns, as a SELECT of the joined rows reads it)
    mvcc = names_mvcc(s)
    ids = [c.id for c in desc.columns]
    targets = list(ex.row_envs(desc, table_span(desc.id), None, ids, mvcc))
    envs = [env for _row, _pairs, env in targets]
    read = [
        # NB: a LATERAL source is read for each row to its left (JoinStep.lateral)
        (None, [], ex.session.database)
        if is_lateral(join.table)
        else read_source(ex, join.table, None, mvcc)
        for join in s.joins
    ]
    items = returning or (exp.Star(),)
    select = st.Select(s.text, s.table, s.alias, items, s.where, joins=s.joins)
    database = s.table.database or ex.session.database
    target = with_mvcc(desc) if mvcc else desc
    plan = JoinPlan.of(
        [target, *(r[0] for r in read)],
        select,
        [database, *(r[2] for r in read)],
        subquery=partial(_lateral_beside_target, ex, len(target.columns)),
    )
    prepare_subqueries(ex, query, s.subqueries, plan.scope)
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
            row[column.id] = assign(value((), ex.context), column.type, column.name)
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
    desc = ex.table(s.table, "DELETE")
    ex.require_privilege(desc, "SELECT")  # NB: it reads the rows it deletes (CockroachDB's)
    plan = ex.plan(s, desc, DeletePlan.of)
    check_full_scan(ex, desc, plan.selection, s)
    prepare_subqueries(ex, query, s.subqueries, plan.scope)
    returning = plan.returning
    chosen = ex.chosen(desc, plan.selection, plan.order, s.limit)
    out_rows = []
    if returning is not None:  # NB: before the first delete, as in update()
        out_rows = [tuple(f(env, ex.context) for f in returning[1]) for _o, _p, env in chosen]
    txn = ex.write_txn
    for old, pairs, _env in chosen:
        for key in pairs:
            txn.delete(key)
        row_written(ex, desc, old, None)
    return _result(returning, out_rows, f"DELETE {len(chosen)}")


def _delete_joined(ex: Execution, s: st.Delete) -> Result:
    """DELETE ... USING: each row of the table that a joined row pairs with (kept by
    WHERE) is deleted once; with ORDER BY and LIMIT, the first rows in that order."""
    desc, plan, chosen = _joined_targets(ex, s, s.returning)
    if s.order_by:
        _check_target_order(s, desc)
        order = [(compile_expr(e, plan.scope), descending) for e, descending in s.order_by]
        chosen = sorted_rows(chosen, order, ex.context, _joined_env)
    chosen = ex.limited(chosen, s.limit)
    out_rows = []
    if s.returning is not None:  # NB: before the first delete, as in update()
        projections = plan.result.projections
        out_rows = [tuple(f(env, ex.context) for f in projections) for _o, _p, env in chosen]
    txn = ex.write_txn
    for old, pairs, _env in chosen:
        for key in pairs:
            txn.delete(key)
        row_written(ex, desc, old, None)
    return _result(_joined_returning(s, plan), out_rows, f"DELETE {len(chosen)}")


def _joined_env(target: tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]) -> Any:
    return target[2]


def _check_target_order(s: st.Delete, desc: TableDescriptor) -> None:
    """DELETE ... USING orders the table's rows, each once, so by its own columns only:
    as CockroachDB (which plans it as DISTINCT ON the table's key), 42P10 for an ORDER BY
    that reads a USING source's column, whose value differs between a row's pairs."""
    qualifier = s.alias or s.table.name
    names = {c.name for c in desc.columns}
    for expression, _descending in s.order_by:
        for column in expression.find_all(exp.Column):
            if column.table == qualifier if column.table else column.name in names:
                continue
            raise SQLError(
                "42P10", "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"
            )


def _result(returning: Projections | None, rows: list[tuple[Any, ...]], tag: str) -> Result:
    """A write's result: its RETURNING rows if it has the clause, else its tag alone."""
    if returning is None:
        return tagged(tag)
    return Result(returning[0], rows, tag)


def _check_not_null(desc: TableDescriptor, row: dict[int, Any]) -> None:
    for column in desc.not_null_columns:
        if row.get(column.id) is None:
            raise SQLError(
                "23502", f'null value in column "{column.name}" violates not-null constraint'
            )


def duplicate_key_at(desc: TableDescriptor, key: bytes) -> SQLError:
    """:func:`duplicate_key` for the row whose KV key is ``key``."""
    values = decode_row_key(desc, key)[0]
    return duplicate_key(desc, dict(zip(desc.primary_key, values, strict=True)))


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.Insert: insert,
    st.Update: update,
    st.Delete: delete,
}
