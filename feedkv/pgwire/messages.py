"""PostgreSQL v3 messages: framing, the frontend messages parsed, the backend ones
encoded. Pure: nothing here reads or writes a socket.

A connection starts with one untyped packet (``int32 length, int32 code, body``): a
startup message (code 196608, protocol 3.0), an SSLRequest, a GSSENCRequest or a
CancelRequest. Every later message is typed (``byte type, int32 length, body``), and
the length counts itself but not the type byte. :class:`Decoder` takes bytes as they
come and gives whole messages; it checks every length against ``max_message_bytes``
before buffering the body, so an oversized or lying length costs nothing.

A malformed message raises :class:`ProtocolViolation` (SQLSTATE 08P01, or 54000 for one
too large): the connection answers with an ErrorResponse and closes, as PostgreSQL does,
since the stream can no longer be trusted to be framed right.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Final

from feedkv.errors import SQLError

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "PROTOCOL_3_0",
    "Bind",
    "CancelRequest",
    "Close",
    "CopyData",
    "CopyDone",
    "CopyFail",
    "Decoder",
    "Describe",
    "Execute",
    "Flush",
    "FrontendMessage",
    "GSSENCRequest",
    "Parse",
    "PasswordMessage",
    "ProtocolViolation",
    "Query",
    "SSLRequest",
    "StartupMessage",
    "Sync",
    "Terminate",
]

PROTOCOL_3_0: Final = 3 << 16
_SSL_REQUEST: Final = 80877103
_GSSENC_REQUEST: Final = 80877104
_CANCEL_REQUEST: Final = 80877102
# CockroachDB's sql.conn.max_read_buffer_message_size defaults to 16 MiB as well.
DEFAULT_MAX_MESSAGE_BYTES: Final = 16 << 20
_MAX_STARTUP_BYTES: Final = 10_000  # PostgreSQL's MAX_STARTUP_PACKET_LENGTH

_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")
_HEADER = struct.Struct("!ci")


class ProtocolViolation(SQLError):
    """The client broke the protocol; the connection is closed after the error."""

    def __init__(self, message: str, code: str = "08P01") -> None:
        super().__init__(code, message)


# Frontend messages.


@dataclass(frozen=True, slots=True)
class StartupMessage:
    version: int
    parameters: dict[str, str]


@dataclass(frozen=True, slots=True)
class SSLRequest:
    pass


@dataclass(frozen=True, slots=True)
class GSSENCRequest:
    pass


@dataclass(frozen=True, slots=True)
class CancelRequest:
    process_id: int
    secret: int


@dataclass(frozen=True, slots=True)
class Query:
    text: str


@dataclass(frozen=True, slots=True)
class Parse:
    name: str
    text: str
    param_oids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...]
    params: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Describe:
    kind: str  # "S": a prepared statement, "P": a portal
    name: str


@dataclass(frozen=True, slots=True)
class Execute:
    portal: str
    max_rows: int  # 0: no limit


@dataclass(frozen=True, slots=True)
class Close:
    kind: str  # "S" or "P"
    name: str


@dataclass(frozen=True, slots=True)
class Sync:
    pass


@dataclass(frozen=True, slots=True)
class Flush:
    pass


@dataclass(frozen=True, slots=True)
class Terminate:
    pass


@dataclass(frozen=True, slots=True)
class PasswordMessage:
    """``p``: a password, a SASL initial response or a SASL response; which one the
    authentication step knows (the message does not say)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class CopyData:
    data: bytes


@dataclass(frozen=True, slots=True)
class CopyDone:
    pass


@dataclass(frozen=True, slots=True)
class CopyFail:
    message: str


FrontendMessage = (
    StartupMessage
    | SSLRequest
    | GSSENCRequest
    | CancelRequest
    | Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Close
    | Sync
    | Flush
    | Terminate
    | PasswordMessage
    | CopyData
    | CopyDone
    | CopyFail
)


class _Reader:
    """Reads the fields of one message body; running past its end is a violation
    naming the message."""

    def __init__(self, body: bytes, what: str) -> None:
        self.body = body
        self.what = what
        self.at = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.body):
            raise ProtocolViolation(f"{self.what} message ends before its fields do")
        chunk = self.body[self.at : self.at + n]
        self.at += n
        return chunk

    def byte(self) -> str:
        return self._take(1).decode("latin-1")

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def string(self) -> str:
        end = self.body.find(b"\0", self.at)
        if end < 0:
            raise ProtocolViolation(f"{self.what} message has a string without its terminator")
        raw = self.body[self.at : end]
        self.at = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation(f"{self.what} message has a string that is not UTF-8") from None

    def count(self) -> int:
        n = self.int16()
        if n < 0:
            raise ProtocolViolation(f"{self.what} message has a negative count")
        return n

    def value(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < -1:
            raise ProtocolViolation(f"{self.what} message has a negative value length")
        return self._take(n)

    def rest(self) -> bytes:
        chunk = self.body[self.at :]
        self.at = len(self.body)
        return chunk

    def end(self) -> None:
        if self.at != len(self.body):
            raise ProtocolViolation(f"{self.what} message has bytes past its last field")


def _formats(reader: _Reader) -> tuple[int, ...]:
    formats = tuple(reader.int16() for _ in range(reader.count()))
    for code in formats:
        if code not in (0, 1):
            raise ProtocolViolation(
                f"{reader.what} message has format code {code}; formats are 0 (text) and 1 (binary)"
            )
    return formats


def _parse_typed(kind: bytes, body: bytes) -> FrontendMessage:
    # NB: the three messages of every prepared statement's run first, without a reader
    if kind == b"S" and not body:
        return _SYNC
    if kind == b"E":
        execute = _parse_execute(body)
        if execute is not None:
            return execute
    message: FrontendMessage
    if kind == b"Q":
        r = _Reader(body, "Query")
        message = Query(r.string())
    elif kind == b"P":
        r = _Reader(body, "Parse")
        name, text = r.string(), r.string()
        oids = tuple(r.int32() & 0xFFFFFFFF for _ in range(r.count()))
        message = Parse(name, text, oids)
    elif kind == b"B":
        bind = _parse_bind(body)
        if bind is not None:
            return bind
        r = _Reader(body, "Bind")
        portal, statement = r.string(), r.string()
        param_formats = _formats(r)
        params = tuple(r.value() for _ in range(r.count()))
        message = Bind(portal, statement, param_formats, params, _formats(r))
    elif kind in (b"D", b"C"):
        r = _Reader(body, "Describe" if kind == b"D" else "Close")
        which = r.byte()
        if which not in ("S", "P"):
            raise ProtocolViolation(
                f"{r.what} message names {which!r}; expected 'S' (statement) or 'P' (portal)"
            )
        name = r.string()
        message = (Describe if kind == b"D" else Close)(which, name)
    elif kind == b"E":
        r = _Reader(body, "Execute")
        message = Execute(r.string(), max(r.int32(), 0))
    elif kind == b"p":
        r = _Reader(body, "password")
        message = PasswordMessage(r.rest())
    elif kind == b"d":
        r = _Reader(body, "CopyData")
        message = CopyData(r.rest())
    elif kind == b"f":
        r = _Reader(body, "CopyFail")
        message = CopyFail(r.string())
    elif kind in _EMPTY:
        r = _Reader(body, _EMPTY[kind].__name__)
        message = _EMPTY[kind]()
    else:
        raise ProtocolViolation(f"invalid frontend message type {kind!r}")
    r.end()
    return message


def _parse_bind(body: bytes) -> Bind | None:
    """A well-formed Bind read without a :class:`_Reader` (the message every prepared
    statement's run sends); ``None`` when anything is off, and the reader then reads
    it again to name what (the same checks, in the same order)."""
    try:
        end = body.index(0)
        portal = body[:end].decode()
        at = body.index(0, end + 1)
        statement = body[end + 1 : at].decode()
        at += 1
        (n,) = _INT16.unpack_from(body, at)
        if n < 0:
            return None
        at += 2
        param_formats: tuple[int, ...] = struct.unpack_from(f"!{n}h", body, at) if n else ()
        at += 2 * n
        (n,) = _INT16.unpack_from(body, at)
        if n < 0:
            return None
        at += 2
        params: list[bytes | None] = []
        size_of = _INT32.unpack_from
        for _ in range(n):
            (size,) = size_of(body, at)
            at += 4
            if size == -1:
                params.append(None)
                continue
            if size < 0 or at + size > len(body):
                return None
            params.append(body[at : at + size])
            at += size
        (n,) = _INT16.unpack_from(body, at)
        if n < 0:
            return None
        at += 2
        result_formats: tuple[int, ...] = struct.unpack_from(f"!{n}h", body, at) if n else ()
        at += 2 * n
    except (ValueError, struct.error):  # NB: UnicodeDecodeError is a ValueError
        return None
    if at != len(body) or any(c not in (0, 1) for c in (*param_formats, *result_formats)):
        return None
    return Bind(portal, statement, param_formats, tuple(params), result_formats)


def _parse_execute(body: bytes) -> Execute | None:
    """A well-formed Execute read without a :class:`_Reader`; ``None`` when anything is
    off, and the reader then reads it again to name what."""
    end = body.find(0)
    if end < 0 or len(body) != end + 5:
        return None
    try:
        portal = body[:end].decode()
    except UnicodeDecodeError:
        return None
    return Execute(portal, max(_INT32.unpack_from(body, end + 1)[0], 0))


_SYNC = Sync()  # NB: it has no fields: one serves every Sync
_EMPTY: dict[bytes, type[Sync | Flush | Terminate | CopyDone]] = {
    b"S": Sync,
    b"H": Flush,
    b"X": Terminate,
    b"c": CopyDone,
}


def _parse_startup(body: bytes) -> FrontendMessage:
    r = _Reader(body, "startup")
    code = r.int32()
    if code == _SSL_REQUEST:
        r.end()
        return SSLRequest()
    if code == _GSSENC_REQUEST:
        r.end()
        return GSSENCRequest()
    if code == _CANCEL_REQUEST:
        message = CancelRequest(r.int32(), r.int32())
        r.end()
        return message
    if code >> 16 != 3:
        raise ProtocolViolation(
            f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: this server "
            "speaks protocol 3.0",
            code="0A000",
        )
    parameters: dict[str, str] = {}
    while True:
        name = r.string()
        if not name:
            break
        parameters[name] = r.string()
    r.end()
    return StartupMessage(code, parameters)


class Decoder:
    """Frontend messages from a byte stream. :meth:`feed` what arrives, then take
    :meth:`next` until it returns ``None``. The first packet is untyped (startup);
    after an SSLRequest or GSSENCRequest another untyped one follows; the connection
    calls :meth:`started` once the startup message is in."""

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        # NB: the bytes fed, read from ``_at`` on: a message's body is one slice of
        # them, not a copy out of a buffer and then a shift of what is left. A message
        # still partial gathers in a bytearray (appended to, not copied anew per read)
        self._buffer: bytes | bytearray = b""
        self._at = 0
        self._startup = True

    def started(self) -> None:
        """Messages from here on are typed."""
        self._startup = False

    def feed(self, data: bytes) -> None:
        buffer, at = self._buffer, self._at
        if at == len(buffer):
            self._buffer = data
        elif at == 0 and isinstance(buffer, bytearray):
            buffer += data
        else:
            self._buffer = bytearray(memoryview(buffer)[at:])
            self._buffer += data
        self._at = 0

    def _body(self, start: int, end: int) -> bytes:
        buffer = self._buffer
        return buffer[start:end] if type(buffer) is bytes else bytes(buffer[start:end])

    def buffered_kinds(self) -> bytes:
        """The type bytes of the whole typed messages buffered, in order (read without
        taking them): what a client sent ahead of the message in hand."""
        buffer, at, kinds = self._buffer, self._at, bytearray()
        while not self._startup and at + 5 <= len(buffer):
            kind, length = _HEADER.unpack_from(buffer, at)
            if length < 4 or at + 1 + length > len(buffer):
                break
            kinds += kind
            at += 1 + length
        return bytes(kinds)

    def next(self) -> FrontendMessage | None:
        """The next whole message, or ``None`` until more bytes arrive."""
        buffer, at = self._buffer, self._at
        if self._startup:
            if len(buffer) - at < 4:
                return None
            length = _INT32.unpack_from(buffer, at)[0]
            if length < 8 or length > _MAX_STARTUP_BYTES:
                raise ProtocolViolation(f"invalid length of startup packet: {length}")
            if len(buffer) - at < length:
                return None
            self._at = at + length
            return _parse_startup(self._body(at + 4, at + length))
        if len(buffer) - at < 5:
            return None
        kind, length = _HEADER.unpack_from(buffer, at)
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length} for message type {kind!r}")
        if length > self.max_message_bytes:
            raise ProtocolViolation(
                f"message of type {kind!r} is {length} bytes, over the limit of "
                f"{self.max_message_bytes} bytes",
                code="54000",
            )
        end = at + 1 + length
        if len(buffer) < end:
            return None
        self._at = end
        return _parse_typed(kind, self._body(at + 5, end))


# Backend messages.


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _INT32.pack(len(body) + 4) + body


def _cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def authentication_ok() -> bytes:
    return _message(b"R", _INT32.pack(0))


def negotiate_protocol_version(minor: int, unknown_options: list[str]) -> bytes:
    """The newest minor version of protocol 3 this server speaks, and the ``_pq_.``
    startup options it does not know."""
    body = _INT32.pack(minor) + _INT32.pack(len(unknown_options))
    return _message(b"v", body + b"".join(_cstring(o) for o in unknown_options))


def parameter_status(name: str, value: str) -> bytes:
    return _message(b"S", _cstring(name) + _cstring(value))


def backend_key_data(process_id: int, secret: int) -> bytes:
    return _message(b"K", _INT32.pack(process_id) + _INT32.pack(secret))


def ready_for_query(status: str) -> bytes:
    """``status``: ``I`` idle, ``T`` in a transaction block, ``E`` in a failed one."""
    ready = _READY.get(status)
    return ready if ready is not None else _message(b"Z", status.encode())


# Replies every statement's run sends, made once.
_READY = {status: _message(b"Z", status.encode()) for status in "ITE"}
_PARSE_COMPLETE = _message(b"1")
_BIND_COMPLETE = _message(b"2")
_CLOSE_COMPLETE = _message(b"3")
_NO_DATA = _message(b"n")


@dataclass(frozen=True, slots=True)
class Field:
    """A column of a RowDescription."""

    name: str
    type_oid: int
    type_size: int
    format: int  # 0 text, 1 binary
    type_modifier: int = -1
    table_oid: int = 0
    column: int = 0


_FIELD = struct.Struct("!ihihih")


def row_description(fields: list[Field]) -> bytes:
    body = bytearray(_INT16.pack(len(fields)))
    for f in fields:
        body += _cstring(f.name)
        body += _FIELD.pack(
            f.table_oid, f.column, f.type_oid, f.type_size, f.type_modifier, f.format
        )
    return _message(b"T", bytes(body))


def data_row(values: list[bytes | None]) -> bytes:
    body = bytearray(_INT16.pack(len(values)))
    for value in values:
        if value is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(value))
            body += value
    return _message(b"D", bytes(body))


@functools.lru_cache(maxsize=1024)
def command_complete(tag: str) -> bytes:
    # NB: cached: most statements' tags come again and again (INSERT 0 1, UPDATE 1)
    return _message(b"C", _cstring(tag))


def empty_query_response() -> bytes:
    return _message(b"I")


def parse_complete() -> bytes:
    return _PARSE_COMPLETE


def bind_complete() -> bytes:
    return _BIND_COMPLETE


def close_complete() -> bytes:
    return _CLOSE_COMPLETE


def no_data() -> bytes:
    return _NO_DATA


def portal_suspended() -> bytes:
    return _message(b"s")


def copy_in_response(columns: int, *, binary: bool = False) -> bytes:
    """CopyInResponse: the client sends CopyData, then CopyDone or CopyFail (text
    format for every column, or binary)."""
    fmt = int(binary)
    return _message(b"G", struct.pack(f"!bh{columns}h", fmt, columns, *([fmt] * columns)))


def copy_out_response(columns: int, *, binary: bool = False) -> bytes:
    """CopyOutResponse: CopyData messages follow, then CopyDone (text or binary)."""
    fmt = int(binary)
    return _message(b"H", struct.pack(f"!bh{columns}h", fmt, columns, *([fmt] * columns)))


def copy_data(data: bytes) -> bytes:
    return _message(b"d", data)


def copy_done() -> bytes:
    return _message(b"c")


def parameter_description(oids: list[int]) -> bytes:
    body = _INT16.pack(len(oids)) + b"".join(struct.pack("!I", oid) for oid in oids)
    return _message(b"t", body)


def _fields(fields: dict[str, str]) -> bytes:
    return b"".join(code.encode() + _cstring(value) for code, value in fields.items()) + b"\0"


def error_response(
    code: str,
    message: str,
    *,
    severity: str = "ERROR",
    position: int | None = None,
    detail: str | None = None,
    hint: str | None = None,
    routine: str | None = None,
) -> bytes:
    """An ErrorResponse; ``severity`` is ``ERROR`` (the connection goes on) or ``FATAL``
    (it closes); ``routine``: the field naming the server routine that failed, which
    drivers read where PostgreSQL's wording would be ambiguous."""
    fields = {"S": severity, "V": severity, "C": code, "M": message}
    if detail:
        fields["D"] = detail
    if hint:
        fields["H"] = hint
    if position is not None:
        fields["P"] = str(position)
    if routine:
        fields["R"] = routine
    return _message(b"E", _fields(fields))


def notice_response(message: str, *, severity: str = "NOTICE", code: str = "00000") -> bytes:
    return _message(b"N", _fields({"S": severity, "V": severity, "C": code, "M": message}))
