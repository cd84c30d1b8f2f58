"""A SQL session over the PostgreSQL wire protocol, for ``feedkv sql --url
postgresql://...``: what the shell needs of a :class:`~feedkv.sql.session.Session`
(``execute_each``, ``in_transaction``, ``user``, ``database``, ``close``), through
psycopg, imported only when such a URL is given.

The connection is in autocommit mode, so BEGIN and COMMIT are the user's, as in psql.
A string of several statements is sent as one simple query (the server runs them as one
implicit transaction); each statement's result comes back in order. Server errors keep
their SQLSTATE, message and position (:class:`~feedkv.errors.SQLError`). A sinkless
changefeed, which ends only when asked, streams instead (:class:`StreamedFeed`): each
row prints as it comes, and Ctrl-C cancels it on the server, as psql's does.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from feedkv.changefeed.sinkless import COLUMNS, FeedResult
from feedkv.cli.credentials import PASSWORD_ENV, split_userinfo, without_password
from feedkv.errors import ExternalError, FeedKVError, PermissionDeniedError, SQLError
from feedkv.security.certs import CA_CERT
from feedkv.sql.arrays import Array
from feedkv.sql.execution import Result
from feedkv.sql.parser import parse
from feedkv.sql.script import split_statements
from feedkv.sql.statements import CreateChangefeed

__all__ = ["PG_SCHEMES", "PasswordNeededError", "PgSession", "StreamedFeed", "open_pg_session"]

PG_SCHEMES = ("postgresql://", "postgres://")
_NO_PASSWORD = "no password supplied"  # libpq's fe_sendauth, when the server asks for one


class PasswordNeededError(PermissionDeniedError):
    """The server asks for a password and none was given."""


def open_pg_session(
    url: str,
    *,
    user: str | None = None,
    database: str | None = None,
    password: str | None = None,
    certs_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    ask: Callable[[str], str] = getpass.getpass,
) -> PgSession:
    """A :class:`PgSession`, its password (when the URL has none) ``password``, else
    ``$FEEDKV_PASSWORD``, else (libpq's ``PGPASSWORD`` or none and) asked for on a
    terminal when the server wants one, as ``psql`` asks. ``certs_dir``: TLS from that
    certs directory for what the URL does not say (see :func:`tls_options`)."""
    env = os.environ if env is None else env
    password = password or env.get(PASSWORD_ENV) or None
    tls = tls_options(url, user, certs_dir) if certs_dir is not None else {}
    try:
        return PgSession(url, user=user, database=database, password=password, tls=tls)
    except PasswordNeededError:
        if password is not None or not (stdin or sys.stdin).isatty():
            raise
    secret = ask("Enter password: ")
    return PgSession(url, user=user, database=database, password=secret, tls=tls)


def tls_options(url: str, user: str | None, certs_dir: str | Path) -> dict[str, str]:
    """libpq's TLS parameters from a certs directory (as ``cockroach sql --url ...
    --certs-dir`` fills them): verify the server against its ``ca.crt``
    (``sslmode=verify-full``), and present ``client.USER.crt`` when it holds one; each
    only where the URL does not say."""
    import psycopg

    given = psycopg.conninfo.conninfo_to_dict(url)
    certs = Path(certs_dir)
    options = {"sslmode": "verify-full", "sslrootcert": str(certs / CA_CERT)}
    who = user or given.get("user") or "root"
    cert, key = certs / f"client.{who}.crt", certs / f"client.{who}.key"
    if cert.exists() and key.exists():
        options.update(sslcert=str(cert), sslkey=str(key))
    return {name: value for name, value in options.items() if name not in given}


class PgSession:
    """Statements run on the server at ``url`` (a libpq connection string)."""

    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        database: str | None = None,
        password: str | None = None,
        tls: Mapping[str, str] | None = None,
    ) -> None:
        """``password``: when the URL has none (the URL's wins). ``tls``: more libpq
        TLS parameters (:func:`tls_options`)."""
        import psycopg

        self._psycopg = psycopg
        options: dict[str, Any] = dict(tls or {})
        if user is not None:
            options["user"] = user
        if database is not None:
            options["dbname"] = database
        if password is not None and split_userinfo(url)[2] is None:
            options["password"] = password
        try:
            self._conn = psycopg.connect(url, autocommit=True, **options)
        except psycopg.Error as exc:
            # NB: the URL without its password, which libpq's message never holds either
            where = without_password(url)
            if _NO_PASSWORD in str(exc):
                raise PasswordNeededError(
                    f"cannot connect to {where}: the server asks for a password: put it in "
                    f"the URL (postgresql://USER:PASSWORD@HOST:PORT), set {PASSWORD_ENV} or "
                    "PGPASSWORD, or run the command from a terminal to be asked for it"
                ) from None
            raise ExternalError(f"cannot connect to {where}: {exc}") from None
        self.user: str = self._conn.info.user
        self.database: str = self._conn.info.dbname
        self._notices: list[str] = []  # the server's NOTICEs since the last result
        self._conn.add_notice_handler(
            lambda notice: self._notices.append(notice.message_primary or "")
        )

    @property
    def in_transaction(self) -> bool:
        status = self._conn.info.transaction_status
        return status in (
            self._psycopg.pq.TransactionStatus.INTRANS,
            self._psycopg.pq.TransactionStatus.INERROR,
        )

    def execute_each(
        self, text: str, params: Sequence[Any] = (), *, batch: bool = True
    ) -> Iterator[Result]:
        """Each statement's result, in order (``batch`` is the server's to decide: a
        string of statements is one implicit transaction there)."""
        if not params and _is_sinkless_changefeed(text):
            yield self._stream_feed(text)
            return
        cursor = self._conn.cursor()
        try:
            cursor.execute(text.encode(), params or None, prepare=False)
        except self._psycopg.Error as exc:
            raise _sql_error(exc) from None
        while True:
            columns = tuple(c.name for c in cursor.description or ())
            rows = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
            arrays = self._array_columns(cursor.description or ())
            if arrays:
                rows = [_with_arrays(row, arrays) for row in rows]
            notices, self._notices[:] = tuple(self._notices), []
            yield Result(columns, rows, cursor.statusmessage or "", notices=notices)
            if not cursor.nextset():
                break
        self.database = self._conn.info.dbname

    def _stream_feed(self, text: str) -> StreamedFeed:
        """A sinkless changefeed's rows as the server sends each (libpq's single-row
        mode): a result fetched whole, as for other statements, would print nothing
        until the feed ended, which it does only when asked."""
        cursor = self._conn.cursor()

        def rows() -> Iterator[tuple[Any, ...]]:
            try:
                for row in cursor.stream(text.encode()):
                    yield tuple(row)
            except self._psycopg.Error as exc:
                raise _sql_error(exc) from None

        return StreamedFeed(
            columns=COLUMNS, tag="CHANGEFEED", rows_of=rows(), cancel=self._conn.cancel_safe
        )

    def _array_columns(self, description: Sequence[Any]) -> list[int]:
        """The positions of the array-typed columns (psycopg loads an array as a list,
        which the shell would print as JSON, and a JSONB array is a list too)."""
        types = self._conn.adapters.types
        out = []
        for i, column in enumerate(description):
            info = types.get(column.type_code)
            if info is not None and info.array_oid == column.type_code:
                out.append(i)
        return out

    def close(self) -> None:
        self._conn.close()


@dataclass(frozen=True)
class StreamedFeed(FeedResult):
    """A sinkless changefeed streamed over the wire: iterating it blocks for each next
    row; :meth:`close` cancels the statement on the server (as psql's Ctrl-C does),
    which ends the feed there and frees it."""

    rows_of: Iterator[tuple[Any, ...]] = field(default_factory=lambda: iter(()))
    cancel: Callable[[], None] = field(default=lambda: None)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        yield from self.rows_of

    def close(self) -> None:
        self.cancel()


# how a changefeed statement starts (after comments and blanks)
_CHANGEFEED_START = re.compile(
    r"(?:\s|--[^\n]*\n|/\*.*?\*/)*(?:EXPERIMENTAL\s+|CREATE\s+)CHANGEFEED\b",
    re.IGNORECASE | re.DOTALL,
)


def _is_sinkless_changefeed(text: str) -> bool:
    """Whether ``text`` is one statement, a changefeed without a sink (what the server
    cannot parse it leaves to the server to say)."""
    if not _CHANGEFEED_START.match(text):
        return False  # NB: the common case, without parsing each statement twice
    statements = [s for _, s in split_statements(text) if s.strip()]
    if len(statements) != 1:
        return False
    try:
        parsed = parse(statements[0])
    except FeedKVError:
        return False
    return len(parsed) == 1 and isinstance(parsed[0], CreateChangefeed) and not parsed[0].sink


def _with_arrays(row: tuple[Any, ...], arrays: list[int]) -> tuple[Any, ...]:
    """``row`` with the lists in its ``arrays`` columns as :class:`Array` values, so
    they print as over a ``feedkv://`` URL and as psql prints them (``{a,"b c"}``)."""
    values = list(row)
    for i in arrays:
        if isinstance(values[i], list):
            values[i] = Array(tuple(values[i]), None)
    return tuple(values)


def _sql_error(exc: Any) -> SQLError:
    diag = exc.diag
    position = int(diag.statement_position) if diag.statement_position else None
    message = diag.message_primary or str(exc)
    if diag.message_hint:
        message = f"{message}\nHINT: {diag.message_hint}"
    detail = diag.message_detail or None
    return SQLError(exc.sqlstate or "XX000", message, position=position, detail=detail)
