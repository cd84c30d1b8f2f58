"""feedkv.sql.regexp: CockroachDB's regular-expression functions as pure functions."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.sql import regexp


@pytest.mark.parametrize(
    ("flags", "expected"),
    [("", "a\nb"), ("n", "a\nX"), ("w", "a\nX"), ("p", "a\nb")],
)
def test_newline_flags_decide_where_caret_matches(flags: str, expected: str) -> None:
    assert regexp.regexp_replace("a\nb", "^b", "X", flags) == expected


def test_replacement_reads_groups_whole_match_and_backslash() -> None:
    assert regexp.regexp_replace("ab", "(a)(b)", r"\2\1-\&-\\-\7-\x") == r"ba-ab-\--\x"


def test_split_skips_empty_matches_at_the_ends_and_after_a_match() -> None:
    assert regexp.regexp_split("abc", "") == ["a", "b", "c"]
    assert regexp.regexp_split("a1b", "[0-9]*") == ["a", "b"]


def test_posix_classes_are_ascii_ranges() -> None:
    assert regexp.regexp_replace("é1a", "[[:alpha:]]", "", "g") == "é1"
    with pytest.raises(SQLError) as caught:
        regexp.compiled("[[:^alpha:]]")
    assert caught.value.code == "2201B"
