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
so a pipeline after a failure does nothing half-way. A protocol violation (a message
that cannot be framed or parsed, or one not allowed in its phase) gets a FATAL
ErrorResponse and closes this connection only.

A sinkless changefeed (``EXPERIMENTAL CHANGEFEED FOR t``, ``CREATE CHANGEFEED FOR t``
without ``INTO``) streams: each row is sent as it comes, through the server's ``send``,
until the feed ends; a CancelRequest (or the server stopping) closes the feed and the
query ends with 57014; a client that goes away is noticed by a check every
:data:`PEER_CHECK_S` while no row comes, and its feed is closed.

Result column types come from the values (:func:`~feedkv.pgwire.types.column_oid`):
the SQL layer does not report them yet, so an all-NULL or empty column is ``text``.
For the same reason a portal runs when it is first described or executed, and
describing a prepared statement's result columns before binding it is refused (0A000)
for statements that return rows. NB: a portal therefore runs at Describe, before its
Execute; every client seen (libpq, psycopg, JDBC) sends both together.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import (
    ExternalError,
    FeedKVError,
    InvalidArgumentError,
    RetryableError,
    SQLError,
)
from feedkv.pgwire import messages as m
from feedkv.pgwire.auth import Accepted, Authenticator, Challenge, Refused
from feedkv.pgwire.types import (
    OID,
    column_oid,
    decode_param,
    encode_binary,
    encode_text,
    type_size,
)
from feedkv.sql import statements as st
from feedkv.sql.execution import Result
from feedkv.sql.session import prepare

__all__ = ["PEER_CHECK_S", "SERVER_VERSION", "Connection", "SQLSession", "SessionFactory"]

log = logging.getLogger(__name__)

# CockroachDB reports a PostgreSQL 13 server; drivers pick their features by it.
SERVER_VERSION = "13.0.0"
# How often a streaming changefeed with no rows to send checks that its client is still
# there (PostgreSQL's client_connection_check_interval): a client that went away would
# otherwise hold the feed until its next row.
PEER_CHECK_S = 1.0


class SQLSession(Protocol):
    """What a connection needs of a SQL session (:class:`feedkv.sql.session.Session`)."""

    @property
    def in_transaction(self) -> bool: ...

    @property
    def failed(self) -> bool: ...

    def check_login(self) -> None: ...

    def execute_all(self, text: str, params: Sequence[Any] = ()) -> list[Result]: ...

    def execute_each(
        self, text: str, params: Sequence[Any] = (), *, batch: bool = True
    ) -> Iterator[Result]: ...

    def close(self) -> None: ...


SessionFactory = Callable[[str, str], SQLSession]  # (user, database) -> a new session

# Statements that never return rows: Describe answers NoData without running them.
_ROWLESS = (
    st.Begin
    | st.Commit
    | st.Rollback
    | st.CreateDatabase
    | st.DropDatabase
    | st.CreateTable
    | st.DropTable
    | st.AddColumn
    | st.DropColumn
    | st.Truncate
    | st.CreateUser
    | st.GrantAdmin
    | st.ControlJob
    | st.AlterChangefeed
)


def _returns_rows(statement: st.Statement) -> bool:
    if isinstance(statement, _ROWLESS):
        return False
    if isinstance(statement, st.Insert | st.Update | st.Delete):
        return statement.returning is not None
    if isinstance(statement, st.SessionVariable | st.ClusterSetting):
        return statement.action == "show"
    return True


class _ClientGone(FeedKVError):
    """The client of a streaming result went away: the handlers that answer errors let
    it through, since there is no one left to answer, and the connection closes."""


@dataclass(slots=True)
class _Prepared:
    text: str
    statement: st.Statement | None  # None: an empty query
    param_oids: tuple[int, ...]  # one per placeholder; 0 where the client gave none


@dataclass(slots=True)
class _Portal:
    prepared: _Prepared
    params: tuple[Any, ...]
    result_formats: tuple[int, ...]
    result: Result | None = None
    oids: list[int] = field(default_factory=list)
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
    ) -> None:
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
        self._decoder = m.Decoder(max_message_bytes)
        self._phase = "startup"
        self._database = ""
        self._session: SQLSession | None = None
        self._statements: dict[str, _Prepared] = {}
        self._portals: dict[str, _Portal] = {}
        self._skipping = False
        self._busy = False
        self._cancelled = False
        self._streaming: FeedResult | None = None

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

    def cancel(self) -> None:
        """A CancelRequest with this connection's key arrived (from another thread): a
        streaming changefeed stops at once, any other query at its next statement
        boundary, with 57014."""
        if self._busy:
            self._cancelled = True
            streaming = self._streaming
            if streaming is not None:
                streaming.close()

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
        try:
            session.check_login()
        except SQLError as exc:
            session.close()
            self._fatal(exc, out)
            return
        self._session = session
        self._phase = "ready"
        out += outcome.message
        out += m.authentication_ok()
        for name, value in self._parameters().items():
            out += m.parameter_status(name, value)
        out += m.backend_key_data(self.process_id, self.secret)
        out += m.ready_for_query("I")

    def _parameters(self) -> dict[str, str]:
        return {
            "server_version": SERVER_VERSION,
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "DateStyle": "ISO, MDY",
            "IntervalStyle": "postgres",
            "TimeZone": "UTC",
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
            "application_name": "",
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

    def _ready(self, message: m.FrontendMessage, out: bytearray) -> None:
        if isinstance(message, m.Terminate):
            self.close()
            return
        if isinstance(message, m.Sync):
            self._skipping = False
            out += m.ready_for_query(self._status())
            return
        if self._skipping:
            return  # an error was answered: skip to Sync
        handler = _EXTENDED.get(type(message))
        if isinstance(message, m.Query):
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
        out += m.error_response(error.code, error.message, position=error.position)

    def _simple_query(self, text: str, out: bytearray) -> None:
        self._statements.pop("", None)
        self._portals.pop("", None)
        self._busy = True
        try:
            if not prepare(text):
                out += m.empty_query_response()
            else:
                for result in self._sql.execute_each(text):
                    self._check_cancelled()
                    self._send_result(result, (), out, describe=True)
        except _ClientGone:
            raise
        except Exception as exc:
            self._error(exc, out)
        finally:
            self._busy = self._cancelled = False
        out += m.ready_for_query(self._status())

    def _check_cancelled(self) -> None:
        if self._cancelled:
            raise SQLError("57014", "query execution canceled")

    def _send_result(
        self, result: Result, formats: Sequence[int], out: bytearray, *, describe: bool
    ) -> None:
        if result.columns or result.rows:
            oids = _column_oids(result)
            codes = _formats(formats, len(oids))
            if describe:
                out += m.row_description(_fields(result.columns, oids, codes))
            if isinstance(result, FeedResult):
                self._stream(result, oids, codes, out)
                return
            _data_rows(result.rows, oids, codes, out)
        out += m.command_complete(result.tag)

    def _stream(
        self, result: FeedResult, oids: list[int], codes: list[int], out: bytearray
    ) -> None:
        """A sinkless changefeed's rows, each sent as it comes, until the feed ends or
        the query is cancelled (which stops the feed)."""
        self._streaming = result
        sent = 0
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
                _data_rows([row], oids, codes, out)
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
        self._statements[message.name] = _Prepared(message.text, statement, oids)
        out += m.parse_complete()

    def _bind(self, message: m.Bind, out: bytearray) -> None:
        prepared = self._statements.get(message.statement)
        if prepared is None:
            raise SQLError("26000", f'prepared statement "{message.statement}" does not exist')
        if message.portal and message.portal in self._portals:
            raise SQLError("42P03", f'portal "{message.portal}" already exists')
        oids = prepared.param_oids
        if len(message.params) != len(oids):
            raise SQLError(
                "08P01",
                f"bind message supplies {len(message.params)} parameters, but prepared "
                f'statement "{message.statement}" requires {len(oids)}',
            )
        codes = _formats(message.param_formats, len(oids), what="parameter")
        params = tuple(
            None if raw is None else decode_param(raw, oid, code == 1, i + 1)
            for i, (raw, oid, code) in enumerate(zip(message.params, oids, codes, strict=True))
        )
        self._portals[message.portal] = _Portal(prepared, params, message.result_formats)
        out += m.bind_complete()

    def _describe(self, message: m.Describe, out: bytearray) -> None:
        if message.kind == "S":
            prepared = self._statements.get(message.name)
            if prepared is None:
                raise SQLError("26000", f'prepared statement "{message.name}" does not exist')
            oids = [OID.TEXT if oid == OID.UNSPECIFIED else oid for oid in prepared.param_oids]
            out += m.parameter_description(oids)
            if prepared.statement is None or not _returns_rows(prepared.statement):
                out += m.no_data()
                return
            raise SQLError(
                "0A000",
                "describing the result columns of a prepared statement is not supported "
                "yet: bind it and describe the portal",
            )
        portal = self._portal(message.name)
        if portal.prepared.statement is None or not _returns_rows(portal.prepared.statement):
            out += m.no_data()
            return
        result = self._run(portal)
        if not (result.columns or result.rows):
            out += m.no_data()
            return
        codes = _formats(portal.result_formats, len(portal.oids))
        out += m.row_description(_fields(result.columns, portal.oids, codes))

    def _portal(self, name: str) -> _Portal:
        portal = self._portals.get(name)
        if portal is None:
            raise SQLError("34000", f'portal "{name}" does not exist')
        return portal

    def _run(self, portal: _Portal) -> Result:
        if portal.result is None:
            if portal.prepared.statement is None:
                portal.result = Result()
            else:
                self._busy = True
                try:
                    results = self._sql.execute_all(portal.prepared.text, portal.params)
                finally:
                    self._busy = self._cancelled = False
                portal.result = results[-1]
            portal.oids = _column_oids(portal.result)
        return portal.result

    def _execute(self, message: m.Execute, out: bytearray) -> None:
        portal = self._portal(message.portal)
        result = self._run(portal)
        if portal.prepared.statement is None:
            out += m.empty_query_response()
            return
        if isinstance(result, FeedResult):
            codes = _formats(portal.result_formats, len(portal.oids))
            self._busy = True
            try:
                self._stream(result, portal.oids, codes, out)
            finally:
                self._busy = self._cancelled = False
            return
        end = len(result.rows) if message.max_rows == 0 else portal.sent + message.max_rows
        rows = result.rows[portal.sent : end]
        if result.columns or result.rows:
            codes = _formats(portal.result_formats, len(portal.oids))
            _data_rows(rows, portal.oids, codes, out)
        portal.sent += len(rows)
        if portal.sent < len(result.rows):
            out += m.portal_suspended()
        else:
            out += m.command_complete(result.tag)

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


def _as_sql_error(exc: BaseException) -> SQLError:
    """``exc`` as the client sees it: its SQLSTATE when it has one, else one for what
    the caller should do (retry, fix the input, look outside); an unexpected exception
    is logged with its trace and reported as XX000, and the connection goes on."""
    if isinstance(exc, SQLError):
        return exc
    if isinstance(exc, RetryableError):
        return SQLError("40001", f"restart transaction: {exc}")
    if isinstance(exc, InvalidArgumentError):
        return SQLError("22023", str(exc))
    if isinstance(exc, ExternalError):
        return SQLError("58000", str(exc))
    if not isinstance(exc, FeedKVError):
        log.exception("internal error answering a SQL client", exc_info=exc)
    return SQLError("XX000", f"internal error: {type(exc).__name__}: {exc}")


def _column_oids(result: Result) -> list[int]:
    width = len(result.columns) if result.columns or not result.rows else len(result.rows[0])
    return [column_oid([row[i] for row in result.rows]) for i in range(width)]


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


def _fields(names: Sequence[str], oids: list[int], codes: list[int]) -> list[m.Field]:
    if len(names) != len(oids):
        names = [f"column{i + 1}" for i in range(len(oids))]
    return [
        m.Field(name, oid, type_size(oid), code)
        for name, oid, code in zip(names, oids, codes, strict=True)
    ]


def _data_rows(
    rows: Sequence[tuple[Any, ...]], oids: list[int], codes: list[int], out: bytearray
) -> None:
    encoders = [encode_binary if code else encode_text for code in codes]
    for row in rows:
        out += m.data_row(
            [
                None if value is None else encode(value, oid)
                for value, oid, encode in zip(row, oids, encoders, strict=True)
            ]
        )
