"""``crdb_internal_mvcc_timestamp``: every table's hidden system column, the MVCC
timestamp of the row's newest version (its newest family's, for a table of several),
as CockroachDB's: a DECIMAL ``<wall nanos>.<logical, 10 digits>``, the form of
``cluster_logical_timestamp()``. A query may select it and filter on it; ``SELECT *``
leaves it out.

Nothing of it is stored. A query whose text names it plans against the table with the
column appended last (:func:`with_mvcc`), and reads its rows with each row's timestamp
appended (``Execution.envs(..., mvcc=True)``); other queries pay nothing for it. So do
an UPDATE's and a DELETE's WHERE, ORDER BY and SET expressions (the timestamp of the
row version they read; with FROM or USING, each table's, as a SELECT of the joined rows
has them), and ON CONFLICT DO UPDATE's SET and WHERE (the existing row's, read again
for it, after the existing and the proposed rows), as CockroachDB's; their RETURNING
names only the table's own columns (42703 for this one, as CockroachDB's), and a
statement that would write it fails with 42P10 (:func:`target_column`).
"""

from __future__ import annotations

import dataclasses

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.types import ColumnType, Kind

__all__ = ["MVCC_COLUMN", "MVCC_TYPE", "names_mvcc", "target_column", "with_mvcc"]

MVCC_COLUMN = "crdb_internal_mvcc_timestamp"
MVCC_TYPE = ColumnType(Kind.DECIMAL)


def names_mvcc(statement: st.Statement) -> bool:
    """Whether ``statement`` may read the column: its text names it (a string constant
    of that text too, which only costs the column's read)."""
    return MVCC_COLUMN in statement.text.lower()


def with_mvcc(desc: TableDescriptor) -> TableDescriptor:
    """``desc`` as a query naming the column plans against it: the column appended,
    hidden, after every other (where the rows read with it carry it). Never stored."""
    if desc.find_column(MVCC_COLUMN) is not None:
        return desc
    column = Column(max(c.id for c in desc.columns) + 1, MVCC_COLUMN, MVCC_TYPE, hidden=True)
    return dataclasses.replace(desc, columns=(*desc.columns, column))


def target_column(desc: TableDescriptor, name: str) -> Column:
    """The column of ``desc`` an INSERT or UPDATE writes, called ``name``: 42P10 for
    this column, which no statement writes (as CockroachDB's "cannot modify system
    column"), 42703 for one ``desc`` does not have."""
    try:
        return desc.column(name)
    except SQLError:
        if name == MVCC_COLUMN:
            raise SQLError("42P10", f'cannot modify system column "{name}"') from None
        raise
