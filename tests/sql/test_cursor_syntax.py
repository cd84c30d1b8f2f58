"""The cursor statements' words (feedkv.sql.cursor_syntax, through the SQL parser):
every form PostgreSQL's grammar gives DECLARE, FETCH, MOVE and CLOSE, a 42601 naming
the word for anything else, and never another error on any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.errors import SQLError
from feedkv.sql import statements as s
from feedkv.sql.cursor_syntax import parse_close, parse_declare, parse_fetch
from feedkv.sql.parser import parse, placeholder_count


@pytest.mark.parametrize(
    ("text", "kind", "count"),
    [
        ("FETCH c", "count", 1),
        ("FETCH NEXT FROM c", "count", 1),
        ("FETCH PRIOR IN c", "count", -1),
        ("FETCH FIRST c", "first", 1),
        ("FETCH LAST c", "last", -1),
        ("FETCH ABSOLUTE 7 c", "absolute", 7),
        ("FETCH RELATIVE -2 FROM c", "relative", -2),
        ("FETCH 12 c", "count", 12),
        ("FETCH ALL IN c", "all", 0),
        ("FETCH FORWARD c", "count", 1),
        ("FETCH FORWARD 3 c", "count", 3),
        ("FETCH FORWARD ALL c", "all", 0),
        ("FETCH BACKWARD c", "count", -1),
        ("fetch backward 4 from c", "count", -4),
        ("FETCH BACKWARD ALL c", "backward_all", 0),
        ("FETCH FROM c", "count", 1),
    ],
)
def test_every_fetch_direction_reads(text: str, kind: str, count: int) -> None:
    for verb in ("FETCH", "MOVE"):
        (statement,) = parse(verb + text[5:])
        assert statement == s.FetchCursor(verb + text[5:], "c", kind, count, verb == "MOVE")  # type: ignore[arg-type]


def test_names_fold_unless_quoted() -> None:
    assert parse_fetch('FETCH 2 FROM "My ""Cursor"""').name == 'My "Cursor"'
    assert parse_fetch("FETCH 2 FROM MyCursor").name == "mycursor"
    assert parse_close('CLOSE "ALL"') == s.CloseCursor('CLOSE "ALL"', "ALL")
    assert parse_close("close all") == s.CloseCursor("close all", None)


def test_declare_reads_its_options_and_its_query() -> None:
    (statement,) = parse(
        'DECLARE "C" BINARY INSENSITIVE NO SCROLL CURSOR WITH HOLD FOR SELECT a FROM t WHERE b = $2'
    )
    assert isinstance(statement, s.DeclareCursor)
    assert (statement.name, statement.binary, statement.scroll, statement.hold) == (
        "C",
        True,
        False,
        True,
    )
    assert isinstance(statement.query, s.Select)
    assert statement.query.text == "SELECT a FROM t WHERE b = $2"
    assert placeholder_count(statement) == 2
    head = parse_declare("declare c asensitive scroll cursor without hold for values (1)")
    assert (head.name, head.binary, head.scroll, head.hold) == ("c", False, True, False)
    (values,) = parse("DECLARE c CURSOR FOR VALUES (1), (2); FETCH 2 c")[:1]
    assert isinstance(values, s.DeclareCursor) and isinstance(values.query, s.Values)


@pytest.mark.parametrize(
    ("text", "near"),
    [
        ("FETCH", "EOF"),
        ("FETCH NEXT", "EOF"),
        ("FETCH 2", "EOF"),
        ("FETCH 1 2 c", '"2"'),
        ("FETCH SIDEWAYS c", '"sideways"'),
        ("FETCH FORWARD 1 2 c", '"2"'),
        ("FETCH ABSOLUTE c", '"c"'),
        ("FETCH 1 FROM c d", '"from"'),
        ("MOVE 1 FROM 2", '"2"'),
        ("CLOSE", "EOF"),
        ("CLOSE a b", '"b"'),
        ("DECLARE", "EOF"),
        ("DECLARE c", "EOF"),
        ("DECLARE c FOR SELECT 1", '"for"'),
        ("DECLARE c NO CURSOR FOR SELECT 1", '"cursor"'),
        ("DECLARE c CURSOR WITH FOR SELECT 1", '"for"'),
        ("DECLARE c CURSOR FOR", "EOF"),
        ("DECLARE c CURSOR FOR INSERT INTO t VALUES (1)", '"insert"'),
        ("DECLARE c CURSOR FOR SELECT FROM", None),
        ('DECLARE "" CURSOR FOR SELECT 1', '""""'),
        ("FETCH 1 FROM c + 1", '"+"'),
    ],
)
def test_what_does_not_read_is_a_syntax_error_at_its_word(text: str, near: str | None) -> None:
    with pytest.raises(SQLError) as raised:
        parse(text)
    assert raised.value.code == "42601"
    if near is not None:
        assert f"at or near {near}" in raised.value.message
        assert raised.value.position is not None


@pytest.mark.parametrize(
    "text", ["FETCH 99999999999999999999 c", "MOVE ABSOLUTE -9223372036854775809 c"]
)
def test_a_row_count_beyond_int64_is_out_of_range_as_in_cockroachdb(text: str) -> None:
    with pytest.raises(SQLError) as raised:
        parse(text)
    assert raised.value.code == "22003"
    number = text.split()[-2]
    assert raised.value.message == (
        f'at or near "{number}": syntax error: numeric constant out of int64 range'
    )
    assert raised.value.position == text.index(number) + 1


def test_the_int64_bounds_are_row_counts() -> None:
    assert parse_fetch("FETCH -9223372036854775808 c").count == -(2**63)
    assert parse_fetch("FETCH ABSOLUTE 9223372036854775807 c").count == 2**63 - 1


_WORDS = st.sampled_from(
    [
        "DECLARE", "FETCH", "MOVE", "CLOSE", "CURSOR", "FOR", "WITH", "WITHOUT", "HOLD",
        "NO", "SCROLL", "BINARY", "INSENSITIVE", "NEXT", "PRIOR", "FIRST", "LAST",
        "ABSOLUTE", "RELATIVE", "ALL", "FORWARD", "BACKWARD", "FROM", "IN", "c", '"C"',
        "1", "-3", "0", "SELECT", "1", ";", "(", ")", "'x'", "$1", "+",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    verb=st.sampled_from(["DECLARE", "FETCH", "MOVE", "CLOSE"]),
    words=st.lists(_WORDS, max_size=10),
)
def test_any_sequence_of_words_parses_or_is_a_syntax_error(verb: str, words: list[str]) -> None:
    text = " ".join([verb, *words])
    try:
        statements = parse(text)
    except SQLError as exc:
        assert exc.code in ("42601", "22P02", "0A000", "42P01"), exc
        return
    assert statements
    first = statements[0]
    assert isinstance(first, s.DeclareCursor | s.FetchCursor | s.CloseCursor)
    if isinstance(first, s.FetchCursor):
        assert first.move == (verb == "MOVE")


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_after_the_verb_is_read_or_refused_with_42601(text: str) -> None:
    for verb in ("FETCH ", "MOVE ", "CLOSE ", "DECLARE c CURSOR "):
        try:
            parse(verb + text)
        except SQLError as exc:
            assert exc.code.startswith(("42", "22", "0A")), exc
