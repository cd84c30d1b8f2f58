"""The schema statements about indexes and constraints: CREATE TABLE's UNIQUE, CHECK,
FOREIGN KEY and INDEX elements, CREATE [UNIQUE] INDEX, DROP INDEX and SHOW INDEXES,
and what dropping or renaming must refuse because of them. What a row write does
with them is :mod:`feedkv.sql.constraints`.

Names follow PostgreSQL's: ``<table>_<columns>_key`` for a UNIQUE constraint,
``<table>_<columns>_idx`` for an index, ``<table>_<column>_check``,
``<table>_<columns>_fkey``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import catalog, comments
from feedkv.sql import statements as st
from feedkv.sql.arrays import Array
from feedkv.sql.computed import check_computed
from feedkv.sql.constraints import backfill_index, validate_rows
from feedkv.sql.describe import type_of
from feedkv.sql.descriptor import Check, Column, ForeignKey, Index, TableDescriptor
from feedkv.sql.execution import Execution, Result
from feedkv.sql.expr import compile_expr
from feedkv.sql.expression_indexes import drop_unused, expression_sql, free_name
from feedkv.sql.indexes import index_span
from feedkv.sql.parser import parse_expression
from feedkv.sql.plan import table_scope
from feedkv.sql.types import ColumnType, Kind
from feedkv.sql.volatility import refuse_non_immutable, refuse_zoned_casts

__all__ = [
    "HANDLERS",
    "drop_found_index",
    "drop_inbound",
    "forget_references",
    "index_to_drop",
    "refuse_column_use",
    "refuse_if_referenced",
    "with_constraints",
]


def with_constraints(
    ex: Execution,
    desc: TableDescriptor,
    index_specs: Sequence[st.IndexSpec],
    check_specs: Sequence[st.CheckSpec],
    reference_specs: Sequence[st.ForeignKeySpec],
) -> TableDescriptor:
    """``desc`` with more indexes, CHECKs and foreign keys (CREATE TABLE's, or ALTER
    TABLE ADD CONSTRAINT's): the tables its new foreign keys reference get a new
    version that knows it (they cannot be dropped while it stands)."""
    if not (index_specs or check_specs or reference_specs):
        return desc
    indexes = list(desc.indexes)
    next_id = desc.next_index_id
    for spec in index_specs:
        desc, spec = _with_index_expressions(desc, spec)
        indexes.append(_index(desc, spec, next_id, indexes))
        next_id += 1
    desc = replace(desc, indexes=tuple(indexes), next_index_id=next_id)
    checks = list(desc.checks)
    taken = {c.name for c in checks} | {f.name for f in desc.foreign_keys}
    for check in check_specs:
        checks.append(_check(ex, desc, check, [*taken, *(c.name for c in checks)]))
    desc = replace(desc, checks=tuple(checks))
    foreign_keys = list(desc.foreign_keys)
    added: list[ForeignKey] = []
    parents: dict[int, TableDescriptor] = {}
    for reference in reference_specs:
        fk, parent = _foreign_key(ex, desc, reference)
        if any(f.name == fk.name for f in foreign_keys) or fk.name in {c.name for c in checks}:
            raise SQLError(
                "42710", f'constraint "{fk.name}" for relation "{desc.name}" already exists'
            )
        foreign_keys.append(fk)
        added.append(fk)
        if parent is not None:
            parents.setdefault(parent.id, parent)
    own = tuple((desc.id, fk.name) for fk in added if fk.table_id == desc.id)
    desc = replace(
        desc, foreign_keys=tuple(foreign_keys), referenced_by=(*desc.referenced_by, *own)
    )
    for parent in parents.values():
        inbound = tuple((desc.id, fk.name) for fk in added if fk.table_id == parent.id)
        ex.changing(parent)
        ex.publish(parent.bumped(referenced_by=(*parent.referenced_by, *inbound)))
        ex.session.forget(table=parent.id)
    return desc


def _columns(
    desc: TableDescriptor, names: Sequence[str], what: str, expressions: Sequence[object] = ()
) -> tuple[int, ...]:
    """The ids of the columns ``names`` names; those at the places of ``expressions``
    that are not ``None`` are an expression index's inaccessible columns, which no
    statement can name itself."""
    inaccessible = {c.name: c for c in desc.columns if c.inaccessible}
    ids = []
    for n, name in enumerate(names):
        if n < len(expressions) and expressions[n] is not None:
            column = inaccessible.get(name)
        else:
            column = desc.find_column(name)
        if column is None:
            raise SQLError("42703", f'column "{name}" named in {what} does not exist')
        ids.append(column.id)
    if len(set(ids)) != len(ids):
        raise SQLError("42701", f"a column is named twice in {what}")
    return tuple(ids)


def _index(
    desc: TableDescriptor, spec: st.IndexSpec, index_id: int, existing: Sequence[Index]
) -> Index:
    what = f"index {spec.name}" if spec.name else "an index"
    column_ids = _columns(desc, spec.columns, what, spec.expressions)
    for column_id in column_ids:
        column = desc.column_by_id(column_id)
        if column is not None and column.type.kind in (Kind.JSONB, Kind.INTERVAL, Kind.ARRAY):
            kind = column.type.kind.value
            raise SQLError("0A000", f'column "{column.name}" of type {kind} cannot be indexed')
    storing = _columns(desc, spec.storing, f"STORING of {what}")
    if set(storing) & set(column_ids):
        raise SQLError("42P16", f"a column of {what} is also in its STORING list")
    name = spec.name
    if name is None:
        suffix = "key" if spec.unique else "idx"
        base = f"{desc.name}_{'_'.join(_name_parts(spec))}_{suffix}"
        name, n = base, 0
        while any(i.name == name for i in existing):
            n += 1
            name = f"{base}{n}"
    if name == f"{desc.name}_pkey" or any(i.name == name for i in existing):
        raise SQLError("42P07", f'index "{name}" already exists on table "{desc.name}"')
    predicate = _predicate(desc, spec.predicate) if spec.predicate is not None else None
    return Index(
        index_id,
        name,
        column_ids,
        spec.unique,
        storing,
        spec.constraint,
        spec.descending,
        predicate,
    )


def _with_index_expressions(
    desc: TableDescriptor, spec: st.IndexSpec
) -> tuple[TableDescriptor, st.IndexSpec]:
    """``desc`` with an inaccessible column for each expression of ``spec`` (one it has
    already for the same expression is reused), and ``spec`` naming those columns."""
    if not spec.expressions:
        return desc, spec
    columns = list(spec.columns)
    added: list[Column] = []
    scope = table_scope(desc, "")
    next_id = desc.next_column_id
    for n, node in enumerate(spec.expressions):
        if node is None:
            continue
        if node.find(exp.Select) is not None:
            raise SQLError("0A000", "subqueries are not allowed in index element")
        if node.find(exp.AggFunc, exp.Window) is not None:
            raise SQLError("42803", "aggregate functions are not allowed in index element")
        refuse_non_immutable(node, "index element")
        text = expression_sql(node)
        held = (*desc.columns, *added)
        found = next((c for c in held if c.inaccessible and c.computed == text), None)
        if found is None:
            found_type = type_of(node, scope)
            if found_type is None:
                raise SQLError(
                    "42804",
                    f"the type of index expression {text} does not follow from it; "
                    "cast it, as ((expression)::TYPE)",
                )
            found = Column(
                next_id,
                free_name(desc, added),
                found_type,
                hidden=True,
                computed=text,
                virtual=True,
                inaccessible=True,
            )
            next_id += 1
            added.append(found)
        columns[n] = found.name
    new = replace(desc, columns=(*desc.columns, *added), next_column_id=next_id)
    check_computed(new)
    return new, replace(spec, columns=tuple(columns))


def _name_parts(spec: st.IndexSpec) -> list[str]:
    """What an index's default name is made of: its columns' names, ``expr``,
    ``expr1``, ... for its expressions (CockroachDB's)."""
    parts, count = [], 0
    for n, column in enumerate(spec.columns):
        if n < len(spec.expressions) and spec.expressions[n] is not None:
            parts.append(f"expr{count or ''}")
            count += 1
        else:
            parts.append(column)
    return parts


def _predicate(desc: TableDescriptor, node: exp.Expr) -> str:
    """A partial index's WHERE as its SQL text, once it is known to be a boolean over
    the table's columns that calls only immutable functions, as CockroachDB requires."""
    if node.find(exp.Select) is not None:
        raise SQLError("0A000", "subqueries are not allowed in index predicate")
    if node.find(exp.AggFunc, exp.Window) is not None:
        raise SQLError("42803", "aggregate functions are not allowed in index predicate")
    # NB: a row's membership would otherwise depend on when or by whom it was written
    refuse_non_immutable(node, "index predicate")
    scope = table_scope(desc, "")
    compile_expr(node, scope)  # 42703 for a column it does not have
    refuse_zoned_casts(node, lambda e: type_of(e, scope), "index predicate")
    found = type_of(node, scope)
    if found is not None and found.kind is not Kind.BOOL:
        raise SQLError(
            "42804",
            f"expected index predicate expression to have type bool, but "
            f"'{node.sql('postgres')}' has type {found.sql().lower()}",
        )
    # NB: function names as CockroachDB's SHOW CREATE TABLE prints them
    return node.sql(dialect="postgres", normalize_functions="lower")


def _check(ex: Execution, desc: TableDescriptor, spec: st.CheckSpec, taken: Sequence[str]) -> Check:
    scope = table_scope(desc, ex.session.database)
    if spec.expression.find(exp.Select) is not None:
        raise SQLError("0A000", "subqueries are not allowed in CHECK constraints")
    compile_expr(spec.expression, scope)  # 42703 for a column it does not have
    found = type_of(spec.expression, scope)
    if found is not None and found.kind is not Kind.BOOL:
        raise SQLError("42804", f"CHECK ({spec.expression.sql('postgres')}) is not a boolean")
    name = spec.name
    if name is None:
        columns = [c.name for c in spec.expression.find_all(exp.Column)]
        first = spec.column or (columns[0] if columns else None)
        base = f"{desc.name}_{first}_check" if first else f"{desc.name}_check"
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}{n}"
    elif name in taken:
        raise SQLError("42710", f'constraint "{name}" for relation "{desc.name}" already exists')
    return Check(name, spec.expression.sql(dialect="postgres"))


def _foreign_key(
    ex: Execution, desc: TableDescriptor, spec: st.ForeignKeySpec
) -> tuple[ForeignKey, TableDescriptor | None]:
    """The foreign key, and the other table it references (``None``: its own)."""
    own = spec.table.name == desc.name and spec.table.database in (None, ex.session.database)
    parent = desc if own else ex.table(spec.table)
    column_ids = _columns(desc, spec.columns, "a foreign key")
    if spec.referenced:
        referenced = _columns(parent, spec.referenced, "a foreign key's referenced columns")
    else:
        referenced = parent.primary_key
    if len(referenced) != len(column_ids):
        raise SQLError(
            "42830", "number of referencing and referenced columns for foreign key disagree"
        )
    unique = referenced == parent.primary_key or any(
        i.unique and i.column_ids == referenced for i in parent.readable_indexes
    )
    if not unique:
        raise SQLError(
            "42830",
            "there is no unique constraint matching given keys for referenced table "
            f'"{parent.name}"',
        )
    name = spec.name or f"{desc.name}_{'_'.join(spec.columns)}_fkey"
    for mine, theirs in zip(column_ids, referenced, strict=True):
        a, b = desc.column_by_id(mine), parent.column_by_id(theirs)
        if a is None or b is None or a.type.kind is not b.type.kind:
            raise SQLError(
                "42804",
                f'foreign key constraint "{name}" cannot be implemented: column '
                f'"{a.name if a else mine}" and "{b.name if b else theirs}" are of '
                "different types",
            )
    for action in (spec.on_delete, spec.on_update):
        _refuse_impossible_action(desc, column_ids, action)
    names = tuple(c.name for i in referenced if (c := parent.column_by_id(i)) is not None)
    fk = ForeignKey(
        name,
        column_ids,
        parent.id,
        parent.name,
        referenced,
        names,
        spec.on_delete,
        spec.on_update,
    )
    return fk, None if own else parent


def _refuse_impossible_action(
    desc: TableDescriptor, column_ids: tuple[int, ...], action: str
) -> None:
    """42P16 for SET NULL on a NOT NULL column, or SET DEFAULT on a NOT NULL column
    without a default: the action could never be carried out (CockroachDB refuses it
    when the constraint is made, where PostgreSQL waits for the first referenced row to
    go)."""
    if action not in ("SET NULL", "SET DEFAULT"):
        return
    for column_id in column_ids:
        column = desc.column_by_id(column_id)
        if column is None or column.nullable:
            continue
        if action == "SET NULL":
            raise SQLError(
                "42P16",
                f'cannot add a SET NULL cascading action on column "{column.name}" '
                "which has a NOT NULL constraint",
            )
        if column.default is None:
            raise SQLError(
                "42P16",
                f'cannot add a SET DEFAULT cascading action on column "{column.name}" '
                "which has a NOT NULL constraint and a NULL default expression",
            )


def refuse_if_referenced(ex: Execution, desc: TableDescriptor, what: str) -> None:
    """2BP01 if another table's foreign key references ``desc`` (``what``: the
    statement, for the message)."""
    for child_id, name in desc.referenced_by:
        if child_id == desc.id:
            continue
        child = catalog.table_by_id(ex.write_txn, child_id)
        if child is not None and not child.dropped:
            raise SQLError(
                "2BP01",
                f'cannot {what} "{desc.name}": foreign key "{name}" of table "{child.name}" '
                "references it (drop that table or constraint first)",
            )


def drop_inbound(ex: Execution, desc: TableDescriptor) -> None:
    """DROP TABLE ... CASCADE: the other tables' foreign keys to ``desc`` go (their rows
    stay, as CockroachDB's)."""
    for child_id, name in desc.referenced_by:
        child = catalog.table_by_id(ex.write_txn, child_id)
        if child_id == desc.id or child is None or child.dropped:
            continue
        ex.changing(child)
        ex.publish(
            child.bumped(foreign_keys=tuple(f for f in child.foreign_keys if f.name != name))
        )
        ex.session.forget(table=child.id)


def forget_references(ex: Execution, desc: TableDescriptor) -> None:
    """``desc`` is being dropped: the tables it references forget its foreign keys."""
    for parent_id in {fk.table_id for fk in desc.foreign_keys if fk.table_id != desc.id}:
        parent = catalog.table_by_id(ex.write_txn, parent_id)
        if parent is None or parent.dropped:
            continue
        kept = tuple(r for r in parent.referenced_by if r[0] != desc.id)
        ex.changing(parent)
        ex.publish(parent.bumped(referenced_by=kept))
        ex.session.forget(table=parent.id)


def refuse_column_use(
    desc: TableDescriptor, column_id: int, what: str, *, checks_only: bool = False
) -> None:
    """2BP01 if an index, CHECK or foreign key uses the column (``what``: the change;
    ``checks_only``: a rename, which only a CHECK's or index predicate's text minds)."""
    column = desc.column_by_id(column_id)
    name = column.name if column is not None else str(column_id)
    for index in () if checks_only else desc.indexes:
        if column_id in index.column_ids or column_id in index.storing:
            raise SQLError("2BP01", f'cannot {what} column "{name}": index "{index.name}" uses it')
    for fk in () if checks_only else desc.foreign_keys:
        if column_id in fk.column_ids:
            raise SQLError(
                "2BP01", f'cannot {what} column "{name}": foreign key "{fk.name}" uses it'
            )
    for child_id, fk_name in () if checks_only else desc.referenced_by:
        if child_id != desc.id and _referenced_column(desc, column_id):
            raise SQLError(
                "2BP01", f'cannot {what} column "{name}": foreign key "{fk_name}" references it'
            )
    for check in desc.checks:
        if _names(check.expression, name):
            raise SQLError("2BP01", f'cannot {what} column "{name}": check "{check.name}" uses it')
    for index in desc.indexes:
        if index.predicate is not None and _names(index.predicate, name):
            raise SQLError(
                "2BP01",
                f'cannot {what} column "{name}": the predicate of index "{index.name}" uses it',
            )


def _names(expression: str, column: str) -> bool:
    """Whether the SQL text ``expression`` names ``column``."""
    return any(c.name == column for c in parse_expression(expression).find_all(exp.Column))


def _referenced_column(desc: TableDescriptor, column_id: int) -> bool:
    return column_id in desc.primary_key or any(
        column_id in i.column_ids for i in desc.indexes if i.unique
    )


# Statements.


def create_index(ex: Execution, s: st.CreateIndex) -> Result:
    desc = ex.table(s.table, "CREATE")
    named = s.index.name is not None and desc.index(s.index.name) is not None
    if named and s.if_not_exists:
        return Result(tag="CREATE INDEX")
    with_columns, spec = _with_index_expressions(desc, s.index)
    index = _index(with_columns, spec, desc.next_index_id, desc.indexes)
    new = with_columns.bumped(indexes=(*desc.indexes, index), next_index_id=desc.next_index_id + 1)
    ex.changing(desc)
    ex.publish(new)
    backfill_index(ex, new, index)
    ex.session.forget(table=desc.id)
    return Result(tag="CREATE INDEX")


def index_to_drop(ex: Execution, s: st.DropIndex) -> tuple[TableDescriptor, Index] | None:
    """The index DROP INDEX ``s`` drops and its table (``None``: none, IF EXISTS), after
    the checks of the index alone: it exists, once, and is no unique constraint unless
    CASCADE (the views reading it are :mod:`feedkv.sql.ddl`'s to check); 42501 unless
    the user holds CREATE on its table (or is an admin), as CockroachDB's."""
    found: list[tuple[TableDescriptor, Index]] = []
    if s.table is not None:
        desc = ex.table(s.table, "CREATE")
        index = desc.index(s.name)
        if index is not None:
            found.append((desc, index))
    else:
        database = ex.database(None)
        for desc in catalog.list_tables(ex.read_source, database):
            index = desc.index(s.name)
            if index is not None:
                found.append((desc, index))
    if not found:
        if s.if_exists:
            return None
        raise SQLError("42704", f'index "{s.name}" does not exist')
    if len(found) > 1:
        tables = ", ".join(f"{d.name}@{s.name}" for d, _ in found)
        raise SQLError("42P09", f'index name "{s.name}" is ambiguous (found {tables})')
    desc, index = found[0]
    if s.table is None:
        ex.require_privilege(desc, "CREATE")
    if index.constraint and not s.cascade:
        raise SQLError(
            "2BP01",
            f'index "{index.name}" is in use as unique constraint (use CASCADE if you really '
            "want to drop it)",
        )
    return desc, index


def drop_found_index(ex: Execution, desc: TableDescriptor, index: Index) -> Result:
    """Drop ``index`` of ``desc`` (DROP INDEX, or DROP CONSTRAINT of a unique one), unless
    a foreign key needs it."""
    for child_id, fk_name in desc.referenced_by:
        child = catalog.table_by_id(ex.write_txn, child_id)
        fk = next((f for f in child.foreign_keys if f.name == fk_name), None) if child else None
        if fk is not None and fk.referenced == index.column_ids and index.unique:
            raise SQLError(
                "2BP01",
                f'cannot drop index "{index.name}": foreign key "{fk_name}" of table '
                f'"{child.name if child else child_id}" needs it',
            )
    new = drop_unused(desc.bumped(indexes=tuple(i for i in desc.indexes if i.id != index.id)))
    ex.changing(desc)
    ex.publish(new)
    span = index_span(desc.id, index.id)
    ex.write_txn.delete_range(span.start, span.end)
    comments.forget(ex.write_txn, desc.id, "index", index.id)
    ex.session.forget(table=desc.id)
    return Result(tag="DROP INDEX")


def show_indexes(ex: Execution, s: st.ShowIndexes) -> Result:
    """As CockroachDB's: a row per column of each index (its key columns, then the
    primary key's columns it holds implicitly, then STORING's)."""
    desc = ex.table(s.table)
    rows: list[tuple[Any, ...]] = []

    def add(
        name: str,
        unique: bool,
        ids: Sequence[int],
        storing: Sequence[int],
        descending: Sequence[bool] = (),
    ) -> None:
        position = 1
        for n, i in enumerate(ids):
            direction = "DESC" if n < len(descending) and descending[n] else "ASC"
            column = _column_name(desc, i)
            rows.append((desc.name, name, not unique, position, column, direction, False, False))
            position += 1
        for n, i in enumerate(desc.primary_key):
            if name != f"{desc.name}_pkey" and i not in ids:
                direction = "DESC" if desc.key_descending(n) else "ASC"
                column = _column_name(desc, i)
                rows.append((desc.name, name, not unique, position, column, direction, False, True))
                position += 1
        for i in storing:
            rows.append(
                (desc.name, name, not unique, position, _column_name(desc, i), "N/A", True, False)
            )
            position += 1

    # NB: a virtual computed column is stored in no index
    others = [
        c.id for c in desc.columns if c.id not in desc.primary_key and c.shown and not c.virtual
    ]
    add(f"{desc.name}_pkey", True, desc.primary_key, others, desc.primary_descending)
    for index in desc.indexes:
        add(index.name, index.unique, index.column_ids, index.storing, index.descending)
    columns: tuple[str, ...] = (
        "table_name",
        "index_name",
        "non_unique",
        "seq_in_index",
        "column_name",
        "direction",
        "storing",
        "implicit",
    )
    if s.with_comment:
        columns = (*columns, "comment")
        noted = {
            name: comments.index_comment(ex.read_source, desc, name)
            for name in {r[1] for r in rows}
        }
        rows = [(*row, noted[row[1]]) for row in rows]
    return Result(columns, rows, f"SHOW {len(rows)}")


def show_columns(ex: Execution, s: st.ShowColumns) -> Result:
    """As CockroachDB's: a row per column, hidden ones too (``rowid``), in their order:
    its type as SHOW CREATE writes it, whether it takes NULL, its DEFAULT, a computed
    column's expression ('' for others), and the indexes that hold it (as SHOW INDEXES
    lists them: keys, implicit primary key columns, STORING; sorted by name)."""
    desc = ex.table(s.table)
    held: dict[str, set[str]] = {}
    for _table, index, *_rest in show_indexes(ex, st.ShowIndexes(s.text, s.table)).rows:
        held.setdefault(_rest[2], set()).add(index)
    rows = [
        (
            column.name,
            column.type.sql(),
            column.nullable,
            column.default,
            column.computed or "",
            Array(tuple(sorted(held.get(column.name, ()))), _STRING),
            column.hidden,
            *(
                (comments.comment(ex.read_source, desc.id, "column", column.id),)
                if s.with_comment
                else ()
            ),
        )
        for column in desc.columns
        if not column.adding and not column.inaccessible
    ]
    columns: tuple[str, ...] = (
        "column_name",
        "data_type",
        "is_nullable",
        "column_default",
        "generation_expression",
        "indices",
        "is_hidden",
        *(("comment",) if s.with_comment else ()),
    )
    return Result(columns, rows, f"SHOW {len(rows)}")


_STRING = ColumnType(Kind.STRING)


def _column_name(desc: TableDescriptor, column_id: int) -> str:
    """A column as SHOW INDEXES names it: an expression index's by its expression."""
    column = desc.column_by_id(column_id)
    if column is None:
        return str(column_id)
    return column.computed if column.inaccessible and column.computed else column.name


def add_constraint(ex: Execution, s: st.AddConstraint) -> Result:
    """ALTER TABLE ... ADD CONSTRAINT: the new version, then the rows already there
    checked against it (and a unique index's entries written), in one transaction."""
    desc = ex.table(s.table, "CREATE")
    ex.changing(desc)
    added = with_constraints(ex, desc, s.indexes, s.checks, s.foreign_keys)
    new = replace(added, version=desc.version + 1)
    ex.publish(new)
    for index in new.indexes[len(desc.indexes) :]:
        backfill_index(ex, new, index)
    validate_rows(
        ex, new, new.checks[len(desc.checks) :], new.foreign_keys[len(desc.foreign_keys) :]
    )
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def drop_constraint(ex: Execution, s: st.DropConstraint) -> Result:
    desc = ex.table(s.table, "CREATE")
    name = s.name
    if name == f"{desc.name}_pkey":
        raise SQLError("0A000", f'cannot drop the primary key "{name}" of "{desc.name}"')
    index = desc.index(name)
    if index is not None and index.unique:
        return drop_found_index(ex, desc, index)
    if any(c.name == name for c in desc.checks):
        ex.changing(desc)
        ex.publish(desc.bumped(checks=tuple(c for c in desc.checks if c.name != name)))
        ex.session.forget(table=desc.id)
        return Result(tag="ALTER TABLE")
    fk = next((f for f in desc.foreign_keys if f.name == name), None)
    if fk is None:
        if s.if_exists:
            return Result(tag="ALTER TABLE")
        raise SQLError("42704", f'constraint "{name}" of relation "{desc.name}" does not exist')
    ex.changing(desc)
    ex.publish(
        desc.bumped(
            foreign_keys=tuple(f for f in desc.foreign_keys if f.name != name),
            referenced_by=tuple(r for r in desc.referenced_by if r != (desc.id, name)),
        )
    )
    if fk.table_id != desc.id:
        parent = catalog.table_by_id(ex.write_txn, fk.table_id)
        if parent is not None and not parent.dropped:
            ex.changing(parent)
            kept = tuple(r for r in parent.referenced_by if r != (desc.id, name))
            ex.publish(parent.bumped(referenced_by=kept))
            ex.session.forget(table=parent.id)
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def validate_constraint(ex: Execution, s: st.ValidateConstraint) -> Result:
    """Nothing to do for a check or foreign key constraint (see
    :class:`~feedkv.sql.statements.ValidateConstraint`); 42809 for a primary key or a
    unique constraint, which are not validated apart (as PostgreSQL and CockroachDB
    refuse them), 42704 for a name ``t`` has no constraint of."""
    desc = ex.table(s.table, "CREATE")
    name = s.name
    if any(c.name == name for c in desc.checks) or any(f.name == name for f in desc.foreign_keys):
        return Result(tag="ALTER TABLE")
    index = desc.index(name)
    if name == f"{desc.name}_pkey" or (index is not None and index.unique):
        raise SQLError(
            "42809",
            f'constraint "{name}" of relation "{desc.name}" is not a foreign key or check '
            "constraint",
        )
    raise SQLError("42704", f'constraint "{name}" of relation "{desc.name}" does not exist')


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.AddConstraint: add_constraint,
    st.DropConstraint: drop_constraint,
    st.ValidateConstraint: validate_constraint,
    st.CreateIndex: create_index,
    st.ShowIndexes: show_indexes,
    st.ShowColumns: show_columns,
}
