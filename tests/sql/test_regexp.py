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
    assert regexp.regexp_replace("é1a", "[[:^alpha:]]", "", "g") == "a"


def test_nested_repetition_answers_without_backtracking() -> None:
    # NB: a backtracking matcher tries every split of the a's among the groups, 2**5000
    assert regexp.compiled("(a+)+b").search("a" * 5000) is None
    assert regexp.regexp_replace("a" * 5000 + "b", "(a+)+b", "x") == "x"


def test_similar_to_of_many_wildcards_answers_without_backtracking() -> None:
    assert regexp.similar_to("%a%a%a%c", None).fullmatch("a" * 800) is None
    assert regexp.similar_to("%a%a%a%c", None).fullmatch("a" * 800 + "c") is not None


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", "(?=a)a", "(?!a)b", "(?<=a)b", "(?<!a)b", r"(?P<x>a)(?P=x)"]
)
def test_back_references_and_look_around_are_refused(pattern: str) -> None:
    with pytest.raises(SQLError) as caught:
        regexp.compiled(pattern)
    assert caught.value.code == "2201B"


def test_dollar_matches_at_the_end_only_unless_newline_sensitive() -> None:
    assert regexp.compiled("a$").search("a\n") is None
    assert regexp.compiled("a$", "m").search("a\n") is not None


def test_refusal_quotes_the_pattern_without_the_flags() -> None:
    with pytest.raises(SQLError) as caught:
        regexp.regexp_replace("a", "(", "x", "n")
    assert str(caught.value) == "invalid regular expression: missing ): ("
