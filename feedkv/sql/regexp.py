"""Regular expressions of SQL: the ``~`` operators' patterns and the functions
``regexp_replace``, ``regexp_extract`` and ``regexp_split_to_array``, as CockroachDB
defines them: pure functions of their argument values.

CockroachDB matches with Go's RE2, and so does feedkv, through ``google-re2`` (Google's
binding of the C++ RE2, BSD-licensed, pinned in pyproject.toml). NB: not Python's
:mod:`re`: it backtracks, so a pattern such as ``(a+)+b`` takes time exponential in the
string's length, and ``%a%a%a%c`` as SIMILAR TO seconds of CPU on 800 characters, in a
call no statement timeout can interrupt. RE2 matches in time linear in the string, and
refuses what it cannot match so (back-references, look-around) as CockroachDB does:
2201B, with RE2's reason, as for any pattern that does not compile. What RE2 gives that
:mod:`re` did not, as Go's: ``\\w``, ``\\d``, ``\\s`` and the POSIX classes
(``[[:alpha:]]``, ``[[:^digit:]]``) are ASCII; ``$`` without the ``m`` flag matches at
the end only, not before a final newline; ``\\Z`` and ``\\u`` are refused; a repeat
count is at most 1000. A compiled pattern takes at most 8 MiB (RE2's default
``max_mem``); a larger one is refused, 2201B. As before, the newline-sensitive flags do
not keep ``[^a]`` from matching a newline (PostgreSQL's do).

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
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import re2

from feedkv.errors import SQLError

__all__ = [
    "Match",
    "Regex",
    "compiled",
    "regexp_extract",
    "regexp_replace",
    "regexp_split",
    "similar_to",
]


class Match(Protocol):
    """One match of a :class:`Regex` (google-re2 ships no types: the part used here)."""

    @property
    def re(self) -> Regex: ...

    def group(self, group: int = 0) -> str | None:
        """The text of group ``group`` (0: the whole match); None when it took no part."""

    def span(self) -> tuple[int, int]:
        """Where the whole match starts and ends, in characters."""


class Regex(Protocol):
    """A compiled pattern (:func:`compiled`); every method runs in time linear in the
    string."""

    @property
    def groups(self) -> int: ...

    def search(self, text: str) -> Match | None:
        """The leftmost match, or None."""

    def fullmatch(self, text: str) -> Match | None:
        """The match of the whole string, or None."""

    def finditer(self, text: str) -> Iterator[Match]:
        """The matches left to right, none overlapping."""

    def sub(self, repl: Callable[[Match], str], text: str, count: int = 0) -> str:
        """``text`` with the first ``count`` matches (0: every one) replaced."""


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # NB: RE2 would also write every refused pattern to stderr


@functools.lru_cache(maxsize=512)
def compiled(pattern: str, flags: str = "") -> Regex:
    """``pattern`` compiled once (bounded and shared by every statement: a pattern from a
    placeholder or a column may differ every run). ``flags`` are RE2's letters: ``i``
    case-insensitive, ``s`` ``.`` matches a newline, ``m`` ``^`` and ``$`` match at
    lines. 2201B when RE2 refuses the pattern."""
    group = f"(?{flags})" if flags else ""
    try:
        regex: Regex = re2.compile(group + pattern, _OPTIONS)
    except re2.error as exc:
        reason = bytes(exc.args[0]).decode(errors="replace")
        # NB: RE2 quotes a whole pattern it cannot close ("missing ): (?s)("): the group of
        # flags is ours, not the user's
        raise SQLError(
            "2201B", f"invalid regular expression: {reason.replace(group, '', 1)}"
        ) from None
    return regex


# NB: the characters a SIMILAR TO pattern keeps as regular-expression syntax; any other
# is itself (``.``, ``^`` and ``$`` too), as in PostgreSQL and CockroachDB
_SIMILAR_SYNTAX = frozenset("|*+?(){},")


@functools.lru_cache(maxsize=512)
def similar_to(pattern: str, escape: str | None) -> Regex:
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
            out.append(re2.escape(ch))
        i += 1
    return compiled("".join(out), "s")


def _escaped(pattern: str, at: int) -> str:
    """The escape character at ``at`` and the character after it, as the regular
    expression's backslash escape."""
    if at + 1 == len(pattern):
        raise SQLError("2201B", "invalid regular expression: trailing escape character")
    follower = pattern[at + 1]
    return "\\" + follower if follower.isalnum() else re2.escape(follower)


def _bracket(pattern: str, at: int, escape: str) -> tuple[int, str]:
    """The bracket expression that starts at ``at``: where it ends, and its set as RE2
    writes it (a ``]`` first in it, after any ``^``, is itself; a ``[`` is itself unless
    it starts a POSIX class, ``[:digit:]``)."""
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
            out.append(pattern[j : close + 2])  # NB: RE2 knows the POSIX classes
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


def _flags(text: str) -> tuple[str, bool]:
    """RE2's flag letters (:func:`compiled`) of CockroachDB's, and whether ``g`` was
    given."""
    fold, dot_nl, lines, every = False, True, False, False
    for letter in text:
        if letter == "g":
            every = True
        elif letter in "ic":
            fold = letter == "i"
        elif letter in "snmpw":
            dot_nl, lines = letter in "sw", letter in "nmw"
        else:
            raise SQLError("22023", f"invalid regexp flag: {letter!r}")
    return "i" * fold + "s" * dot_nl + "m" * lines, every


def _expand(replacement: str, match: Match) -> str:
    r"""``replacement`` for one match: ``\1`` .. ``\9`` its groups (an absent one
    empty), ``\&`` the whole match, ``\\`` a backslash; any other backslash stays."""
    out, at = [], 0
    while at < len(replacement):
        ch = replacement[at]
        follower = replacement[at + 1] if at + 1 < len(replacement) else ""
        if ch == "\\" and follower.isdigit():
            group = int(follower)
            out.append((match.group(group) or "") if group <= match.re.groups else "")
            at += 2
        elif ch == "\\" and follower in ("&", "\\"):
            out.append((match.group(0) or "") if follower == "&" else "\\")
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
