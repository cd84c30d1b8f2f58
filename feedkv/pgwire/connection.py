"""One client connection's protocol state machine: bytes in, bytes out.

:meth:`Connection.receive` takes what the socket read and returns what to write back;
after it, :attr:`Connection.closed` says whether to close the socket. The SQL runs
through a :class:`SQLSession` (a :class:`~feedkv.sql.session.Session`), synchronously:
a statement's results are encoded whole before the next message is read. The server
(:mod:`feedkv.pgwire.server`) owns the socket and the thread.

Phases: **startup** (an SSLRequest or GSSENCRequest is answered ``N``: an insecure
node has no TLS, and the client goes on in plaintext or gives up as its ``sslmode``
says; a secure node's server answers SSLRequest ``S`` before this state machine starts,
:mod:`feedkv.pgwire.server`; a
CancelRequest is passed on and the connection closes), **authentication** (relayed to
an :class:`~feedkv.pgwire.auth.Authenticator`), then **ready**: ParameterStatus,
BackendKeyData and ReadyForQuery, whose status is ``I`` (idle), ``T`` (in BEGIN) or
``E`` (in a failed transaction, where statements get 25P02 until ROLLBACK).

Simple queries run every statement of the string (as one implicit transaction, see
:mod:`feedkv.sql.session`), each answered with its rows and its command tag; an empty
string gets EmptyQueryResponse. An error answers the statement and the connection goes
on. In the extended protocol (Parse, Bind, Describe, Execute, Close, Sync, Flush) an
error makes the connection skip every message up to the next Sync, as PostgreSQL does,
so a pipeline after a failure does nothing half-way; outside BEGIN, the Executes before
one Sync that read or write rows run in one implicit transaction, committed at the Sync
(rolled back after an error), unless the statement came alone with its Sync
(:meth:`Connection._join_implicit`). A protocol violation (a message
that cannot be framed or parsed, or one not allowed in its phase) gets a FATAL
ErrorResponse and closes this connection only.

A sinkless changefeed (``EXPERIMENTAL CHANGEFEED FOR t``, ``CREATE CHANGEFEED FOR t``
without ``INTO``) streams: each row is sent as it comes, through the server's ``send``,
until the feed ends; a CancelRequest (or the server stopping) closes the feed and the
query ends with 57014; a client that goes away is noticed by a check every
:data:`PEER_CHECK_S` while no row comes, and its feed is closed.

Result column and parameter types come from the SQL layer, which plans a statement
without running it (:meth:`~feedkv.sql.session.Session.describe`): Parse types the
placeholders the client left untyped, Describe of a statement or a portal answers
with the result's columns, and a portal runs at its first Execute. Where the SQL layer
cannot tell a column's type from the statement alone (``SELECT NULL``, ``$1``), the
column goes out as ``text`` when described before running (and its runs send its values
as text, as the client decodes them so), else with the type of its values
(:func:`~feedkv.pgwire.types.column_oid`). The SHOW statements (other than SHOW
of a session variable) have a shape known only from their rows: describing one as a
prepared statement is refused (0A000), and describing it as a portal runs it then (they
only read).

Two kinds of query do not go to the SQL layer: ``COPY ... FROM STDIN | TO STDOUT``
(simple protocol; the data is checked whole and inserted all or nothing, see
:mod:`feedkv.pgwire.copy`), and queries of ``pg_catalog`` or ``information_schema``
(:mod:`feedkv.pgwire.catalog`), which only read and so run when described.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from feedkv.changefeed.changefeed import ChangefeedError
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import (
    AmbiguousResultError,
    BatchTimestampBeforeGCError,
    ClockOffsetError,
    ExternalError,
    FeedKVError,
    InvalidArgumentError,
    PermissionDeniedError,
    RetryableError,
    SerializationFailure,
    SQLError,
)
from feedkv.kv.cancellation import GIVE_UP
from feedkv.pgwire import messages as m
from feedkv.pgwire.auth import Accepted, Authenticator, Challenge, Refused
from feedkv.pgwire.catalog import (
    CatalogResult,
    catalog_param_oids,
    reads_catalog,
    run_catalog_query,
)
from feedkv.pgwire.copy import (
    BINARY_HEADER,
    BINARY_TRAILER,
    CopyStatement,
    decode_binary_rows,
    decode_columns,
    decode_rows,
    encode_binary_row,
    encode_row,
    is_copy,
    parse_copy,
)
from feedkv.pgwire.prepare_sql import (
    ExecuteSQL,
    PrepareSQL,
    param_type,
    parse_execute,
    parse_prepare,
)
from feedkv.pgwire.types import (
    OID,
    WireType,
    binary_reader,
    column_oid,
    decode_param,
    encode_binary,
    encode_text,
    oid_of_type,
    type_of_param,
    type_size,
    wire_type,
)
from feedkv.sql import literal_lifting
from feedkv.sql import statements as st
from feedkv.sql.catalog import User
from feedkv.sql.cursors import Cursors
from feedkv.sql.describe import Description, Origin
from feedkv.sql.descriptor import (
    DatabaseDescriptor,
    SequenceDescriptor,
    TableDescriptor,
    TypeDescriptor,
    ViewDescriptor,
)
from feedkv.sql.execution import Result
from feedkv.sql.expr import VERSION_STRING
from feedkv.sql.interrupt import Interrupt
from feedkv.sql.records import RECORD_OID
from feedkv.sql.session import prepare
from feedkv.sql.time_zone import statement_zone
from feedkv.sql.types import ColumnType, Kind, coerce, kind_name

__all__ = [
    "MAX_COPY_BYTES",
    "PEER_CHECK_S",
    "SERVER_VERSION",
    "Connection",
    "SQLSession",
    "SessionFactory",
]

log = logging.getLogger(__name__)

# CockroachDB reports a PostgreSQL 13 server; drivers pick their features by it.
SERVER_VERSION = "13.0.0"
# How often a streaming changefeed with no rows to send checks that its client is still
# there (PostgreSQL's client_connection_check_interval): a client that went away would
# otherwise hold the feed until its next row.
PEER_CHECK_S = 1.0
# COPY FROM STDIN keeps its data until CopyDone (so that a retry can run it again and
# a bad row anywhere writes nothing): past this many bytes it fails with 54000.
MAX_COPY_BYTES = 256 << 20
# Rows per INSERT of a COPY: one statement text for every full batch (parsed once).
_COPY_BATCH_ROWS = 1000


class SQLSession(Protocol):
    """What a connection needs of a SQL session (:class:`feedkv.sql.session.Session`)."""

    # pg_backend_pid()'s answer: the connection's process id, as BackendKeyData gave it
    backend_pid: int

    @property
    def in_transaction(self) -> bool: ...

    @property
    def failed(self) -> bool: ...

    @property
    def database(self) -> str: ...

    def schema(self) -> list[tuple[DatabaseDescriptor, list[TableDescriptor]]]: ...

    def views_and_sequences(self) -> list[ViewDescriptor | SequenceDescriptor]: ...

    def users(self) -> list[User]: ...

    def grants(self) -> list[tuple[int, str, frozenset[str]]]: ...

    def memberships(self) -> list[tuple[str, str]]: ...

    def comments(self) -> list[tuple[int, str, int, str]]: ...

    def types(self) -> list[TypeDescriptor]: ...

    def check_login(self) -> None: ...

    def set_variable(self, name: str, value: str) -> None: ...

    def fail(self) -> None: ...

    def variable(self, name: str) -> str: ...

    @property
    def zone(self) -> datetime.tzinfo: ...

    @property
    def interrupt(self) -> Interrupt: ...

    def describe(self, text: str, param_types: Sequence[ColumnType | None] = ()) -> Description: ...

    @property
    def cursors(self) -> Cursors: ...

    def declare_over(self, text: str, run: Callable[[str], Result]) -> Result: ...

    def execute_all(self, text: str, params: Sequence[Any] = ()) -> list[Result]: ...

    def leased_descriptor(self, database: str | None, name: str) -> TableDescriptor | None: ...

    def execute_each(
        self,
        text: str,
        params: Sequence[Any] = (),
        *,
        batch: bool = True,
        shown: str | None = None,
    ) -> Iterator[Result]: ...

    def execute_many(
        self,
        runs: Sequence[tuple[str, Sequence[Any]]],
        *,
        interrupt: Callable[[], None] | None = None,
    ) -> list[Result]: ...

    def copy_columns(
        self,
        text: str,
        columns: Sequence[list[Any]],
        *,
        interrupt: Callable[[], None] | None = None,
    ) -> int | None: ...

    def close(self) -> None: ...


SessionFactory = Callable[[str, str], SQLSession]  # (user, database) -> a new session

# The statements an implicit transaction of the extended protocol runs (see
# Connection._join_implicit): those that read or write rows.
_IMPLICIT = st.Insert | st.Update | st.Delete | st.Select | st.SetOperation | st.Values
# Statements whose result's shape is known only from their rows, and which only read:
# describing one as a prepared statement runs it.
_SHOWS = (
    st.ShowTables
    | st.ShowDatabases
    | st.ShowUsers
    | st.ShowCreateTable
    | st.ShowCreateAllTables
    | st.ShowSchemas
    | st.ShowStatistics
    | st.ShowRegions
    | st.ShowRanges
    | st.ShowPartitions
    | st.ShowColumns
    | st.ShowIndexes
    | st.ShowChangefeedJobs
    | st.ShowCreateChangefeed
    | st.ClusterSetting
)

_PLACEHOLDER = re.compile(r"\$(\d+)")
_DECLARE_CURSOR = re.compile(r"\s*DECLARE\b", re.IGNORECASE)
_DEALLOCATE = re.compile(
    r'^\s*DEALLOCATE\s+(?:PREPARE\s+)?("(?:[^"]|"")+"|\w+)\s*;?\s*$', re.IGNORECASE
)

# As CockroachDB's: a 40001 names what to do about it.
_RETRY_HINT = (
    "the transaction conflicted with another: retry it from its start, or use "
    "SAVEPOINT cockroach_restart and ROLLBACK TO SAVEPOINT cockroach_restart. See: "
    "https://www.cockroachlabs.com/docs/stable/transaction-retry-error-reference.html"
)
_RETRY_REASON = re.compile(r"(?:retry txn \(|TransactionAbortedError\()([A-Z_]+)")


def _retry_hint(message: str) -> str:
    """The 40001 hint, its link pointing at the reason's entry when the message names one
    (``#retry_serializable``), as CockroachDB's does."""
    reason = _RETRY_REASON.search(message)
    return _RETRY_HINT + (f"#{reason.group(1).lower()}" if reason else "")


class _ClientGone(FeedKVError):
    """The client of a streaming result went away: the handlers that answer errors let
    it through, since there is no one left to answer, and the connection closes."""


@dataclass(slots=True)
class _CopyIn:
    """A COPY FROM STDIN waiting for its data."""

    copy: CopyStatement
    columns: tuple[tuple[str, ColumnType], ...]
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class _Prepared:
    text: str
    statement: st.Statement | None  # None: an empty query
    param_oids: tuple[int, ...]  # one per placeholder; 0 where neither client nor SQL knew
    description: Description | None  # None: not described yet (in a failed transaction)
    catalog: bool = False  # it reads pg_catalog or information_schema (see catalog.py)
    # the column types a Describe of the statement sent: where one was text (unknown
    # then), a run sends that column's values as text, as the client decodes them so
    sent_types: list[WireType] | None = None
    # a Describe of the statement sent its columns: the client may keep them
    described: bool = False
    from_sql: bool = False  # made by SQL's PREPARE (else by a Parse)
    # a write's: the version of its table's descriptor when its RETURNING was described
    # (None: not known), which tells whether its columns may have changed since
    target_version: int | None = None
    created: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))
    # a portal's RowDescription from ``description``, by the Bind's result formats: the
    # column types and the message (a prepared statement is described at every run)
    rows_described: dict[tuple[int, ...], tuple[list[WireType], bytes]] = field(
        default_factory=dict
    )


@dataclass(slots=True)
class _Portal:
    prepared: _Prepared
    params: tuple[Any, ...]
    result_formats: tuple[int, ...]
    result: Result | None = None
    types: list[WireType] = field(default_factory=list)
    described: bool = False  # ``types`` were sent in a RowDescription: they stay
    sent: int = 0  # rows sent by earlier Executes


class Connection:
    """See the module docstring. Not thread-safe except :meth:`cancel`."""

    def __init__(
        self,
        sessions: SessionFactory,
        authenticator: Authenticator,
        *,
        process_id: int,
        secret: int,
        peer_host: str | None,
        on_cancel: Callable[[int, int], None],
        send: Callable[[bytes], None] | None = None,
        peer_gone: Callable[[], bool] | None = None,
        max_message_bytes: int = m.DEFAULT_MAX_MESSAGE_BYTES,
        client_address: str | None = None,
        terminate: Callable[[], None] | None = None,
    ) -> None:
        """``client_address``: the client's host:port; ``terminate``: closes the
        connection from another thread (CANCEL SESSION)."""
        self.process_id = process_id
        self.secret = secret
        self.closed = False
        self.user = ""
        self._sessions = sessions
        self._authenticator = authenticator
        self._peer_host = peer_host
        self._on_cancel = on_cancel
        self._send = send
        self._peer_gone = peer_gone
        self._client_address = client_address or peer_host or ""
        self._application_name = ""
        self._terminate = terminate
        self._decoder = m.Decoder(max_message_bytes)
        self._phase = "startup"
        self._database = ""
        self._startup_params: dict[str, str] = {}
        self._session: SQLSession | None = None
        self._reported_zone = "UTC"  # the TimeZone the client was last told
        self._statements: dict[str, _Prepared] = {}
        self._portals: dict[str, _Portal] = {}
        self._skipping = False
        # a transaction BEGIN did not open: the Executes a client sent ahead of one Sync
        # run in it (PostgreSQL's implicit transaction), committed at that Sync
        self._implicit = False
        self._busy = False
        self._cancelled = False
        self._shutting_down = False
        self._streaming: FeedResult | None = None
        self._copy_in: _CopyIn | None = None

    def receive(self, data: bytes) -> bytes:
        """Handle the messages ``data`` completes; return the bytes to send back."""
        out = bytearray()
        self._decoder.feed(data)
        while not self.closed:
            try:
                message = self._decoder.next()
                if message is None:
                    break
                self._handle(message, out)
            except m.ProtocolViolation as exc:
                self._fatal(exc, out)
            except _ClientGone:
                self.close()
        return bytes(out)

    @property
    def busy(self) -> bool:
        """Whether a query is running (read from any thread; a snapshot)."""
        return self._busy

    @property
    def streaming(self) -> bool:
        """Whether a sinkless changefeed is streaming to the client (a snapshot)."""
        return self._streaming is not None

    def cancel(self) -> None:
        """A CancelRequest with this connection's key arrived (from another thread): a
        streaming changefeed stops at once, any other statement where it next looks at
        its session's interrupt (:mod:`feedkv.sql.interrupt`: between a scan's pages,
        in ``pg_sleep``, between statements), with 57014."""
        if self._busy:
            self._cancelled = True
            session = self._session
            if session is not None:
                session.interrupt.cancel()
            streaming = self._streaming
            if streaming is not None:
                streaming.close()

    def shut_down(self) -> None:
        """The server stops (from another thread): cancel the running statement as
        :meth:`cancel` does, but with 57P01 (``server is shutting down``: reconnect,
        to another node), not 57014, which says someone cancelled it."""
        self._shutting_down = True
        self.cancel()

    def close(self) -> None:
        """Roll back an open transaction. Idempotent."""
        self.closed = True
        if self._session is not None:
            self._session.close()
            self._session = None

    def _fatal(self, error: SQLError, out: bytearray) -> None:
        out += m.error_response(error.code, error.message, severity="FATAL")
        self.close()

    # Startup and authentication.

    def _handle(self, message: m.FrontendMessage, out: bytearray) -> None:
        if self._phase == "ready":
            self._ready(message, out)
        elif self._phase == "startup":
            self._startup(message, out)
        elif isinstance(message, m.PasswordMessage):
            self._authenticated(self._authenticator.respond(message.data), out)
        elif isinstance(message, m.Terminate):
            self.close()
        else:
            raise m.ProtocolViolation(
                f"expected a password message during authentication, got {type(message).__name__}"
            )

    def _startup(self, message: m.FrontendMessage, out: bytearray) -> None:
        if isinstance(message, m.SSLRequest | m.GSSENCRequest):
            out += b"N"
            return
        if isinstance(message, m.CancelRequest):
            self._on_cancel(message.process_id, message.secret)
            self.close()
            return
        if not isinstance(message, m.StartupMessage):
            raise m.ProtocolViolation(f"expected a startup message, got {type(message).__name__}")
        self._decoder.started()
        params = message.parameters
        unknown = [name for name in params if name.startswith("_pq_.")]
        if message.version & 0xFFFF or unknown:
            out += m.negotiate_protocol_version(0, unknown)
        user = params.get("user", "")
        if not user:
            raise m.ProtocolViolation(
                "no user name in the startup message: connect as a user (root)", code="28000"
            )
        self.user = user
        self._database = params.get("database") or "defaultdb"
        self._startup_params = dict(params)
        self._application_name = params.get("application_name", "")
        self._phase = "authentication"
        self._authenticated(self._authenticator.begin(user, self._peer_host), out)

    def _authenticated(self, outcome: Accepted | Refused | Challenge, out: bytearray) -> None:
        if isinstance(outcome, Challenge):
            out += outcome.message
            return
        if isinstance(outcome, Refused):
            self._fatal(outcome.error, out)
            return
        session = self._sessions(self.user, self._database)
        session.backend_pid = self.process_id  # as CockroachDB's, part of the cancel key
        try:
            with _login_deadline(LOGIN_TIMEOUT_S):
                session.check_login()
            for name, value in _startup_settings(self._startup_params):
                session.set_variable(name, value)
        except FeedKVError as exc:  # NB: a cluster that cannot read the user's records too
            session.close()
            self._fatal(_as_sql_error(exc), out)
            return
        self._session = session
        session.cursors.portals = self._portals  # NB: DECLARE refuses a portal's name
        attach = getattr(session, "attach_connection", None)
        if attach is not None and self._terminate is not None:
            # NB: a session of feedkv.sql.session; a test's stand-in may have none
            attach(self._client_address, self.cancel, self._terminate, self._application_name)
        self._phase = "ready"
        out += outcome.message
        out += m.authentication_ok()
        for name, value in self._parameters().items():
            out += m.parameter_status(name, value)
        self._reported_zone = session.variable("timezone")
        out += m.backend_key_data(self.process_id, self.secret)
        out += m.ready_for_query("I")

    def _parameters(self) -> dict[str, str]:
        return {
            "server_version": SERVER_VERSION,
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "DateStyle": "ISO, MDY",
            "IntervalStyle": "postgres",
            "TimeZone": self._sql.variable("timezone"),
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
            "application_name": self._sql.variable("application_name"),
            "is_superuser": "on" if self.user == "root" else "off",
            "session_authorization": self.user,
            "default_transaction_isolation": "serializable",
            "crdb_version": "feedkv (CockroachDB-compatible SQL subset)",
        }

    # Ready: simple and extended queries.

    @property
    def _sql(self) -> SQLSession:
        if self._session is None:
            raise m.ProtocolViolation("the connection is closed")
        return self._session

    def _status(self) -> str:
        session = self._sql
        if session.failed:
            return "E"
        return "T" if session.in_transaction else "I"

    def _ready_for_query(self, out: bytearray) -> None:
        """ReadyForQuery with the transaction status. Outside a transaction, the portals
        are gone: as in PostgreSQL and CockroachDB, a portal lasts until its transaction
        ends (an implicit one ends here), and its name is free for a DECLARE again."""
        status = self._status()
        if status == "I":
            self._portals.clear()
        out += m.ready_for_query(status)

    def _ready(self, message: m.FrontendMessage, out: bytearray) -> None:
        if isinstance(message, m.Terminate):
            self.close()
            return
        if self._copy_in is not None:
            self._copy_message(self._copy_in, message, out)
            return
        if isinstance(message, m.Sync):
            self._end_implicit(out)
            self._skipping = False
            self._ready_for_query(out)
            return
        if self._skipping:
            return  # an error was answered: skip to Sync
        handler = _EXTENDED.get(type(message))
        if isinstance(message, m.Query):
            self._end_implicit(out)
            self._simple_query(message.text, out)
        elif handler is not None:
            mark = len(out)
            try:
                handler(self, message, out)
            except (m.ProtocolViolation, _ClientGone):
                raise
            except Exception as exc:
                del out[mark:]
                self._error(exc, out)
                self._skipping = True
        elif isinstance(message, m.Flush):
            pass  # every answer is written as soon as it is made
        else:
            raise m.ProtocolViolation(
                f"unexpected {type(message).__name__} message outside COPY or authentication"
            )

    def _error(self, exc: BaseException, out: bytearray) -> None:
        error = _as_sql_error(exc)
        hint = _retry_hint(error.message) if error.code == "40001" else None
        routine = _REVALIDATE if isinstance(error, _PlanChanged) else None
        out += m.error_response(
            error.code,
            error.message,
            position=error.position,
            detail=error.detail,
            hint=hint,
            routine=routine,
        )

    def _simple_query(self, text: str, out: bytearray) -> None:
        self._statements.pop("", None)
        self._portals.pop("", None)
        self._begin_query()
        try:
            sql_prepare, sql_execute = parse_prepare(text), parse_execute(text)
            copying, catalog = is_copy(text), reads_catalog(text)
            deallocate = _DEALLOCATE.match(text)
            special = copying or catalog or deallocate or sql_prepare or sql_execute
            # NB: its integer literals as parameters, when they may be: one parse and plan
            # for all the texts that differ only in them (feedkv.sql.literal_lifting)
            lifted = None if special else self._lifted(text)
            run, params = lifted if lifted is not None else (text, ())
            prepared = () if special else prepare(run)
            if sql_prepare is not None:
                self._prepare_sql(sql_prepare, out)
            elif sql_execute is not None:
                self._execute_sql(sql_execute, out)
            elif deallocate:
                self._deallocate(deallocate.group(1), out)
            elif copying:
                if self._copy(text, out):
                    return  # ReadyForQuery comes when the data is in
            elif catalog:
                result = self._catalog(text, ())
                self._send_result(result, self._result_types(result, None), (), out, describe=True)
            elif not prepared:
                out += m.empty_query_response()
            elif (fetch := self._portal_fetch(prepared)) is not None:
                self._fetch_portal(fetch, out)
            else:
                results = self._sql.execute_each(run, params, shown=text)
                for (statement, _count), result in zip(prepared, results, strict=False):
                    self._check_cancelled()
                    description = self._described_after(statement, result)
                    types = self._result_types(result, description)
                    origins = () if description is None else description.origins
                    self._send_result(result, types, (), out, describe=True, origins=origins)
        except _ClientGone:
            raise
        except Exception as exc:
            self._error(exc, out)
        finally:
            self._end_query()
        self._ready_for_query(out)

    def _lifted(self, text: str) -> tuple[str, tuple[int, ...]] | None:
        """``text``'s template and values (:func:`literal_lifting.lifted`) when its
        table, as leased now, may take them; else ``None``: run the text as written."""
        found = literal_lifting.lifted(text, prepare)
        if found is None:
            return None
        table = literal_lifting.table_of(prepare(found[0])[0][0])
        desc = None if table is None else self._sql.leased_descriptor(table.database, table.name)
        return found if desc is not None and literal_lifting.lifts_into(desc) else None

    def _portal_fetch(self, prepared: Sequence[tuple[st.Statement, int]]) -> st.FetchCursor | None:
        """The query's one statement if it is a FETCH or MOVE of a portal Bind made (not
        of a SQL cursor), as asyncpg's ``Cursor.forward`` sends: in PostgreSQL they
        share one namespace."""
        if len(prepared) != 1:
            return None
        statement = prepared[0][0]
        if not isinstance(statement, st.FetchCursor) or statement.name not in self._portals:
            return None
        return None if statement.name in self._sql.cursors.open else statement

    def _fetch_portal(self, statement: st.FetchCursor, out: bytearray) -> None:
        """FETCH or MOVE forward over portal ``statement.name``: its next rows, sent (in
        text) or skipped; 55000 for a move backward, as a portal only scans forward."""
        portal = self._portals[statement.name]
        if statement.kind not in ("count", "all") or statement.count < 0:
            raise SQLError("55000", "cursor can only scan forward")
        result = self._run(portal)
        if isinstance(result, FeedResult):
            raise SQLError("0A000", f"cannot {'MOVE' if statement.move else 'FETCH'} a changefeed")
        end = len(result.rows) if statement.kind == "all" else portal.sent + statement.count
        rows = result.rows[portal.sent : end]
        portal.sent += len(rows)
        if statement.move:
            out += m.command_complete(f"MOVE {len(rows)}")
            return
        fetched = Result(result.columns, rows, f"FETCH {len(rows)}")
        self._send_result(fetched, portal.types, (), out, describe=True)

    # COPY.

    def _copy(self, text: str, out: bytearray) -> bool:
        """Start a COPY; returns whether it waits for data (FROM STDIN)."""
        copy = parse_copy(text)
        if copy.direction == "out":
            self._copy_out(copy, out)
            return False
        columns = ", ".join(f'"{c}"' for c in copy.columns) if copy.columns else "*"
        described = self._sql.describe(f"SELECT {columns} FROM {copy.table}").columns or ()
        if not copy.columns:  # NB: as PostgreSQL, all columns but the computed ones
            computed = self._computed_columns(copy.table or "")
            described = tuple((name, ctype) for name, ctype in described if name not in computed)
        typed = tuple((name, ctype) for name, ctype in described if ctype is not None)
        if len(typed) != len(described):
            raise SQLError("0A000", f"COPY cannot tell the column types of {copy.table}")
        self._copy_in = _CopyIn(copy, typed)
        out += m.copy_in_response(len(typed), binary=copy.binary)
        return True

    def _computed_columns(self, table: str) -> set[str]:
        """The names of the computed columns of ``table`` (as COPY names it: ``t``,
        ``public.t`` or ``db.public.t``), which COPY FROM fills in, not the data."""
        parts = [
            p[1:-1].replace('""', '"') if p.startswith('"') else p.lower()
            for p in (part.strip() for part in table.split("."))
        ]
        database = parts[0] if len(parts) == 3 else self._sql.database
        for found, tables in self._sql.schema():
            if found.name == database:
                for desc in tables:
                    if desc.name == parts[-1]:
                        return {c.name for c in desc.computed_columns}
        return set()

    def _copy_message(self, state: _CopyIn, message: m.FrontendMessage, out: bytearray) -> None:
        """A message during COPY FROM STDIN: data, its end, or its failure; anything
        else fails the COPY (as PostgreSQL does), which then writes nothing."""
        if isinstance(message, m.CopyData):
            state.data += message.data
            if len(state.data) <= MAX_COPY_BYTES:
                return
            error = SQLError(
                "54000", f"COPY data is larger than {MAX_COPY_BYTES} bytes: split it up"
            )
        elif isinstance(message, m.Flush | m.Sync):
            return  # PostgreSQL ignores them during COPY
        elif isinstance(message, m.CopyDone):
            self._copy_in = None
            self._begin_query()
            try:
                count = self._copy_rows(state)
            except _ClientGone:
                raise
            except Exception as exc:
                self._sql.fail()
                self._error(exc, out)
            else:
                out += m.command_complete(f"COPY {count}")
            finally:
                self._end_query()
            self._ready_for_query(out)
            return
        elif isinstance(message, m.CopyFail):
            error = SQLError("57014", f"COPY from stdin failed: {message.message}")
        else:
            error = SQLError(
                "08P01", f"unexpected {type(message).__name__} message during COPY from stdin"
            )
        self._copy_in = None
        self._sql.fail()
        self._error(error, out)
        self._ready_for_query(out)

    def _copy_rows(self, state: _CopyIn) -> int:
        """Insert the COPY's rows, all or none: in the open transaction, else in one of
        their own, retried on conflicts."""
        copy, columns = state.copy, state.columns
        names = ", ".join(f'"{name}"' for name, _ in columns)
        width = len(columns)

        def statement(count: int) -> str:
            values = ", ".join(
                "(" + ", ".join(f"${r * width + c + 1}" for c in range(width)) + ")"
                for r in range(count)
            )
            return f"INSERT INTO {copy.table} ({names}) VALUES {values}"

        def decoded() -> Iterator[tuple[int, list[Any]]]:
            if copy.binary:
                readers = [binary_reader(ctype) for _, ctype in columns]
                return decode_binary_rows(bytes(state.data), readers, [n for n, _ in columns])
            return decode_rows(copy, bytes(state.data), width)

        if width and not self._sql.in_transaction:
            ints = [ctype.kind is Kind.INT for _, ctype in columns]
            fields = decode_columns(copy, bytes(state.data), width, ints)
            if fields is None:
                # NB: the values go straight into a list per column (a list per row
                # would keep a million rows alive as a million lists, which every full
                # garbage collection walks while the COPY runs)
                fields = [[] for _ in range(width)]
                rows = decoded()
                for chunk in iter(lambda: list(itertools.islice(rows, _COPY_BATCH_ROWS)), []):
                    for into, part in zip(
                        fields, zip(*(v for _, v in chunk), strict=True), strict=True
                    ):
                        into.extend(part)
            written = self._sql.copy_columns(statement(1), fields, interrupt=self._check_cancelled)
            if written is not None:
                return written
        # NB: each batch's values go straight into one flat list: a list per row would
        # keep a million rows alive as a million lists, which every full garbage
        # collection walks while the COPY runs
        batches: list[list[Any]] = [[]]
        rows = decoded()
        for line, values in rows:
            batch = batches[-1]
            if len(batch) == _COPY_BATCH_ROWS * width:
                batch = []
                batches.append(batch)
            try:
                batch.extend(
                    [
                        coerce(value, ctype, name)
                        for value, (name, ctype) in zip(values, columns, strict=True)
                    ]
                )
            except SQLError as exc:
                where = "row" if copy.binary else "line"
                raise SQLError(
                    exc.code, f"COPY data, {where} {line}: {exc.message}", detail=exc.detail
                ) from None
        if not batches[-1]:
            batches.pop()
        full_text = statement(_COPY_BATCH_ROWS)  # NB: one text for every full batch
        runs: list[tuple[str, Sequence[Any]]] = [
            (full_text if len(b) == _COPY_BATCH_ROWS * width else statement(len(b) // width), b)
            for b in batches
        ]
        self._sql.execute_many(runs, interrupt=self._check_cancelled)
        return sum(len(b) for b in batches) // width if width else 0

    def _copy_out(self, copy: CopyStatement, out: bytearray) -> None:
        if copy.query is not None:
            query = copy.query
        else:
            columns = ", ".join(f'"{c}"' for c in copy.columns) if copy.columns else "*"
            query = f"SELECT {columns} FROM {copy.table}"
        self._begin_query()
        try:
            result = self._sql.execute_all(query)[-1]
        finally:
            self._end_query()
        types = self._result_types(result, self._described_after(prepare(query)[0][0], result))
        out += m.copy_out_response(len(types), binary=copy.binary)
        if copy.binary:
            # NB: the header goes in the first message, with the first row (or the
            # trailer), as PostgreSQL sends it: clients (psycopg) expect it there
            header = BINARY_HEADER
            for row in result.rows:
                fields = [
                    None if value is None else encode_binary(value, wire.oid)
                    for value, wire in zip(row, types, strict=True)
                ]
                out += m.copy_data(header + encode_binary_row(fields))
                header = b""
            out += m.copy_data(header + BINARY_TRAILER)
            out += m.copy_done()
            out += m.command_complete(f"COPY {len(result.rows)}")
            return
        if copy.header:
            out += m.copy_data(encode_row(copy, list(result.columns)))
        digits = self._float_digits()
        with statement_zone(self._zone()):
            for row in result.rows:
                text = [
                    None if value is None else encode_text(value, wire.oid, digits).decode()
                    for value, wire in zip(row, types, strict=True)
                ]
                out += m.copy_data(encode_row(copy, text))
        out += m.copy_done()
        out += m.command_complete(f"COPY {len(result.rows)}")

    def _report_time_zone(self, out: bytearray) -> None:
        """A ParameterStatus for ``TimeZone`` once a statement changed it, as PostgreSQL
        and CockroachDB send one: drivers (psycopg) give TIMESTAMPTZ values in it."""
        zone = self._sql.variable("timezone")
        if zone != self._reported_zone:
            self._reported_zone = zone
            out += m.parameter_status("TimeZone", zone)

    def _zone(self) -> datetime.tzinfo:
        """The session's time zone: how a TIMESTAMPTZ is written as text."""
        session = self._session
        return datetime.UTC if session is None else session.zone

    def _float_digits(self) -> int:
        """The session's ``extra_float_digits``: how FLOATs are written as text."""
        session = self._session
        return 0 if session is None else int(session.variable("extra_float_digits"))

    def _deallocate(self, name: str, out: bytearray) -> None:
        """``DEALLOCATE [PREPARE] name | ALL``: drop prepared statements (drivers send
        it when they reset their statement cache)."""
        if name.upper() == "ALL":
            self._statements.clear()
            out += m.command_complete("DEALLOCATE ALL")
            return
        name = name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()
        if self._statements.pop(name, None) is None:
            raise SQLError("26000", f'prepared statement "{name}" does not exist')
        out += m.command_complete("DEALLOCATE")

    def _prepare_sql(self, statement: PrepareSQL, out: bytearray) -> None:
        """SQL's ``PREPARE name [(types)] AS ...``: a prepared statement as a Parse of
        it makes (42P05 when the name is taken)."""
        enums = {t.name: t for t in self._sql.types()} if statement.types else {}
        oids = []
        for name in statement.types:
            ctype = param_type(name)
            if ctype.kind is Kind.ENUM:  # NB: a name of no built-in type
                found = enums.get(ctype.type_name or "")
                if found is None:
                    raise SQLError("42704", f'type "{name}" does not exist')
                ctype = found.column_type()
            oids.append(oid_of_type(ctype))
        self._parse(m.Parse(statement.name, statement.text, tuple(oids)), bytearray())
        self._statements[statement.name].from_sql = True
        out += m.command_complete("PREPARE")

    def _execute_sql(self, statement: ExecuteSQL, out: bytearray) -> None:
        """SQL's ``EXECUTE name [(values)]``: the values, evaluated by the session, bound
        as a Bind would bind them in text, then the statement run and its rows sent."""
        prepared = self._statements.get(statement.name)
        if prepared is None:
            raise SQLError("26000", f'prepared statement "{statement.name}" does not exist')
        values: Sequence[Any] = ()
        if statement.arguments:
            values = self._sql.execute_all(f"SELECT {statement.arguments}")[-1].rows[0]
        oids = prepared.param_oids
        if len(values) != len(oids):
            raise SQLError(
                "42601",
                f'wrong number of parameters for prepared statement "{statement.name}": '
                f"expected {len(oids)}, got {len(values)}",
            )
        with statement_zone(self._zone()):
            params = tuple(
                None if v is None else decode_param(encode_text(v, oid), oid, False, i + 1)
                for i, (v, oid) in enumerate(zip(values, oids, strict=True))
            )
        portal = _Portal(prepared, params, ())
        result = self._run(portal)
        if prepared.statement is None and not prepared.catalog:
            out += m.empty_query_response()
            return
        self._send_result(result, portal.types, (), out, describe=True)

    def _catalog(self, text: str, params: Sequence[Any]) -> Result:
        if _DECLARE_CURSOR.match(text):
            return self._sql.declare_over(text, lambda query: self._catalog(query, params))
        session = self._sql
        others = session.views_and_sequences()
        return run_catalog_query(
            text,
            params,
            session.schema(),
            database=session.database,
            user=self.user,
            version=VERSION_STRING,
            others=others,
            view_types={v.id: self._view_types(v) for v in others if isinstance(v, ViewDescriptor)},
            users=session.users(),
            grants=session.grants(),
            memberships=session.memberships(),
            comments=session.comments(),
            types=session.types(),
            cursors=[
                (c.name, c.statement, c.holdable, False, False, c.created)
                for c in session.cursors.open.values()
            ],
            prepared=[
                (name, p.text, p.created, p.param_oids, p.from_sql)
                for name, p in self._statements.items()
                if name  # NB: as PostgreSQL's, not the unnamed statement
            ],
        )

    def _view_types(self, view: ViewDescriptor) -> tuple[ColumnType | None, ...]:
        """The types of ``view`` (of the current database)'s columns, as its query's
        description gives them (``None``: known only from its values)."""
        try:
            described = self._sql.describe(view.query).columns
        except SQLError:
            return ()  # NB: a view that no longer reads fails when read, with its SQLSTATE
        return tuple(ctype for _name, ctype in (described or ())[: len(view.columns)])

    def _begin_query(self) -> None:
        """A query starts: a cancel that came before it is spent."""
        if self._session is not None:
            self._session.interrupt.reset()
        self._busy = True

    def _end_query(self) -> None:
        self._busy = self._cancelled = False

    def _check_cancelled(self) -> None:
        if self._cancelled:
            if self._shutting_down:
                raise SQLError("57P01", "server is shutting down")
            raise SQLError("57014", "query execution canceled")

    def _described_after(self, statement: st.Statement, result: Result) -> Description | None:
        """``statement``'s description, made after it ran (a simple query's statements
        may create the tables the next ones read); ``None`` when it fails, as for a
        statement that dropped what it read: then the values tell the types."""
        if not (result.columns or result.rows):
            return None
        try:
            return self._sql.describe(statement.text)
        except SQLError:
            return None

    def _result_types(self, result: Result, description: Description | None) -> list[WireType]:
        """The result's column types: the SQL layer's (a catalog query's own), else its
        values'."""
        if isinstance(result, CatalogResult) and len(result.wire_types) == len(result.columns):
            return list(result.wire_types)
        types = _column_types(result)
        declared = description.columns if description is not None else None
        if declared is not None and len(declared) == len(types):
            types = [
                found if ctype is None else wire_type(ctype)
                for found, (_name, ctype) in zip(types, declared, strict=True)
            ]
        return types

    def _send_result(
        self,
        result: Result,
        types: list[WireType],
        formats: Sequence[int],
        out: bytearray,
        *,
        describe: bool,
        origins: Sequence[Origin] = (),
    ) -> None:
        if result.columns or result.rows:
            codes = _formats(formats, len(types))
            if describe:
                out += m.row_description(_fields(result.columns, types, codes, origins))
            if isinstance(result, FeedResult):
                self._stream(result, types, codes, out)
                return
            _data_rows(result.rows, types, codes, out, self._float_digits(), self._zone())
        for notice in result.notices:
            out += m.notice_response(notice)
        self._report_time_zone(out)
        out += m.command_complete(result.tag)

    def _stream(
        self, result: FeedResult, types: list[WireType], codes: list[int], out: bytearray
    ) -> None:
        """A sinkless changefeed's rows, each sent as it comes, until the feed ends or
        the query is cancelled (which stops the feed)."""
        self._streaming = result
        sent = 0
        for notice in result.notices:  # before the rows, which may never end
            out += m.notice_response(notice)
        try:
            if self._cancelled:
                result.close()
            while True:
                try:
                    row = result.poll(PEER_CHECK_S)
                except TimeoutError:
                    if self._peer_gone is not None and self._peer_gone():
                        raise _ClientGone from None
                    continue
                if row is None:
                    break
                _data_rows([row], types, codes, out, self._float_digits(), self._zone())
                sent += 1
                self._flush(out)
        finally:
            self._streaming = None
            result.close()
        self._check_cancelled()
        out += m.command_complete(f"SELECT {sent}")

    def _flush(self, out: bytearray) -> None:
        """Send what is in ``out`` now (a streaming result); without a sender it stays
        in ``out`` for :meth:`receive` to return."""
        if self._send is not None and out:
            self._send(bytes(out))
            out.clear()

    def _parse(self, message: m.Parse, out: bytearray) -> None:
        if message.name and message.name in self._statements:
            raise SQLError("42P05", f'prepared statement "{message.name}" already exists')
        if reads_catalog(message.text):
            count = max((int(n) for n in _PLACEHOLDER.findall(message.text)), default=0)
            given = message.param_oids[:count] + (OID.UNSPECIFIED,) * count
            cast = catalog_param_oids(message.text, count)
            oids = tuple(g or c for g, c in zip(given, cast, strict=False))
            self._statements[message.name] = _Prepared(message.text, None, oids, None, True)
            out += m.parse_complete()
            return
        _refuse_void(message.text, message.param_oids)
        prepared = prepare(message.text)
        if len(prepared) > 1:
            raise SQLError("42601", "cannot insert multiple commands into a prepared statement")
        statement, count = prepared[0] if prepared else (None, 0)
        if len(message.param_oids) > count:
            raise SQLError(
                "08P01",
                f"Parse gave {len(message.param_oids)} parameter types for a statement with "
                f"{count} placeholders",
            )
        oids = message.param_oids + (OID.UNSPECIFIED,) * (count - len(message.param_oids))
        description = None
        if statement is not None and not self._sql.failed:
            # NB: as PostgreSQL, an unknown table or column fails the Parse
            description = self._sql.describe(message.text, _param_types(oids))
            oids = _typed(oids, description.params)
        self._statements[message.name] = _Prepared(
            message.text, statement, oids, description, target_version=self._version_of(statement)
        )
        out += m.parse_complete()

    def _bind(self, message: m.Bind, out: bytearray) -> None:
        prepared = self._statements.get(message.statement)
        if prepared is None:
            raise SQLError("26000", f'prepared statement "{message.statement}" does not exist')
        if message.portal and message.portal in self._portals:
            raise SQLError("42P03", f'portal "{message.portal}" already exists')
        if message.portal in self._sql.cursors.open:  # NB: one namespace, as PostgreSQL's
            raise SQLError("42P03", f'portal "{message.portal}" already exists as cursor')
        if isinstance(prepared.statement, st.FetchCursor) and not prepared.statement.move:
            self._redescribe_fetch(prepared, prepared.statement.name)
        oids = prepared.param_oids
        if len(message.params) != len(oids):
            raise SQLError(
                "08P01",
                f"bind message supplies {len(message.params)} parameters, but prepared "
                f'statement "{message.statement}" requires {len(oids)}',
            )
        codes = _formats(message.param_formats, len(oids), what="parameter")
        with statement_zone(self._zone()):  # a TIMESTAMPTZ's text without an offset
            params = tuple(
                None if raw is None else decode_param(raw, oid, code == 1, i + 1)
                for i, (raw, oid, code) in enumerate(zip(message.params, oids, codes, strict=True))
            )
        self._portals[message.portal] = _Portal(prepared, params, message.result_formats)
        out += m.bind_complete()

    def _redescribe_fetch(self, prepared: _Prepared, cursor: str) -> None:
        """A FETCH's columns are those of the cursor its name has at Bind (as a
        PostgreSQL portal takes them), which may not be the one it was prepared over. A
        client that described the statement keeps those columns: for it a change is
        refused as PostgreSQL refuses a cached plan whose result type changed (0A000);
        else the statement is described anew."""
        if cursor not in self._sql.cursors.open:
            return  # NB: the FETCH fails as it runs (34000)
        description = self._sql.describe(prepared.text)
        if description == prepared.description:
            return
        if prepared.described:
            raise SQLError("0A000", "cached plan must not change result type")
        prepared.description = description
        prepared.rows_described.clear()

    def _describe(self, message: m.Describe, out: bytearray) -> None:
        if message.kind == "S":
            prepared = self._statements.get(message.name)
            if prepared is None:
                raise SQLError("26000", f'prepared statement "{message.name}" does not exist')
            description = self._description(prepared)
            prepared.described = True
            if description is not None:
                prepared.param_oids = _typed(prepared.param_oids, description.params)
            oids = [OID.TEXT if oid == OID.UNSPECIFIED else oid for oid in prepared.param_oids]
            out += m.parameter_description(oids)
            if prepared.catalog and _DECLARE_CURSOR.match(prepared.text):
                out += m.no_data()  # NB: it declares a cursor when it runs, not now
                return
            if prepared.catalog:  # it only reads: its columns are those of a run
                result = self._catalog(prepared.text, [None] * len(prepared.param_oids))
                types = self._result_types(result, None)
                prepared.sent_types = types
                out += m.row_description(_fields(result.columns, types, [0] * len(types)))
                return
            if description is None or description.columns == ():
                out += m.no_data()
                return
            origins: Sequence[Origin] = ()
            if description.columns is not None:
                shown = [name for name, _ in description.columns]
                types = _described_types(description)
                origins = description.origins
            elif isinstance(prepared.statement, _SHOWS) and not prepared.param_oids:
                result = self._sql.execute_all(prepared.text)[-1]  # it only reads
                shown, types = list(result.columns), self._result_types(result, None)
            else:
                raise SQLError(
                    "0A000",
                    "the result columns of this statement are known only when it runs: bind "
                    "it and describe the portal",
                )
            prepared.sent_types = types
            out += m.row_description(_fields(shown, types, [0] * len(types), origins))
            return
        if message.name and message.name not in self._portals:
            # NB: a SQL cursor is a portal too (psycopg describes its named cursors so)
            self._describe_cursor(message.name, out)
            return
        portal = self._portal(message.name)
        description = self._description(portal.prepared)
        if portal.prepared.catalog:
            description = Description(None, ())  # it only reads: it runs now
        if description is None or description.columns == ():
            out += m.no_data()
            return
        names: Sequence[str]
        if description.columns is None:  # a SHOW (or SPLIT AT): it runs now
            result = self._run(portal)
            if not (result.columns or result.rows):
                out += m.no_data()
                return
            names = result.columns
        else:
            prepared = portal.prepared
            known = prepared.rows_described.get(portal.result_formats)
            if known is None or prepared.description is not description:
                if prepared.description is not description:
                    prepared.rows_described.clear()
                types = _described_types(description)
                codes = _formats(portal.result_formats, len(types))
                names = [name for name, _ in description.columns]
                fields = _fields(names, types, codes, description.origins)
                known = (types, m.row_description(fields))
                if prepared.description is description:
                    prepared.rows_described[portal.result_formats] = known
            portal.types = list(known[0])
            portal.described = True
            out += known[1]
            return
        portal.described = True
        codes = _formats(portal.result_formats, len(portal.types))
        out += m.row_description(_fields(names, portal.types, codes))

    def _describe_cursor(self, name: str, out: bytearray) -> None:
        """The RowDescription of SQL cursor ``name``'s rows, as FETCH sends them (34000
        if there is no such cursor)."""
        cursor = self._sql.cursors.get(name)
        types = [_declared_type(ctype) for ctype in cursor.types]
        out += m.row_description(_fields(cursor.columns, types, [0] * len(types)))

    def _description(self, prepared: _Prepared) -> Description | None:
        """``prepared``'s description, made now if Parse could not (None: an empty
        query)."""
        if prepared.statement is None:
            return None
        if prepared.description is None:
            prepared.description = self._sql.describe(
                prepared.text, _param_types(prepared.param_oids)
            )
        return prepared.description

    def _portal(self, name: str) -> _Portal:
        portal = self._portals.get(name)
        if portal is None:
            raise SQLError("34000", f'portal "{name}" does not exist')
        return portal

    def _run(self, portal: _Portal) -> Result:
        if portal.result is None:
            if portal.prepared.catalog:
                portal.result = self._catalog(portal.prepared.text, portal.params)
            elif portal.prepared.statement is None:
                portal.result = Result()
            else:
                prepared = portal.prepared
                read = isinstance(prepared.statement, st.Select)
                if not read and _described_columns(prepared):
                    # NB: a write's RETURNING is checked before it runs, not after it
                    # committed, when its table's version moved (a describe costs a
                    # quarter of the write); a read's rows once read (it costs nothing)
                    version = self._version_of(prepared.statement)
                    if version is None or version != prepared.target_version:
                        described = self._sql.describe(prepared.text).columns
                        self._check_unchanged(prepared, described)
                        prepared.target_version = version
                self._begin_query()
                try:
                    results = self._sql.execute_all(prepared.text, portal.params)
                finally:
                    self._end_query()
                portal.result = results[-1]
                if read:
                    self._check_unchanged(prepared, portal.result.columns)
            if not portal.described and (portal.result.columns or portal.result.rows):
                found = self._result_types(portal.result, portal.prepared.description)
                portal.types = _as_sent(found, portal.prepared.sent_types)
        return portal.result

    def _version_of(self, statement: st.Statement | None) -> int | None:
        """The version of the descriptor of the table a write writes, as its lease has
        it (None: not a write, or no lease to be had)."""
        if not isinstance(statement, st.Insert | st.Update | st.Delete):
            return None
        desc = self._sql.leased_descriptor(statement.table.database, statement.table.name)
        return desc.version if desc is not None else None

    @staticmethod
    def _check_unchanged(prepared: _Prepared, columns: Sequence[Any] | None) -> None:
        """0A000 when the columns of ``prepared``'s result are no longer those it was
        described with (another session altered a table it reads), as PostgreSQL
        refuses such a cached plan: drivers (asyncpg, pgJDBC) then prepare it again.
        ``columns``: the names, or ``(name, type)`` pairs, found now."""
        described = _described_columns(prepared)
        if not described or columns is None:
            return
        names = [c if isinstance(c, str) else c[0] for c in columns]
        if names != [name for name, _type in described]:
            raise _PlanChanged("0A000", "cached plan must not change result type")

    def _execute(self, message: m.Execute, out: bytearray) -> None:
        portal = self._portal(message.portal)
        if portal.result is None:
            self._join_implicit(portal, out)
        result = self._run(portal)
        if portal.prepared.statement is None and not portal.prepared.catalog:
            out += m.empty_query_response()
            return
        if isinstance(result, FeedResult):
            codes = _formats(portal.result_formats, len(portal.types))
            self._begin_query()
            try:
                self._stream(result, portal.types, codes, out)
            finally:
                self._end_query()
            return
        end = len(result.rows) if message.max_rows == 0 else portal.sent + message.max_rows
        rows = result.rows[portal.sent : end]
        if result.columns or result.rows:
            codes = _formats(portal.result_formats, len(portal.types))
            _data_rows(rows, portal.types, codes, out, self._float_digits(), self._zone())
        portal.sent += len(rows)
        if portal.sent < len(result.rows):
            out += m.portal_suspended()
        else:
            for notice in result.notices:
                out += m.notice_response(notice)
            self._report_time_zone(out)
            out += m.command_complete(result.tag)

    def _join_implicit(self, portal: _Portal, out: bytearray) -> None:
        """Before ``portal``'s statement runs at an Execute: it joins the implicit
        transaction when it reads or writes rows; a COMMIT or ROLLBACK ends it, as in
        PostgreSQL (the writes before a ROLLBACK are undone, not committed), and a BEGIN
        makes it explicit, answered without running (the writes before it are then the
        explicit transaction's, as in PostgreSQL and CockroachDB), its modes set on it as
        SET TRANSACTION sets them (a change SET TRANSACTION refuses fails the BEGIN, and
        the implicit transaction rolls back at the Sync, as CockroachDB's); any other
        statement ends it first, committing, and runs as it would alone. Outside a transaction,
        one begins unless the Sync that ends this Execute's batch is already here with
        no other Execute before it: the Executes of one batch (asyncpg's executemany, a
        JDBC batch, a psycopg pipeline) take effect all or none, in one commit, as in
        PostgreSQL. A statement sent alone with its Sync, the common case, still runs in
        a transaction of its own that is retried on conflicts."""
        statement = portal.prepared.statement
        # NB: a read AS OF SYSTEM TIME runs outside any transaction, as it would alone
        historical = isinstance(statement, st.Select) and statement.as_of is not None
        rows = isinstance(statement, _IMPLICIT) and not historical
        if self._implicit and isinstance(statement, st.Commit | st.Rollback):
            self._implicit = False  # NB: the statement ends the transaction itself
            return
        if self._implicit and isinstance(statement, st.Begin):
            modes = _transaction_modes(statement)
            if modes:  # NB: as CockroachDB, set on the transaction made explicit (or refused)
                self._sql.execute_all(f"SET TRANSACTION {modes}")
            self._implicit = False
            portal.result = Result(tag="BEGIN")
            return
        if self._implicit and not rows:
            self._end_implicit(out)
        if self._implicit or not rows or self._sql.in_transaction:
            return
        ahead = self._decoder.buffered_kinds()
        sync = ahead.find(b"S")
        if sync < 0 or b"E" in ahead[:sync]:
            self._sql.execute_all("BEGIN")
            self._implicit = True

    def _end_implicit(self, out: bytearray) -> None:
        """Commit the implicit transaction (roll it back after an error, which the
        client was answered); a failing commit is answered here, before ReadyForQuery."""
        if not self._implicit:
            return
        self._implicit = False
        session = self._sql
        if not session.in_transaction:
            return
        try:
            session.execute_all("ROLLBACK" if session.failed or self._skipping else "COMMIT")
        except Exception as exc:
            self._error(exc, out)

    def _close(self, message: m.Close, out: bytearray) -> None:
        if message.kind == "S":
            self._statements.pop(message.name, None)
        else:
            self._portals.pop(message.name, None)
        out += m.close_complete()


_EXTENDED: dict[type, Callable[[Connection, Any, bytearray], None]] = {
    m.Parse: Connection._parse,
    m.Bind: Connection._bind,
    m.Describe: Connection._describe,
    m.Execute: Connection._execute,
    m.Close: Connection._close,
}


def _startup_settings(params: dict[str, str]) -> list[tuple[str, str]]:
    """The session variables a startup message sets: ``application_name``, and each
    ``-c name=value`` (or ``--name=value``) of ``options``, as libpq passes them
    (``options='-c statement_timeout=5s'``; a backslash escapes a space). Other
    parameters are left alone: drivers send ones such as ``TimeZone`` of their own
    accord, which a client never asked for."""
    settings = []
    if "application_name" in params:
        settings.append(("application_name", params["application_name"]))
    options = params.get("options", "").replace("\\ ", "\x00")
    words = [w.replace("\x00", " ") for w in options.split()]
    pending = False
    for word in words:
        if pending or word.startswith(("-c", "--")):
            setting = word if pending else word[2:]
            pending = not setting
            if setting:
                name, equals, value = setting.partition("=")
                if not equals:
                    raise SQLError("22023", f"invalid option {word!r} in options: -c name=value")
                settings.append((name.replace("-", "_"), value))
    return settings


# How long a login may wait to read the user's records (CockroachDB's
# server.user_login.timeout): a range that lost its quorum must not hold a client for
# the router's every retry.
LOGIN_TIMEOUT_S = 10.0


@contextlib.contextmanager
def _login_deadline(seconds: float) -> Iterator[None]:
    """Give up the KV waits of a login (:func:`~feedkv.kv.cancellation.check_given_up`)
    ``seconds`` from now, with 58000 saying why."""
    deadline = time.monotonic() + seconds

    def check() -> None:
        if time.monotonic() > deadline:
            raise SQLError(
                "58000",
                f"cannot log in: the user's records could not be read within {seconds:g} s "
                "(the cluster may be unavailable: a range without its quorum of nodes)",
            )

    token = GIVE_UP.set(check)
    try:
        yield
    finally:
        GIVE_UP.reset(token)


def _as_sql_error(exc: BaseException) -> SQLError:
    """``exc`` as the client sees it: its SQLSTATE when it has one, else one for what
    the caller should do (retry, fix the input, look outside); an unexpected exception
    is logged with its trace and reported as XX000, and the connection goes on."""
    if isinstance(exc, SQLError):
        return exc
    if isinstance(exc, RetryableError):
        return SerializationFailure.restart(exc)
    if isinstance(exc, InvalidArgumentError):
        return SQLError("22023", str(exc))
    if isinstance(exc, PermissionDeniedError):
        return SQLError("42501", str(exc))
    if isinstance(exc, AmbiguousResultError):
        # NB: CockroachDB's statement_completion_unknown: the client must look before it
        # retries, unlike the 58000 of a node that applied nothing
        return SQLError("40003", f"result is ambiguous: {exc}")
    if isinstance(exc, ChangefeedError):
        # NB: a sinkless changefeed that ended (schema_change_policy='stop', a dropped
        # table) is no internal error; CockroachDB sends its message uncategorized
        return SQLError("XXUUU", str(exc))
    if isinstance(exc, BatchTimestampBeforeGCError):
        # NB: a read of history already removed (AS OF SYSTEM TIME too far back) is the
        # caller's to change, no internal error; CockroachDB's is uncategorized too
        return SQLError("XXUUU", str(exc))
    if isinstance(exc, ExternalError | ClockOffsetError):
        # NB: a node that cannot serve now (down, its clock off) is no internal error
        return SQLError("58000", str(exc))
    if not isinstance(exc, FeedKVError):
        log.exception("internal error answering a SQL client", exc_info=exc)
    return SQLError("XX000", f"internal error: {type(exc).__name__}: {exc}")


def _typed(oids: tuple[int, ...], types: Sequence[ColumnType | None]) -> tuple[int, ...]:
    """Placeholder types: the client's where it gave one, else the SQL layer's."""
    return tuple(
        oid_of_type(ctype) if oid == OID.UNSPECIFIED and ctype is not None else oid
        for oid, ctype in zip(oids, types, strict=True)
    )


def _param_types(oids: Sequence[int]) -> list[ColumnType | None]:
    return [type_of_param(oid) for oid in oids]


# A call and its arguments, none of them a call: ``f($1, $2, 'x')``.
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(([^()]*)\)")
_ARGUMENT_PLACEHOLDER = re.compile(r"\$(\d+)")


def _refuse_void(text: str, oids: Sequence[int]) -> None:
    """42883 for a call with an argument the client typed VOID, as CockroachDB refuses
    it (it reads the placeholder as a VOID, which no builtin takes). It is pgjdbc's
    ``{? = call f(?)}`` escape: the driver sends ``select * from f($1, $2) as result``
    with $1, the return value's, typed VOID (PostgreSQL drops such an argument;
    CockroachDB does not)."""
    if OID.VOID not in oids:
        return
    for call in _CALL.finditer(text):
        names = []
        for argument in filter(None, (a.strip() for a in call.group(2).split(","))):
            found = _ARGUMENT_PLACEHOLDER.fullmatch(argument)
            oid = oids[int(found.group(1)) - 1] if found and int(found.group(1)) <= len(oids) else 0
            ctype = type_of_param(oid)
            names.append(
                "void" if oid == OID.VOID else kind_name(ctype.kind) if ctype else "unknown"
            )
        if "void" in names:
            signature = f"{call.group(1).lower()}({', '.join(names)})"
            raise SQLError("42883", f"unknown signature: {signature}")


def _transaction_modes(begin: st.Begin) -> str:
    """The transaction modes ``begin`` gives, as SET TRANSACTION takes them ('' for
    none)."""
    modes = [
        f"PRIORITY {begin.priority}" if begin.priority is not None else "",
        f"ISOLATION LEVEL {begin.isolation}" if begin.isolation is not None else "",
        {None: "", True: "READ ONLY", False: "READ WRITE"}[begin.read_only],
    ]
    return ", ".join(mode for mode in modes if mode)


def _as_sent(found: list[WireType], sent: list[WireType] | None) -> list[WireType]:
    """A run's column types ``found``, but text where a Describe sent text."""
    if sent is None or len(sent) != len(found):
        return found
    return [s if s.oid == OID.TEXT else f for f, s in zip(found, sent, strict=True)]


def _declared_type(ctype: ColumnType | None) -> WireType:
    return WireType(OID.TEXT) if ctype is None else wire_type(ctype)


def _described_types(description: Description) -> list[WireType]:
    """The types RowDescription announces for ``description``'s columns: a row value's
    is ``record``, as its rows carry it (:func:`~feedkv.pgwire.types.column_oid`)."""
    return [
        WireType(RECORD_OID) if place in description.records else _declared_type(ctype)
        for place, (_name, ctype) in enumerate(description.columns or ())
    ]


def _column_types(result: Result) -> list[WireType]:
    """The result's column types as its values tell them; a column of NULLs has the
    type its query declares, else text."""
    width = len(result.columns) if result.columns or not result.rows else len(result.rows[0])
    declared = result.types if len(result.types) == width else (None,) * width
    return [
        wire_type(ctype)
        if ctype is not None and all(row[i] is None for row in result.rows)
        else WireType(column_oid([row[i] for row in result.rows]))
        for i, ctype in enumerate(declared)
    ]


def _formats(codes: Sequence[int], n: int, *, what: str = "result") -> list[int]:
    """Per-column format codes from a Bind's list: none (all text), one (for all) or
    one per column."""
    if not codes:
        return [0] * n
    if len(codes) == 1:
        return [codes[0]] * n
    if len(codes) != n:
        raise SQLError("08P01", f"bind message has {len(codes)} {what} formats for {n} columns")
    return list(codes)


def _fields(
    names: Sequence[str],
    types: list[WireType],
    codes: list[int],
    origins: Sequence[Origin] = (),
) -> list[m.Field]:
    """RowDescription's fields; ``origins``: each column's table OID and attnum, when
    the statement's description told them."""
    if len(names) != len(types):
        names = [f"column{i + 1}" for i in range(len(types))]
    if len(origins) != len(types):
        origins = [(0, 0)] * len(types)
    return [
        m.Field(name, wire.oid, type_size(wire.oid), code, wire.typmod, table, attnum)
        for name, wire, code, (table, attnum) in zip(names, types, codes, origins, strict=True)
    ]


def _data_rows(
    rows: Sequence[tuple[Any, ...]],
    types: list[WireType],
    codes: list[int],
    out: bytearray,
    float_digits: int = 0,
    zone: datetime.tzinfo = datetime.UTC,
) -> None:
    """``rows`` as DataRow messages; a TIMESTAMPTZ's text is shown in ``zone`` (the
    session's time zone)."""
    oids = [wire.oid for wire in types]
    encoders = [encode_binary if code else encode_text for code in codes]
    with statement_zone(zone):
        for row in rows:
            out += m.data_row(
                [
                    None if value is None else encode(value, oid, float_digits)
                    for value, oid, encode in zip(row, oids, encoders, strict=True)
                ]
            )


class _PlanChanged(SQLError):
    """A prepared statement's result columns changed: sent with PostgreSQL's routine,
    by which asyncpg knows to prepare the statement again."""


_REVALIDATE = "RevalidateCachedQuery"


def _described_columns(prepared: _Prepared) -> Sequence[tuple[str, Any]]:
    """The result columns ``prepared`` was described with (none: it returns no rows, or
    was not described)."""
    description = prepared.description
    return description.columns or () if description is not None else ()
