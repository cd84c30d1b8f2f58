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

__all__ = ["format_text", "quote_literal"]

_SPECIFIER = re.compile(r"%(?:(\d+)\$)?(-)?(\*(?:(\d+)\$)?|\d+)?(.)?", re.DOTALL)


def quote_literal(text: str) -> str:
    """``text`` as a SQL string literal: quotes doubled, and with a backslash, an
    ``E'...'`` string with it doubled too (PostgreSQL's quote_literal)."""
    quoted = text.replace("'", "''")
    if "\\" in text:
        return "E'" + quoted.replace("\\", "\\\\") + "'"
    return f"'{quoted}'"


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
            given = take(width_position)
            if given is not None and (isinstance(given, bool) or not isinstance(given, int)):
                raise SQLError("22023", f"format() takes an integer width, not {given!r}")
            pad = given or 0
        elif width is not None:
            pad = int(width)
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
