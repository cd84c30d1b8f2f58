"""COPY over the wire: ``COPY t [(cols)] FROM STDIN`` and ``COPY t [(cols)] | (query)
TO STDOUT``, in PostgreSQL's text and CSV formats. Pure: statements are parsed, rows
decoded and encoded here; :mod:`feedkv.pgwire.connection` moves the bytes and runs
the SQL.

Options, written as PostgreSQL has them (``WITH (FORMAT csv, HEADER true, DELIMITER
';', NULL '')``) or in the older form (``WITH CSV HEADER DELIMITER ';'``): ``FORMAT``
(``text``, the default, or ``csv``), ``DELIMITER`` (one character; tab in text, comma
in CSV), ``NULL`` (``\\N`` in text, the empty unquoted string in CSV), ``HEADER``
(CSV: the first line names columns and is skipped; written on the way out).

Binary format (``FORMAT binary``): PostgreSQL's. An 11-byte signature, a flags word (no
critical flag may be set: OIDs are not supported), a header extension that is skipped;
then per row a 16-bit field count and each field as a 32-bit length (-1: NULL) and the
value in its type's binary format; a count of -1 ends the data (as does the end of
the data between rows). Anything else is refused (22P04) before a row is written.

Text format: one row a line, fields split on the delimiter, ``\\N`` is NULL, and the
backslash escapes ``\\\\ \\t \\n \\r \\b \\f \\v`` and ``\\ooo`` (octal) and ``\\xhh``
stand for their characters; a line ``\\.`` ends the data. CSV follows RFC 4180 with
``"`` quoting, where a quoted empty string is an empty string, not NULL.

A row that has the wrong number of fields is refused with its line number
(:class:`CopyError`, SQLSTATE 22P04); the connection converts the values to the
column types when it inserts them and reports a bad value with its line too.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from feedkv.errors import SQLError

__all__ = [
    "BINARY_HEADER",
    "BINARY_TRAILER",
    "CopyError",
    "CopyStatement",
    "decode_binary_rows",
    "decode_columns",
    "decode_rows",
    "encode_binary_row",
    "encode_row",
    "parse_copy",
]


class CopyError(SQLError):
    """Bad COPY data (22P04) or a bad COPY statement (42601, 0A000)."""


@dataclass(frozen=True, slots=True)
class CopyStatement:
    """A COPY statement: ``table`` and ``columns`` (``()``: all of them) or a ``query``
    (TO only); ``direction`` ``in`` (FROM STDIN) or ``out`` (TO STDOUT)."""

    direction: Literal["in", "out"]
    table: str | None
    columns: tuple[str, ...]
    query: str | None
    csv: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    header: bool = False
    binary: bool = False


_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}}"
_HEAD = re.compile(
    rf"""^\s*COPY\s+
    (?:(?P<table>{_NAME})\s*(?:\((?P<columns>[^)]*)\))?|\((?P<query>.+)\))\s*
    (?P<direction>FROM\s+STDIN|TO\s+STDOUT)\b
    \s*(?P<options>.*?)\s*;?\s*$""",
    re.IGNORECASE | re.DOTALL | re.VERBOSE,
)
_OPTION = re.compile(
    r"""\s*,?\s*(?P<name>[A-Za-z_]+)(?:\s+(?P<value>'(?:[^']|'')*'|[A-Za-z_0-9]+))?""",
    re.DOTALL,
)


def is_copy(text: str) -> bool:
    return text.lstrip()[:4].upper() == "COPY"


def parse_copy(text: str) -> CopyStatement:
    """``text`` (a COPY statement) parsed; CopyError (42601, 0A000) names what is wrong."""
    found = _HEAD.match(text)
    if found is None:
        raise CopyError(
            "42601",
            "COPY must be COPY table [(columns)] FROM STDIN [WITH (...)] or "
            "COPY table [(columns)] | (query) TO STDOUT [WITH (...)]; files and programs "
            "are not supported",
        )
    direction: Literal["in", "out"] = (
        "in" if found["direction"].upper().startswith("FROM") else "out"
    )
    if found["query"] is not None and direction == "in":
        raise CopyError("42601", "COPY FROM takes a table, not a query")
    columns: tuple[str, ...] = ()
    if found["columns"] is not None:
        columns = tuple(_ident(c.strip()) for c in found["columns"].split(","))
        if any(not c for c in columns):
            raise CopyError("42601", "COPY: an empty column name in the column list")
    options = _options(found["options"])
    fmt = options.pop("format", "text").lower()
    if fmt not in ("text", "csv", "binary"):
        raise CopyError("0A000", f"COPY format {fmt!r} is not supported: use text, csv or binary")
    if fmt == "binary":
        for option in ("delimiter", "null", "header"):
            if option in options:
                raise CopyError("42601", f"cannot specify {option.upper()} in BINARY mode")
    is_csv = fmt == "csv"
    delimiter = options.pop("delimiter", "," if is_csv else "\t")
    if len(delimiter) != 1:
        raise CopyError("42601", "COPY delimiter must be a single one-byte character")
    null = options.pop("null", "" if is_csv else "\\N")
    header = options.pop("header", "false").lower() in ("true", "on", "1", "")
    if header and not is_csv:
        raise CopyError("0A000", "COPY HEADER is available only in CSV mode")
    if options:
        raise CopyError("0A000", f"COPY option {next(iter(options))!r} is not supported")
    return CopyStatement(
        direction,
        found["table"],
        columns,
        found["query"],
        is_csv,
        delimiter,
        null,
        header,
        fmt == "binary",
    )


def _ident(text: str) -> str:
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1].replace('""', '"')
    return text.lower()


def _options(text: str) -> dict[str, str]:
    """``WITH (a x, b 'y')``, ``WITH a x b``, ``(a x)`` or ``CSV HEADER`` as a dict."""
    text = text.strip()
    if text[:4].upper() == "WITH":
        text = text[4:].strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    options: dict[str, str] = {}
    at = 0
    while at < len(text.rstrip()):
        match = _OPTION.match(text, at)
        if match is None or match.end() == at:
            raise CopyError("42601", f"COPY: cannot read the options at {text[at : at + 20]!r}")
        name, value = match["name"].lower(), match["value"]
        at = match.end()
        if name in ("csv", "text", "binary"):
            options["format"] = name
            if value is not None:
                at = match.start("value")  # the old form: CSV HEADER, no value
            continue
        if name == "header" and value is not None and value.upper() not in _BOOLEAN_WORDS:
            options["header"] = "true"
            at = match.start("value")
            continue
        if value is None:
            value = "true" if name == "header" else ""
            if name != "header":
                raise CopyError("42601", f"COPY option {name!r} needs a value")
        if value.startswith("'"):
            value = value[1:-1].replace("''", "'")
        if name == "delimiter" and value == "\\t":
            value = "\t"
        options[name] = value
    return options


_BOOLEAN_WORDS = {"TRUE", "FALSE", "ON", "OFF", "1", "0"}

_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)


def _unescape(field: str) -> str:
    if "\\" not in field:
        return field

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "x" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(one, field)


def decode_rows(copy: CopyStatement, data: bytes, width: int) -> Iterator[tuple[int, list[Any]]]:
    """The rows in ``data`` as ``(line, values)``, each value a string or ``None``;
    CopyError 22P04 for a row without ``width`` fields or text that is not UTF-8."""
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise CopyError("22021", f"COPY data is not valid UTF-8: {exc}") from None
    if copy.csv:
        yield from _csv_rows(copy, text, width)
        return
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line == "\\.":
            return
        if not line and number > text.count("\n"):
            return  # the newline after the last row
        fields = line.split(copy.delimiter)
        if len(fields) != width:
            raise _width_error(number, len(fields), width)
        yield number, [None if f == copy.null else _unescape(f) for f in fields]


def decode_columns(
    copy: CopyStatement, data: bytes, width: int, ints: Sequence[bool] = ()
) -> list[list[Any]] | None:
    """The fields of ``data``'s rows column by column (``width`` lists of strings or
    ``None``), what :func:`decode_rows` gives row by row, split by pyarrow's CSV reader
    in C instead of a Python loop per line. The columns where ``ints`` is true are
    parsed as 64-bit ints there, when every field of theirs is one (else they are
    strings too). ``None`` when ``data`` holds anything that
    reader would not split as :func:`decode_rows` does: in text format a backslash
    escape (a NULL field ``\\N`` is fine), in CSV a quote (pyarrow accepts an unterminated
    one) or the end marker ``\\.``, a carriage return anywhere; and when the data is bad
    (a row of the wrong width, text that is not UTF-8): :func:`decode_rows` then reads
    it, and names the bad line."""
    if copy.binary or not width or not data or b"\r" in data:
        return None
    escaped = b"\\" in data
    if copy.csv:
        if b'"' in data or b"\\." in data:
            return None
    elif escaped and (copy.null != "\\N" or data.count(b"\\") != data.count(b"\\N")):
        return None
    import pyarrow as pa  # NB: here, not at the top: it takes a while to import
    from pyarrow import csv as pa_csv

    names = [f"c{i}" for i in range(width)]

    def read(parsed: Sequence[bool]) -> Any:
        return pa_csv.read_csv(
            pa.BufferReader(data),
            read_options=pa_csv.ReadOptions(
                column_names=names, skip_rows=1 if copy.header else 0, block_size=1 << 24
            ),
            parse_options=pa_csv.ParseOptions(
                delimiter=copy.delimiter,
                quote_char=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={
                    name: pa.int64() if i < len(parsed) and parsed[i] else pa.string()
                    for i, name in enumerate(names)
                },
                null_values=[copy.null],
                strings_can_be_null=True,
            ),
        )

    try:
        try:
            table = read(ints)
        except pa.ArrowInvalid:
            if not any(ints):
                raise
            table = read(())  # a field is no int: strings, which the caller converts
    except (pa.ArrowException, OSError):
        return None
    columns = table.columns
    if escaped and not copy.csv:
        import pyarrow.compute as pc  # NB: only here: 0.2 s to import, on a first COPY

        if any(
            pc.any(pc.match_substring(c, "\\")).as_py()
            for c in columns
            if pa.types.is_string(c.type)
        ):
            return None  # a \\N inside a field, not a whole one: decode_rows unescapes it
    return [column.to_pylist() for column in columns]


def _csv_rows(copy: CopyStatement, text: str, width: int) -> Iterator[tuple[int, list[Any]]]:
    first = True
    for number, fields in _csv_records(text, copy.delimiter):
        if fields == [("\\.", False)]:
            return
        if first and copy.header:
            first = False
            continue
        first = False
        if len(fields) != width:
            raise _width_error(number, len(fields), width)
        yield number, [None if not quoted and v == copy.null else v for v, quoted in fields]


def _csv_records(text: str, delimiter: str) -> Iterator[tuple[int, list[tuple[str, bool]]]]:
    """CSV records as ``(first line, [(value, quoted)])``: a quoted field may hold the
    delimiter, newlines and doubled quotes."""
    at, end, line = 0, len(text), 1
    while at < end:
        start = line
        fields: list[tuple[str, bool]] = []
        while True:
            if at < end and text[at] == '"':
                at += 1
                parts = []
                while True:
                    close = text.find('"', at)
                    if close < 0:
                        raise CopyError(
                            "22P04", f"COPY data, line {start}: unterminated CSV quoted field"
                        )
                    parts.append(text[at:close])
                    line += text.count("\n", at, close)
                    at = close + 1
                    if at < end and text[at] == '"':
                        parts.append('"')
                        at += 1
                        continue
                    break
                fields.append(("".join(parts), True))
            else:
                stop = at
                while stop < end and text[stop] not in (delimiter, "\n", "\r"):
                    stop += 1
                fields.append((text[at:stop], False))
                at = stop
            if at >= end:
                break
            char = text[at]
            at += 1
            if char == delimiter:
                continue
            if char == "\r" and at < end and text[at] == "\n":
                at += 1
            if char in "\r\n":
                line += 1
                break
            raise CopyError(
                "22P04", f"COPY data, line {line}: unexpected {char!r} after a quoted CSV field"
            )
        yield start, fields


def _width_error(line: int, got: int, width: int) -> CopyError:
    which = "extra data after last expected column" if got > width else "missing data for column"
    return CopyError("22P04", f"COPY data, line {line}: {which} ({got} fields for {width} columns)")


def encode_row(copy: CopyStatement, values: Sequence[str | None]) -> bytes:
    """One row of COPY TO output, its values already in text form (``None``: NULL)."""
    if copy.csv:
        fields = (copy.null if v is None else _csv_field(v, copy) for v in values)
    else:
        fields = (copy.null if v is None else _escape(v, copy.delimiter) for v in values)
    return (copy.delimiter.join(fields) + "\n").encode()


def _csv_field(value: str, copy: CopyStatement) -> str:
    special = value == copy.null or any(c in value for c in (copy.delimiter, '"', "\n", "\r"))
    return '"' + value.replace('"', '""') + '"' if special else value


def _escape(value: str, delimiter: str) -> str:
    value = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    value = value.replace("\t", "\\t")
    if delimiter != "\t":
        value = value.replace(delimiter, "\\" + delimiter)
    return value


# Binary format.

BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
BINARY_TRAILER = struct.pack("!h", -1)
_SIGNATURE = BINARY_HEADER[:11]
_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")


def decode_binary_rows(
    data: bytes, readers: Sequence[Callable[[bytes], Any]], names: Sequence[str]
) -> Iterator[tuple[int, list[Any]]]:
    """The rows of binary COPY ``data`` as ``(row number, values)``, each field read by
    its column's reader (``names``: the columns, for errors). CopyError 22P04 for a
    malformed stream, 22P03 for a field that does not read as its column's type."""
    view = memoryview(data)
    end = len(data)
    if bytes(view[:11]) != _SIGNATURE:
        raise CopyError("22P04", "COPY file signature not recognized")
    if end < 19:
        raise CopyError("22P04", "invalid COPY file header (missing flags or length)")
    (flags,) = _INT32.unpack_from(data, 11)
    if flags & (1 << 16):
        raise CopyError("0A000", "COPY with OIDs is not supported")
    if flags >> 16:
        raise CopyError("22P04", "unrecognized critical flags in COPY file header")
    (extension,) = _INT32.unpack_from(data, 15)
    at = 19 + extension
    if extension < 0 or at > end:
        raise CopyError("22P04", "invalid COPY file header (wrong length)")
    width = len(readers)
    number = 0
    while at < end:
        number += 1
        if at + 2 > end:
            raise _eof(number)
        (count,) = _INT16.unpack_from(data, at)
        at += 2
        if count == -1:
            if at != end:
                raise CopyError("22P04", "received copy data after EOF marker")
            return
        if count != width:
            raise CopyError(
                "22P04", f"COPY data, row {number}: row field count is {count}, expected {width}"
            )
        values: list[Any] = []
        for reader, name in zip(readers, names, strict=True):
            if at + 4 > end:
                raise _eof(number)
            (size,) = _INT32.unpack_from(data, at)
            at += 4
            if size == -1:
                values.append(None)
                continue
            if size < 0:
                raise CopyError("22P04", f"COPY data, row {number}: invalid field size {size}")
            if at + size > end:
                raise _eof(number)
            raw = bytes(view[at : at + size])
            at += size
            try:
                values.append(reader(raw))
            except (ValueError, struct.error, ArithmeticError, UnicodeDecodeError) as exc:
                raise CopyError(
                    "22P03",
                    f"COPY data, row {number}, column {name}: incorrect binary data format ({exc})",
                ) from None
        yield number, values


def _eof(number: int) -> CopyError:
    return CopyError("22P04", f"COPY data, row {number}: unexpected EOF in COPY data")


def encode_binary_row(fields: Sequence[bytes | None]) -> bytes:
    """One row of binary COPY TO output, its values already in binary form (``None``:
    NULL)."""
    parts = [_INT16.pack(len(fields))]
    for value in fields:
        if value is None:
            parts.append(_INT32.pack(-1))
        else:
            parts.append(_INT32.pack(len(value)))
            parts.append(value)
    return b"".join(parts)
