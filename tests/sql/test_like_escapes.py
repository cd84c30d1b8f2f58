"""LIKE's escape character as PostgreSQL and CockroachDB read it: backslash by default,
another with ESCAPE, none with ESCAPE ''; a pattern that ends with the escape character
is an error (22025), where feedkv matched it as if the escape were a literal."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (r"'a%' LIKE 'a\%'", True),
        (r"'abc' LIKE 'a\%'", False),
        (r"'a_c' LIKE 'a\_c'", True),
        (r"'abc' LIKE 'a\_c'", False),
        (r"'a\c' LIKE 'a\\c'", True),
        ("'a%c' LIKE 'a+%c' ESCAPE '+'", True),
        ("'abc' LIKE 'a+%c' ESCAPE '+'", False),
        (r"'a\bc' LIKE 'a\%' ESCAPE ''", True),  # no escape: \ is itself, % any text
        ("'ab' LIKE 'a_' ESCAPE ''", True),
    ],
)
def test_like_escapes(session: Session, condition: str, expected: bool) -> None:
    assert session.execute(f"SELECT {condition}").rows == [(expected,)]


@pytest.mark.parametrize("condition", [r"'a\' LIKE 'a\'", "'a+' LIKE 'a+' ESCAPE '+'"])
def test_a_pattern_ending_with_its_escape_character_is_an_error(
    session: Session, condition: str
) -> None:
    with pytest.raises(SQLError) as caught:
        session.execute(f"SELECT {condition}")
    assert caught.value.code == "22025"
