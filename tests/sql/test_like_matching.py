"""LIKE and ILIKE match without backtracking (feedkv.sql.expr's ``_LikePattern``): the
runs between ``%`` signs are placed leftmost, one after another. Each answer must be
the one a regular expression with ``.*`` for every ``%`` gives, which backtracks."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv import DB
from feedkv.sql.expr import _like_compiled

PATTERNS = st.text(alphabet="ab%_\\", max_size=8).filter(
    lambda p: not re.search(r"(?<!\\)(\\\\)*\\$", p)  # NB: a trailing escape is 22025
)
VALUES = st.text(alphabet="abAB\n", max_size=10)


def backtracking(pattern: str, value: str, flags: int) -> bool:
    """The answer of LIKE as one regular expression, ``.*`` for each ``%``."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append({"%": ".*", "_": "."}.get(pattern[i], re.escape(pattern[i])))
        i += 1
    return re.fullmatch("".join(out), value, flags | re.S) is not None


@settings(max_examples=2000, deadline=None)
@given(PATTERNS, VALUES, st.sampled_from([0, re.IGNORECASE]))
def test_like_answers_as_the_backtracking_expression(pattern: str, value: str, flags: int) -> None:
    assert _like_compiled(pattern, None, flags).fullmatch(value) == backtracking(
        pattern, value, flags
    )


def test_like_with_many_wildcards_over_a_long_string(db: DB) -> None:
    # NB: a pattern a backtracking match takes seconds over (8 s of CPU as one regular
    # expression); an answer at all is what this asks
    row = db.sql(
        "SELECT repeat('a', 800) LIKE '%a%a%a%c', repeat('a', 800) LIKE '%a%a%a%a', "
        "repeat('a', 800) NOT LIKE '%a_a%a%c', 'aaa' LIKE '%c'"
    ).rows
    assert row == [(False, True, True, False)]
