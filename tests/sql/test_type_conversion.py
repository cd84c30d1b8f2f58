"""Which kind of change an ALTER COLUMN ... TYPE is (:mod:`feedkv.sql.type_conversion`)."""

from __future__ import annotations

import pytest

from feedkv.sql.type_conversion import Conversion, automatic, conversion
from feedkv.sql.types import ColumnType, Kind

INT8, INT4, INT2 = (
    ColumnType(Kind.INT),
    ColumnType(Kind.INT, width=32),
    ColumnType(Kind.INT, width=16),
)
STRING, STRING5 = ColumnType(Kind.STRING), ColumnType(Kind.STRING, width=5)
DECIMAL, DECIMAL_10_2 = ColumnType(Kind.DECIMAL), ColumnType(Kind.DECIMAL, precision=10, scale=2)
DECIMAL_10_1 = ColumnType(Kind.DECIMAL, precision=10, scale=1)
CHAR5, CHAR9 = ColumnType(Kind.STRING, width=5, fixed=True), ColumnType(Kind.STRING, 9, fixed=True)
FLOAT8, FLOAT4 = ColumnType(Kind.FLOAT), ColumnType(Kind.FLOAT, width=32)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (INT8, INT8, Conversion.TRIVIAL),
        (INT4, INT8, Conversion.TRIVIAL),
        (INT2, INT4, Conversion.TRIVIAL),
        (INT8, INT4, Conversion.VALIDATE),
        (INT4, INT2, Conversion.VALIDATE),
        (STRING5, STRING, Conversion.TRIVIAL),
        (STRING, STRING5, Conversion.VALIDATE),
        (DECIMAL_10_2, DECIMAL, Conversion.TRIVIAL),
        (DECIMAL_10_2, DECIMAL_10_1, Conversion.REWRITE),
        (INT8, STRING, Conversion.REWRITE),
        (STRING, INT8, Conversion.REWRITE),
        # to CHAR(n), stored values lose their trailing spaces
        (STRING, CHAR9, Conversion.REWRITE),
        (CHAR5, CHAR9, Conversion.TRIVIAL),
        (CHAR5, STRING, Conversion.TRIVIAL),
        # FLOAT4 values are rounded to float32
        (FLOAT8, FLOAT4, Conversion.REWRITE),
    ],
)
def test_each_change_is_of_its_kind(old: ColumnType, new: ColumnType, expected: Conversion) -> None:
    assert conversion(old, new) is expected


def test_using_always_rewrites() -> None:
    assert conversion(INT8, INT8, using=True) is Conversion.REWRITE


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (Kind.INT, Kind.DECIMAL, True),
        (Kind.FLOAT, Kind.INT, True),
        (Kind.BOOL, Kind.STRING, True),
        (Kind.DATE, Kind.TIMESTAMPTZ, True),
        (Kind.STRING, Kind.INT, False),
        (Kind.INT, Kind.BOOL, False),
        (Kind.JSONB, Kind.INT, False),
    ],
)
def test_only_assignment_casts_go_without_using(old: Kind, new: Kind, expected: bool) -> None:
    assert automatic(old, new) is expected
