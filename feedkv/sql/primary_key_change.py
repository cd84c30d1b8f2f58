"""``ALTER TABLE t ADD [CONSTRAINT name] PRIMARY KEY (columns)``: give a table created
without a primary key (keyed by its hidden ``rowid``, as CockroachDB does) the key it
was meant to have. pgbench's initialisation creates its tables this way and adds their
keys after loading them.

The rows move: each is read under its ``rowid`` key and written under the new one, in
the statement's transaction, and the ``rowid`` column goes (CockroachDB drops it too
when it replaces the default key). The key columns become NOT NULL. A NULL in one fails
the statement (23502), and so does a value twice (23505), before anything is written.
All the old keys are deleted before any new key is written: an old ``rowid`` key and a
new key can be the same bytes (both one INT), and the new write must win.

A table with secondary indexes, foreign keys or partitions, or one a changefeed
watches, is refused (0A000, 55006): their entries and boundaries are keyed by the old
key.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import ROWID, Column, TableDescriptor
from feedkv.sql.execution import Execution, Result
from feedkv.sql.row_codec import row_kvs, table_span
from feedkv.sql.types import Kind

__all__ = ["add_primary_key"]

# Types whose values cannot be part of a key.
_UNKEYABLE = (Kind.JSONB, Kind.INTERVAL, Kind.ARRAY)


def add_primary_key(ex: Execution, s: st.AddPrimaryKey) -> Result:
    desc = ex.table(s.table, "CREATE")
    new = _with_primary_key(desc, s.columns)
    watchers = catalog.changefeed_watchers(ex.read_source, desc.id)
    if watchers:
        raise SQLError(
            "55006",
            f"cannot change the primary key of {desc.name!r}: changefeed job {watchers[0]} "
            "watches it; cancel the changefeed first",
        )
    ex.changing(desc)
    ex.publish(new)
    rows = list(ex.rows(desc, table_span(desc.id)))
    _check_rows(new, [row for row, _pairs in rows])
    txn = ex.write_txn
    for _row, pairs in rows:
        for key in pairs:
            txn.delete(key)
    for row, _pairs in rows:
        for key, value in row_kvs(new, row).items():
            if value is not None:
                txn.put(key, value)
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def _with_primary_key(desc: TableDescriptor, names: tuple[str, ...]) -> TableDescriptor:
    """``desc`` keyed by the columns ``names`` instead of its hidden ``rowid``."""
    rowid = desc.find_column(ROWID)
    if rowid is None or not rowid.hidden or desc.primary_key != (rowid.id,):
        raise SQLError("42P16", f'multiple primary keys for table "{desc.name}" are not allowed')
    if desc.indexes or desc.foreign_keys or desc.referenced_by or desc.partitions:
        raise SQLError(
            "0A000",
            f'cannot add a primary key to "{desc.name}": it has secondary indexes, foreign '
            "keys or partitions, which are keyed by its rowid; add the key first",
        )
    if len(set(names)) != len(names):
        raise SQLError("42701", "a column appears twice in the primary key")
    key: list[Column] = []
    for name in names:
        column = desc.find_column(name)
        if column is None or column.hidden:
            raise SQLError("42703", f'column "{name}" named in key does not exist')
        if column.type.kind in _UNKEYABLE:
            raise SQLError(
                "0A000",
                f'column "{name}" of type {column.type.kind.value} cannot be in a primary key',
            )
        key.append(column)
    key_ids = {c.id for c in key}
    columns = tuple(
        replace(c, nullable=False) if c.id in key_ids else c
        for c in desc.columns
        if c.id != rowid.id
    )
    families = tuple(
        replace(f, column_ids=tuple(i for i in f.column_ids if i != rowid.id))
        for f in desc.families
    )
    return desc.bumped(
        columns=columns,
        primary_key=tuple(c.id for c in key),
        families=families,
        primary_descending=(),  # NB: the new key's columns are ascending
    )


def _check_rows(new: TableDescriptor, rows: list[dict[int, Any]]) -> None:
    """23502 for a NULL in a key column, 23505 for a key value twice."""
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        key = tuple(row.get(i) for i in new.primary_key)
        for column_id, value in zip(new.primary_key, key, strict=True):
            if value is None:
                column = new.column_by_id(column_id)
                name = column.name if column is not None else str(column_id)
                raise SQLError(
                    "23502", f'column "{name}" of relation "{new.name}" contains null values'
                )
        if key in seen:
            names = ", ".join(c.name for c in new.key_columns)
            values = ", ".join(str(v) for v in key)
            raise SQLError(
                "23505",
                f'could not create unique index "{new.name}_pkey": Key ({names})=({values}) '
                "is duplicated.",
            )
        seen.add(key)
