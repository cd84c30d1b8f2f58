"""``key_column``: a message keyed by one column's value instead of the primary key.

CockroachDB's option (with ``unordered``, which it requires: rows of one key column
value may come from many primary keys, so no per-message-key order holds) changes only
the message key (what a Kafka partitioner hashes), never the value: ``key_in_value``
still carries the primary key. The key is that column's value alone, in the key's form
(the JSON array ``["eu"]``; the protobuf ``Key`` of that one column). A deletion takes
the value from the row before it (the changefeed reads previous rows for this option).

Pure: :func:`check_key_column` judges a table when the changefeed is created,
:func:`key_column_value` finds an event's value.
"""

from __future__ import annotations

from typing import Any

from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.rows import RowEvent
from feedkv.sql.descriptor import Column, TableDescriptor

__all__ = ["check_key_column", "key_column_of", "key_column_value"]


def check_key_column(desc: TableDescriptor, options: ChangefeedOptions) -> None:
    """Raise SQLError 22023 unless ``desc`` has the option's column."""
    name = options.key_column
    if name is not None and desc.find_column(name) is None:
        raise option_error(f"key_column: column {name} not present on table {desc.name}")


def key_column_of(desc: TableDescriptor, name: str) -> Column:
    """The key column of ``desc`` (checked when the changefeed was created; a column
    dropped since fails the table's rows, which the changefeed sets aside)."""
    column = desc.find_column(name)
    if column is None:
        raise ValueError(f"key_column {name} is no longer a column of table {desc.name}")
    return column


def key_column_value(event: RowEvent, name: str) -> Any:
    """The column's value in the row after the change, else in the row before it."""
    for row in (event.after, event.before):
        if row is not None and name in row:
            return row[name]
    return None
