"""What a row write must do besides writing the row: keep the table's secondary index
entries (:mod:`feedkv.sql.indexes`), enforce its UNIQUE indexes (23505), its CHECK
constraints (23514) and its foreign keys, both ways (23503): a row's references must
name a row of the referenced table, and a referenced row may not go (or change its
referenced values) while a row references it (NO ACTION).

:func:`row_written` runs for every row an INSERT, UPSERT, UPDATE or DELETE writes, in
the statement's transaction, so the entries and checks are atomic with the row. It
costs nothing for a table with no index or constraint (:attr:`TableDescriptor.constrained`);
otherwise a read per unique index entry and per reference, and for a referenced row a
look for rows referencing it: through an index whose leading columns are the foreign
key's, else a scan of the referencing table.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql.descriptor import Check, ForeignKey, Index, TableDescriptor
from feedkv.sql.execution import Execution
from feedkv.sql.expr import Compiled, compile_expr
from feedkv.sql.indexes import entry, primary_key_of, values_prefix
from feedkv.sql.parser import annotated_constants, parse_expression
from feedkv.sql.plan import column_default, holds, table_scope
from feedkv.sql.referential_actions import ACTS, CASCADES_LIMIT, action_of, referencing_change
from feedkv.sql.row_codec import family_key, row_kvs, row_prefix, row_span, table_span
from feedkv.sql.types import coerce, literal_text
from feedkv.util.keys import prefix_end

__all__ = [
    "backfill_index",
    "check_failed",
    "duplicate_key",
    "row_written",
    "rows_written",
    "unique_conflict",
    "validate_rows",
]

Row = Mapping[int, Any]


def row_written(
    ex: Execution, desc: TableDescriptor, old: Row | None, new: Row | None, verb: str = ""
) -> None:
    """``old`` (None: an insert) became ``new`` (None: a delete) in table ``desc``:
    check its constraints and write its index entries. ``verb`` names the statement in
    foreign key errors (``insert``, ``update``, ``delete``)."""
    rows_written(ex, desc, [(old, new)], verb)


def rows_written(
    ex: Execution,
    desc: TableDescriptor,
    changes: Sequence[tuple[Row | None, Row | None]],
    verb: str = "",
) -> None:
    """:func:`row_written` for all the rows one statement wrote: their index entries
    move all at once, so uniqueness holds for the statement's result, not row by row
    (``UPDATE t SET u = u + 1`` over consecutive values is no duplicate), as
    CockroachDB checks it. Rows that reference a changed row undergo their foreign
    key's action (:mod:`feedkv.sql.referential_actions`), and those writes go through
    the same, round after round, until no write cascades any more."""
    pending: deque[tuple[TableDescriptor, Sequence[tuple[Row | None, Row | None]]]]
    pending = deque([(desc, changes)])
    rounds = 0
    while pending:
        table, written = pending.popleft()
        rounds += 1
        if rounds > CASCADES_LIMIT:
            raise SQLError(
                "54000", f"cascades limit ({CASCADES_LIMIT}) reached: foreign key actions loop"
            )
        pending.extend(_rows_written(ex, table, written, verb if rounds == 1 else ""))


def _rows_written(
    ex: Execution,
    desc: TableDescriptor,
    changes: Sequence[tuple[Row | None, Row | None]],
    verb: str,
) -> list[tuple[TableDescriptor, list[tuple[Row | None, Row | None]]]]:
    """Check and index one table's written rows; returns the writes their referencing
    rows' actions made, table by table, still to be checked."""
    if not desc.constrained:
        return []
    cascaded = []
    for old, new in changes:
        said = verb or ("insert" if old is None else "delete" if new is None else "update")
        if new is not None:
            _check(ex, desc, new)
            for fk in desc.foreign_keys:
                _check_reference(ex, desc, fk, old, new, said)
        if old is not None and desc.referenced_by and not _keys_kept(desc, old, new):
            cascaded.extend(_check_referenced(ex, desc, old, new, said))
    for index in desc.indexes:
        _move_entries(ex, desc, index, changes)
    return cascaded


def backfill_index(ex: Execution, desc: TableDescriptor, index: Index) -> None:
    """Write ``index``'s entry for every row of ``desc`` (CREATE INDEX): 23505 if a
    unique index finds two rows with the same values."""
    for row, _pairs in ex.rows(desc, table_span(desc.id)):
        _write_entry(ex, desc, index, None, row)


def unique_conflict(
    ex: Execution, desc: TableDescriptor, row: Row, only: Index | None = None
) -> list[Any] | None:
    """The primary key of another row that holds ``row``'s values of a unique index
    (``only``: of that one), if any: what ON CONFLICT meets besides the primary key."""
    for index in desc.indexes:
        if not index.unique or (only is not None and index.id != only.id):
            continue
        found_entry = _entry_of(ex, desc, index, row)
        if found_entry is None:
            continue  # a partial index the row is not in
        key, _value, unique = found_entry
        if not unique:
            continue  # a NULL among its values conflicts with nothing
        found = ex.write_txn.get(key)
        if found is not None:
            return primary_key_of(desc, found)
    return None


def validate_rows(
    ex: Execution,
    desc: TableDescriptor,
    checks: Sequence[Check],
    foreign_keys: Sequence[ForeignKey],
) -> None:
    """Every row of ``desc`` satisfies ``checks`` (23514) and ``foreign_keys`` (23503):
    constraints ALTER TABLE adds to a table that has rows."""
    if not checks and not foreign_keys:
        return
    scope = table_scope(desc, ex.session.database)
    tests = [(c, compile_expr(parse_expression(c.expression), scope)) for c in checks]
    for row, _pairs in ex.rows(desc, table_span(desc.id)):
        env = tuple(row.get(c.id) for c in desc.columns)
        for check, test in tests:
            verdict = test(env, ex.context)
            if verdict is not None and not holds(verdict):
                raise _unsatisfied_row(desc, check, row)
        for fk in foreign_keys:
            parent = _missing_parent(ex, fk, None, row)
            if parent is not None:
                raise _unmatched_row(desc, fk, parent, row)


def _write_entry(
    ex: Execution, desc: TableDescriptor, index: Index, old: Row | None, new: Row | None
) -> None:
    _move_entries(ex, desc, index, [(old, new)])


def _move_entries(
    ex: Execution,
    desc: TableDescriptor,
    index: Index,
    changes: Sequence[tuple[Row | None, Row | None]],
) -> None:
    """Delete the entries the rows left, then write those they took (23505 for a
    unique one another row holds)."""
    txn = ex.write_txn
    moves = []
    for old, new in changes:
        before = _entry_of(ex, desc, index, old) if old is not None else None
        after = _entry_of(ex, desc, index, new) if new is not None else None
        if before == after:
            continue
        if before is not None and (after is None or before[0] != after[0]):
            txn.delete(before[0])
        if after is not None and new is not None:
            moves.append((before, after, new))
    for before, after, new in moves:
        _put_entry(ex, desc, index, before, after, new)


def _put_entry(
    ex: Execution,
    desc: TableDescriptor,
    index: Index,
    before: tuple[bytes, bytes, bool] | None,
    after: tuple[bytes, bytes, bool],
    new: Row,
) -> None:
    txn = ex.write_txn
    key, value, unique = after
    if unique and (before is None or before[0] != key) and txn.get(key):
        names = ", ".join(desc.index_key_sql(i) for i in index.column_ids)
        values = ", ".join(literal_text(new.get(i)) for i in index.column_ids)
        raise SQLError(
            "23505",
            f'duplicate key value violates unique constraint "{index.name}"',
            detail=f"Key ({names})=({values}) already exists.",
        )
    txn.put(key, value)


# CHECK.


def _check(ex: Execution, desc: TableDescriptor, row: Row) -> None:
    if not desc.checks:
        return
    compiled = _compiled(ex, desc).checks
    env = tuple(row.get(c.id) for c in desc.columns)
    for check, test in zip(desc.checks, compiled, strict=True):
        verdict = test(env, ex.context)
        if verdict is not None and not holds(verdict):
            raise check_failed(check.expression)


def check_failed(expression: str) -> SQLError:
    # NB: CockroachDB's message, its expression's constants annotated; it names neither
    # the relation nor the constraint, as PostgreSQL's does
    return SQLError(
        "23514", f"failed to satisfy CHECK constraint ({annotated_constants(expression)})"
    )


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A descriptor version's CHECKs and partial index predicates, compiled."""

    checks: list[Compiled]
    predicates: dict[int, Compiled]  # by index id


def _compiled(ex: Execution, desc: TableDescriptor) -> _Compiled:
    cached: _Compiled | None = desc._constraints
    if cached is None:
        scope = table_scope(desc, ex.session.database)
        cached = _Compiled(
            [compile_expr(parse_expression(c.expression), scope) for c in desc.checks],
            {
                index.id: compile_expr(parse_expression(index.predicate), scope)
                for index in desc.indexes
                if index.predicate is not None
            },
        )
        object.__setattr__(desc, "_constraints", cached)
    return cached


def _entry_of(
    ex: Execution, desc: TableDescriptor, index: Index, row: Row
) -> tuple[bytes, bytes, bool] | None:
    """``row``'s entry in ``index`` (see indexes.entry); None when ``index`` is a
    partial index whose predicate does not hold for the row."""
    if index.predicate is not None:
        env = tuple(row.get(c.id) for c in desc.columns)
        if not holds(_compiled(ex, desc).predicates[index.id](env, ex.context)):
            return None
    return entry(desc, index, row)


# Foreign keys.


def _values(row: Row, ids: tuple[int, ...]) -> list[Any] | None:
    values = [row.get(i) for i in ids]
    return None if any(v is None for v in values) else values


def _missing_parent(
    ex: Execution, fk: ForeignKey, old: Row | None, new: Row
) -> TableDescriptor | None:
    """The referenced table when ``new``'s values of ``fk`` name none of its rows, and
    changed from ``old``'s (MATCH SIMPLE: a NULL among them references nothing)."""
    values = _values(new, fk.column_ids)
    if values is None or (old is not None and _values(old, fk.column_ids) == values):
        return None
    parent = catalog.table_by_id(ex.read_source, fk.table_id)
    if parent is None or parent.dropped:
        raise SQLError("XX000", f"foreign key {fk.name!r} references a table that is gone")
    return None if _has_row(ex, parent, fk.referenced, values) else parent


def _check_reference(
    ex: Execution, desc: TableDescriptor, fk: ForeignKey, old: Row | None, new: Row, verb: str
) -> None:
    """``new``'s values of ``fk`` name a row of the referenced table."""
    parent = _missing_parent(ex, fk, old, new)
    if parent is None:
        return
    names = ", ".join(_name(desc, i) for i in fk.column_ids)
    shown = ", ".join(literal_text(new.get(i)) for i in fk.column_ids)
    # NB: as CockroachDB sends it: the key in the DETAIL field, not the message
    raise SQLError(
        "23503",
        f'{verb} on table "{desc.name}" violates foreign key constraint "{fk.name}"',
        detail=f'Key ({names})=({shown}) is not present in table "{parent.name}".',
    )


def _unmatched_row(
    desc: TableDescriptor, fk: ForeignKey, parent: TableDescriptor, row: Row
) -> SQLError:
    """CockroachDB's error for a row that fails a foreign key being added: the row's
    key columns, then its primary key's others, as ``name=value``."""
    ids = [*fk.column_ids, *(i for i in desc.primary_key if i not in fk.column_ids)]
    shown = _labeled(desc, ids, row)
    return SQLError(
        "23503", f'foreign key violation: "{desc.name}" row {shown} has no match in "{parent.name}"'
    )


def _unsatisfied_row(desc: TableDescriptor, check: Check, row: Row) -> SQLError:
    """CockroachDB's error for a row that fails a CHECK being added: the expression
    (its constants annotated), then the row's columns but hidden ones, as ``name=value``."""
    shown = _labeled(desc, [c.id for c in desc.columns if not c.hidden], row)
    expression = annotated_constants(check.expression)
    return SQLError("23514", f'validation of CHECK "{expression}" failed on row: {shown}')


def _labeled(desc: TableDescriptor, ids: Sequence[int], row: Row) -> str:
    """``row``'s values of columns ``ids`` as CockroachDB's validation errors show them:
    ``a=1, s='x'``."""
    return ", ".join(f"{_name(desc, i)}={literal_text(row.get(i))}" for i in ids)


def _has_row(
    ex: Execution, parent: TableDescriptor, ids: tuple[int, ...], values: list[Any]
) -> bool:
    txn = ex.write_txn
    if ids == parent.primary_key:
        return txn.get(family_key(row_prefix(parent, values), 0)) is not None
    for index in parent.readable_indexes:
        if index.unique and index.column_ids == ids:
            key = values_prefix(parent, index, values)
            return txn.get(key) is not None
    raise SQLError("XX000", f"no unique index of {parent.name!r} matches a foreign key to it")


def _keys_kept(desc: TableDescriptor, old: Row, new: Row | None) -> bool:
    """Whether ``new`` keeps every value a foreign key may reference: those of the
    primary key and of the unique indexes (then no referencing row can lose its row)."""
    if new is None:
        return False
    ids = set(desc.primary_key).union(*(i.column_ids for i in desc.indexes if i.unique))
    return all(old.get(i) == new.get(i) for i in ids)


def _check_referenced(
    ex: Execution, desc: TableDescriptor, old: Row, new: Row | None, verb: str
) -> list[tuple[TableDescriptor, list[tuple[Row | None, Row | None]]]]:
    """The rows that reference ``old`` by values it no longer has undergo their foreign
    key's action: 23503 under NO ACTION or RESTRICT, else they are written here and
    returned (per referencing table) for the checks every write goes through."""
    cascaded = []
    for child_id, name in desc.referenced_by:
        child = catalog.table_by_id(ex.read_source, child_id)
        fk = next((f for f in child.foreign_keys if f.name == name), None) if child else None
        if child is None or child.dropped or fk is None:
            continue
        values = _values(old, fk.referenced)
        if values is None or (new is not None and _values(new, fk.referenced) == values):
            continue
        action = action_of(fk, new)
        if action in ACTS:
            changes = _act(ex, child, fk, action, values, new)
            if changes:
                cascaded.append((child, changes))
        elif _referencing_row(ex, child, fk, values):
            names = ", ".join(_name(desc, i) for i in fk.referenced)
            shown = ", ".join(literal_text(v) for v in values)
            raise SQLError(
                "23503",
                f'{verb} on table "{desc.name}" violates foreign key constraint "{fk.name}" '
                f'on table "{child.name}"',
                detail=f'Key ({names})=({shown}) is still referenced from table "{child.name}".',
            )
    return cascaded


def _act(
    ex: Execution,
    child: TableDescriptor,
    fk: ForeignKey,
    action: str,
    values: list[Any],
    new_parent: Row | None,
) -> list[tuple[Row | None, Row | None]]:
    """Write what ``action`` makes of each row of ``child`` that references ``values``;
    returns the ``(old, new)`` changes (``new`` None: deleted)."""
    found = _referencing_rows(ex, child, fk, values)
    defaults: list[Any] = []
    if action == "SET DEFAULT" and found:
        defaults = [_default(ex, child, i) for i in fk.column_ids]
    txn = ex.write_txn
    changes: list[tuple[Row | None, Row | None]] = []
    for row, pairs in found:
        changed = referencing_change(fk, action, row, new_parent, defaults)
        kvs = row_kvs(child, changed) if changed is not None else {}
        if kvs and next(iter(kvs)) not in pairs and txn.get(next(iter(kvs))) is not None:
            raise duplicate_key(child, changed or {})
        for key in pairs:
            if kvs.get(key) is None:
                txn.delete(key)
        for key, encoded in kvs.items():
            if encoded is not None:
                txn.put(key, encoded)
        if action == "SET DEFAULT" and changed is not None:
            # NB: checked here, as a new reference: a row that already held the default
            # looks unchanged to the checks of the write, yet may now reference nothing
            _check_reference(ex, child, fk, None, changed, "update")
        changes.append((row, changed))
    return changes


def _default(ex: Execution, desc: TableDescriptor, column_id: int) -> Any:
    column = desc.column_by_id(column_id)
    if column is None:
        raise SQLError("XX000", f"table {desc.name!r} has no column {column_id}")
    default = column_default(column)
    return coerce(default((), ex.context), column.type, column.name) if default else None


def duplicate_key(desc: TableDescriptor, row: Row) -> SQLError:
    """23505 for a row whose primary key another row holds."""
    names = ", ".join(c.name for c in desc.key_columns)
    values = ", ".join(literal_text(row[i]) for i in desc.primary_key)
    return SQLError(
        "23505",
        f'duplicate key value violates unique constraint "{desc.name}_pkey"',
        detail=f"Key ({names})=({values}) already exists.",
    )


def _referencing_row(
    ex: Execution, child: TableDescriptor, fk: ForeignKey, values: list[Any]
) -> bool:
    txn = ex.write_txn
    for index in child.readable_indexes:
        if index.column_ids[: len(fk.column_ids)] == fk.column_ids:
            prefix = values_prefix(child, index, values)
            return bool(txn.scan(prefix, prefix_end(prefix), limit=1))
    if fk.column_ids == child.primary_key[: len(fk.column_ids)]:
        prefix = row_prefix(child, values)
        return bool(txn.scan(prefix, prefix_end(prefix), limit=1))
    for row, _pairs in ex.rows(child, table_span(child.id)):
        if [row.get(i) for i in fk.column_ids] == values:
            return True
    return False


def _referencing_rows(
    ex: Execution, child: TableDescriptor, fk: ForeignKey, values: list[Any]
) -> list[tuple[dict[int, Any], dict[bytes, bytes]]]:
    """Every row of ``child`` whose ``fk`` columns hold ``values``, with its KV pairs:
    through an index that leads with them, the primary key if it does, else a scan."""
    for index in child.readable_indexes:
        if index.column_ids[: len(fk.column_ids)] == fk.column_ids:
            prefix = values_prefix(child, index, values)
            entries = ex.write_txn.scan(prefix, prefix_end(prefix))
            keys = [primary_key_of(child, found.value) for found in entries]
            return [found for key in keys for found in ex.rows(child, row_span(child, key))]
    if fk.column_ids == child.primary_key[: len(fk.column_ids)]:
        return list(ex.rows(child, row_span(child, values)))
    return [
        (row, pairs)
        for row, pairs in ex.rows(child, table_span(child.id))
        if [row.get(i) for i in fk.column_ids] == values
    ]


def _name(desc: TableDescriptor, column_id: int) -> str:
    column = desc.column_by_id(column_id)
    return column.name if column is not None else str(column_id)
