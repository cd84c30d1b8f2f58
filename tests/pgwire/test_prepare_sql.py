"""Reading SQL's PREPARE and EXECUTE (pure): names fold as PostgreSQL's, the parameter
types split at top-level commas, malformed ones are syntax errors, other statements
(PREPARE TRANSACTION too) are left alone."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.pgwire.prepare_sql import (
    ExecuteSQL,
    PrepareSQL,
    param_type,
    parse_execute,
    parse_prepare,
)
from feedkv.sql.types import Kind


def test_prepare_reads_its_name_types_and_statement() -> None:
    assert parse_prepare("PREPARE Q (INT8, numeric(10, 2), text[]) AS SELECT $1, $2;") == (
        PrepareSQL("q", ("INT8", "numeric(10, 2)", "text[]"), "SELECT $1, $2")
    )
    assert parse_prepare('prepare "Mixed"\nas\nINSERT INTO t VALUES (1)') == PrepareSQL(
        "Mixed", (), "INSERT INTO t VALUES (1)"
    )


def test_execute_reads_its_name_and_values() -> None:
    assert parse_execute("EXECUTE q (1, 'a, b', f(2))") == ExecuteSQL("q", "1, 'a, b', f(2)")
    assert parse_execute('execute "Q";') == ExecuteSQL("Q", "")


@pytest.mark.parametrize(
    "text", ["SELECT 1", "PREPARE TRANSACTION 'x'", "EXECUTED", "  -- PREPARE\nSELECT 1"]
)
def test_other_statements_are_left_alone(text: str) -> None:
    assert parse_prepare(text) is None and parse_execute(text) is None


@pytest.mark.parametrize("text", ["PREPARE q", "PREPARE q AS", "PREPARE q (int,) AS SELECT 1"])
def test_a_malformed_prepare_is_a_syntax_error(text: str) -> None:
    with pytest.raises(SQLError) as caught:
        parse_prepare(text)
    assert caught.value.code == "42601"


def test_parameter_type_names() -> None:
    assert param_type("int8").kind is Kind.INT
    numeric = param_type("numeric(10,2)")
    assert (numeric.kind, numeric.precision, numeric.scale) == (Kind.DECIMAL, 10, 2)
    assert param_type("text[]").kind is Kind.ARRAY
    assert param_type("mood").kind is Kind.ENUM  # resolved by the connection
