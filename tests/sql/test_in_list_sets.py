"""``x IN (values...)`` and ``x = ANY (array)``, as ORMs write them, looked up in a hash
set made once per run: the answers are SQL's three-valued ones, as a comparison with
each element gives them (NULLs, duplicates, DECIMAL scales, FLOAT zeros and NaN, a
string read as the column's type, placeholders that change between runs)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, d DECIMAL, f FLOAT, s STRING)")
    db.sql(
        "INSERT INTO t VALUES (1, 1.00, 0.1, 'a'), (2, 2.5, -0.0, 'b'),"
        " (3, NULL, 'NaN', NULL), (4, 4, 4, 'd')"
    )
    return db


def _keys(db: DB, where: str, *params: object) -> list[int]:
    return [k for (k,) in db.sql(f"SELECT k FROM t WHERE {where} ORDER BY k", *params).rows]


def test_a_null_element_makes_a_miss_null_not_false(t: DB) -> None:
    rows = t.sql("SELECT k, k IN (1, NULL), k NOT IN (1, NULL) FROM t ORDER BY k").rows
    assert rows == [(1, True, False), (2, None, None), (3, None, None), (4, None, None)]
    assert _keys(t, "k NOT IN (1, NULL)") == []


def test_a_null_value_is_null_whatever_the_list(t: DB) -> None:
    rows = t.sql("SELECT k, d IN (1, 2.5), d NOT IN (7) FROM t ORDER BY k").rows
    assert rows == [(1, True, True), (2, True, True), (3, None, None), (4, False, True)]


def test_duplicates_in_the_list_count_once(t: DB) -> None:
    assert _keys(t, "k IN (2, 2, 4, 4, 2)") == [2, 4]
    assert _keys(t, "k NOT IN (2, 2, 4)") == [1, 3]
    assert _keys(t, "k = ANY (ARRAY[4, 4, 1])") == [1, 4]


def test_decimals_equal_whatever_their_scale(t: DB) -> None:
    assert _keys(t, "d IN (1, 2.50, 4.000)") == [1, 2, 4]
    assert _keys(t, "d = ANY (ARRAY[1.0, 2.5])") == [1, 2]
    assert _keys(t, "k IN (1.0, 2.00)") == [1, 2]


def test_a_decimal_equals_a_float_of_its_digits(t: DB) -> None:
    assert _keys(t, "d IN (2.5::FLOAT8, 4::FLOAT8)") == [2, 4]
    assert _keys(t, "d = ANY (ARRAY[2.5::FLOAT8, 1::FLOAT8])") == [1, 2]


def test_floats_zero_signs_and_nan(t: DB) -> None:
    assert _keys(t, "f IN (0.1, 0)") == [1, 2]
    assert _keys(t, "f IN ('NaN'::FLOAT)") == [3]
    assert _keys(t, "f = ANY (ARRAY[0.1, 'NaN'::FLOAT])") == [1, 3]
    assert _keys(t, "f NOT IN (-0.0, 4)") == [1, 3]


def test_strings_and_a_string_read_as_the_columns_type(t: DB) -> None:
    assert _keys(t, "s IN ('a', 'd', 'zz')") == [1, 4]
    assert _keys(t, "k IN ('1', '4')") == [1, 4]
    assert _keys(t, "k = ANY ('{2,3}')") == [2, 3]
    assert _keys(t, "s = ANY ('{b,d}')") == [2, 4]


def test_values_of_another_type_are_refused_as_by_equality(t: DB) -> None:
    with pytest.raises(SQLError) as caught:
        t.sql("SELECT k FROM t WHERE s IN (1, 2)")
    assert caught.value.code == "42883"
    with pytest.raises(SQLError) as caught:
        t.sql("SELECT k FROM t WHERE k IN ('x')")
    assert caught.value.code == "22P02"


def test_placeholders_are_read_anew_each_run(t: DB) -> None:
    assert _keys(t, "k IN ($1, $2)", 1, 2) == [1, 2]
    assert _keys(t, "k IN ($1, $2)", 3, 4) == [3, 4]
    assert _keys(t, "k = ANY ($1)", "{1,4}") == [1, 4]
    assert _keys(t, "k = ANY ($1)", "{2}") == [2]


def test_any_of_an_empty_or_null_array(t: DB) -> None:
    assert t.sql("SELECT k, d = ANY ('{}'), d = ANY (NULL::DECIMAL[]) FROM t WHERE k = 3").rows == [
        (3, False, None)
    ]
    assert t.sql("SELECT k = ANY (ARRAY[1, NULL]) FROM t ORDER BY k").rows == [
        (True,),
        (None,),
        (None,),
        (None,),
    ]


def test_a_list_naming_the_row_is_read_for_each_row(t: DB) -> None:
    assert _keys(t, "k IN (1, d, f)") == [1, 4]
    assert _keys(t, "4 = ANY (ARRAY[k, 0])") == [4]


def test_a_correlated_subquery_list_reads_its_own_column_type(t: DB) -> None:
    t.sql("CREATE TABLE u (id INT PRIMARY KEY, k STRING)")
    t.sql("INSERT INTO u VALUES (1, '1'), (2, '01'), (3, '4')")
    rows = t.sql(
        "SELECT k, (SELECT count(*) FROM u WHERE u.id = t.k AND k IN ('1', '4')) FROM t"
        " WHERE k IN ('1', '4') OR k = 2 ORDER BY k"
    ).rows
    assert rows == [(1, 1), (2, 0), (4, 0)]
