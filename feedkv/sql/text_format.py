"""PostgreSQL's (and CockroachDB's) ``format(template, args...)``: a pure function of the
template and the argument values.

A specifier is ``%[position$][-][width]type``: ``position`` (from 1) picks the argument
(later specifiers without one go on from there), ``-`` pads on the right, ``width`` is a
number, ``*`` (the next argument) or ``*n$`` (argument n; a negative width pads on the
right); ``type`` is ``s`` (the value's text, NULL as nothing), ``I`` (an identifier,
quoted where it must be; NULL is an error) or ``L`` (a literal, quoted; NULL as
``NULL``); ``%%`` is a ``%``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.descriptor import quote_name

__all__ = ["built_length", "format_text", "quote_literal"]

# NB: CockroachDB's bound on a string a function builds; past it Python would try to
# allocate it (or overflow an index) rather than refuse.
_MAX_BUILT_STRING = 128 << 20

_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_SPECIFIER = re.compile(r"%(?:(\d+)\$)?(-)?(\*(?:(\d+)\$)?|\d+)?(.)?", re.DOTALL)


def built_length(name: str, length: int) -> int:
    """``length`` of the string ``name()`` is to build, refused past CockroachDB's bound."""
    if length > _MAX_BUILT_STRING:
        raise SQLError("54000", f"{name}(): requested length too large, exceeds 128 MiB")
    return length


def quote_literal(text: str) -> str:
    """``text`` as a SQL string literal: quotes doubled, and with a backslash, an
    ``E'...'`` string with it doubled too (PostgreSQL's quote_literal)."""
    quoted = text.replace("'", "''")
    if "\\" in text:
        return "E'" + quoted.replace("\\", "\\\\") + "'"
    return f"'{quoted}'"


def _width(given: Any, show: Callable[[Any], str]) -> int:
    """A ``*`` width's argument as an integer, which PostgreSQL casts it to: an integer,
    or a value whose text is one (NULL: no width)."""
    if given is None:
        return 0
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    text = show(given)
    if _INTEGER.fullmatch(text) is None:
        raise SQLError("22P02", f'invalid input syntax for type integer: "{text}"')
    return int(text)


def format_text(template: str, args: Sequence[Any], show: Callable[[Any], str]) -> str:
    """``format(template, args...)``; ``show`` gives a non-NULL value's text."""
    out: list[str] = []
    at = 0  # the template's next character to copy
    following = 0  # the argument a specifier without a position takes

    def take(position: str | None) -> Any:
        nonlocal following
        index = int(position) - 1 if position is not None else following
        if position is not None and index < 0:
            raise SQLError(
                "22023", "format specifies argument 0, but arguments are numbered from 1"
            )
        if index >= len(args):
            raise SQLError("22023", "too few arguments for format()")
        following = index + 1
        return args[index]

    for found in _SPECIFIER.finditer(template):
        out.append(template[at : found.start()])
        at = found.end()
        position, left, width, width_position, kind = found.groups()
        if kind is None:
            raise SQLError("22023", "unterminated format() type specifier")
        if kind == "%" and not (position or left or width):
            out.append("%")
            continue
        if kind not in "sIL":
            raise SQLError("22023", f'unrecognized format() type specifier "{kind}"')
        pad = 0
        if width is not None and width.startswith("*"):
            pad = _width(take(width_position), show)
        elif width is not None:
            pad = int(width)
        built_length("format", abs(pad))
        text = _converted(kind, take(position), show)
        if left or pad < 0:
            out.append(text.ljust(abs(pad)))
        else:
            out.append(text.rjust(pad))
    out.append(template[at:])
    return "".join(out)


def _converted(kind: str, value: Any, show: Callable[[Any], str]) -> str:
    if kind == "s":
        return "" if value is None else show(value)
    if kind == "I":
        if value is None:
            raise SQLError("22004", "null values cannot be formatted as an SQL identifier")
        return quote_name(show(value))
    return "NULL" if value is None else quote_literal(show(value))
