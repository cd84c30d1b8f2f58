"""``assign`` answers a value already of its column's type (an ``int`` into an INT8, a
``str`` into a STRING of no width) itself, without ``coerce``: it gives what ``coerce``
gives, and the checks of the types around them still hold."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv.errors import SQLError
from feedkv.sql.types import INT64_MAX, INT64_MIN, ColumnType, Kind, assign, coerce

INT8 = ColumnType(Kind.INT)
STRING = ColumnType(Kind.STRING)


@pytest.mark.parametrize(
    ("value", "ctype"),
    [
        (0, INT8),
        (INT64_MIN, INT8),
        (INT64_MAX, INT8),
        ("", STRING),
        ("  spaced  ", STRING),
        (40000, ColumnType(Kind.INT, width=32)),
        ("ab ", ColumnType(Kind.STRING, width=3, fixed=True)),
        ("abc", ColumnType(Kind.STRING, width=3)),
        ("12", INT8),
        (2.5, INT8),
    ],
)
def test_assign_gives_what_coerce_gives(value: Any, ctype: ColumnType) -> None:
    assigned, expected = assign(value, ctype, "c"), coerce(value, ctype, "c")
    assert (assigned, type(assigned)) == (expected, type(expected))


@pytest.mark.parametrize(
    ("value", "ctype", "code"),
    [
        (INT64_MAX + 1, INT8, "22003"),
        (INT64_MIN - 1, INT8, "22003"),
        (40000, ColumnType(Kind.INT, width=16), "22003"),
        (True, INT8, "42804"),
        ("abcd", ColumnType(Kind.STRING, width=3), "22001"),
        (b"bytes", STRING, "42804"),
    ],
)
def test_assign_refuses_what_the_column_cannot_hold(
    value: Any, ctype: ColumnType, code: str
) -> None:
    with pytest.raises(SQLError) as raised:
        assign(value, ctype, "c")
    assert raised.value.code == code


def test_a_number_into_a_string_is_its_text() -> None:
    assert assign(7, STRING, "c") == "7"
    assert assign(1.5, STRING, "c") == "1.5"
