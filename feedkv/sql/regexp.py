"""Regular expressions of SQL: the ``~`` operators' patterns and the functions
``regexp_replace``, ``regexp_extract`` and ``regexp_split_to_array``, as CockroachDB
defines them: pure functions of their argument values.

CockroachDB matches with Go's RE2; feedkv with Python's :mod:`re`, after turning the
POSIX bracket classes RE2 knows (``[[:alpha:]]``, ``[[:digit:]]``, ...) into their
ASCII ranges. What differs: Python accepts back-references and look-around (RE2 refuses
them, 2201B), ``$`` without the ``n`` flag also matches before a final newline, and the
newline-sensitive flags do not keep ``[^a]`` from matching a newline. A pattern that does
not compile is 2201B (``invalid regular expression``).

The flags of ``regexp_replace`` and ``regexp_split_to_array``, as CockroachDB's: ``g``
every match (``regexp_replace`` only), ``i`` case-insensitive, ``c`` case-sensitive (the
default), ``s`` ``.`` matches a newline (the default), ``n`` or ``m`` newline-sensitive
(``.`` does not match one; ``^`` and ``$`` match at lines), ``p`` partial (``.`` does not
match one), ``w`` inverse partial (``^`` and ``$`` at lines). Another letter is 22023.

``SIMILAR TO`` patterns (:func:`similar_to`) are SQL's mix of LIKE and regular
expressions: ``%`` and ``_`` as in LIKE, ``|``, ``*``, ``+``, ``?``, ``{m,n}``, groups
and brackets as in a regular expression, ``\\`` escaping; ``.`` is itself. The pattern
matches the whole string.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from feedkv.errors import SQLError

__all__ = ["compiled", "regexp_extract", "regexp_replace", "regexp_split", "similar_to"]

# NB: RE2's POSIX classes are ASCII only, as these ranges are
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_POSIX_CLASS = re.compile(r"\[:(\^?)([a-z]+):\]")


def _posix_class(match: re.Match[str]) -> str:
    negated, name = match.groups()
    ranges = _POSIX_CLASSES.get(name)
    if ranges is None:
        raise SQLError("2201B", f"invalid regular expression: invalid character class: {name}")
    if negated:
        raise SQLError(
            "2201B", "invalid regular expression: a negated POSIX class is not supported"
        )
    return ranges


@functools.lru_cache(maxsize=512)
def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``pattern`` compiled once (bounded and shared by every statement: a pattern from a
    placeholder or a column may differ every run); 2201B when it does not compile."""
    try:
        return re.compile(_POSIX_CLASS.sub(_posix_class, pattern), flags)
    except re.error as exc:
        raise SQLError("2201B", f"invalid regular expression: {exc}") from None


# NB: the characters a SIMILAR TO pattern keeps as regular-expression syntax; any other
# is itself (``.``, ``^`` and ``$`` too), as in PostgreSQL and CockroachDB
_SIMILAR_SYNTAX = frozenset("|*+?(){},")


@functools.lru_cache(maxsize=512)
def similar_to(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The regular expression of ``SIMILAR TO pattern [ESCAPE escape]``, to be matched
    against the whole string: ``%`` is any run of characters, ``_`` any one, ``|``,
    ``*``, ``+``, ``?``, ``{m,n}``, parentheses and bracket expressions are as in a
    regular expression. The escape character (``\\`` unless ESCAPE says another; ESCAPE
    '' none) and the character after it reach the regular expression as a backslash
    and that character, as PostgreSQL passes them: ``\\%`` is ``%`` itself, ``\\d`` a
    digit."""
    escape = "\\" if escape is None else escape
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if escape and ch == escape:
            out.append(_escaped(pattern, i))
            i += 2
            continue
        if ch == "[":
            end, bracket = _bracket(pattern, i, escape)
            out.append(bracket)
            i = end
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch == "(":
            out.append("(?:")
        elif ch in _SIMILAR_SYNTAX:
            out.append(ch)
        else:
            out.append(re.escape(ch))
        i += 1
    return compiled("".join(out), re.S)


def _escaped(pattern: str, at: int) -> str:
    """The escape character at ``at`` and the character after it, as the regular
    expression's backslash escape."""
    if at + 1 == len(pattern):
        raise SQLError("2201B", "invalid regular expression: trailing escape character")
    follower = pattern[at + 1]
    return "\\" + follower if follower.isalnum() else re.escape(follower)


def _bracket(pattern: str, at: int, escape: str) -> tuple[int, str]:
    """The bracket expression that starts at ``at``: where it ends, and its set as
    Python's regular expressions write it (a ``]`` first in it, after any ``^``, is
    itself; a ``[`` is itself unless it starts a POSIX class, ``[:digit:]``)."""
    out, j, n = ["["], at + 1, len(pattern)
    if pattern[j : j + 1] == "^":
        out.append("^")
        j += 1
    if pattern[j : j + 1] == "]":
        out.append("\\]")
        j += 1
    while j < n:
        ch = pattern[j]
        if ch == "]":
            out.append("]")
            return j + 1, "".join(out)
        close = pattern.find(":]", j + 2) if pattern.startswith("[:", j) else -1
        if close > 0:
            out.append(pattern[j : close + 2])  # NB: compiled() spells the class out
            j = close + 2
        elif escape and ch == escape:
            out.append(_escaped(pattern, j))
            j += 2
        elif ch == "[" or (ch == "\\" and escape != "\\"):
            out.append("\\" + ch)
            j += 1
        else:
            out.append(ch)
            j += 1
    raise SQLError("2201B", "invalid regular expression: brackets [] not balanced")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _flags(text: str) -> tuple[int, bool]:
    """The :mod:`re` flags of CockroachDB's flag letters, and whether ``g`` was given."""
    flags, every = re.S, False
    for letter in text:
        if letter == "g":
            every = True
        elif letter == "i":
            flags |= re.I
        elif letter == "c":
            flags &= ~re.I
        elif letter == "s":
            flags = (flags | re.S) & ~re.M
        elif letter in "nm":
            flags = (flags | re.M) & ~re.S
        elif letter == "p":
            flags &= ~(re.S | re.M)
        elif letter == "w":
            flags |= re.S | re.M
        else:
            raise SQLError("22023", f"invalid regexp flag: {letter!r}")
    return flags, every


def _expand(replacement: str, match: re.Match[str]) -> str:
    r"""``replacement`` for one match: ``\1`` .. ``\9`` its groups (an absent one
    empty), ``\&`` the whole match, ``\\`` a backslash; any other backslash stays."""
    out, at = [], 0
    while at < len(replacement):
        ch = replacement[at]
        follower = replacement[at + 1] if at + 1 < len(replacement) else ""
        if ch == "\\" and follower.isdigit():
            group = int(follower)
            out.append((match.group(group) or "") if group <= (match.re.groups or 0) else "")
            at += 2
        elif ch == "\\" and follower in ("&", "\\"):
            out.append(match.group(0) if follower == "&" else "\\")
            at += 2
        else:
            out.append(ch)
            at += 1
    return "".join(out)


def regexp_replace(value: Any, pattern: Any, replacement: Any, flags: Any = "") -> str:
    """``regexp_replace(s, pattern, replacement [, flags])``: the first match (every
    one with ``g``) replaced."""
    text, template = _text(value), _text(replacement)
    options, every = _flags(_text(flags))
    regex = compiled(_text(pattern), options)
    return regex.sub(lambda m: _expand(template, m), text, count=0 if every else 1)


def regexp_extract(value: Any, pattern: Any) -> str | None:
    """``regexp_extract(s, pattern)``: the first match's first group (the whole match
    for a pattern of none); NULL for no match."""
    found = compiled(_text(pattern)).search(_text(value))
    if found is None:
        return None
    return found.group(1) if found.re.groups else found.group(0)


def regexp_split(value: Any, pattern: Any, flags: Any = "") -> list[str]:
    """``regexp_split_to_array(s, pattern [, flags])``: the text between matches. As
    PostgreSQL's, an empty match at either end or just after another match splits
    nothing (so ``''`` splits into characters); ``g`` is refused (22023)."""
    text = _text(value)
    options, every = _flags(_text(flags))
    if every:
        raise SQLError("22023", "regexp_split_to_array() does not support the global option")
    parts, start, last_end = [], 0, -1
    for found in compiled(_text(pattern), options).finditer(text):
        at, end = found.span()
        if at == end and at in (0, len(text), last_end):
            continue
        parts.append(text[start:at])
        start = last_end = end
    parts.append(text[start:])
    return parts
