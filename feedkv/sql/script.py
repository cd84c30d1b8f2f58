r"""A SQL script cut into statements without parsing them, and where a quote or comment
that never closes starts.

``split_statements`` finds the semicolons outside quoted strings (``'...'``, ``e'...'``
and ``b'...'`` with their backslash escapes, ``$tag$...$tag$``), quoted identifiers and
comments (``--``, nested ``/* */``), so each statement of a script can run, or fail, on
its own (``feedkv sql`` reading a script); :func:`runaway` names what never closes, for
the parser's error. ``split_script`` does the same for a script that may hold the
shell's own commands: as psql reads one, a backslash where a statement would start makes
the rest of its line that command, semicolons and all (``\d u; DROP TABLE u`` is ``\d``
with the arguments ``u;``, ``DROP``, ``TABLE`` and ``u``: nothing is dropped).
"""

from __future__ import annotations

import re

__all__ = ["runaway", "split_script", "split_statements"]

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def runaway(text: str) -> tuple[int, str]:
    """Where the quoted string, quoted identifier or comment that is never closed starts
    (0-based), and what it is; the end of the text if everything is closed."""
    i = 0
    while i < len(text):
        after = _skip_quoted(text, i)
        if after is None:
            return i, _QUOTED_NAMES[text[i] if text[i] in "'\"$" else text[i : i + 2]]
        i = after
    return len(text), "input"


_QUOTED_NAMES = {
    "'": "quoted string",
    '"': "quoted identifier",
    "$": "dollar-quoted string",
    "/*": "comment",
}


def _skip_quoted(text: str, i: int) -> int | None:
    """Past the comment, quoted string or quoted identifier that starts at ``i`` (or past
    the one character there); ``None`` when it is never closed."""
    n = len(text)
    c = text[i]
    if text.startswith("--", i):
        newline = text.find("\n", i)
        return n if newline < 0 else newline + 1
    if text.startswith("/*", i):
        depth, j = 1, i + 2
        while j < n and depth:
            if text.startswith("/*", j):
                depth, j = depth + 1, j + 2
            elif text.startswith("*/", j):
                depth, j = depth - 1, j + 2
            else:
                j += 1
        return None if depth else j
    if c in "'\"":
        j = i + 1
        # e'...' and b'...' take backslash escapes; a word ending in e or b does not
        escapes = c == "'" and i > 0 and text[i - 1] in "eEbB" and not _word_char(text, i - 2)
        while j < n:
            if escapes and text[j] == "\\":
                j += 2
            elif text[j] == c:
                if text.startswith(c * 2, j):
                    j += 2
                else:
                    break
            else:
                j += 1
        return None if j >= n else j + 1
    if c == "$" and not _word_char(text, i - 1) and (tag := _DOLLAR_TAG.match(text, i)) is not None:
        close = text.find(tag.group(0), tag.end())
        return None if close < 0 else close + len(tag.group(0))
    return i + 1


def _word_char(text: str, i: int) -> bool:
    """Whether ``text[i]`` exists and can be part of a name."""
    return i >= 0 and (text[i].isalnum() or text[i] in "_$")


def split_statements(text: str) -> list[tuple[int, str]]:
    """The statements of a script, each with the 0-based offset of its first word (past
    blanks and comments), split at the semicolons outside quotes and comments, without
    parsing them (so each can run, or fail, on its own). A quote that never closes takes
    the rest of the text."""
    out: list[tuple[int, str]] = []
    start = i = 0
    while i < len(text):
        if text[i] == ";":
            out.append((start, text[start:i]))
            start = i + 1
            i += 1
            continue
        after = _skip_quoted(text, i)
        i = len(text) if after is None else after
    out.append((start, text[start:]))
    words = [(offset, part, _first_word(part)) for offset, part in out]
    return [(offset + first, part[first:]) for offset, part, first in words if first is not None]


def split_script(text: str) -> list[tuple[int, str]]:
    """The statements and the shell's own commands of a script, each with the 0-based
    offset of its first character: as :func:`split_statements`, but a backslash where a
    statement would start takes the rest of its line (without its newline)."""
    out: list[tuple[int, str]] = []
    position = 0
    while position < len(text):
        first = _first_word(text[position:])
        if first is None:
            break
        start = position + first
        if text[start] == "\\":
            newline = text.find("\n", start)
            end = len(text) if newline < 0 else newline
            out.append((start, text[start:end]))
            position = end + 1
            continue
        i = start
        while i < len(text) and text[i] != ";":
            after = _skip_quoted(text, i)
            i = len(text) if after is None else after
        out.append((start, text[start:i]))
        position = i + 1
    return out


def _first_word(text: str) -> int | None:
    """Where the first thing that is not a blank or a comment starts (``None``: none)."""
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith(("--", "/*"), i):
            after = _skip_quoted(text, i)
            if after is None:
                return None
            i = after
        else:
            return i
    return None
