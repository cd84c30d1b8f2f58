"""ARRAY values: one-dimensional arrays of a column type's values (``INT[]``).

An array knows its element type, which its text, its JSON and its wire format need.
Arrays compare as PostgreSQL's one-dimensional arrays: element by element, then by
length. Text is PostgreSQL's: ``{1,2,NULL}``, an element quoted when it is empty,
``NULL``, or holds a space, a quote, a backslash, a comma or a brace.

To Python (an embedded ``db.sql`` result) an array is a read-only sequence of its
values: it iterates, indexes, equals a list of the same values and shows as one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from feedkv.errors import SQLError

__all__ = ["Array", "parse_array_text"]

_SPECIAL = set(' "\\,{}\t\n')


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Array(Sequence[Any]):
    values: tuple[Any, ...]
    # NB: a feedkv.sql.types.ColumnType; not named here, since types imports this module
    element: Any

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self.values) == other
        return isinstance(other, Array) and self.values == other.values

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Array):
            return NotImplemented
        for a, b in zip(self.values, other.values, strict=False):
            if a == b:
                continue
            if a is None or b is None:  # NB: NULL sorts after every value, as PostgreSQL
                return b is None
            return bool(a < b)
        return len(self.values) < len(other.values)

    def __hash__(self) -> int:
        return hash(self.values)

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Array: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return Array(self.values[index], self.element)
        return self.values[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        # NB: the values alone, as a list shows them; the element type is for SQL
        return repr(list(self.values))

    def text(self, show: Callable[[Any], str]) -> str:
        """PostgreSQL's text of the array, each element shown by ``show``."""
        parts = []
        for value in self.values:
            if value is None:
                parts.append("NULL")
                continue
            shown = show(value)
            if not shown or shown.upper() == "NULL" or any(ch in _SPECIAL for ch in shown):
                shown = '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'
            parts.append(shown)
        return "{" + ",".join(parts) + "}"


def parse_array_text(text: str) -> list[str | None]:
    """The elements of PostgreSQL's text of a one-dimensional array, as strings
    (``None`` for an unquoted NULL); 22P02 for text that is not one."""
    source = text.strip()
    if len(source) < 2 or source[0] != "{" or source[-1] != "}":
        raise _bad(text)
    body = source[1:-1]
    out: list[str | None] = []
    if not body.strip():
        return out
    pos = 0
    while True:
        while pos < len(body) and body[pos].isspace():
            pos += 1
        if pos < len(body) and body[pos] == "{":
            raise SQLError("0A000", "arrays of more than one dimension are not supported")
        if pos < len(body) and body[pos] == '"':
            pos += 1
            chars = []
            while pos < len(body) and body[pos] != '"':
                if body[pos] == "\\" and pos + 1 < len(body):
                    pos += 1
                chars.append(body[pos])
                pos += 1
            if pos >= len(body):
                raise _bad(text)
            pos += 1
            out.append("".join(chars))
        else:
            start = pos
            while pos < len(body) and body[pos] != ",":
                if body[pos] in '"{}':
                    raise _bad(text)
                pos += 1
            item = body[start:pos].strip()
            if not item:
                raise _bad(text)
            out.append(None if item.upper() == "NULL" else item)
        while pos < len(body) and body[pos].isspace():
            pos += 1
        if pos >= len(body):
            return out
        if body[pos] != ",":
            raise _bad(text)
        pos += 1


def _bad(text: str) -> SQLError:
    return SQLError("22P02", f"malformed array literal: {text!r}")
