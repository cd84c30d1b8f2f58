"""SQL's ``PREPARE`` and ``EXECUTE``, read from a simple query's text.

They name the connection's prepared statements, one namespace with the protocol's Parse
(as PostgreSQL's): ``PREPARE name [(type, ...)] AS statement`` makes one as a Parse
would (the types are its parameters' where given), ``EXECUTE name [(value, ...)]``
binds the values, constants or expressions the session evaluates, and runs it.
``DEALLOCATE`` drops either kind. Pure: the connection does the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError

from feedkv.errors import SQLError
from feedkv.sql.parser import column_type
from feedkv.sql.types import ColumnType

__all__ = ["ExecuteSQL", "PrepareSQL", "param_type", "parse_execute", "parse_prepare"]

_NAME = r'("(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_PREPARE = re.compile(rf"^\s*PREPARE\s+{_NAME}\s*(\((.*?)\))?\s*AS\s+(.*?)[\s;]*$", re.I | re.S)
_EXECUTE = re.compile(rf"^\s*EXECUTE\s+{_NAME}\s*(?:\((.*)\))?[\s;]*$", re.I | re.S)
_STARTS = re.compile(r"^\s*(PREPARE|EXECUTE)\b", re.I)
_TRANSACTION = re.compile(r"^\s*PREPARE\s+TRANSACTION\b", re.I)


@dataclass(frozen=True, slots=True)
class PrepareSQL:
    name: str
    types: tuple[str, ...]  # the parameters' type names as written; () when not given
    text: str  # the statement prepared


@dataclass(frozen=True, slots=True)
class ExecuteSQL:
    name: str
    arguments: str  # the values' SQL, as a select list ("" when none are given)


def parse_prepare(text: str) -> PrepareSQL | None:
    """``text`` as a PREPARE; ``None`` when it is none; 42601 for one malformed."""
    if not _starts_with(text, "PREPARE") or _TRANSACTION.match(text):
        return None  # NB: PREPARE TRANSACTION (two-phase commit) is another statement
    found = _PREPARE.match(text)
    if found is None or not found.group(4).strip():
        raise SQLError("42601", "syntax error: expected PREPARE name [(type, ...)] AS statement")
    types = tuple(t.strip() for t in _split(found.group(3) or "")) if found.group(2) else ()
    if any(not t for t in types):
        raise SQLError("42601", "syntax error: a parameter type is missing in PREPARE")
    return PrepareSQL(_name(found.group(1)), types, found.group(4))


def parse_execute(text: str) -> ExecuteSQL | None:
    """``text`` as an EXECUTE; ``None`` when it is none; 42601 for one malformed."""
    if not _starts_with(text, "EXECUTE"):
        return None
    found = _EXECUTE.match(text)
    if found is None:
        raise SQLError("42601", "syntax error: expected EXECUTE name [(value, ...)]")
    return ExecuteSQL(_name(found.group(1)), (found.group(2) or "").strip())


def param_type(name: str) -> ColumnType:
    """The type a PREPARE's parameter type name names (``int8``, ``numeric(10,2)``,
    ``text[]``; a name of no built-in type is a user-defined one's)."""
    try:
        return column_type(exp.DataType.build(name, dialect="postgres", udt=True))
    except ParseError:
        raise SQLError("42704", f'type "{name}" does not exist') from None


def _starts_with(text: str, word: str) -> bool:
    found = _STARTS.match(text)
    return found is not None and found.group(1).upper() == word


def _name(text: str) -> str:
    """A name as PostgreSQL folds it: quoted kept, else lower case."""
    return text[1:-1].replace('""', '"') if text.startswith('"') else text.lower()


def _split(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses (``numeric(10, 2), int``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
