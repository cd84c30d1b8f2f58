"""The built-in scalar functions' edge cases (:mod:`feedkv.sql.scalar_functions`),
each as PostgreSQL answers it."""

from __future__ import annotations

import decimal
import math
from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.scalar_functions import FUNCTIONS, concat, concat_ws

D = decimal.Decimal


def call(name: str, *args: Any) -> Any:
    return FUNCTIONS[name][0](*args)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("round", (D("2.5"),), D("3")),  # DECIMAL: half away from zero
        ("round", (D("-2.5"),), D("-3")),
        ("round", (2.5,), 2.0),  # FLOAT: half to even
        ("round", (D("1.2345"), 2), D("1.23")),
        ("round", (D("15"), -1), D("20")),
        ("floor", (5,), 5.0),  # INT is taken as FLOAT
        ("trunc", (D("-2.7"),), D("-2")),
        ("substring", ("hello", 0, 2), "h"),
        ("substring", ("hello", -5, 2), ""),
        ("substring", ("hello", 3), "llo"),
        ("left", ("hello", -2), "hel"),
        ("right", ("hello", -2), "llo"),
        ("split_part", ("a,b,c", ",", -1), "c"),
        ("split_part", ("a,b,c", ",", 4), ""),
        ("strpos", ("hello", "x"), 0),
        ("lpad", ("hello", 3), "hel"),
        ("rpad", ("7", 3, "ab"), "7ab"),
        ("repeat", ("ab", -1), ""),
        ("initcap", ("hello wORLD-x",), "Hello World-X"),
        ("octet_length", ("é",), 2),
    ],
)
def test_each_answers_as_postgresql(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *args) == expected


def test_a_decimal_rounded_to_tens_has_no_exponent() -> None:
    assert str(call("round", D("15"), -1)) == "20"


def test_a_float_rounded_to_zero_keeps_its_sign() -> None:
    assert math.copysign(1.0, call("ceil", -0.5)) == -1.0
    assert math.copysign(1.0, call("trunc", -0.5)) == -1.0


def test_concat_skips_nulls_and_concat_ws_needs_its_separator() -> None:
    assert concat(["a", None, 1], str) == "a1"
    assert concat_ws(["-", "a", None, "b"], str) == "a-b"
    assert concat_ws([None, "a"], str) is None


@pytest.mark.parametrize(
    ("name", "args", "code"),
    [
        ("sqrt", (-1.0,), "2201F"),
        ("power", (0.0, -1.0), "2201F"),
        ("power", (-8.0, 0.5), "2201F"),
        ("substring", ("hello", 1, -1), "22011"),
        ("split_part", ("a", ",", 0), "22023"),
    ],
)
def test_bad_arguments_fail_with_their_sqlstate(
    name: str, args: tuple[Any, ...], code: str
) -> None:
    with pytest.raises(SQLError) as caught:
        call(name, *args)
    assert caught.value.code == code


def test_a_value_of_another_type_is_no_signature() -> None:
    with pytest.raises(TypeError):
        call("round", "a")
    with pytest.raises(TypeError):
        call("reverse", 5)


def test_result_columns_are_named_as_postgresql_names_them(db: DB) -> None:
    result = db.sql(
        "SELECT CASE WHEN true THEN 1 END, trim(' a '), ltrim('a'), lpad('a', 2), "
        "power(2, 2), substring('abc', 1, 1), nullif(1, 2), greatest(1, 2), concat('a'), "
        "date_trunc('month', now())"
    )
    assert result.columns == (
        "case",
        "btrim",
        "ltrim",
        "lpad",
        "power",
        "substring",
        "nullif",
        "greatest",
        "concat",
        "date_trunc",
    )
