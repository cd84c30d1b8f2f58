"""``crdb_internal_mvcc_timestamp``: every table's hidden system column, the MVCC
timestamp of the row's newest version (its newest family's, for a table of several),
as CockroachDB's: a DECIMAL ``<wall nanos>.<logical, 10 digits>``, the form of
``cluster_logical_timestamp()``. A query may select it and filter on it; ``SELECT *``
leaves it out.

Nothing of it is stored. A query whose text names it plans against the table with the
column appended last (:func:`with_mvcc`), and reads its rows with each row's timestamp
appended (``Execution.envs(..., mvcc=True)``); other queries pay nothing for it.
"""

from __future__ import annotations

import dataclasses

from feedkv.sql import statements as st
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.types import ColumnType, Kind

__all__ = ["MVCC_COLUMN", "names_mvcc", "with_mvcc"]

MVCC_COLUMN = "crdb_internal_mvcc_timestamp"


def names_mvcc(statement: st.Statement) -> bool:
    """Whether ``statement`` may read the column: its text names it (a string constant
    of that text too, which only costs the column's read)."""
    return MVCC_COLUMN in statement.text.lower()


def with_mvcc(desc: TableDescriptor) -> TableDescriptor:
    """``desc`` as a query naming the column plans against it: the column appended,
    hidden, after every other (where the rows read with it carry it). Never stored."""
    if desc.find_column(MVCC_COLUMN) is not None:
        return desc
    column = Column(
        max(c.id for c in desc.columns) + 1, MVCC_COLUMN, ColumnType(Kind.DECIMAL), hidden=True
    )
    return dataclasses.replace(desc, columns=(*desc.columns, column))
