"""CHAR(n) as CockroachDB has it: a bare CHAR is CHAR(1); trailing spaces of a CHAR(n)
value are insignificant and not kept (``length``, ``=`` and ``||`` see the value
without them); a longer value is an error in a column (22001) and truncated by a cast;
a client is sent the value padded with spaces to n (see test_fixed_char_wire)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    session = db.session()
    session.execute("CREATE TABLE ch (k INT PRIMARY KEY, one CHAR, three CHAR(3), v VARCHAR(3))")
    return session


def test_a_bare_char_column_holds_one_character(session: Session) -> None:
    session.execute("INSERT INTO ch (k, one) VALUES (1, 'x')")
    with pytest.raises(SQLError) as caught:
        session.execute("INSERT INTO ch (k, one) VALUES (2, 'xy')")
    assert caught.value.code == "22001"
    assert "value too long for type CHAR" in str(caught.value)


def test_a_cast_to_char_truncates_to_its_length(session: Session) -> None:
    [row] = session.execute("SELECT 'ab'::CHAR, 'abcd'::CHAR(2), 'abcd'::CHARACTER(3)").rows
    assert row == ("a", "ab", "abc")


def test_trailing_spaces_of_a_char_value_are_not_kept(session: Session) -> None:
    session.execute(
        "INSERT INTO ch (k, three, v) VALUES (1, '', ''), (2, ' ', ' '), (3, 'a  ', 'a  '),"
        " (4, ' b ', ' b '), (5, 'abc', 'abc')"
    )
    rows = session.execute("SELECT k, length(three), length(v) FROM ch ORDER BY k").rows
    assert rows == [(1, 0, 0), (2, 0, 1), (3, 1, 3), (4, 2, 3), (5, 3, 3)]
    assert session.execute("SELECT k FROM ch WHERE three = 'a' ORDER BY k").rows == [(3,)]
    # a string constant compared with a CHAR(n) is a CHAR(n): its trailing spaces too
    assert session.execute("SELECT k FROM ch WHERE three = 'a  '").rows == [(3,)]
    assert session.execute("SELECT k FROM ch WHERE three IN ('a ', 'x')").rows == [(3,)]
    assert session.execute("SELECT k FROM ch WHERE v = 'a'").rows == []
    assert session.execute("SELECT three || '|' FROM ch WHERE k = 4").rows == [(" b|",)]


def test_trailing_spaces_past_the_length_fit(session: Session) -> None:
    session.execute("INSERT INTO ch (k, three) VALUES (1, 'abc    ')")
    assert session.execute("SELECT length(three) FROM ch").rows == [(3,)]


def test_a_char_primary_key_reads_back_without_its_spaces(db: DB) -> None:
    session = db.session()
    session.execute("CREATE TABLE chk (c CHAR(4) PRIMARY KEY, v INT)")
    session.execute("INSERT INTO chk VALUES ('ab  ', 1)")
    with pytest.raises(SQLError) as caught:
        session.execute("INSERT INTO chk VALUES ('ab', 2)")
    assert caught.value.code == "23505"
    assert session.execute("SELECT length(c), v FROM chk WHERE c = 'ab'").rows == [(2, 1)]


def test_the_column_type_reads_char(session: Session) -> None:
    [(_name, create)] = session.execute("SHOW CREATE TABLE ch").rows
    assert "one CHAR NULL," in create and "three CHAR(3) NULL," in create
