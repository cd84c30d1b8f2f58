"""What a stored expression may call (feedkv.sql.volatility): immutable functions only,
with CockroachDB's 0A000 message naming the place."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.sql.describe import type_of
from feedkv.sql.expr import Scope
from feedkv.sql.parser import parse_expression
from feedkv.sql.types import ColumnType, Kind
from feedkv.sql.volatility import (
    TypeOf,
    refuse_non_immutable,
    refuse_volatile,
    refuse_zoned_casts,
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("now() > '2020-01-01'", "context-dependent operators are not allowed in index predicate"),
        ("current_user = 'root'", "context-dependent operators are not allowed in index predicate"),
        ("a > 0 AND random() > 0.5", "volatile functions are not allowed in index predicate"),
        ("a = nextval('s')", "volatile functions are not allowed in index predicate"),
        # sqlglot's Uuid node, not a function name
        ("gen_random_uuid() IS NOT NULL", "volatile functions are not allowed in index predicate"),
        ("abs(a) > extract(year FROM now())", "context-dependent operators are not allowed"),
    ],
)
def test_a_stable_or_volatile_call_is_refused(text: str, message: str) -> None:
    with pytest.raises(SQLError) as raised:
        refuse_non_immutable(parse_expression(text), "index predicate")
    assert raised.value.code == "0A000"
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [("random() > 0.5", "random()"), ("uuid_generate_v4() = u", "uuid_generate_v4()")],
)
def test_refuse_volatile_names_the_call_and_lets_stable_ones_pass(text: str, named: str) -> None:
    with pytest.raises(SQLError) as raised:
        refuse_volatile(parse_expression(text), "a changefeed query")
    assert (
        str(raised.value.message)
        == f"volatile functions are not allowed in a changefeed query: {named}"
    )
    assert refuse_volatile(parse_expression("now() > '2020-01-01'"), "a changefeed query") is None


@pytest.mark.parametrize("text", ["a > 0", "lower(s) = 'x' AND abs(a) < 3", "s || 'x' = 'yx'"])
def test_an_immutable_expression_passes(text: str) -> None:
    assert refuse_non_immutable(parse_expression(text), "index predicate") is None


def _types() -> TypeOf:
    scope = Scope(table_name="t")
    scope.add(["", "t"], "ts", 0, ColumnType(Kind.TIMESTAMPTZ))
    scope.add(["", "t"], "s", 1, ColumnType(Kind.STRING))
    scope.add(["", "t"], "n", 2, ColumnType(Kind.INT))
    return lambda node: type_of(node, scope)


@pytest.mark.parametrize(
    "text", ["ts::STRING > '2020'", "s::TIMESTAMPTZ > ts", "ts::DATE > '2020-01-01'"]
)
def test_a_cast_that_reads_the_time_zone_is_refused(text: str) -> None:
    with pytest.raises(SQLError) as raised:
        refuse_zoned_casts(parse_expression(text), _types(), "computed column")
    assert raised.value.code == "0A000"
    assert "depends on the session's time zone" in str(raised.value)


@pytest.mark.parametrize("text", ["n::STRING = '1'", "ts + INTERVAL '1 day' > ts"])
def test_a_cast_free_of_the_time_zone_passes(text: str) -> None:
    assert refuse_zoned_casts(parse_expression(text), _types(), "computed column") is None
