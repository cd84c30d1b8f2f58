"""A SQL session: who is running statements, in which database, in which transaction.

Outside ``BEGIN``, each statement runs in a transaction of its own that is retried on
conflicts, so a single statement never fails with 40001. Several statements sent in one
string run in one such implicit transaction, as PostgreSQL and CockroachDB run a batch:
all take effect or none does (unless the string has ``BEGIN``, ``COMMIT`` or job
statements; then each runs as it comes). Between ``BEGIN`` and
``COMMIT`` the statements share one serializable transaction; a conflict there raises
:class:`~feedkv.errors.SerializationFailure` (SQLSTATE 40001) and the client retries
the whole transaction, which :meth:`Session.run_transaction` does. After an error inside
a transaction, only ``ROLLBACK`` (or ``COMMIT``, which rolls back) is accepted, as in
PostgreSQL.

CockroachDB's client-side retry protocol works too: ``SAVEPOINT cockroach_restart``
first in the transaction; after an error (a 40001 above all), ``ROLLBACK TO SAVEPOINT
cockroach_restart`` starts the transaction over, still open and with the savepoint;
``RELEASE SAVEPOINT cockroach_restart`` commits (a 40001 there is retried the same
way), after which only ``COMMIT`` (or ``ROLLBACK``) is accepted and ends the block.

Savepoints of any other name nest as in PostgreSQL: ``SAVEPOINT x`` marks a point,
``ROLLBACK TO [SAVEPOINT] x`` undoes the statements since (also after one of them failed)
and keeps ``x``, ``RELEASE [SAVEPOINT] x`` forgets ``x`` and those after it; a name used
twice means its latest use. The transaction's writes since ``x`` are taken out of its
buffer (:meth:`feedkv.kv.txn.Txn.rollback_to`), so they never commit. As in CockroachDB:

- after a retryable error (40001) the transaction must start over, so only a savepoint
  taken before its first statement can be rolled back to (it starts the transaction
  over); rolling back to a later one fails with 40001 again;
- rolling back past a schema change is refused (0A000).

SQL cursors (``DECLARE``, ``FETCH``, ``MOVE``, ``CLOSE``) belong to the session and end
with the transaction that declared them, or with a ``ROLLBACK TO SAVEPOINT`` taken before
them (:mod:`feedkv.sql.cursors`).

Sessions run SQL in the client: statements become KV reads and writes of the connected
node, so an embedded store and a server give the same results.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import random
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from feedkv.errors import (
    ConditionFailedError,
    InvariantViolation,
    LockNotAvailableError,
    RetryableError,
    SerializationFailure,
    SQLError,
)
from feedkv.kv.api import MAX_PRIORITY
from feedkv.kv.cancellation import GIVE_UP
from feedkv.kv.txn import Savepoint, Txn, TxnState
from feedkv.sql import catalog, comments, cursor_syntax
from feedkv.sql import statements as st
from feedkv.sql.active_sessions import ActiveSession, SessionRegistry
from feedkv.sql.alter_type import publish_added_labels
from feedkv.sql.copy_rows import CopyDeclined
from feedkv.sql.cursors import Cursor, Cursors, check_declare
from feedkv.sql.describe import Description, describe
from feedkv.sql.descriptor import (
    DatabaseDescriptor,
    NamedRelation,
    SequenceDescriptor,
    TableDescriptor,
    TypeDescriptor,
    ViewDescriptor,
)
from feedkv.sql.dml import duplicate_key_at
from feedkv.sql.execution import Execution, Result, publish_added_columns
from feedkv.sql.executor import LEASED, run
from feedkv.sql.import_into import import_into
from feedkv.sql.interrupt import Interrupt
from feedkv.sql.leases import Lease, Leases
from feedkv.sql.metrics import SQLMetrics, unregistered_sql_metrics
from feedkv.sql.parser import parse, placeholder_count
from feedkv.sql.relation import Relation
from feedkv.sql.session_context import SequenceState
from feedkv.sql.session_vars import VARIABLES, canonical_name, checked_value
from feedkv.sql.statement_cache import StatementCache, retire
from feedkv.sql.statement_kinds import StatementKind
from feedkv.sql.time_zone import ZONE, infinity_of, zone_named
from feedkv.sql.types import ColumnType, timestamp_of

if TYPE_CHECKING:
    from sqlglot import exp

    from feedkv.kv.db import KVClient
    from feedkv.util.hlc import Timestamp

__all__ = ["ChangefeedService", "Result", "Session", "prepare"]

T = TypeVar("T")
P = TypeVar("P")
S = TypeVar("S", bound=st.Statement)


_CACHED_TEXT_CHARS = 2000
_LONG_TEXTS_KEPT = 64


def prepare(text: str) -> tuple[tuple[st.Statement, int], ...]:
    """Parsed statements with their placeholder counts, cached by text. A long text is
    cached only when it has placeholders (``$``): a bulk INSERT of literal rows rarely
    comes twice, while its tree would stay in memory, and in every garbage collection,
    until others pushed it out; a loader's 1,000-row INSERT with placeholders comes
    once a batch, and parsing it costs as much as running it. Long texts have a
    smaller cache of their own, so they never push the short ones out."""
    if len(text) <= _CACHED_TEXT_CHARS:
        return _prepare_cached(text)
    if _kept(text):
        return _prepare_long(text)
    return _prepare(text)


def _kept(text: str) -> bool:
    """Whether the parse of ``text`` (and a session's plans of it) are kept."""
    return len(text) <= _CACHED_TEXT_CHARS or "$" in text


def _prepare(text: str) -> tuple[tuple[st.Statement, int], ...]:
    return tuple((statement, placeholder_count(statement)) for statement in parse(text))


def _statements(prepared: tuple[tuple[st.Statement, int], ...]) -> list[Any]:
    return [statement for statement, _count in prepared]


# NB: a parsed statement dropped from these is unlinked (feedkv.sql.statement_cache), so
# a stream of new texts leaves no trees to the cyclic GC
_prepare_cached = StatementCache(_prepare, 2048, _statements)
_prepare_long = StatementCache(_prepare, _LONG_TEXTS_KEPT, _statements)


_PLANS_KEPT = 1024  # per session; past it the plans are dropped and made again
_LONG_PLANS_KEPT = 16  # of texts over _CACHED_TEXT_CHARS, per session, likewise

_JOB_STATEMENTS = (
    st.ShowChangefeedJobs
    | st.ShowCreateChangefeed
    | st.ControlJob
    | st.AlterChangefeed
    | st.ClusterSetting
)
# Statements that write a new version of a leased descriptor (Execution._publish). They
# run above every writer's priority (the rangefeed pusher keeps MAX_PRIORITY): writers
# that meet the new version wait for it instead of pushing it.
_SCHEMA_CHANGES = StatementKind(
    st.AddColumn
    | st.AlterColumn
    | st.AlterTableActions
    | st.DropColumn
    | st.DropTable
    | st.DropDatabase
    | st.Truncate
)
_SCHEMA_CHANGE_PRIORITY = MAX_PRIORITY - 1
# Statements a READ ONLY transaction refuses (see Session._refuse_if_read_only), and the
# first words that name a statement with the next one (CREATE TABLE, not CREATE).
_TWO_WORD_TAGS = frozenset({"CREATE", "ALTER", "DROP", "GRANT", "REVOKE"})
# BEGIN PRIORITY LOW / HIGH: the least and (under a schema change's) the greatest; NORMAL
# (or none) draws one at random, as CockroachDB.
_USER_PRIORITIES = {"LOW": 1, "HIGH": _SCHEMA_CHANGE_PRIORITY - 1}
# Statements that end, start or stand outside a transaction: a string holding one runs its
# statements one by one rather than as one implicit transaction.
_OWN_TRANSACTION = StatementKind(
    st.Begin
    | st.Commit
    | st.Rollback
    | st.Savepoint
    | st.CreateChangefeed
    | _JOB_STATEMENTS
    | st.SessionVariable
    | st.SetTransaction
    | st.ImportInto
    | st.DeclareCursor
    | st.FetchCursor
    | st.CloseCursor
)
RESTART_SAVEPOINT = "cockroach_restart"
# Statements that change the schema, users or placement: a savepoint before one cannot be
# rolled back to (their descriptors go out as intents at once, as CockroachDB refuses
# ROLLBACK TO SAVEPOINT after DDL).
_DDL = (
    st.CreateDatabase
    | st.DropDatabase
    | st.CreateTable
    | st.DropTable
    | st.AddColumn
    | st.AlterTableActions
    | st.AddPrimaryKey
    | st.DropColumn
    | st.RenameTable
    | st.RenameColumn
    | st.Truncate
    | st.ConfigureZone
    | st.SplitAt
    | st.Relocate
    | st.CreateUser
    | st.AlterUserPassword
    | st.DropUser
    | st.GrantRole
    | st.GrantPrivileges
    | st.CreateView
    | st.DropView
    | st.CreateTableAs
    | st.CreateSequence
    | st.AlterSequence
    | st.DropSequence
    | st.CreateIndex
    | st.DropIndex
    | st.CreateEnum
    | st.AlterTypeAddValue
    | st.AlterTypeRenameValue
    | st.DropType
    | st.AddConstraint
    | st.DropConstraint
    | st.ValidateConstraint
)
_WRITES = StatementKind(
    _DDL | st.Insert | st.Update | st.Delete | st.CopyRows | st.ImportInto | st.CommentOn
)
_DDL_KIND = StatementKind(_DDL)
_JOBS = StatementKind(st.CreateChangefeed | _JOB_STATEMENTS)
# Statements that, outside a transaction, go straight to a transaction of their own
# (Session._run_statement): none of the statements its other branches take is one.
_ALONE = frozenset({st.Select, st.Insert, st.Update, st.Delete})


@dataclass(slots=True)
class _NamedSavepoint:
    """A savepoint of the open transaction: its name, the transaction's mark, and how
    many statements (and schema changes, after-commit hooks and SET LOCAL changes) came
    before it. ``initial``: taken before the transaction's first statement."""

    name: str
    mark: Savepoint
    executions: int
    ddl: int
    after_commit: int
    initial: bool
    local_changes: int = 0


class ChangefeedService(Protocol):
    """Starts changefeeds for ``CREATE CHANGEFEED`` statements and runs the job
    statements (the changefeed layer provides it; the SQL layer only parses them)."""

    def create(
        self, statement: st.CreateChangefeed, session: Session, params: Sequence[Any]
    ) -> Result: ...

    def execute(self, statement: st.Statement, session: Session) -> Result: ...


def _arguments_mismatch(placeholders: int, params: Sequence[Any]) -> SQLError:
    """The error for ``params`` given to a statement of ``placeholders`` placeholders: as
    CockroachDB, a statement run with none names the first it lacks (42P02)."""
    if not params:
        return SQLError("42P02", "no value provided for placeholder: $1")
    return SQLError("08P01", f"expected {placeholders} arguments, got {len(params)}")


def _lock_error(exc: LockNotAvailableError) -> SQLError:
    """55P03 for a lock error no locking read worded (those name their row:
    feedkv.sql.execution): a write or a plain read that waited past lock_timeout."""
    if exc.reason == LockNotAvailableError.LOCK_TIMEOUT:
        return SQLError("55P03", "canceling statement due to lock timeout", detail=str(exc))
    return SQLError("55P03", str(exc))


def _withdraw(executions: Iterable[Execution]) -> None:
    """Their transaction did not commit: take back the pending schema-change markers
    they wrote, so the tables are leased again at once rather than when the markers
    expire."""
    for execution in executions:
        execution.withdraw_changes()


def _release(executions: Iterable[Execution]) -> None:
    """Their transaction ended: give back the descriptor leases they hold."""
    for execution in executions:
        execution.release_leases()


def _in(zone: datetime.tzinfo, value: datetime.datetime) -> datetime.datetime:
    """The aware ``value`` as the same instant in ``zone``; in UTC when its wall clock
    time there is outside the years a datetime holds (0001-01-01 00:00 UTC is 1 BC in New
    York): NB: the instant is what it is, only its zone is not the session's."""
    try:
        return value.astimezone(zone)
    except OverflowError:
        return value.astimezone(datetime.UTC)


def _bind_job_id(statement: st.Statement, params: Sequence[Any]) -> st.Statement:
    """A job statement whose job id is a placeholder (``PAUSE JOB $1``, ``SHOW JOB WHEN
    COMPLETE $1``), with the id its parameter gives (an INT8, or text of one)."""
    param = getattr(statement, "job_param", None)
    if not isinstance(statement, st.ShowChangefeedJobs | st.ControlJob) or param is None:
        return statement
    index = int(param.this.name)
    value = params[index - 1]
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        job_id = int(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        raise SQLError("22P02", f"${index}: a job id is an INT8, not {value!r}") from None
    return dataclasses.replace(statement, job_id=job_id, job_param=None)


# NB: counted from 2**30, so that an embedded session's number meets no SQL client's
# (a server counts its process ids from 1)
_BACKEND_PIDS = itertools.count(1 << 30)


class Session:
    """Runs statements as ``user`` with ``database`` as the current database. Use one
    session from one thread at a time. ``changefeeds`` runs ``CREATE CHANGEFEED``
    (sessions made by :meth:`feedkv.db.DB.session` have it)."""

    def __init__(
        self,
        db: KVClient,
        *,
        user: str = catalog.ROOT,
        database: str = catalog.DEFAULT_DATABASE,
        changefeeds: ChangefeedService | None = None,
        leases: Leases | None = None,
        metrics: SQLMetrics | None = None,
        external_io_dir: Path | None = None,
        default_replicas: int = 1,
        registry: SessionRegistry | None = None,
    ) -> None:
        """``external_io_dir``: IMPORT INTO reads ``file://`` URIs only below it (``None``:
        anywhere, with the rights of this process, as an embedded node's sinks write).
        ``default_replicas``: the default zone's ``num_replicas`` until one is set (the
        node's ``--replicas``). ``registry``: the node's open sessions, which this one
        joins until it closes (SHOW SESSIONS, CANCEL QUERY)."""
        self.db = db
        self.default_replicas = default_replicas
        self.changefeeds = changefeeds
        self.external_io_dir = external_io_dir
        self.metrics = metrics or unregistered_sql_metrics()
        self.leases = leases
        self.user = user
        self.database = database
        # the session variables SET (see session_vars); written only through the methods
        # here, each calling _variables_changed (read them with variable or variables)
        self._variables: dict[str, str] = {}
        # NB: what every statement reads of the variables, kept in step with them by
        # _variables_changed, which each write to them calls: asked of the dict, it
        # cost each statement three lookups and a parse. The time zone (name, zone),
        # statement_timeout (ms, 0: none), default_transaction_read_only; and
        # lock_timeout (ms, 0: none), which each execution gives its transaction
        self._zone: tuple[str, datetime.tzinfo] = ("UTC", datetime.UTC)
        self._timeout_ms = 0
        self._read_only_default = False
        self.lock_timeout_ms = 0
        self._as_of: Timestamp | None = None  # the open transaction's AS OF SYSTEM TIME
        # SET LOCAL: each variable's value before the transaction changed it (None: it
        # was not set), put back when the transaction ends
        self._local_saved: dict[str, str | None] = {}
        # SET LOCAL in the open transaction: each variable's value before that change,
        # oldest first, for ROLLBACK TO SAVEPOINT to undo the changes after its mark
        # (the name None: a plain SET overrode the change since)
        self._local_changes: list[tuple[str | None, str | None]] = []
        self.sequences = SequenceState()  # currval and lastval (see sql.sequences)
        self.cursors = Cursors()  # DECLARE's (see sql.cursors)
        # A CancelRequest for the running statement (set from another thread; see
        # feedkv.sql.interrupt); whoever runs statements resets it before each.
        self.interrupt = Interrupt()
        # pg_backend_pid(): a SQL client's is its connection's process id (the server
        # sets it); an embedded session's, a number of its own
        self.backend_pid = next(_BACKEND_PIDS)
        self._txn: Txn | None = None
        self._failed = False
        self._restart = False  # SAVEPOINT cockroach_restart is active
        self._read_only = False  # the open transaction is READ ONLY
        self._priority = "normal"  # the open transaction's user priority
        # when the SQL transaction running began (time.monotonic_ns): at BEGIN, or the
        # first attempt of an implicit one; a retry or a restart keeps it
        self._began_ns = 0
        self._released = False  # RELEASE committed the transaction; COMMIT ends the block
        self._savepoints: list[_NamedSavepoint] = []  # held, oldest first
        self._ddl = 0  # schema changes in the open transaction
        self._retry = False  # the failure is retryable: the transaction must start over
        self._after_commit: list[Callable[[], object]] = []
        self._executions: list[Execution] = []  # the statements of the open transaction
        # the open transaction has run only statements of rows: its statements may use
        # descriptor leases (see feedkv.sql.leases)
        self._rows_only = True
        self._table_ids: dict[tuple[str, str], int] = {}
        self._database_ids: dict[str, int] = {}
        self._plans: dict[tuple[int, int], tuple[st.Statement, TableDescriptor, Any]] = {}
        self._long_plans: dict[tuple[int, int], tuple[st.Statement, TableDescriptor, Any]] = {}
        self._checked_user = False
        # The text last prepared and its statements (see _prepare_checked)
        self._last_prepared: tuple[str, tuple[tuple[st.Statement, int], ...]] | None = None
        self.registry = registry
        self.active: ActiveSession | None = None
        if registry is not None:
            # NB: the registry holds no reference to the session: a session never closed
            # (a thread's own, of DB.sql) leaves the list when it is collected
            this = weakref.ref(self)

            def application_name() -> str:
                session = this()
                return session.variable("application_name") if session is not None else ""

            self.active = registry.register(user, self.interrupt.cancel, application_name)
            weakref.finalize(self, registry.remove, self.active)
        self._attached = False  # a connection resets the interrupt before each query

    def attach_connection(
        self,
        client_address: str,
        cancel: Callable[[], None],
        terminate: Callable[[], None],
        application_name: str = "",
    ) -> None:
        """The SQL connection this session serves: its client's address, how to cancel
        its running query (a CancelRequest's way), how to close it (CANCEL SESSION) and
        the application name its startup message gave (the session's
        ``application_name``, as CockroachDB takes it)."""
        self._attached = True
        if application_name:
            self._variables["application_name"] = application_name
            self._variables_changed()
        if self.active is not None:
            self.active.client_address = client_address
            self.active.cancel = cancel
            self.active.terminate = terminate

    def _finish(self, active: ActiveSession) -> None:
        """The active query ended (see :meth:`ActiveSession.begin`)."""
        if active.finish() and not self._attached:
            # NB: CANCEL QUERY was for this query: the next one must not see it (a
            # connection resets the interrupt before each query itself)
            self.interrupt.reset()

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    @property
    def failed(self) -> bool:
        """A statement of the open transaction failed: only ROLLBACK (or COMMIT, which
        rolls back) is accepted until it ends."""
        return self._txn is not None and self._failed

    def fail(self) -> None:
        """Work of the open transaction done outside :meth:`execute` failed (a COPY's
        data did not read): as after a failed statement, the transaction accepts only
        ROLLBACK or ROLLBACK TO SAVEPOINT now. Nothing to do outside a transaction."""
        if self._txn is not None:
            self._failed = True

    def check_login(self) -> None:
        """Raise SQLError 28000 if this session's user does not exist, 3D000 if its
        database does not (a server checks both when a client connects)."""
        if not self._checked_user:
            self._check_user()
        self.resolve_database(catalog.Snapshot(self.db, self.db.now()), self.database)

    def set_variable(self, name: str, value: str) -> None:
        """``SET name = value`` for a client's connection parameters (``options='-c
        name=value'``): 42704 for an unknown variable, its check's error for a bad
        value or a read-only one."""
        name = canonical_name(name)
        value = checked_value(name, value)
        if name == "database":
            reader = catalog.Snapshot(self.db, self.db.now())
            self.database = self.resolve_database(reader, value).name
        else:
            self._variables[name] = value
            self._variables_changed()

    def execute(self, text: str, *params: Any) -> Result:
        """Run every statement in ``text``; returns the last one's result (an empty
        one, no columns and no tag, for text with no statement)."""
        last = self._last_prepared
        # NB: _prepare_checked's first question, asked here: the text run last (a loop's,
        # a prepared statement's) is run again without its call
        prepared = last[1] if last is not None and last[0] is text else self._prepare_checked(text)
        if len(prepared) == 1:  # NB: the common case, run without a list of results
            statement, count = prepared[0]
            return self._run(statement, count, params)
        results = self._run_all(prepared, params)
        # NB: text with no statement (blank, or only a comment: SHOW CREATE ALL TABLES
        # writes one) runs as an empty query, as PostgreSQL and CockroachDB run it
        return results[-1] if results else Result()

    sql = execute

    def execute_all(self, text: str, params: Sequence[Any] = ()) -> list[Result]:
        """Run every statement in ``text`` and return each one's result."""
        return self._run_all(self._prepare_checked(text), params)

    def _run_all(
        self, prepared: tuple[tuple[st.Statement, int], ...], params: Sequence[Any]
    ) -> list[Result]:
        if self._batches(prepared):
            return self._run_batch(prepared, params)
        return [self._run(statement, count, params) for statement, count in prepared]

    def execute_each(
        self,
        text: str,
        params: Sequence[Any] = (),
        *,
        batch: bool = True,
        shown: str | None = None,
    ) -> Iterator[Result]:
        """Run the statements in ``text`` and yield each result: as one implicit
        transaction (see the module docstring), or with ``batch=False`` one by one, each
        result as soon as its statement is done (a script: what took effect before an
        error stays). ``shown``: the text the session's active query shows instead, for
        a statement alone (the text as the client wrote it, its literals lifted into
        ``params``)."""
        prepared = self._prepare_checked(text)
        if batch and self._batches(prepared):
            yield from self._run_batch(prepared, params)
            return
        for statement, count in prepared:
            yield self._run(statement, count, params, shown)

    def execute_many(
        self,
        runs: Sequence[tuple[str, Sequence[Any]]],
        *,
        interrupt: Callable[[], None] | None = None,
    ) -> list[Result]:
        """Run each ``(text, params)`` (one statement a text, texts commonly repeated),
        all or none: in the open transaction, else in one implicit transaction of their
        own, retried on conflicts. What a bulk load (COPY) runs: when every statement is
        an INSERT, their new rows are written without reading first, the keys checked
        absent when the transaction commits (as for a statement alone), so a batch
        costs its writes, not a read per row. ``interrupt`` is called before each
        statement; what it raises ends them all."""
        planned: list[tuple[st.Statement, Sequence[Any]]] = []
        for text, params in runs:
            prepared = self._prepare_checked(text)
            if len(prepared) != 1:
                raise SQLError("42601", f"expected one statement a text, got {len(prepared)}")
            statement, placeholders = prepared[0]
            if _OWN_TRANSACTION.holds(statement):
                raise SQLError("0A000", f"{statement.text[:40]!r} cannot run in a bulk load")
            if len(params) != placeholders:
                raise _arguments_mismatch(placeholders, params)
            planned.append((statement, params))
        if self._txn is not None or not planned:
            results = []
            for statement, params in planned:
                if interrupt is not None:
                    interrupt()
                results.append(self._run(statement, len(params), params))
            return results
        started = time.perf_counter_ns()
        failed = True
        try:
            results = self._run_implicit(
                planned,
                autocommit=all(isinstance(s, st.Insert) for s, _ in planned),
                interrupt=interrupt,
            )
            failed = False
            return results
        finally:
            self.metrics.ran_together(
                [statement for statement, _ in planned],
                time.perf_counter_ns() - started,
                failed=failed,
            )

    def copy_columns(
        self,
        text: str,
        columns: Sequence[list[Any]],
        *,
        interrupt: Callable[[], None] | None = None,
    ) -> int | None:
        """A COPY's rows, column by column, written in bulk outside a transaction
        (:mod:`feedkv.sql.copy_rows`), all or none, in a transaction of their own
        retried on conflicts; ``text`` is the one-row INSERT naming the table and the
        columns. Returns how many rows were written, or ``None`` when the rows cannot go
        in bulk (in a transaction, or see :class:`CopyDeclined`): nothing was written,
        run them as INSERTs (:meth:`execute_many`)."""
        if self._txn is not None:
            return None
        prepared = self._prepare_checked(text)
        statement = prepared[0][0] if len(prepared) == 1 else None
        if not isinstance(statement, st.Insert) or statement.columns is None:
            return None
        copy = st.CopyRows(text, statement.table, statement.columns, tuple(columns))
        started = time.perf_counter_ns()
        failed = True
        try:
            self._run_implicit([(copy, ())], autocommit=True, interrupt=interrupt)
            failed = False
        except CopyDeclined:
            failed = False  # NB: nothing ran: its rows go as INSERTs
            return None
        finally:
            self.metrics.ran(statement, time.perf_counter_ns() - started, failed=failed)
        return len(columns[0]) if columns else 0

    def describe(self, text: str, param_types: Sequence[ColumnType | None] = ()) -> Description:
        """What the one statement in ``text`` returns and takes, planned against the
        tables this session sees now (in its open transaction, else at the present)
        without running it (:mod:`feedkv.sql.describe`); ``param_types``: the types of
        placeholders the client gave (``None``: not given)."""
        prepared = self._prepare_checked(text)
        if len(prepared) != 1:
            raise SQLError("42601", f"expected one statement to describe, got {len(prepared)}")
        statement, placeholders = prepared[0]
        if isinstance(statement, st.FetchCursor):
            if statement.move:
                return Description((), ())
            cursor = self.cursors.get(statement.name)
            return Description(tuple(zip(cursor.columns, cursor.types, strict=True)), ())
        reader = self._reader()
        return describe(
            statement,
            placeholders,
            lambda name: self.resolve_relation(reader, name.database, name.name),
            self.database,
            param_types,
        )

    def declare_over(self, text: str, run: Callable[[str], Result]) -> Result:
        """``DECLARE ... FOR query`` (``text``) whose query the SQL layer does not run
        (a catalog query: ``run`` answers it); its rows are read now, as a held
        cursor's are. Fails as DECLARE does; in a transaction, the failure aborts it."""
        if self._txn is not None:
            self._check_not_failed()
        try:
            head = cursor_syntax.parse_declare(text)
            explicit = self._txn is not None
            check_declare(
                self.cursors,
                head.name,
                binary=head.binary,
                scroll=head.scroll,
                hold=head.hold,
                explicit=explicit,
            )
            query = text[head.query_at :]
            result = run(query)
        except SQLError:
            self.fail()
            raise
        now = datetime.datetime.now(datetime.UTC)
        types = (None,) * len(result.columns)
        rows = iter(result.rows)
        cursor = Cursor(head.name, query, result.columns, types, rows, head.hold, now)
        if explicit:
            # NB: a statement of the transaction, for ROLLBACK TO SAVEPOINT to undo
            cursor.execution = Execution(self, self._txn, ())
            self._executions.append(cursor.execution)
        cursor.committed = not explicit
        self.cursors.add(cursor)
        return Result(tag="DECLARE CURSOR")

    def views_and_sequences(self) -> list[ViewDescriptor | SequenceDescriptor]:
        """The views and sequences of the current database, as this session sees them
        now (for the catalog views, as :meth:`schema`)."""
        reader = self._reader()
        database = self.resolve_database(reader, self.database)
        return [*catalog.list_views(reader, database), *catalog.list_sequences(reader, database)]

    def types(self) -> list[TypeDescriptor]:
        """The user-defined types (enums) of the current database, as this session sees
        them now (for the catalog views, as :meth:`schema`)."""
        reader = self._reader()
        return catalog.list_types(reader, self.resolve_database(reader, self.database))

    def users(self) -> list[catalog.User]:
        """Every user, as this session sees them now (for the catalog views, as
        :meth:`schema`)."""
        return catalog.list_users(self._reader())

    def grants(self) -> list[tuple[int, str, frozenset[str]]]:
        """Every ``(object id, grantee, privileges)`` granted, as this session sees
        them now (for the catalog views, as :meth:`schema`)."""
        return list(catalog.list_privileges(self._reader()))

    def memberships(self) -> list[tuple[str, str]]:
        """Every ``(role, member)`` but ``admin``'s, as this session sees them now (for
        the catalog views, as :meth:`schema`)."""
        return catalog.list_memberships(self._reader())

    def comments(self) -> list[tuple[int, str, int, str]]:
        """Every comment (:func:`feedkv.sql.comments.list_comments`), as this session
        sees them now (for the catalog views, as :meth:`schema`)."""
        return comments.list_comments(self._reader())

    def schema(self) -> list[tuple[DatabaseDescriptor, list[TableDescriptor]]]:
        """Every database with its tables, as this session sees them now (in its open
        transaction, else at the present): what catalog views such as pg_catalog and
        information_schema show."""
        reader = self._reader()
        return [(d, catalog.list_tables(reader, d)) for d in catalog.list_databases(reader)]

    def _reader(self) -> catalog.Reader:
        if self._txn is not None and not self._failed:
            return self._txn
        return catalog.Snapshot(self.db, self.db.now())

    def _prepare_checked(self, text: str) -> tuple[tuple[st.Statement, int], ...]:
        """``text`` prepared, once this session's user is known to exist. Text that
        does not parse aborts the open transaction, as any failed statement does (as in
        CockroachDB and PostgreSQL: a COMMIT then rolls back)."""
        last = self._last_prepared
        if last is not None and last[0] is text:
            # NB: the very text object run last (a loop's, a prepared statement's): its
            # statements without the shared cache's lock and bookkeeping
            return last[1]
        try:
            prepared = prepare(text)
        except SQLError:
            if self._txn is not None and not self._released:
                self._failed = True
            raise
        if not self._checked_user:
            self._check_user()
        if _kept(text):  # NB: a long literal text's tree is not kept (see prepare)
            self._last_prepared = (text, prepared)
        return prepared

    def _batches(self, prepared: Sequence[tuple[st.Statement, int]]) -> bool:
        """Whether ``prepared`` runs as one implicit transaction."""
        return (
            len(prepared) > 1
            and self._txn is None
            and not any(_OWN_TRANSACTION.holds(statement) for statement, _ in prepared)
        )

    def run_transaction(self, fn: Callable[[Session], T], *, max_attempts: int | None = None) -> T:
        """``BEGIN``; ``fn(self)``; ``COMMIT``, retried from the start on SQLSTATE 40001
        with jittered backoff. ``fn`` may run more than once."""
        attempt = 0
        while True:
            attempt += 1
            self.execute("BEGIN")
            try:
                result = fn(self)
                if self.execute("COMMIT").tag != "COMMIT":
                    raise SQLError(
                        "25P02",
                        "the transaction was rolled back because a statement in it failed; "
                        "nothing was committed",
                    )
                return result
            except SerializationFailure:
                self._abandon()
                if max_attempts is not None and attempt >= max_attempts:
                    raise
                time.sleep(random.uniform(0, min(1.0, 0.001 * 2**attempt)))  # wait-ok: backoff
            except BaseException:
                self._abandon()
                raise

    def close(self) -> None:
        """Roll back an open transaction. Idempotent."""
        if self.registry is not None and self.active is not None:
            self.registry.remove(self.active)
        self._abandon()

    # Statement execution.

    def _run(
        self,
        statement: st.Statement,
        placeholders: int,
        params: Sequence[Any],
        shown: str | None = None,
    ) -> Result:
        # NB: not statement_zone(): a statement is tens of microseconds, and its
        # generator-based context manager cost a few of them
        active = self.active
        if active is not None:
            active.begin(statement.text if shown is None else shown)
        zone = self._zone[1]
        # NB: set only when it differs: a thread's zone is UTC until one is set
        token = None if ZONE.get() is zone else ZONE.set(zone)
        give_up = GIVE_UP.set(self.interrupt.check)  # a lock wait ends at a cancel
        metrics = self.metrics
        # NB: a node with its metrics off (feedkv bench changefeed's baseline) neither
        # times nor counts its statements: what the metrics cost is all on the other
        measured = metrics.enabled
        started = time.perf_counter_ns() if measured else 0
        failed = True
        try:
            timeout_ms = self._timeout_ms
            if not timeout_ms:
                result = self._run_statement(statement, placeholders, params)
            else:
                deadline = time.monotonic() + timeout_ms / 1000
                self.interrupt.arm(timeout_ms / 1000)  # 57014 where the statement next looks
                try:
                    result = self._run_statement(statement, placeholders, params)
                finally:
                    self.interrupt.disarm()
                result.stop_at(deadline)  # NB: rows that stream on count in its time
            failed = False
            return result if zone is datetime.UTC else self._in_zone(result)
        except LockNotAvailableError as exc:
            raise _lock_error(exc) from exc  # NB: in an explicit transaction
        finally:
            if measured:
                metrics.ran(statement, time.perf_counter_ns() - started, failed=failed)
            GIVE_UP.reset(give_up)
            if token is not None:
                ZONE.reset(token)
            if active is not None and active.finish() and not self._attached:
                self.interrupt.reset()  # NB: as _finish does, without its call

    def _in_zone(self, result: Result) -> Result:
        """``result`` with its TIMESTAMPTZ values (aware datetimes, the same instants) in
        the session's time zone, as a driver gives them after ``SET TIME ZONE``."""
        zone = self.zone
        if zone is datetime.UTC or type(result) is not Result or not result.rows:
            return result
        rows = [
            tuple(
                _in(zone, v)
                if isinstance(v, datetime.datetime) and v.tzinfo is not None and not infinity_of(v)
                else v
                for v in row
            )
            for row in result.rows
        ]
        return dataclasses.replace(result, rows=rows)

    @property
    def variables(self) -> Mapping[str, str]:
        """The session variables SET, read-only: change them with SQL (``SET``) or
        :meth:`set_variable`, which keep what statements read of them in step."""
        return MappingProxyType(self._variables)

    @property
    def zone(self) -> datetime.tzinfo:
        """The session's time zone (``SET TIME ZONE``), which its statements run in."""
        return self._zone[1]

    def _variables_changed(self) -> None:
        """Keep what every statement reads of the variables in step with them (see
        ``__init__``): each write to ``self._variables`` calls this."""
        variables = self._variables
        name = variables.get("timezone", "UTC")
        if name != self._zone[0]:
            self._zone = (name, zone_named(name))
        self._timeout_ms = int(variables.get("statement_timeout", "0"))
        self.lock_timeout_ms = int(variables.get("lock_timeout", "0"))
        self._read_only_default = variables.get("default_transaction_read_only") == "on"

    def _run_statement(
        self, statement: st.Statement, placeholders: int, params: Sequence[Any]
    ) -> Result:
        if len(params) != placeholders:
            raise _arguments_mismatch(placeholders, params)
        if self._txn is None and not self._released and type(statement) in _ALONE:
            # NB: the common case, checked first; none of these changes the schema
            return self._run_alone(statement, params, None)
        if isinstance(statement, st.Begin):
            if self._txn is not None:
                self._failed = True  # as CockroachDB: only ROLLBACK ends it now
                raise SQLError("25001", "there is already a transaction in progress")
            self._priority = (
                statement.priority or self.variable("default_transaction_priority")
            ).lower()
            self._txn = self.db.transaction(priority=_USER_PRIORITIES.get(self._priority.upper()))
            self._began_ns = time.monotonic_ns()
            self._failed = False
            self._read_only = (
                statement.read_only if statement.read_only is not None else self._read_only_default
            )
            self._as_of = None
            if statement.as_of is not None:
                try:
                    self._read_as_of(statement.as_of, params)
                except BaseException:  # NB: a BEGIN that fails begins nothing
                    self._txn.rollback()
                    self._txn = None
                    raise
            self._rows_only = True
            return Result(tag="BEGIN")
        if isinstance(statement, st.SetTransaction):
            return self._set_transaction(statement)
        if (
            self._released
            and not isinstance(statement, st.Commit | st.Rollback)
            and not (
                isinstance(statement, st.SessionVariable) and statement.name == "transaction_status"
            )
        ):
            raise SQLError(
                "25000",
                "current transaction is committed, commands ignored until end of transaction block",
            )
        if isinstance(statement, st.Commit):
            return self._commit()
        if isinstance(statement, st.Savepoint):
            return self._savepoint(statement)
        if isinstance(statement, st.SessionVariable):
            return self._session_variable(statement)
        if isinstance(statement, st.Rollback):
            if self._txn is None:
                raise SQLError("25P01", "there is no transaction in progress")
            self._abandon()
            return Result(tag="ROLLBACK")
        if _JOBS.holds(statement):
            if self.changefeeds is None:
                raise SQLError("0A000", "changefeeds need a database from feedkv.connect()")
            if isinstance(statement, st.CreateChangefeed):
                return self.changefeeds.create(statement, self, params)
            shows = isinstance(statement, st.ShowChangefeedJobs | st.ShowCreateChangefeed) or (
                isinstance(statement, st.ClusterSetting) and statement.action in ("show", "list")
            )
            if self._txn is not None and not shows:
                raise SQLError("25001", "job statements cannot run inside a transaction")
            return self.changefeeds.execute(_bind_job_id(statement, params), self)
        if isinstance(statement, st.ImportInto):
            if self._txn is not None:
                raise SQLError("25001", "IMPORT INTO cannot be used inside a transaction")
            return import_into(
                statement,
                self.db,
                self._in_own_transaction,
                Execution(self, None, ()),
                self.external_io_dir,
            )
        if self._txn is None:
            changes_schema = _SCHEMA_CHANGES.holds(statement)
            return self._run_alone(
                statement, params, _SCHEMA_CHANGE_PRIORITY if changes_schema else None
            )
        if self._failed:
            raise SQLError(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        rows = isinstance(statement, LEASED)
        self._rows_only = self._rows_only and rows
        execution = Execution(self, self._txn, params, lease_in_txn=self._rows_only)
        self._executions.append(execution)
        ddl = _DDL_KIND.holds(statement)
        if ddl:
            self._ddl += 1
        try:
            if ddl and self.cursors.in_transaction():
                raise SQLError(
                    "0A000",
                    "unimplemented: cannot run schema change in a transaction with open "
                    "DECLARE cursors",
                )
            self._refuse_if_read_only(statement)
            result = run(execution, statement)
        except RetryableError as exc:
            self._failed = self._retry = True
            if isinstance(exc, SQLError):
                raise
            raise SerializationFailure.restart(exc) from exc
        except BaseException:
            self._failed = True
            raise
        self._after_commit.extend(execution.after_commit)
        return result

    def _in_own_transaction(self, fn: Callable[[Execution], T]) -> T:
        """``fn`` with an execution in a transaction of its own at a schema change's
        priority, retried on conflicts (a step of IMPORT INTO)."""
        attempts: list[Execution] = []

        def attempt(txn: Txn) -> T:
            execution = Execution(self, txn, ())
            attempts.append(execution)
            return fn(execution)

        try:
            result = self.db.run_transaction(attempt, priority=_SCHEMA_CHANGE_PRIORITY)
        except BaseException:
            _withdraw(attempts)
            raise
        finally:
            for execution in attempts:
                execution.release_leases()
        for hook in attempts[-1].after_commit:
            hook()
        return result

    def _run_alone(
        self, statement: st.Statement, params: Sequence[Any], priority: int | None
    ) -> Result:
        """``statement`` in a transaction of its own at ``priority`` (the default's:
        ``None``), retried on conflicts: what :meth:`_run_implicit` does for one
        statement, without its lists and loops (the common case; :meth:`_run` has set
        the session's zone)."""
        # NB: _refuse_if_read_only's question outside a transaction, asked here first:
        # a call fewer on every statement's path
        if self._read_only_default:
            self._refuse_if_read_only(statement)
        executions: list[Execution] = []  # one an attempt

        def attempt(txn: Txn) -> Result:
            execution = Execution(self, txn, params, autocommit=True)
            executions.append(execution)
            result = run(execution, statement)
            if execution.adding:
                publish_added_columns(txn, (execution,))
            if execution.added_labels:
                publish_added_labels(txn, (execution,))
            return result

        self._began_ns = time.monotonic_ns()
        try:
            result = self.db.run_transaction(attempt, priority=priority)
        except BaseException as exc:
            _withdraw(executions)
            return self._implicit_failed(exc, executions[-1:], 1)[0]
        finally:
            for execution in executions:
                execution.release_leases()
        for hook in executions[-1].after_commit:
            hook()
        return result

    def _run_batch(
        self, prepared: Sequence[tuple[st.Statement, int]], params: Sequence[Any]
    ) -> list[Result]:
        """Statements sent together outside ``BEGIN``, as one implicit transaction."""
        active = self.active
        if active is not None:
            active.begin("; ".join(statement.text for statement, _ in prepared))
        try:
            return self._run_batch_measured(prepared, params)
        finally:
            if active is not None:
                self._finish(active)

    def _run_batch_measured(
        self, prepared: Sequence[tuple[st.Statement, int]], params: Sequence[Any]
    ) -> list[Result]:
        started = time.perf_counter_ns()
        failed = True
        try:
            for _statement, placeholders in prepared:
                if len(params) != placeholders:
                    raise _arguments_mismatch(placeholders, params)
            results = self._run_implicit([(s, params) for s, _ in prepared], autocommit=False)
            failed = False
            return [self._in_zone(result) for result in results]
        finally:
            self.metrics.ran_together(
                [statement for statement, _ in prepared],
                time.perf_counter_ns() - started,
                failed=failed,
            )

    def _run_implicit(
        self,
        runs: Sequence[tuple[st.Statement, Sequence[Any]]],
        *,
        autocommit: bool,
        interrupt: Callable[[], None] | None = None,
    ) -> list[Result]:
        """``runs`` (statements with their parameters) in one transaction of their own,
        retried on conflicts. ``autocommit``: statements that may write blind and use
        leases (a statement alone, or the INSERTs of :meth:`execute_many`)."""
        attempts: list[list[Execution]] = []
        statements = [statement for statement, _ in runs]
        for statement in statements:
            self._refuse_if_read_only(statement)

        def attempt(txn: Txn) -> list[Result]:
            executions: list[Execution] = []
            attempts.append(executions)
            results = []
            for statement, params in runs:
                if interrupt is not None:
                    interrupt()
                execution = Execution(self, txn, params, autocommit=autocommit)
                executions.append(execution)
                results.append(run(execution, statement))
            publish_added_columns(txn, executions)
            publish_added_labels(txn, executions)
            return results

        changes_schema = any(map(_SCHEMA_CHANGES.holds, statements))
        # NB: the statements run in the session's zone; a statement alone comes from _run,
        # which has set it already
        zone = self.zone
        zoned = None if ZONE.get() is zone else ZONE.set(zone)
        self._began_ns = time.monotonic_ns()
        try:
            results = self.db.run_transaction(
                attempt, priority=_SCHEMA_CHANGE_PRIORITY if changes_schema else None
            )
        except BaseException as exc:
            _withdraw(itertools.chain.from_iterable(attempts))
            return self._implicit_failed(exc, attempts[-1] if attempts else [], len(statements))
        finally:
            if zoned is not None:
                ZONE.reset(zoned)
            _release(itertools.chain.from_iterable(attempts))
        for execution in attempts[-1]:
            for hook in execution.after_commit:
                hook()
        return results

    @staticmethod
    def _implicit_failed(
        exc: BaseException, executions: Sequence[Execution], statements: int
    ) -> list[Result]:
        """An implicit transaction of ``statements`` failed with ``exc``, its last
        attempt's ``executions`` withdrawn: a failed check of a row written blind is the
        duplicate key it was (23505), or a blind UPDATE's missing row (its result);
        anything else is raised again (a lock error as 55P03)."""
        if isinstance(exc, LockNotAvailableError):
            raise _lock_error(exc) from exc
        if isinstance(exc, ConditionFailedError):
            for execution in executions:
                inserted = execution.inserted_table(exc.key)
                if inserted is not None:
                    raise duplicate_key_at(inserted, exc.key) from None
                missing = execution.missing.get(exc.key)
                if missing is not None:
                    if statements != 1:
                        raise InvariantViolation(
                            "a blind UPDATE ran in a transaction with other statements"
                        ) from exc
                    return [Result(tag=missing)]
        raise exc

    def show_jobs(self, source: st.ShowSource) -> Relation:
        """The rows of ``source``'s SHOW statement as a table (see :class:`SessionContext`)."""
        if self.changefeeds is None:
            raise SQLError("0A000", "jobs need a database from feedkv.connect()")
        result = self.changefeeds.execute(source.statement, self)
        return Relation.of(source.alias, result.columns, result.types, result.rows)

    def transaction_age_ns(self) -> int:
        """See :class:`SessionContext`."""
        return time.monotonic_ns() - self._began_ns

    def variable(self, name: str) -> str:
        """The value of session variable ``name`` (canonical, see :mod:`session_vars`)."""
        if name == "database":
            return self.database
        if name == "session_user":
            return self.user
        if name == "transaction_priority":
            return (
                self._priority
                if self._txn is not None
                else self.variable("default_transaction_priority")
            )
        if name == "transaction_status":
            if self._txn is None:
                return "NoTxn"
            return "Aborted" if self._failed else "CommitWait" if self._released else "Open"
        if name == "transaction_read_only":
            read_only = self._read_only_default if self._txn is None else self._read_only
            return "on" if read_only else "off"
        return self._variables.get(name, VARIABLES[name].default)

    def _set_transaction(self, s: st.SetTransaction) -> Result:
        """SET TRANSACTION's modes, for the open transaction. NB: its priority was drawn
        when it began (BEGIN PRIORITY sets it)."""
        if self._txn is None:
            raise SQLError("25P01", "there is no transaction in progress")
        self._check_not_failed()
        if s.priority is not None:
            self._set_priority(s.priority.lower())
        if s.read_only is not None:
            if not s.read_only and self._as_of is not None:
                raise SQLError("0A000", "AS OF SYSTEM TIME specified with READ WRITE mode")
            self._read_only = s.read_only
        if s.as_of is not None:
            self._read_as_of(s.as_of, ())
        return Result(tag="SET TRANSACTION")

    def _read_as_of(self, expression: exp.Expr, params: Sequence[Any]) -> None:
        """The open transaction reads at AS OF SYSTEM TIME's ``expression`` and writes
        nothing, as CockroachDB's ``BEGIN AS OF SYSTEM TIME``: only before it has run a
        statement."""
        txn = self._txn
        if txn is None:
            raise SQLError("25P01", "there is no transaction in progress")
        if self._executions or self._savepoints or txn.read_ts is not None:
            raise SQLError(
                "25001", "cannot set AS OF SYSTEM TIME in a transaction that has run statements"
            )
        now = self.db.now()
        ts = timestamp_of(Execution(self, None, params).constant(expression), now)
        if ts > now:
            raise SQLError("22007", f"AS OF SYSTEM TIME: {ts} is in the future")
        txn.advance_to(ts)
        self._as_of = ts
        self._read_only = True

    @property
    def transaction_as_of(self) -> Timestamp | None:
        """The time the open transaction reads at, when it began AS OF SYSTEM TIME."""
        return self._as_of if self._txn is not None else None

    def _set_priority(self, priority: str) -> None:
        """The open transaction's user priority, changed before it has run a statement:
        it starts again, with nothing done, at ``priority`` (as CockroachDB, where a
        transaction's priority is fixed once it has sent a request)."""
        if priority == self._priority:
            return
        txn = self._txn
        if txn is None:
            raise SQLError("25P01", "there is no transaction in progress")
        # NB: SAVEPOINT cockroach_restart alone has run nothing (it holds no mark of the
        # transaction replaced here), as CockroachDB's client retry loops begin
        if self._executions or self._savepoints or txn.read_ts is not None:
            raise SQLError("25001", "cannot change the user priority of a running transaction")
        self._txn = self.db.transaction(priority=_USER_PRIORITIES.get(priority.upper()))
        self._priority = priority

    def _refuse_if_read_only(self, statement: st.Statement) -> None:
        """25006 for a statement that writes, in a READ ONLY transaction (an implicit one
        under default_transaction_read_only), as CockroachDB."""
        # NB: variable("transaction_read_only"), without its other names' checks
        read_only = self._read_only_default if self._txn is None else self._read_only
        if not read_only:
            return
        if not _WRITES.holds(statement):
            modifying = st.modifying_cte(statement)  # WITH x AS (UPDATE ...) SELECT ...
            if modifying is None:
                return
            statement = modifying
        if isinstance(statement, st.Insert):
            what = "UPSERT" if statement.upsert else "INSERT"
        elif isinstance(statement, st.Update | st.Delete):
            what = type(statement).__name__.upper()
        else:
            words = statement.text.split()
            what = " ".join(words[:2] if words[0].upper() in _TWO_WORD_TAGS else words[:1])
        raise SQLError("25006", f"cannot execute {what.upper()} in a read-only transaction")

    def _session_variable(self, s: st.SessionVariable) -> Result:
        """SET, RESET or SHOW a session variable; these take effect at once, in a
        transaction or not (as in CockroachDB), and are not rolled back. In an aborted
        transaction they are refused, as every statement but its end is."""
        if self._txn is not None and s.name != "transaction_status":
            # NB: SHOW TRANSACTION STATUS observes the session, so it says Aborted
            self._check_not_failed()
        if s.action == "show":
            if s.name is None:
                rows = [(name, self.variable(name)) for name in sorted(VARIABLES)]
                return Result(("variable", "value"), rows, f"SHOW {len(rows)}")
            return Result((s.name,), [(self.variable(s.name),)], "SHOW 1")
        if s.action == "transaction" and self._txn is None:
            raise SQLError("25P01", "there is no transaction in progress")
        if s.name == "transaction_priority" and s.action in ("set", "reset"):
            if self._txn is None:  # NB: outside one, as transaction_read_only: no effect
                return Result(tag="SET")
            default_priority = self.variable("default_transaction_priority")
            self._set_priority(
                checked_value(s.name, s.value or "") if s.action == "set" else default_priority
            )
            return Result(tag="SET")
        if s.name == "transaction_read_only" and s.action in ("set", "reset"):
            if self._txn is not None:  # NB: outside one, as PostgreSQL: no effect
                default = self.variable("default_transaction_read_only") == "on"
                self._read_only = (
                    checked_value(s.name, s.value or "") == "on" if s.action == "set" else default
                )
            return Result(tag="SET")
        names = [s.name] if s.name is not None else list(VARIABLES)
        if s.local:
            if self._txn is None:  # NB: as PostgreSQL and CockroachDB: a warning, no effect
                return Result(
                    tag="SET", notices=("SET LOCAL can only be used in transaction blocks",)
                )
            for name in names:
                before = self.database if name == "database" else self._variables.get(name)
                self._local_saved.setdefault(name, before)
                self._local_changes.append((name, before))
        else:
            for name in names:  # NB: a plain SET after SET LOCAL outlives the transaction
                self._local_saved.pop(name, None)
            self._local_changes = [
                (None, None) if changed in names else (changed, before)
                for changed, before in self._local_changes
            ]
        try:
            for name in names:
                variable = VARIABLES[name]
                if s.action == "reset":
                    if not variable.read_only:
                        self._variables.pop(name, None)
                    if name == "database":
                        self.database = catalog.DEFAULT_DATABASE
                    continue
                value = checked_value(name, s.value or "")
                if name == "database":
                    reader = catalog.Snapshot(self.db, self.db.now())
                    self.database = self.resolve_database(reader, value).name  # 3D000 if none
                else:
                    self._variables[name] = value
        finally:
            self._variables_changed()
        return Result(tag="RESET" if s.text.lstrip()[:5].upper() == "RESET" else "SET")

    def _savepoint(self, s: st.Savepoint) -> Result:
        """SAVEPOINT, RELEASE and ROLLBACK TO (see the module docstring)."""
        if self._txn is None:
            verb = {"savepoint": "", "release": "RELEASE ", "rollback": "ROLLBACK TO "}
            raise SQLError(
                "25P01", f"{verb[s.action]}SAVEPOINT can only be used in transaction blocks"
            )
        if s.name != RESTART_SAVEPOINT:
            return self._named_savepoint(self._txn, s)
        if s.action == "savepoint":
            self._check_not_failed()
            fresh = not self._executions
            if self._restart and fresh and not self._savepoints:
                # NB: declared again before anything ran (a retry loop that declares it
                # each time round, as sqlalchemy-cockroachdb's does, after ROLLBACK TO):
                # the same one marker, as CockroachDB's
                return Result(tag="SAVEPOINT")
            if self._restart or self._savepoints or not fresh:
                self._failed = True
                raise SQLError(
                    "42601",
                    f'SAVEPOINT "{RESTART_SAVEPOINT}" cannot be nested'
                    if self._restart or self._savepoints
                    else f'SAVEPOINT "{RESTART_SAVEPOINT}" needs to be the first statement '
                    "in a transaction",
                )
            self._restart = True
            return Result(tag="SAVEPOINT")
        if not self._restart:
            self._failed = True
            raise SQLError("3B001", f'savepoint "{s.name}" does not exist')
        if s.action == "rollback":
            self._start_over(0)
            return Result(tag="ROLLBACK")
        if self._failed:
            raise SQLError(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction "
                f"block (ROLLBACK TO SAVEPOINT {RESTART_SAVEPOINT} retries it)",
            )
        try:
            self.cursors.before_commit()
        except BaseException:
            self._failed = True
            raise
        try:
            self._commit_txn(self._txn)
        except SerializationFailure:
            self._failed = True  # ROLLBACK TO SAVEPOINT starts it over
            raise
        self._released = True
        self._savepoints = []  # committed: nothing to roll back to
        return Result(tag="RELEASE")

    def _named_savepoint(self, txn: Txn, s: st.Savepoint) -> Result:
        """A savepoint other than CockroachDB's restart savepoint."""
        if s.action == "savepoint":
            self._check_not_failed()
            self._savepoints.append(
                _NamedSavepoint(
                    s.name,
                    txn.savepoint(),
                    len(self._executions),
                    self._ddl,
                    len(self._after_commit),
                    initial=not self._executions,
                    local_changes=len(self._local_changes),
                )
            )
            return Result(tag="SAVEPOINT")
        found = self._find_savepoint(s.name)
        if s.action == "release":
            self._check_not_failed()
            self._forget_savepoints(txn, found)
            return Result(tag="RELEASE")
        held = self._savepoints[found]
        if self._retry or txn.state is not TxnState.OPEN:
            if not held.initial:
                raise SerializationFailure(
                    f'restart transaction: cannot roll back to savepoint "{s.name}" after '
                    "a retryable error: the transaction must start over (roll back to a "
                    "savepoint taken before its first statement, or ROLLBACK)"
                )
            self._start_over(found + 1)
            return Result(tag="ROLLBACK")
        if self._ddl > held.ddl:
            self._failed = True
            raise SQLError(
                "0A000",
                f'unimplemented: ROLLBACK TO SAVEPOINT "{s.name}" not yet supported after '
                "DDL statements",
            )
        self._forget_savepoints(txn, found + 1)
        txn.rollback_to(held.mark)
        undone = self._executions[held.executions :]
        del self._executions[held.executions :]
        self.cursors.rolled_back(undone)
        del self._after_commit[held.after_commit :]
        self._undo_local_changes(held.local_changes)
        _withdraw(undone)
        for execution in undone:
            execution.release_leases()
        self._failed = False
        return Result(tag="ROLLBACK")

    def _find_savepoint(self, name: str) -> int:
        """The index of the latest savepoint named ``name``; 3B001 if none is held."""
        for index in range(len(self._savepoints) - 1, -1, -1):
            if self._savepoints[index].name == name:
                return index
        self._failed = True
        raise SQLError("3B001", f'savepoint "{name}" does not exist')

    def _forget_savepoints(self, txn: Txn, keep: int) -> None:
        """Release the savepoints after the first ``keep``."""
        while len(self._savepoints) > keep:
            txn.release(self._savepoints.pop().mark)

    def _start_over(self, keep: int) -> None:
        """Roll the open transaction back and begin a new one in its place, still open,
        keeping the first ``keep`` savepoints (all taken before its first statement)."""
        if self._txn is not None:
            self._txn.rollback()
        self.cursors.end_transaction(False)
        _withdraw(self._executions)
        _release(self._executions)
        # NB: at the transaction's user priority (SET TRANSACTION PRIORITY), which a
        # restart keeps
        txn = self._txn = self.db.transaction(priority=_USER_PRIORITIES.get(self._priority.upper()))
        if self._as_of is not None:  # NB: BEGIN AS OF SYSTEM TIME's: it reads there again
            txn.advance_to(self._as_of)
        self._rows_only = True
        kept = self._savepoints[:keep]
        if kept:
            self._undo_local_changes(kept[-1].local_changes)
        self._savepoints = [
            _NamedSavepoint(
                held.name, txn.savepoint(), 0, 0, 0, initial=True, local_changes=held.local_changes
            )
            for held in kept
        ]
        self._failed = self._retry = False
        self._ddl = 0
        self._after_commit = []
        self._executions = []

    def _check_not_failed(self) -> None:
        if self._failed:
            raise SQLError(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            )

    def _commit(self) -> Result:
        txn = self._txn
        if txn is None:
            raise SQLError("25P01", "there is no transaction in progress")
        if self._released:
            self._end()
            return Result(tag="COMMIT")
        if self._failed:
            self._abandon()
            return Result(tag="ROLLBACK")
        try:
            self.cursors.before_commit()
        except BaseException:
            self._abandon()  # NB: as CockroachDB, a held cursor that fails rolls back
            raise
        self._txn = None
        self._restart = False
        self._restore_local()
        self._commit_txn(txn)
        return Result(tag="COMMIT")

    def _commit_txn(self, txn: Txn) -> None:
        """Commit ``txn`` and run its statements' after-commit hooks."""
        hooks, self._after_commit = self._after_commit, []
        executions, self._executions = self._executions, []
        committed = False
        try:
            self._renew_leases(txn, executions)
            publish_added_columns(txn, executions)
            publish_added_labels(txn, executions)
            txn.commit()
            committed = True
        except RetryableError as exc:
            txn.rollback()
            _withdraw(executions)
            raise SerializationFailure.restart(exc) from exc
        except ConditionFailedError as exc:
            # NB: in an explicit transaction only a new rowid is checked at commit
            # (dml._insert_blind): another row took it, and a retry draws a new one
            _withdraw(executions)
            raise SerializationFailure(
                f"restart transaction: a generated row id was taken by another row: {exc}"
            ) from exc
        finally:
            _release(executions)
            self.cursors.end_transaction(committed)
        for hook in hooks:
            hook()

    def _renew_leases(self, txn: Txn, executions: Sequence[Execution]) -> None:
        """Before an explicit transaction commits: a lease its statements hold that is
        less than half its duration from expiring is swapped for the client's current
        lease when that is of the same version (the version then cannot have changed
        in between), and the commit deadline becomes the earliest expiry held; so a
        transaction is not refused for lasting longer than the lease it began with."""
        owner = self.leases
        held = [lease for execution in executions for lease in execution.leases]
        if owner is None or not held:
            return
        soon = time.time_ns() + owner.duration_ns // 2
        if min(lease.expires.wall for lease in held) > soon:
            return
        for execution in executions:
            for index, lease in enumerate(execution.leases):
                if lease.expires.wall > soon:
                    continue
                fresh = owner.use(lease.desc.id)
                if fresh is None:
                    continue
                if fresh.desc.version != lease.desc.version or fresh.expires <= lease.expires:
                    owner.release(fresh)
                    continue
                execution.leases[index] = fresh
                owner.release(lease)
        txn.deadline = min(lease.expires for e in executions for lease in e.leases)

    def _abandon(self) -> None:
        self.cursors.end_transaction(False)  # NB: no-op once RELEASE committed it
        if self._txn is not None:
            self._txn.rollback()  # NB: nothing to do once RELEASE committed it
        _withdraw(self._executions)
        _release(self._executions)
        self._end()

    def _restore_local(self) -> None:
        """Put back the variables SET LOCAL changed (the transaction ended)."""
        saved, self._local_saved = self._local_saved, {}
        self._local_changes = []
        for name, before in saved.items():
            self._put_variable(name, before)

    def _undo_local_changes(self, keep: int) -> None:
        """Undo the SET LOCAL changes after the first ``keep`` (ROLLBACK TO SAVEPOINT),
        newest first. NB: a variable a plain SET has since changed keeps that value, as
        a plain SET is not transactional in CockroachDB."""
        while len(self._local_changes) > keep:
            name, before = self._local_changes.pop()
            if name is not None:
                self._put_variable(name, before)

    def _put_variable(self, name: str, value: str | None) -> None:
        """Set a session variable back to ``value`` (None: never set)."""
        if name == "database":
            self.database = value or catalog.DEFAULT_DATABASE
        elif value is None:
            self._variables.pop(name, None)
        else:
            self._variables[name] = value
        self._variables_changed()

    def _end(self) -> None:
        self._restore_local()
        self._txn = None
        self._failed = self._retry = False
        self._savepoints = []
        self._ddl = 0
        self._restart = self._released = False
        self._after_commit = []
        self._executions = []

    def _check_user(self) -> None:
        catalog.bootstrap(self.db)
        user = catalog.get_user(catalog.Snapshot(self.db, self.db.now()), self.user)
        if user is None:
            raise SQLError("28000", f'role "{self.user}" does not exist')
        if not user.can_login:
            raise SQLError("28000", f"{self.user} does not have login privilege")
        self._checked_user = True

    # Name resolution with a cache of ids (the descriptor itself is always read).

    def resolve_database(self, reader: catalog.Reader, name: str) -> DatabaseDescriptor:
        cached = self._database_ids.get(name)
        if cached is not None:
            found = catalog.get_descriptor(reader, cached)
            if isinstance(found, DatabaseDescriptor) and found.name == name:
                return found
        database = catalog.database_by_name(reader, name)
        self._database_ids[name] = database.id
        return database

    def resolve_table(
        self, reader: catalog.Reader, database: str | None, name: str
    ) -> TableDescriptor:
        database = database or self.database
        cached = self._table_ids.get((database, name))
        if cached is not None:
            found = catalog.table_by_id(reader, cached)
            if found is not None and found.name == name and not found.dropped:
                return found
        table = catalog.table_by_name(reader, self.resolve_database(reader, database), name)
        self._table_ids[(database, name)] = table.id
        return table

    def resolve_relation(
        self, reader: catalog.Reader, database: str | None, name: str
    ) -> NamedRelation:
        """The table (as :meth:`resolve_table` finds it), view or sequence ``name``
        names in ``database`` (the session's if None); 42P01 if none."""
        try:
            return self.resolve_table(reader, database, name)
        except SQLError as exc:
            if exc.code != "42809":  # a view or a sequence
                raise
        return self.relation_named(reader, database, name)

    def relation_named(
        self, reader: catalog.Reader, database: str | None, name: str
    ) -> NamedRelation:
        """The table, view or sequence ``name`` names in ``database`` (the session's if
        None); 42P01 if none."""
        found = catalog.relation_by_name(
            reader, self.resolve_database(reader, database or self.database), name
        )
        if found is None:
            raise SQLError("42P01", f'relation "{name}" does not exist')
        return found

    def transaction_leases(self) -> frozenset[bytes]:
        return frozenset(lease.key for execution in self._executions for lease in execution.leases)

    def leased_table(self, database: str | None, name: str) -> Lease | None:
        """A lease on table ``name`` when its id is known here and a lease is to be had
        (see :mod:`feedkv.sql.leases`); the caller releases it."""
        if self.leases is None:
            return None
        table_id = self._table_ids.get((database or self.database, name))
        if table_id is None:
            return None
        lease = self.leases.use(table_id)
        if lease is not None and lease.desc.name != name:
            self.leases.release(lease)
            return None
        return lease

    def leased_descriptor(self, database: str | None, name: str) -> TableDescriptor | None:
        """Table ``name``'s descriptor as its lease has it now, read from no store
        (``None``: no lease to be had; see :meth:`leased_table`)."""
        lease = self.leased_table(database, name)
        if lease is None or self.leases is None:
            return None
        self.leases.release(lease)
        return lease.desc

    def forget(self, *, database: str | None = None, table: int | None = None) -> None:
        if database is not None:
            self._database_ids.pop(database, None)
        if table is not None:
            for key in [k for k, v in self._table_ids.items() if v == table]:
                del self._table_ids[key]

    def plan(
        self,
        statement: S,
        desc: TableDescriptor,
        make: Callable[[TableDescriptor, S, str], P],
        database: Callable[[S], str],
    ) -> P:
        """``make(desc, statement, database(statement))``, what ``statement`` compiles to
        against ``desc`` (its expressions, its key plan) in its database, made once per
        statement and table version in this session, so a statement run again goes
        straight to its rows. A failed making is not kept: its error comes again on the
        next run. (The parts, not a function making it: a closure cost each statement
        more than the lookup.)"""
        key = (id(statement), desc.id)
        found = self._plans.get(key) or self._long_plans.get(key)
        # NB: the statement is kept with its plan, so its id is not reused while the entry
        # lives. The descriptor is compared whole, not by version: a transaction that
        # rolled back may have used a version that a later change writes differently.
        if found is not None and found[0] is statement and (found[1] is desc or found[1] == desc):
            plan: P = found[2]
            return plan
        if not _kept(statement.text):
            # a long literal statement is not kept either (see prepare)
            return make(desc, statement, database(statement))
        plan = make(desc, statement, database(statement))
        # NB: long texts (a loader's 1,000-row INSERT) have few plans of their own, each
        # as large as a thousand short ones
        plans = self._plans if len(statement.text) <= _CACHED_TEXT_CHARS else self._long_plans
        if len(plans) >= (_PLANS_KEPT if plans is self._plans else _LONG_PLANS_KEPT):
            dropped = [kept for kept, _desc, _plan in plans.values()]
            plans.clear()
            retire(dropped)  # NB: those the parse caches dropped already, no one holds
        plans[key] = (statement, desc, plan)
        return plan
