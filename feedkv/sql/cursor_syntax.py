"""The words of the SQL cursor statements, read strictly: ``DECLARE``'s head (up to the
query after ``FOR``, which the SQL parser reads), ``FETCH`` and ``MOVE`` with their
directions, and ``CLOSE``, in PostgreSQL's grammar (the forms CockroachDB accepts;
what each does is :mod:`feedkv.sql.cursors`'). sqlglot reads none of them (it swallows
what follows ``DECLARE`` or ``FETCH`` into one string), hence this small scanner; what
does not fit is a 42601 naming the word, with its position (a row count beyond int64:
22003, as CockroachDB's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.types import INT64_MAX, INT64_MIN

__all__ = ["DeclareHead", "parse_close", "parse_declare", "parse_fetch"]

_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"]|"")*")|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)|(?P<number>[+-]?\d+))'
)
# Words that FETCH and MOVE read as their direction, not as a cursor's name: such a name
# must be quoted (as in PostgreSQL, where they are keywords).
_DIRECTION_WORDS = frozenset(
    {"NEXT", "PRIOR", "FIRST", "LAST", "ABSOLUTE", "RELATIVE", "ALL", "FORWARD", "BACKWARD"}
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["quoted", "word", "number"]
    text: str  # a word upper-cased, a quoted name unquoted, a number as written
    name: str  # what it names as an identifier: a word folded to lower case
    start: int  # offset in the statement


@dataclass(frozen=True, slots=True)
class DeclareHead:
    """What ``DECLARE`` says before its query, and where the query starts."""

    name: str
    binary: bool
    scroll: bool | None
    hold: bool
    query_at: int


def _error(text: str, at: int | None, message: str, offset: int, code: str) -> SQLError:
    if at is None or at >= len(text):
        return SQLError(
            code, f"at or near EOF: syntax error: {message}", position=offset + len(text) + 1
        )
    near = text[at:].split(None, 1)[0].lower() if text[at:].strip() else "EOF"
    return SQLError(code, f'at or near "{near}": syntax error: {message}', position=offset + at + 1)


class _Scanner:
    def __init__(self, text: str, offset: int) -> None:
        self.text = text
        self.offset = offset
        self.at = 0

    def next(self) -> _Token | None:
        """The next token, or None at the end; 42601 for anything else."""
        rest = self.text[self.at :]
        if not rest.strip():
            self.at = len(self.text)
            return None
        match = _TOKEN.match(self.text, self.at)
        if match is None:
            start = self.at + len(rest) - len(rest.lstrip())
            raise self.error(start, "unexpected character")
        self.at = match.end()
        kind = match.lastgroup
        raw = match.group(kind or "word")
        start = match.start(kind or "word")
        if kind == "quoted":
            name = raw[1:-1].replace('""', '"')
            if not name:
                raise self.error(start, "a quoted name cannot be empty")
            return _Token("quoted", name, name, start)
        if kind == "number":
            return _Token("number", raw, raw, start)
        return _Token("word", raw.upper(), raw.lower(), start)

    def rest(self) -> list[_Token]:
        out = []
        while (token := self.next()) is not None:
            out.append(token)
        return out

    def error(self, at: int | None, message: str, code: str = "42601") -> SQLError:
        return _error(self.text, at, message, self.offset, code)

    def error_at(self, token: _Token | None, message: str) -> SQLError:
        """:meth:`error` at ``token`` (None: at the end of the statement)."""
        return self.error(None if token is None else token.start, message)


def _is_word(token: _Token | None, *words: str) -> bool:
    return token is not None and token.kind == "word" and token.text in words


def _name(scanner: _Scanner, token: _Token | None, what: str) -> str:
    if token is None or token.kind == "number":
        raise scanner.error_at(token, f"expected {what}")
    return token.name


def parse_declare(text: str, offset: int = 0) -> DeclareHead:
    """``DECLARE name [BINARY] [ASENSITIVE | INSENSITIVE] [[NO] SCROLL] CURSOR [{WITH |
    WITHOUT} HOLD] FOR``, the words in that order; ``query_at`` is where the query
    after ``FOR`` starts in ``text`` (``offset``: where ``text`` starts in its script,
    for error positions)."""
    scanner = _Scanner(text, offset)
    if not _is_word(scanner.next(), "DECLARE"):
        raise scanner.error(0, "expected DECLARE")
    name = _name(scanner, scanner.next(), "a cursor name after DECLARE")
    token = scanner.next()
    binary = _is_word(token, "BINARY")
    if binary:
        token = scanner.next()
    if _is_word(token, "ASENSITIVE", "INSENSITIVE"):
        token = scanner.next()
    scroll: bool | None = None
    if _is_word(token, "NO"):
        token = scanner.next()
        if not _is_word(token, "SCROLL"):
            raise scanner.error_at(token, "expected SCROLL")
        scroll, token = False, scanner.next()
    elif _is_word(token, "SCROLL"):
        scroll, token = True, scanner.next()
    if not _is_word(token, "CURSOR"):
        raise scanner.error_at(token, "expected CURSOR")
    token = scanner.next()
    hold = False
    if _is_word(token, "WITH", "WITHOUT"):
        hold = token is not None and token.text == "WITH"
        token = scanner.next()
        if not _is_word(token, "HOLD"):
            raise scanner.error_at(token, "expected HOLD")
        token = scanner.next()
    if not _is_word(token, "FOR"):
        raise scanner.error_at(token, "expected FOR")
    query_at = scanner.at + len(text[scanner.at :]) - len(text[scanner.at :].lstrip())
    if query_at >= len(text):
        raise scanner.error(None, "DECLARE needs a query after FOR")
    return DeclareHead(name, binary, scroll, hold, query_at)


def _count(scanner: _Scanner, token: _Token | None) -> int:
    if token is None or token.kind != "number":
        raise scanner.error_at(token, "expected a row count")
    value = int(token.text)
    if not INT64_MIN <= value <= INT64_MAX:  # CockroachDB's grammar reads an int64 here
        raise scanner.error(token.start, "numeric constant out of int64 range", "22003")
    return value


def parse_fetch(text: str, offset: int = 0) -> st.FetchCursor:
    """``FETCH`` or ``MOVE`` ``[direction] [FROM | IN] name``, where direction is NEXT,
    PRIOR, FIRST, LAST, ABSOLUTE n, RELATIVE n, n, ALL, FORWARD [n | ALL] or BACKWARD
    [n | ALL]."""
    scanner = _Scanner(text, offset)
    first = scanner.next()
    if not _is_word(first, "FETCH", "MOVE"):
        raise scanner.error(0, "expected FETCH or MOVE")
    move = first is not None and first.text == "MOVE"
    tokens = scanner.rest()
    if not tokens:
        raise scanner.error(None, "expected a cursor name")
    last = tokens[-1]
    if last.kind == "number" or _is_word(last, "FROM", "IN", *_DIRECTION_WORDS):
        raise scanner.error(last.start if len(tokens) > 1 else None, "expected a cursor name")
    body = tokens[:-1]
    if body and _is_word(body[-1], "FROM", "IN"):
        body = body[:-1]
    kind, count = _direction(scanner, body)
    return st.FetchCursor(text, last.name, kind, count, move)


def _direction(scanner: _Scanner, body: list[_Token]) -> tuple[st.FetchKind, int]:
    if not body:
        return "count", 1
    head, rest = body[0], body[1:]
    word = head.text if head.kind == "word" else ""
    if head.kind == "number" and not rest:
        return "count", _count(scanner, head)
    simple: dict[str, tuple[st.FetchKind, int]] = {
        "NEXT": ("count", 1),
        "PRIOR": ("count", -1),
        "FIRST": ("first", 1),
        "LAST": ("last", -1),
        "ALL": ("all", 0),
    }
    if word in simple and not rest:
        return simple[word]
    if word in ("ABSOLUTE", "RELATIVE") and len(rest) == 1:
        return ("absolute" if word == "ABSOLUTE" else "relative"), _count(scanner, rest[0])
    if word in ("FORWARD", "BACKWARD") and len(rest) <= 1:
        sign = 1 if word == "FORWARD" else -1
        if not rest:
            return "count", sign
        if _is_word(rest[0], "ALL"):
            return ("all" if sign > 0 else "backward_all"), 0
        return "count", sign * _count(scanner, rest[0])
    if word in ("ABSOLUTE", "RELATIVE") and not rest:
        raise scanner.error(body[-1].start + len(word), f"{word} needs a row count")
    # NB: the first word that cannot belong: the second after a one-word direction, the
    # third after a two-word one, else the first
    known = 1 if word in simple or head.kind == "number" else 2 if word in _DIRECTION_WORDS else 0
    raise scanner.error(body[min(known, len(body) - 1)].start, "unexpected word in the direction")


def parse_close(text: str, offset: int = 0) -> st.CloseCursor:
    """``CLOSE name`` or ``CLOSE ALL``."""
    scanner = _Scanner(text, offset)
    if not _is_word(scanner.next(), "CLOSE"):
        raise scanner.error(0, "expected CLOSE")
    tokens = scanner.rest()
    if len(tokens) != 1:
        at = tokens[1].start if len(tokens) > 1 else None
        raise scanner.error(at, "CLOSE takes one cursor name, or ALL")
    if _is_word(tokens[0], "ALL"):
        return st.CloseCursor(text, None)
    return st.CloseCursor(text, _name(scanner, tokens[0], "a cursor name"))
