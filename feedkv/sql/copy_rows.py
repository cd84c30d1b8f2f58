"""``COPY ... FROM STDIN``'s rows written in bulk, column by column.

The wire protocol hands a COPY's rows over decoded into fields; they could run as
INSERT statements of a thousand rows each (and do, inside an explicit transaction or
when this path declines), but each row would then be planned, coerced, encoded and
buffered on its own. Here a COPY outside a transaction is one statement of its own
(:class:`~feedkv.sql.statements.CopyRows`): each column is coerced as a whole
(:func:`~feedkv.sql.types.coerce_column`), the rows are encoded in bulk
(:func:`~feedkv.sql.row_codec.rows_pairs`) and buffered as new keys in one call
(:meth:`Txn.put_if_absent_many`), and the commit sends them as one
:class:`~feedkv.kv.api.Ingest` command when they fall in one range (a one-phase commit,
all or none). Rows across ranges go as one ``Ingest`` per range too, but of the
transaction's intents (:func:`~feedkv.storage.mvcc.ingest_intents`), and the commit's
resolution turns each range's batch into committed values at once
(:func:`~feedkv.storage.mvcc.resolve_intents`). The rows are ordinary committed writes:
changefeeds emit them.

NB: rows across ranges are not sent as an ``Ingest`` of committed values per range at one
timestamp, as IMPORT sends them: those commands are each atomic, not together, so a
reader could see one range's rows and not another's, and a range that refused its rows
(a key there already) would leave the others' written. IMPORT may, because its table is
offline until every command is in (as CockroachDB's AddSSTable-based IMPORT, which is not
transactional either); a COPY loads a table that stays online, so it keeps the
transaction's all or nothing, as CockroachDB's atomic COPY does: until the transaction
record commits, its intents hold readers off, and an abort removes them unseen.

Anything this path does not do in bulk raises :class:`CopyDeclined` before anything is
written, and the caller runs the INSERTs instead, which find and name the bad line:
a table with secondary indexes or constraints, a column that needs converting, a bad
value, a NULL where none may be, a key twice.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

from feedkv.errors import FeedKVError, InvalidArgumentError, SQLError
from feedkv.sql import statements as st
from feedkv.sql.columnar import note_written
from feedkv.sql.execution import Execution, Result
from feedkv.sql.plan import column_default
from feedkv.sql.row_codec import rows_pairs
from feedkv.sql.types import coerce_column

__all__ = ["HANDLERS", "CopyDeclined", "copy_rows"]


class CopyDeclined(FeedKVError):
    """The rows cannot go in bulk (the message says why): run them as INSERTs."""


def copy_rows(ex: Execution, s: st.CopyRows) -> Result:
    """Buffer ``s``'s rows in ``ex``'s transaction as new rows (see the module
    docstring); raises :class:`CopyDeclined` for rows it cannot write in bulk."""
    desc = ex.table(s.table, "INSERT")
    txn = ex.txn
    if not ex.autocommit or txn is None:
        raise CopyDeclined("a COPY inside a transaction runs as INSERTs")
    if desc.constrained:
        raise CopyDeclined("the table has indexes or constraints")
    count = len(s.columns[0]) if s.columns else 0
    values: dict[int, list[Any]] = {}
    try:
        for name, column_values in zip(s.names, s.columns, strict=True):
            column = desc.column(name)
            values[column.id] = coerce_column(column_values, column.type, column.name)
        for column in desc.columns:
            if column.id not in values:
                make = column_default(column)
                made = [make((), ex.context) for _ in range(count)] if make else [None] * count
                values[column.id] = coerce_column(made, column.type, column.name)
    except SQLError as exc:
        raise CopyDeclined(f"a value does not convert: {exc.message}") from None
    if any(None in values[c.id] for c in desc.columns if not c.nullable):
        raise CopyDeclined("a NULL where none may be")
    try:
        encoded = rows_pairs(desc, values)
    except InvalidArgumentError as exc:
        raise CopyDeclined(str(exc)) from None
    if encoded is None:
        raise CopyDeclined("the rows need encoding one by one")
    keys, row_values = encoded
    # NB: keys in order (a COPY of sorted rows) hold none twice: one pass of compares
    ascending = all(map(operator.lt, keys, itertools.islice(keys, 1, None)))
    if not ascending and len(set(keys)) != len(keys):
        raise CopyDeclined("a key twice")
    if not txn.put_if_absent_many(keys, row_values, ascending=ascending):
        raise CopyDeclined("the transaction wrote some of the keys already")
    if keys:
        low, high = (keys[0], keys[-1]) if ascending else (min(keys), max(keys))
        ex.inserted_batch(low, high, desc)
    note_written(ex, desc, count)
    return Result(tag=f"COPY {count}")


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {st.CopyRows: copy_rows}
