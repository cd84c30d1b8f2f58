"""``ALTER TYPE`` of an enum: ``ADD VALUE`` and ``RENAME VALUE``, as CockroachDB runs them.

A new label gets a code between its neighbours' (:func:`feedkv.sql.enums.code_between`)
and a renamed one keeps its code, so no stored key or value is rewritten: the type's
descriptor and the columns that use it (which keep the labels and codes, see
``TableDescriptor``) get new versions, the tables' as any schema change publishes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from feedkv.errors import InvariantViolation, SQLError
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import DatabaseDescriptor, TypeDescriptor
from feedkv.sql.enums import code_between
from feedkv.sql.execution import Execution, Result

__all__ = ["HANDLERS", "publish_added_labels"]

_TAG = "ALTER TYPE"


def add_value(ex: Execution, s: st.AlterTypeAddValue) -> Result:
    database, found = _enum(ex, s.name)
    labels = found.labels
    if s.label in labels or any(s.label == label for label, _code in found.adding):
        if s.if_not_exists:
            return Result(tag=_TAG, notices=(f'enum value "{s.label}" already exists, skipping',))
        raise SQLError("42710", f'enum value "{s.label}" already exists')
    # NB: the codes of the labels this transaction added too, so two added at one place
    # get distinct codes
    codes = sorted([*found.codes, *(code for _label, code in found.adding)])
    at = len(codes)
    if s.existing is not None:
        if s.existing not in labels:
            raise SQLError("22023", f'"{s.existing}" is not an existing enum value')
        at = codes.index(found.codes[labels.index(s.existing)]) + (s.placement == "AFTER")
    code = code_between(codes[at - 1] if at else None, codes[at] if at < len(codes) else None)
    added = replace(found, adding=(*found.adding, (s.label, code)))
    if ex.autocommit:
        added = added.made_public()
    else:
        # NB: as CockroachDB's: the rest of the transaction cannot use it; its commit
        # makes it public (publish_added_labels)
        ex.added_labels |= {found.id}
    _publish(ex, database, added)
    return Result(tag=_TAG)


def rename_value(ex: Execution, s: st.AlterTypeRenameValue) -> Result:
    database, found = _enum(ex, s.name)
    if s.old not in found.labels:
        raise SQLError("22023", f"{s.old} is not an existing enum value")
    if s.new != s.old and s.new in found.labels:
        raise SQLError("42710", f"enum value {s.new} already exists")
    labels = tuple(s.new if label == s.old else label for label in found.labels)
    _publish(ex, database, replace(found, labels=labels))
    return Result(tag=_TAG)


def _enum(ex: Execution, name: st.TableName) -> tuple[DatabaseDescriptor, TypeDescriptor]:
    database = ex.database(name.database)
    ex.require_privilege(database, "CREATE")  # as CREATE TYPE
    found = catalog.type_by_name(ex.write_txn, database, name.name)
    if found is None:
        raise SQLError("42704", f'type "{name.name}" does not exist')
    return database, found


def _publish(ex: Execution, database: DatabaseDescriptor, new: TypeDescriptor) -> None:
    """Write the type's new version, and a new version of every table with a column of
    it (or an array of it) holding its new labels and codes."""
    txn = ex.write_txn
    catalog.put_type(txn, new)
    for desc in catalog.list_tables(txn, database):
        columns = new.retyped(desc.columns)
        if columns != desc.columns:
            ex.changing(desc)
            ex.publish(desc.bumped(columns=columns))
            ex.session.forget(table=desc.id)


def publish_added_labels(txn: Txn, executions: Iterable[Execution]) -> None:
    """Make public, in ``txn`` just before it commits, the enum labels its
    ``executions`` added (:attr:`TypeDescriptor.adding`): the type and the tables of
    it are rewritten, at the versions the transaction wrote, with them public, so no
    statement outside it ever sees them adding (as ``publish_added_columns``). NB: a
    savepoint rolled back may have undone the addition; then there is nothing to do."""
    type_ids: set[int] = set()
    for execution in executions:
        type_ids |= execution.added_labels
    if not type_ids:
        return
    for type_id in sorted(type_ids):
        found = catalog.get_descriptor(txn, type_id)
        if not isinstance(found, TypeDescriptor) or not found.adding:
            continue
        public = found.made_public()
        catalog.put_type(txn, public)
        database = catalog.get_descriptor(txn, public.database_id)
        if not isinstance(database, DatabaseDescriptor):
            raise InvariantViolation(f"type {public.name!r} has no database {public.database_id}")
        for desc in catalog.list_tables(txn, database):
            columns = public.retyped(desc.columns)
            if columns != desc.columns:
                catalog.put_table(txn, replace(desc, columns=columns), name_entry=False)


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.AlterTypeAddValue: add_value,
    st.AlterTypeRenameValue: rename_value,
}
