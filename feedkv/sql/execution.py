"""One statement's run: what it runs with, and the reading every statement shares.

An :class:`Execution` holds what one statement runs with: the reader (a transaction,
or a snapshot for AS OF SYSTEM TIME), the placeholders, the statement's clock and the
session it belongs to (seen through
:class:`~feedkv.sql.session_context.SessionContext`). :mod:`feedkv.sql.executor`
runs a statement with one; the handlers of :mod:`feedkv.sql.ddl`, :mod:`feedkv.sql.query`
and :mod:`feedkv.sql.dml` use its methods.

Rows are read by scanning the narrowest key span the WHERE clause allows
(:mod:`feedkv.sql.plan`); the full WHERE clause is then applied to every row read.
"""

from __future__ import annotations

import decimal
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Self, SupportsIndex, TypeVar

from sqlglot import exp

from feedkv.errors import (
    LockNotAvailableError,
    SQLError,
)
from feedkv.kv.txn import Txn
from feedkv.sql import catalog, sequences
from feedkv.sql import statements as st
from feedkv.sql.computed import fill_virtual, has_virtual
from feedkv.sql.descriptor import (
    DatabaseDescriptor,
    NamedRelation,
    TableDescriptor,
)
from feedkv.sql.expr import (
    Compiled,
    Context,
    Scope,
    compile_expr,
)
from feedkv.sql.indexes import primary_key_of
from feedkv.sql.leases import Lease, prepare_change, withdraw_change
from feedkv.sql.plan import Planned, Selection, env_of, holds, sorted_rows
from feedkv.sql.relation import Relation
from feedkv.sql.row_codec import (
    RowAssembler,
    decode_row_key,
    decode_row_values,
    row_span,
    table_span,
)
from feedkv.sql.session_context import SessionContext
from feedkv.sql.types import (
    INT64_MAX,
    ColumnType,
    logical_decimal,
    type_of_value,
    wall_instant,
)
from feedkv.storage.mvcc import KeyValue
from feedkv.util.keys import Span, key_next

if TYPE_CHECKING:
    from feedkv.kv.db import KVClient
    from feedkv.util.hlc import Timestamp

__all__ = [
    "ROW_IDS",
    "Execution",
    "Result",
    "RowIds",
    "RowLocking",
    "publish_added_columns",
    "tagged",
]


@dataclass(frozen=True, slots=True)  # NB: slots: one is made per statement, in half the time
class Result:
    """What a statement returns: column names, rows (tuples) and a command tag such as
    ``INSERT 0 3``. Iterating a result iterates its rows.

    NB: a write without RETURNING answers with a result its tag shares with other
    statements (:func:`tagged`), whose empty rows refuse to grow: copy rows to change
    them."""

    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    tag: str = ""
    # The columns' types where the query's tree tells (None: it does not), for a query
    # read as a table or as a side of a set operation.
    types: tuple[ColumnType | None, ...] = field(default=(), compare=False)
    # Notices for the client (PostgreSQL's NoticeResponse), sent before the tag.
    notices: tuple[str, ...] = field(default=(), compare=False)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return self.rows[index]

    def stop_at(self, deadline: float) -> None:
        """End rows still to come at ``deadline`` (``time.monotonic()``) with 57014: the
        ``statement_timeout`` of the statement that made this result, whose rows may
        stream after it returned (a sinkless changefeed's). A result whose rows are
        all here has nothing to stop."""


class _NoRows(list[tuple[Any, ...]]):
    """The rows of a result :func:`tagged` shares: an empty list (the result compares and
    reads as one made anew) that refuses to grow, so no caller's change reaches the
    results of other statements. What cannot change an empty list (``sort``, ``pop``,
    ``clear``, ...) is left as it is."""

    __slots__ = ()

    def append(self, row: tuple[Any, ...]) -> None:
        raise _unchanging()

    def insert(self, index: SupportsIndex, row: tuple[Any, ...]) -> None:
        raise _unchanging()

    def extend(self, rows: Iterable[tuple[Any, ...]]) -> None:
        raise _unchanging()

    def __iadd__(self, rows: Iterable[tuple[Any, ...]]) -> Self:  # type: ignore[override, misc]
        raise _unchanging()

    def __setitem__(self, index: Any, rows: Any) -> None:
        raise _unchanging()


def _unchanging() -> TypeError:
    return TypeError("this result has no rows and is shared by statements: its rows do not change")


@lru_cache(maxsize=256)
def tagged(tag: str) -> Result:
    """``Result(tag=tag)``, made once for each recent tag: a write without RETURNING
    answers with one on every statement, and making a frozen result costs a call per
    field (about a fiftieth of an INSERT's bytecodes)."""
    return Result(rows=_NoRows(), tag=tag)


class RowIds:
    """``unique_rowid()``: increasing 64-bit ids, time in units of 10 us in the high bits
    (as CockroachDB does) and a per-process random salt in the low 15, counted up when
    two ids fall in the same tick."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0
        # NB: not the global random: a test (hypothesis) seeds it, so two processes
        # would share a salt
        self._salt = int.from_bytes(os.urandom(2)) & 0x7FFF

    def next(self) -> int:
        with self._lock:
            candidate = (time.time_ns() // 10_000) << 15 | self._salt
            self._last = max(self._last + 1, candidate)
            return self._last


ROW_IDS = RowIds()


def _logical_timestamp(txn: Txn | None, db: KVClient) -> decimal.Decimal:
    """``cluster_logical_timestamp()`` of a statement in ``txn``: its read timestamp,
    fixed now if it has none yet (``db.now()`` without a transaction)."""
    if txn is not None:
        if txn.read_ts is None:
            txn.get(catalog.descriptor_key(0))  # fixes the read timestamp
        if txn.read_ts is not None:
            return logical_decimal(txn.read_ts)
    return logical_decimal(db.now())


def _user_type(
    session: SessionContext, txn: Txn | None, seen: dict[str, ColumnType], name: str
) -> ColumnType:
    """The column type of the enum ``name`` in the session's database, read once per
    statement (``seen``); 42704 when there is none."""
    found = seen.get(name)
    if found is not None:
        return found
    described = None
    if txn is not None:
        database = session.resolve_database(txn, session.database)
        described = catalog.type_by_name(txn, database, name)
    if described is None:
        raise SQLError("42704", f'type "{name}" does not exist')
    seen[name] = found = described.column_type()
    return found


_P = TypeVar("_P")

# How a statement reads the rows it locks: waiting for another transaction holding one,
# failing at once with 55P03 (NOWAIT), or leaving such rows out (SKIP LOCKED). ``None``
# where a read takes no lock.
RowLocking = Literal["wait", "nowait", "skip"]


class _StatementContext(Context):
    """The context of one statement's expressions. The functions bound to its session
    (``logical_timestamp``, ``sequence``, ``enum_type``, ...) and the state of its
    subqueries are made at their first read, by :meth:`__getattr__`: most statements use
    none, and making the seven functions (three of them partials) and three containers
    cost each statement more than the rest of its context."""

    __slots__ = ("_session", "_txn")

    def __init__(self, session: SessionContext, txn: Txn | None, params: Sequence[Any]) -> None:
        # NB: not Context.__init__, which sets every slot: a slot left unset here is read
        # through __getattr__, which makes its value then (and it may still be assigned
        # first: AS OF SYSTEM TIME sets its own logical_timestamp)
        self.params = params
        self._session = session
        self._txn = txn

    def __getattr__(self, name: str) -> Any:
        # NB: partials of the session and the transaction, never of the execution: the
        # context would hold the execution in a cycle, and every statement would leave
        # its garbage to the cyclic GC
        session, txn = self._session, self._txn
        made: object
        if name == "_now":
            # read from the clock at its first use (see Context.now); in a transaction
            # AS OF SYSTEM TIME, its time, as CockroachDB's
            as_of = session.transaction_as_of if txn is not None else None
            made = None if as_of is None else wall_instant(as_of)
        elif name == "subqueries" or name == "value_sets":
            made = {}
        elif name == "outer":
            made = []
        elif name == "logical_timestamp":
            made = partial(_logical_timestamp, txn, session.db)
        elif name == "unique_rowid":
            made = ROW_IDS.next
        elif name == "variable":
            made = session.variable
        elif name == "sequence":
            made = partial(sequences.call, session, txn)
        elif name == "sleep":
            made = session.interrupt.sleep
        elif name == "interrupted":
            made = session.interrupt.check
        elif name == "backend_pid":
            made = session.backend_pid
        elif name == "node_id":
            made = session.db.gateway_node
        elif name == "transaction_age":
            made = session.transaction_age_ns
        elif name == "enum_type":
            made = partial(_user_type, session, txn, {})
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        setattr(self, name, made)
        return made


# KV pairs a table scan reads in its first page, and at most in one (see _scan_pages).
_FIRST_PAGE = 1024
_LAST_PAGE = 65536


class Execution:
    """One statement's run (see the module docstring)."""

    # NB: what most statements never fill starts as a shared, empty, immutable value
    # here, and a statement that adds to one makes its own (``ex.adding |= {id}``): one
    # execution is made per statement, and building each container for each cost more
    # than the rest of its making.
    after_commit: Sequence[Callable[[], object]] = ()  # run once the transaction commits
    # Tables this statement added columns to that its transaction's commit makes public
    # (see Column.adding and publish_added_columns).
    adding: frozenset[int] = frozenset()
    # The ids of the enum types whose labels it added in an explicit transaction: public
    # once it commits (TypeDescriptor.adding, publish_added_labels).
    added_labels: frozenset[int] = frozenset()
    leasing = False
    ctes: Mapping[str, Relation] = MappingProxyType({})  # the rows of the CTEs in scope
    # Runs a statement in an execution: the executor's, which sets it (a write read as a
    # source, ``FROM [INSERT ... RETURNING ...]``, runs in the reader's).
    run_nested: Callable[[Execution, st.Statement], Result] | None = None
    # The scopes of the queries around the subquery being planned, innermost last.
    outer_scopes: tuple[Scope, ...] = ()
    _admin: bool | None = None  # whether the user has the admin role, once asked
    _lease_keys: Mapping[int, list[bytes]] = MappingProxyType({})  # table id -> keys to delete
    _changed: frozenset[int] = frozenset()  # tables whose leases :meth:`changing` waited for
    # Rows written blind in bulk (a COPY's): each batch's lowest and highest key.
    inserted_batches: Sequence[tuple[bytes, bytes, TableDescriptor]] = ()

    def __init__(
        self,
        session: SessionContext,
        txn: Txn | None,
        params: Sequence[Any],
        *,
        autocommit: bool = False,  # the statement's transaction commits right after it
        lease_in_txn: bool = False,  # an explicit transaction's: it may use leases
    ) -> None:
        self.session = session
        self.txn = txn
        self.autocommit = autocommit
        self.lease_in_txn = lease_in_txn
        self.reader: catalog.Reader | None = txn
        self.leases: list[Lease] = []  # held until the transaction ends
        # Rows written blind, by their first key: a failed check at commit is a duplicate
        # (the key tells its values). NB: the table alone, not the row: a bulk load's
        # million rows would otherwise stay alive as a million dicts until the commit,
        # and every full garbage collection would walk them.
        self.inserted: dict[bytes, TableDescriptor] = {}
        # Rows updated blind, by key: the tag of the result had the row been missing at
        # commit (a tag, not a Result: one is made per UPDATE, and hardly ever used).
        self.missing: dict[bytes, str] = {}
        self.context: Context = _StatementContext(session, txn, params)
        if txn is not None:
            txn.lock_timeout_ms = session.lock_timeout_ms

    def on_commit(self, hook: Callable[[], object]) -> None:
        """Run ``hook`` once the statement's transaction commits."""
        hooks = self.after_commit
        if not isinstance(hooks, list):
            hooks = self.after_commit = []  # NB: its own, in place of the shared empty one
        hooks.append(hook)

    def inserted_batch(self, low: bytes, high: bytes, desc: TableDescriptor) -> None:
        """Rows of ``desc`` were written blind in bulk, their keys from ``low`` to
        ``high`` (see :meth:`inserted_table`)."""
        batches = self.inserted_batches
        if not isinstance(batches, list):
            batches = self.inserted_batches = []
        batches.append((low, high, desc))

    def inserted_table(self, key: bytes) -> TableDescriptor | None:
        """The table of the row written blind whose first key is ``key`` (``None``: no
        row written blind here has it)."""
        found = self.inserted.get(key)
        if found is None:
            for low, high, desc in self.inserted_batches:
                if low <= key <= high:
                    return desc
        return found

    @property
    def write_txn(self) -> Txn:
        if self.txn is None:
            raise SQLError("0A000", "this statement needs a transaction")
        return self.txn

    @property
    def read_source(self) -> catalog.Reader:
        if self.reader is None:
            raise SQLError("0A000", "this statement needs a transaction")
        return self.reader

    def database(self, name: str | None) -> DatabaseDescriptor:
        return self.session.resolve_database(self.read_source, name or self.session.database)

    def table(
        self, name: st.TableName, privilege: str = "SELECT", *, offline_ok: bool = False
    ) -> TableDescriptor:
        """The table ``name`` names, if the session's user holds ``privilege`` on it
        (or the admin role); else 42501. A table an IMPORT INTO has taken offline is
        refused (55000) unless ``offline_ok``."""
        desc = self._table(name)
        if desc.offline and not offline_ok:
            raise SQLError("55000", f'relation "{desc.name}" is offline: importing')
        self.require_privilege(desc, privilege)
        return desc

    def relation(self, name: st.TableName, privilege: str = "SELECT") -> NamedRelation:
        """The table, view or sequence ``name`` names, if the user holds ``privilege``
        on it."""
        try:
            return self.table(name, privilege)
        except SQLError as exc:
            if exc.code != "42809":  # a view or a sequence
                raise
        found = self.session.relation_named(self.read_source, name.database, name.name)
        self.require_privilege(found, privilege)
        return found

    def _table(self, name: st.TableName) -> TableDescriptor:
        if self.leasing and self.reader is self.txn:
            lease = self.session.leased_table(name.database, name.name)
            if lease is not None and not self.autocommit:
                # NB: an explicit transaction may read below the version's time: its
                # descriptor then comes from the transaction, as its rows do
                read_ts = self.write_txn.read_ts
                owner = self.session.leases
                if read_ts is not None and read_ts < lease.read_at and owner is not None:
                    owner.release(lease)
                    lease = None
            if lease is not None:
                self.leases.append(lease)
                self.write_txn.limit_commit(lease.expires)
                return lease.desc
        return self.session.resolve_table(self.read_source, name.database, name.name)

    def is_admin(self) -> bool:
        # NB: root is always an admin (as CockroachDB's): its statements read no user
        # record, so a statement on a leased table still sends a single batch
        if self.session.user == catalog.ROOT:
            return True
        if self._admin is None:
            self._admin = catalog.is_admin(self.read_source, self.session.user)
        return self._admin

    def require_privilege(self, desc: NamedRelation | DatabaseDescriptor, privilege: str) -> None:
        """42501 unless the user is an admin or was granted ``privilege`` on ``desc``
        (a table, or a database); 42501 for everyone, admins too, to create or drop
        anything in the ``system`` database, or to drop it."""
        if (
            privilege in ("CREATE", "DROP")
            and isinstance(desc, DatabaseDescriptor)
            and desc.id == catalog.SYSTEM_DATABASE_ID
        ):
            raise SQLError(
                "42501",
                f"user {self.session.user} does not have {privilege} privilege on database "
                f"{desc.name}",
            )
        # NB: root's question first, without is_admin's call: each statement asks once
        # or twice
        if self.session.user == catalog.ROOT or self.is_admin():
            return
        if privilege not in catalog.get_privileges(self.read_source, desc.id, self.session.user):
            kind = "database" if isinstance(desc, DatabaseDescriptor) else "relation"
            raise SQLError(
                "42501",
                f"user {self.session.user} does not have {privilege} privilege on {kind} "
                f"{desc.name}",
            )

    def grant_creator(self, object_id: int) -> None:
        """The user creating the table, view or sequence ``object_id`` holds every
        privilege on it, as CockroachDB's owner of an object does (and as its SHOW GRANTS
        lists the owner's ALL); admins hold them already."""
        if not self.is_admin():
            catalog.put_privileges(
                self.write_txn, object_id, self.session.user, frozenset(st.PRIVILEGES)
            )

    def release_leases(self) -> None:
        leases, self.leases = self.leases, []
        owner = self.session.leases
        if owner is not None:
            for lease in leases:
                owner.release(lease)

    def changing(self, desc: TableDescriptor) -> None:
        """A new version of ``desc`` will be written: wait for the leases on this one
        (before the rows it rewrites are read, so they are read above every statement
        that used it)."""
        self._changed |= {desc.id}
        keys = prepare_change(
            self.session.db,
            self.write_txn,
            desc.id,
            local=self.session.leases,
            own=self.session.transaction_leases(),
        )
        self._lease_keys = {**self._lease_keys, desc.id: keys}

    def withdraw_changes(self) -> None:
        """The statement's transaction did not commit: take back its pending markers."""
        changed, self._changed = self._changed, frozenset()
        for table_id in changed:
            withdraw_change(self.session.db, table_id)

    def publish(self, new: TableDescriptor) -> None:
        """Write ``new``, the next version of a table :meth:`_changing` prepared, before
        any row the change rewrites, and move the transaction up to now.

        While the change is pending no lease is granted, so statements read the
        descriptor in their transactions. The new version goes out as an intent at
        once, and the statements that meet it wait (a schema change outranks writers,
        see ``Session``). The rows are read after that, above every statement that read
        the old version: none can write under the rewrite and fail its refresh, which a
        steady stream of writers otherwise did on every retry."""
        txn = self.write_txn
        # NB: the record goes with the rows, which then resolve with the commit: a
        # changefeed sees the rewrite before the writes that follow it.
        catalog.put_table(txn, new, name_entry=False, anchor=table_span(new.id).start)
        lease_keys = dict(self._lease_keys)
        for key in lease_keys.pop(new.id):
            txn.delete(key)
        self._lease_keys = lease_keys
        txn.advance_to(self.session.db.now())

    def require_admin(self, what: str) -> None:
        if not catalog.is_admin(self.read_source, self.session.user):
            raise SQLError(
                "42501", f"user {self.session.user} does not have the admin role needed to {what}"
            )

    def constant(self, node: exp.Expr) -> Any:
        return compile_expr(node, Scope())((), self.context)

    def rows(
        self,
        desc: TableDescriptor,
        span: Span,
        *,
        lock: RowLocking | None = None,
        stamps: dict[bytes, Timestamp] | None = None,
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes]]]:
        """The rows of ``desc`` in ``span``, each with its KV pairs; ``lock``: read them
        with locks, held until the transaction ends (see :meth:`chosen`); ``stamps``:
        each pair's MVCC timestamp is put in it by its key as the pair is read."""
        kvs = self._scan_pages(desc, span, lock)
        if stamps is not None:
            kvs = _stamped(kvs, stamps)
        rows = RowAssembler(desc).rows(kvs)
        if not has_virtual(desc):
            return rows
        return self._with_virtual(desc, rows)

    def _with_virtual(
        self, desc: TableDescriptor, rows: Iterator[tuple[dict[int, Any], dict[bytes, bytes]]]
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes]]]:
        """``rows`` with their VIRTUAL computed columns computed (none is stored)."""
        context = self.context
        ids = [c.id for c in desc.columns]
        for row, pairs in rows:
            values = fill_virtual(desc, [row[i] for i in ids], context)
            yield dict(zip(ids, values, strict=True)), pairs

    def _scan_pages(
        self, desc: TableDescriptor, span: Span, lock: RowLocking | None
    ) -> Iterator[KeyValue]:
        """The KV pairs of ``span``, read a page at a time (pages grow from
        :data:`_FIRST_PAGE` to :data:`_LAST_PAGE` pairs), the session's interrupt looked
        at between pages: a scan of a large table stops within a page of a cancel.

        NB: the pages grow: a read that stops early (a LIMIT, a cursor's first FETCH)
        costs a small page, a long scan few round trips. A SKIP LOCKED read's pages are
        of one pair: it locks what it reads, so a LIMIT that stops it leaves the rows
        past it to other transactions (each of a job queue's workers takes its own)."""
        if lock == "skip" and len(desc.families) > 1:
            # NB: a write of some of a row's families leaves intents on their keys
            # only: skipping those would return the rest of the row, a row in part
            raise SQLError(
                "0A000",
                f'SKIP LOCKED is not supported on table "{desc.name}": it has more than '
                "one column family",
            )
        source, check = self.read_source, self.session.interrupt.check
        start, page = span.start, 1 if lock == "skip" else _FIRST_PAGE
        txn = self.txn if lock is not None and source is self.txn else None
        while True:
            if txn is not None:
                try:
                    kvs = txn.scan(
                        start,
                        span.end,
                        limit=page,
                        lock=True,
                        nowait=lock == "nowait",
                        skip_locked=lock == "skip",
                    )
                except LockNotAvailableError as exc:
                    raise _lock_not_available(desc, exc) from exc
            else:
                kvs = source.scan(start, span.end, limit=page)
            yield from kvs
            if len(kvs) < page:
                return
            check()
            start = key_next(kvs[-1].key)
            if lock != "skip":
                page = min(page * 2, _LAST_PAGE)

    def envs(
        self,
        desc: TableDescriptor,
        span: Span,
        *,
        lock: RowLocking | None = None,
        mvcc: bool = False,
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of ``desc`` in ``span`` as tuples in column order, for a statement
        that only reads them: no dict per row and no KV pairs kept (which a write needs
        to rewrite the row), a third of a row's cost in a scan. Read in pages, as
        :meth:`rows`, so a cancel stops it. ``mvcc``: each row's MVCC timestamp follows
        its columns (:mod:`feedkv.sql.mvcc_column`)."""
        kvs = self._scan_pages(desc, span, lock)
        virtual = has_virtual(desc)
        if not virtual and not mvcc:
            return (tuple(values) for _key, values, _ts in decode_row_values(desc, kvs))
        return self._filled(desc, kvs, virtual, mvcc)

    def _filled(
        self, desc: TableDescriptor, kvs: Iterator[KeyValue], virtual: bool, mvcc: bool
    ) -> Iterator[tuple[Any, ...]]:
        """:meth:`envs`'s rows with their VIRTUAL columns computed and, with ``mvcc``,
        their timestamps appended."""
        context = self.context
        for _key, values, ts in decode_row_values(desc, kvs):
            row = fill_virtual(desc, values, context) if virtual else values
            yield (*row, logical_decimal(ts)) if mvcc else tuple(row)

    def selected(
        self, desc: TableDescriptor, selection: Selection, *, lock: RowLocking | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows the WHERE clause keeps, as :meth:`envs` gives them (read only);
        ``lock``: the rows read are locked (SELECT FOR UPDATE), as :meth:`chosen`'s.

        NB: a scan locks every row it reads, those the WHERE clause then drops among
        them, as CockroachDB's does when the filter is not part of the span."""
        return list(self.iter_selected(desc, selection, lock=lock))

    def iter_selected(
        self, desc: TableDescriptor, selection: Selection, *, lock: RowLocking | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """:meth:`selected`'s rows as they are read, a page at a time (a cursor's): those
        of the index entries the WHERE clause reads, or of the keys it lists, or of its
        key span (filtered by the WHERE clause unless the span holds exactly its rows)."""
        context = self.context
        test = selection.test
        spans = None
        if selection.index_span is not None:
            entries = selection.index_span(context)
            if entries is not None:
                spans = self._indexed_rows(desc, entries)
        if spans is None:
            spans = self._key_list_spans(desc, selection)
        if spans is None:
            span, exact = selection.span(context)
            spans = [span]
            test = None if exact else test
        envs = (
            env for span in spans for env in self.envs(desc, span, lock=lock, mvcc=selection.mvcc)
        )
        if test is None:
            return envs
        return (env for env in envs if holds(test(env, context)))

    def _key_list_spans(self, desc: TableDescriptor, selection: Selection) -> list[Span] | None:
        """The spans of the keys ``selection`` lists (in key order, as a scan gives the
        rows), or None when it lists none for this run (see Selection.key_list)."""
        if selection.key_list is None:
            return None
        keys = selection.key_list(self.context)
        return None if keys is None else [row_span(desc, [key]) for key in keys]

    def matching(
        self, desc: TableDescriptor, selection: Selection, *, lock: RowLocking | None = None
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]:
        context = self.context
        if selection.index_span is not None:
            entries = selection.index_span(context)
            if entries is not None:
                yield from self._matching_by_index(desc, selection, entries, lock)
                return
        span, exact = selection.span(context)
        test = None if exact else selection.test
        spans = self._key_list_spans(desc, selection)
        if spans is None:
            spans = [span]
        else:
            test = selection.test
        ids = [c.id for c in desc.columns]
        for span in spans:
            for row, pairs, env in self.row_envs(desc, span, lock, ids, selection.mvcc):
                if test is not None and not holds(test(env, context)):
                    continue
                yield row, pairs, env

    def row_envs(
        self, desc: TableDescriptor, span: Span, lock: RowLocking | None, ids: list[int], mvcc: bool
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]:
        """:meth:`rows` with each row's values in ``ids``' order; ``mvcc``: its MVCC
        timestamp (its newest pair's) after them (:mod:`feedkv.sql.mvcc_column`)."""
        if not mvcc:
            for row, pairs in self.rows(desc, span, lock=lock):
                yield row, pairs, tuple(row[i] for i in ids)
            return
        stamps: dict[bytes, Timestamp] = {}
        for row, pairs in self.rows(desc, span, lock=lock, stamps=stamps):
            newest = max(stamps.pop(key) for key in pairs)
            yield row, pairs, (*(row[i] for i in ids), logical_decimal(newest))

    def _matching_by_index(
        self,
        desc: TableDescriptor,
        selection: Selection,
        entries: list[Span],
        lock: RowLocking | None,
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]:
        """The rows whose index entries are in the ``entries`` spans that the WHERE clause keeps,
        in primary key order (as a scan of the table gives them): one read of the
        entries, then one of each row they name (with ``lock``, the rows are locked,
        not the entries: a writer of the row writes both)."""
        found = self._indexed_rows(desc, entries)
        test, ids, context = selection.test, [c.id for c in desc.columns], self.context
        for span in found:
            for row, pairs, env in self.row_envs(desc, span, lock, ids, selection.mvcc):
                if test is None or holds(test(env, context)):
                    yield row, pairs, env

    def _indexed_rows(self, desc: TableDescriptor, entries: list[Span]) -> list[Span]:
        """The spans of the rows whose index entries are in ``entries``, in primary key
        order (as a scan of the table gives them)."""
        found = [
            row_span(desc, primary_key_of(desc, kv.value))
            for span in entries
            for kv in self.read_source.scan(span.start, span.end)
        ]
        found.sort(key=lambda span: span.start)
        return found

    def plan(
        self,
        s: Planned,
        desc: TableDescriptor,
        make: Callable[[TableDescriptor, Any, str], _P],
    ) -> _P:
        """``s``'s plan against ``desc``, made once per session (Session.plan); a
        subquery's is made anew each time (it may name the columns of the query around
        it, which is how a run finds out whether it is correlated)."""
        if self.outer_scopes:
            return make(desc, s, self._plan_database(s))
        # NB: the database is worked out only when the plan is made (a kept one is not)
        return self.session.plan(s, desc, make, self._plan_database)

    def _plan_database(self, s: Planned) -> str:
        """The database ``s``'s table is named in (a plan's names resolve there)."""
        table = s.table if isinstance(s.table, st.TableName) else None
        return table.database or self.session.database if table else ""

    @property
    def outer_scope(self) -> Scope | None:
        """The scope of the query around the one being planned (a subquery's)."""
        return self.outer_scopes[-1] if self.outer_scopes else None

    def chosen(
        self,
        desc: TableDescriptor,
        selection: Selection,
        order: Sequence[tuple[Compiled, bool]],
        limit: exp.Expr | None,
    ) -> list[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]:
        """The rows an UPDATE or DELETE writes, in the order it writes them: all that
        ``selection`` matches, in ``order`` (else the primary key's), up to ``limit``.

        With ``enable_implicit_select_for_update`` on (the default, as in CockroachDB),
        the rows are read with locks, held until the transaction ends: a transaction
        that would write them meanwhile waits for this one instead of one of the two
        failing with 40001 (:mod:`feedkv.kv.lock_table`)."""
        matched = list(self.matching(desc, selection, lock=self.row_locking()))
        rows = sorted_rows(matched, order, self.context, env_of)
        return self.limited(rows, limit)

    def row_for_update(
        self, desc: TableDescriptor, key: Sequence[Any]
    ) -> tuple[dict[int, Any], dict[bytes, bytes]] | None:
        """The row of ``desc`` with primary key ``key`` (its values and KV pairs), read
        with a lock as :meth:`chosen` reads (an UPSERT's or ON CONFLICT DO UPDATE's row);
        ``None`` when there is no such row."""
        found = self.rows(desc, row_span(desc, list(key)), lock=self.row_locking())
        return next(iter(found), None)

    def row_locking(self) -> RowLocking | None:
        """How the rows a statement writes are read: with locks, waiting, when
        :meth:`locks_rows`."""
        return "wait" if self.locks_rows() else None

    def locks_rows(self) -> bool:
        """Whether the rows a statement writes are read with locks (the session's
        ``enable_implicit_select_for_update``)."""
        return self.session.variable("enable_implicit_select_for_update") == "on"

    def limited(
        self, rows: list[Any], limit: exp.Expr | None, offset: exp.Expr | None = None
    ) -> list[Any]:
        if offset is not None and (skip := self.count(offset, "OFFSET")):
            rows = rows[skip:]
        if limit is not None and (kept := self.count(limit, "LIMIT")) is not None:
            rows = rows[:kept]
        return rows

    def count(self, node: exp.Expr, what: str) -> int | None:
        """A LIMIT's or OFFSET's row count, typed as CockroachDB types it: an INT, or a
        numeric constant with no fraction (``1 + 0.0``), or a string that reads as one;
        NULL limits nothing. A negative count is 2201W, another type 42804."""
        value = self.constant(node)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise SQLError("22P02", f"could not parse {value!r} as type int") from None
        if (
            isinstance(value, decimal.Decimal)
            and _is_number_constant(node)
            and value == value.to_integral_value()
        ):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SQLError(
                "42804",
                f"argument of {what} must be type int, not type {type_of_value(value).lower()}",
            )
        if value > INT64_MAX:
            raise SQLError("22003", f"{what}: numeric constant out of int64 range: {value}")
        if value < 0:
            raise SQLError("2201W", f"negative value for {what}")
        return value


def publish_added_columns(txn: Txn, executions: Iterable[Execution]) -> None:
    """Make public, in ``txn`` just before it commits, the columns its ``executions``
    added (:attr:`Column.adding`): the version the transaction wrote with them adding is
    rewritten with them public, so no statement outside it ever sees them adding. NB: a
    savepoint rolled back may have undone the addition; then there is nothing to do."""
    table_ids: set[int] = set()
    for execution in executions:
        table_ids |= execution.adding
    if not table_ids:
        return
    for table_id in sorted(table_ids):
        desc = catalog.table_by_id(txn, table_id)
        if desc is None or not any(c.adding for c in desc.columns):
            continue
        public = tuple(replace(c, adding=False) if c.adding else c for c in desc.columns)
        catalog.put_table(txn, replace(desc, columns=public), name_entry=False)


def _is_number_constant(node: exp.Expr) -> bool:
    """A numeric constant expression: literals, signs, parentheses and arithmetic."""
    return all(
        isinstance(part, exp.Literal | exp.Neg | exp.Paren | exp.Add | exp.Sub | exp.Mul)
        and not (isinstance(part, exp.Literal) and part.is_string)
        for part in node.walk()
    )


def _lock_not_available(desc: TableDescriptor, exc: LockNotAvailableError) -> SQLError:
    """55P03 for a NOWAIT read that met ``exc.key``, a row of ``desc`` another
    transaction holds, or a read that waited for it past ``lock_timeout``, worded as
    CockroachDB's (``could not obtain lock on row (k)=(1) in t@t_pkey``, ``canceling
    statement due to lock timeout on row ...``)."""
    where = f"{desc.name}@{desc.name}_pkey"
    what = (
        "canceling statement due to lock timeout on"
        if exc.reason == LockNotAvailableError.LOCK_TIMEOUT
        else "could not obtain lock on"
    )
    try:
        values, _family, _prefix = decode_row_key(desc, exc.key)
    except SQLError:
        return SQLError("55P03", f"{what} row in {where}")
    names = ", ".join(c.name for c in desc.key_columns)
    shown = ", ".join("NULL" if v is None else str(v) for v in values)
    return SQLError("55P03", f"{what} row ({names})=({shown}) in {where}")


def _stamped(kvs: Iterator[KeyValue], stamps: dict[bytes, Timestamp]) -> Iterator[KeyValue]:
    """``kvs``, each pair's timestamp put in ``stamps`` by its key as it passes."""
    for kv in kvs:
        stamps[kv.key] = kv.ts
        yield kv
