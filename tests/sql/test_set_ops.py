"""set_ops: the set algebra on two results, without a store."""

from __future__ import annotations

import decimal

import pytest

from feedkv.errors import SQLError
from feedkv.sql.set_ops import SetResult, combine, union_all
from feedkv.sql.types import ColumnType, Kind

INT = ColumnType(Kind.INT)
STRING = ColumnType(Kind.STRING)
DECIMAL = ColumnType(Kind.DECIMAL)


def side(*rows: tuple[object, ...], types: tuple[ColumnType | None, ...] = (INT,)) -> SetResult:
    return SetResult(tuple(f"c{i}" for i in range(len(types))), types, list(rows))


@pytest.mark.parametrize(
    ("op", "all_", "expected"),
    [
        ("union", False, [(1,), (None,), (2,), (3,)]),
        ("union", True, [(1,), (1,), (None,), (None,), (2,), (1,), (None,), (3,)]),
        ("intersect", False, [(1,), (None,)]),
        ("intersect", True, [(1,), (None,)]),
        ("except", False, [(2,)]),
        ("except", True, [(1,), (None,), (2,)]),
    ],
)
def test_set_operations_treat_nulls_as_equal_and_count_copies_with_all(
    op: str, all_: bool, expected: list[tuple[object, ...]]
) -> None:
    left = side((1,), (1,), (None,), (None,), (2,))
    right = side((1,), (None,), (3,))
    assert combine(op, all_, left, right).rows == expected


def test_widths_must_match() -> None:
    with pytest.raises(SQLError) as caught:
        combine("union", False, side((1,)), side((1, 2), types=(INT, INT)))
    assert caught.value.code == "42601"


def test_types_must_match_even_without_rows() -> None:
    with pytest.raises(SQLError) as caught:
        combine("except", False, side(), side(types=(STRING,)))
    assert caught.value.code == "42804"
    assert "EXCEPT types int and string cannot be matched" in caught.value.message


def test_int_and_decimal_make_a_decimal_column() -> None:
    out = combine("union", True, side((1,)), side((decimal.Decimal("1.5"),), types=(DECIMAL,)))
    assert out.types == (DECIMAL,)
    assert out.rows == [(decimal.Decimal(1),), (decimal.Decimal("1.5"),)]
    assert all(isinstance(v, decimal.Decimal) for (v,) in out.rows)


def test_a_column_of_nulls_matches_any_type() -> None:
    out = combine("union", False, side((None,), types=(None,)), side(("x",), types=(None,)))
    assert out.rows == [(None,), ("x",)]


def test_types_unknown_from_the_tree_come_from_the_values() -> None:
    with pytest.raises(SQLError) as caught:
        union_all("VALUES", [side((1,), types=(None,)), side(("x",), types=(None,))])
    assert "VALUES types int and string" in caught.value.message
