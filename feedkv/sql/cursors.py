"""SQL cursors: ``DECLARE``, ``FETCH``, ``MOVE`` and ``CLOSE``, as CockroachDB has them
(the statements run in :mod:`feedkv.sql.cursor_statements`; this module keeps the
cursors' state and motion, and imports nothing of the SQL layer's execution).

A cursor names a query declared in an explicit transaction; its rows are read as
``FETCH`` asks for them, a page of the table's scan at a time where the query allows
(:func:`feedkv.sql.query.stream`), so a cursor over a large table holds a page, not the
table. The query reads at the transaction's timestamp and sees the transaction's
writes made before ``DECLARE``, none after (insensitive, through
:meth:`feedkv.kv.txn.Txn.view`).

As in CockroachDB, cursors only move forward: ``SCROLL`` is refused (0A000) and so
is any motion backwards (55000 ``cursor can only scan forward``: PRIOR, BACKWARD, a
negative count, LAST, FIRST past the first row, ABSOLUTE before the position);
``BINARY`` is refused (0A000). ``FETCH 0`` returns no row and ``RELATIVE 0`` the
current one. ``MOVE`` moves as ``FETCH`` would and counts the rows it passed. Cursors
and the wire protocol's portals share one namespace: ``DECLARE`` refuses a name either
has (42P03).

Lifetime: a cursor ends with its transaction (``COMMIT``, ``ROLLBACK``), with a
``ROLLBACK TO SAVEPOINT`` taken before its ``DECLARE`` (as in PostgreSQL), or by
``CLOSE``. A ``WITH HOLD`` cursor outlives the commit: its remaining rows are read
into memory then (an error there rolls the transaction back); outside a transaction
``DECLARE ... WITH HOLD`` reads them at once, in a transaction of its own. A rollback
closes the cursors its transaction declared and keeps the held ones of earlier
transactions. A schema change in a transaction with open cursors is refused (0A000),
as CockroachDB refuses it.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.types import ColumnType

__all__ = ["Cursor", "Cursors", "check_declare"]

_BACKWARD = "cursor can only scan forward"


@dataclass(eq=False)
class Cursor:
    """One declared cursor: its query's columns and rows, and where it stands:
    ``position`` 0 before the first row, ``n`` on the n-th, one past the last once
    the rows ran out (as PostgreSQL counts)."""

    name: str
    statement: str  # the query's text, for pg_cursors
    columns: tuple[str, ...]
    types: tuple[ColumnType | None, ...]
    rows: Iterator[tuple[Any, ...]]
    holdable: bool
    created: datetime.datetime
    # the DECLARE's execution (None: held past its commit, or read at once); NB: only
    # compared, for ROLLBACK TO SAVEPOINT, so this module needs none of the SQL layer
    execution: object | None = None
    committed: bool = False  # a held cursor whose transaction committed
    position: int = 0
    current: tuple[Any, ...] | None = None
    done: bool = False  # the rows ran out

    def _advance(self) -> tuple[Any, ...] | None:
        """The next row (None: there is none; the position goes one past the last)."""
        if self.done:
            return None
        row = next(self.rows, None)
        self.position += 1
        self.current = row
        if row is None:
            self.done = True
        return row

    def motion(self, kind: str, count: int) -> Iterator[tuple[Any, ...]]:
        """The rows a FETCH of ``kind`` and ``count`` returns (a MOVE passes them),
        read as the iterator is advanced; a backward motion fails now (55000)."""
        if kind == "backward_all" or kind == "last" or count < 0:
            raise SQLError("55000", _BACKWARD)
        if kind == "first" and self.position > 1:
            raise SQLError("55000", _BACKWARD)
        if kind == "absolute" and self.position > count:
            raise SQLError("55000", _BACKWARD)
        return self._rows(kind, count)

    def _rows(self, kind: str, count: int) -> Iterator[tuple[Any, ...]]:
        if kind == "count" or kind == "all":
            steps = itertools.repeat(None) if kind == "all" else range(count)
            for _ in steps:
                row = self._advance()
                if row is None:
                    return
                yield row
            return
        if kind == "first":
            row = self._advance() if self.position == 0 else self.current
        elif kind == "relative":
            row = self.current
            for _ in range(count):
                if (row := self._advance()) is None:
                    break
        else:  # absolute
            row = self.current if self.position == count else None
            while self.position < count:
                if (row := self._advance()) is None:
                    break
        if row is not None:
            yield row

    def hold(self) -> None:
        """Read the remaining rows into memory: the cursor no longer needs its
        transaction."""
        self.rows = iter(list(self.rows))
        self.execution = None


@dataclass
class Cursors:
    """A session's cursors, by name."""

    open: dict[str, Cursor] = field(default_factory=dict)
    # the names of the protocol-level portals (pgwire's, which sets it): one namespace
    # with the cursors', as in PostgreSQL and CockroachDB
    portals: Container[str] = frozenset()

    def get(self, name: str) -> Cursor:
        cursor = self.open.get(name)
        if cursor is None:
            raise SQLError("34000", f'cursor "{name}" does not exist')
        return cursor

    def check_free(self, name: str) -> None:
        """Refuse ``name`` for a new cursor when a cursor or a portal has it (42P03)."""
        if name in self.open:
            raise SQLError("42P03", f'cursor "{name}" already exists')
        if name in self.portals:
            raise SQLError("42P03", f'cursor "{name}" already exists as portal')

    def add(self, cursor: Cursor) -> None:
        self.check_free(cursor.name)
        self.open[cursor.name] = cursor

    def close(self, name: str | None) -> None:
        """CLOSE ``name`` (34000 if there is none), or every cursor (None)."""
        if name is None:
            self.open.clear()
        else:
            self.get(name)
            del self.open[name]

    def in_transaction(self) -> bool:
        """Whether the open transaction declared a cursor still open."""
        return any(not cursor.committed for cursor in self.open.values())

    def before_commit(self) -> None:
        """The transaction commits next: its held cursors read their rows now."""
        for cursor in self.open.values():
            if cursor.holdable and not cursor.committed:
                cursor.hold()

    def end_transaction(self, committed: bool) -> None:
        """The transaction ended: its cursors close, but for the held ones of a commit
        (after :meth:`before_commit`), which stay, as do those of earlier commits."""
        for name, cursor in list(self.open.items()):
            if cursor.committed:
                continue
            if committed and cursor.holdable:
                cursor.committed = True
            else:
                del self.open[name]

    def rolled_back(self, undone: Sequence[object]) -> None:
        """ROLLBACK TO SAVEPOINT undid ``undone``: the cursors they declared close."""
        for name, cursor in list(self.open.items()):
            if any(cursor.execution is execution for execution in undone):
                del self.open[name]


def check_declare(
    cursors: Cursors, name: str, *, binary: bool, scroll: bool | None, hold: bool, explicit: bool
) -> None:
    """Refuse a DECLARE as CockroachDB does: BINARY and SCROLL (0A000), outside a
    transaction without WITH HOLD (25P01), a name a cursor or portal has (42P03)."""
    if binary:
        raise SQLError("0A000", "unimplemented: DECLARE BINARY CURSOR")
    if scroll:
        raise SQLError("0A000", "unimplemented: DECLARE SCROLL CURSOR")
    if not explicit and not hold:
        raise SQLError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
    cursors.check_free(name)
