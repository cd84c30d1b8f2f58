"""feedkv.sql.jsonb_functions: documents rewritten without changing the argument."""

from __future__ import annotations

import decimal

import pytest

from feedkv.errors import SQLError
from feedkv.sql import jsonb_functions as jf
from feedkv.sql.jsonb import JSON_NULL


def test_set_and_insert_leave_their_argument_unchanged() -> None:
    target = {"a": [1, 2]}
    assert jf.jsonb_set(target, "{a,0}", 9) == {"a": [9, 2]}
    assert jf.jsonb_insert(target, "{a,0}", 9, True) == {"a": [1, 9, 2]}
    assert target == {"a": [1, 2]}


def test_a_json_null_value_is_set_as_null() -> None:
    assert jf.jsonb_set({"a": 1}, "{a}", JSON_NULL) == {"a": None}
    assert jf.strip_nulls(jf.jsonb_set({"a": 1}, "{a}", JSON_NULL)) == {}


def test_a_path_through_a_scalar_leads_nowhere_but_a_scalar_target_fails() -> None:
    assert jf.jsonb_set({"a": 1}, "{a,b}", 2) == {"a": 1}
    with pytest.raises(SQLError) as caught:
        jf.jsonb_set(5, "{a}", 2)
    assert caught.value.code == "22023"


def test_pretty_keeps_a_decimal_digits_and_sorts_keys() -> None:
    pretty = jf.jsonb_pretty({"b": decimal.Decimal("1.50"), "a": []})
    assert pretty == '{\n    "a": [],\n    "b": 1.50\n}'


def test_object_keys_of_a_non_object_name_what_it_got() -> None:
    assert jf.object_keys({"b": 1, "a": 2}) == ["a", "b"]
    with pytest.raises(SQLError, match="on an array"):
        jf.object_keys([1])
