"""``ALTER TYPE`` of an enum: ``ADD VALUE`` and ``RENAME VALUE``, as CockroachDB runs them.

A new label gets a code between its neighbours' (:func:`feedkv.sql.enums.code_between`)
and a renamed one keeps its code, so no stored key or value is rewritten: the type's
descriptor and the columns that use it (which keep the labels and codes, see
``TableDescriptor``) get new versions, the tables' as any schema change publishes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import Column, DatabaseDescriptor, TypeDescriptor
from feedkv.sql.enums import code_between
from feedkv.sql.execution import Execution, Result
from feedkv.sql.types import ColumnType, Kind

__all__ = ["HANDLERS"]

_TAG = "ALTER TYPE"


def add_value(ex: Execution, s: st.AlterTypeAddValue) -> Result:
    database, found = _enum(ex, s.name)
    labels, codes = found.labels, found.codes
    if s.label in labels:
        if s.if_not_exists:
            return Result(tag=_TAG, notices=(f'enum value "{s.label}" already exists, skipping',))
        raise SQLError("42710", f'enum value "{s.label}" already exists')
    at = len(labels)
    if s.existing is not None:
        if s.existing not in labels:
            raise SQLError("22023", f'"{s.existing}" is not an existing enum value')
        at = labels.index(s.existing) + (s.placement == "AFTER")
    code = code_between(codes[at - 1] if at else None, codes[at] if at < len(codes) else None)
    _publish(
        ex,
        database,
        replace(
            found,
            labels=(*labels[:at], s.label, *labels[at:]),
            codes=(*codes[:at], code, *codes[at:]),
        ),
    )
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
    ctype = new.column_type()

    def retyped(column: Column) -> Column:
        if _is_of(column.type, new):
            return replace(column, type=ctype)
        element = column.type.element
        if column.type.kind is Kind.ARRAY and element is not None and _is_of(element, new):
            return replace(column, type=replace(column.type, element=ctype))
        return column

    for desc in catalog.list_tables(txn, database):
        columns = tuple(retyped(c) for c in desc.columns)
        if columns != desc.columns:
            ex.changing(desc)
            ex.publish(desc.bumped(columns=columns))
            ex.session.forget(table=desc.id)


def _is_of(ctype: ColumnType, found: TypeDescriptor) -> bool:
    return ctype.kind is Kind.ENUM and ctype.type_name == found.name


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.AlterTypeAddValue: add_value,
    st.AlterTypeRenameValue: rename_value,
}
