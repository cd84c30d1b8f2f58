"""feedkv.sql.set_functions: the rows of generate_series and unnest from values."""

from __future__ import annotations

import pytest
from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.arrays import Array
from feedkv.sql.set_functions import rows_from_of, series_of, unnest_of
from feedkv.sql.types import ColumnType, Kind

_ARG = exp.column("a")


def test_unnest_pads_the_shorter_array_and_numbers_rows() -> None:
    source = st.Unnest((_ARG, _ARG), "u", ("x", "y"), "n")
    ints = Array((1, 2), ColumnType(Kind.INT))
    rows = unnest_of(source, [ints, Array(("a",), ColumnType(Kind.STRING))], [None, None]).rows
    assert rows == [(1, "a", 1), (2, None, 2)]


def test_unnest_of_null_is_no_rows_and_of_a_scalar_unknown_signature() -> None:
    source = st.Unnest((_ARG,), "u", ("u",), None)
    assert unnest_of(source, [None], [None]).rows == []
    with pytest.raises(SQLError) as caught:
        unnest_of(source, [5], [None])
    assert caught.value.code == "42883"


def test_series_counts_down_with_a_negative_step_and_refuses_a_zero_one() -> None:
    source = st.Series((_ARG, _ARG, _ARG), "g", "g", None)
    assert series_of(source, [3, 1, -1], _never).rows == [(3,), (2,), (1,)]
    assert series_of(source, [1, None, 1], _never).rows == []
    with pytest.raises(SQLError, match="step cannot be 0"):
        series_of(source, [1, 2, 0], _never)


def test_rows_from_zips_the_functions_rows_padding_each_by_its_own_width() -> None:
    series = st.Series((_ARG, _ARG), "g", "g", None)
    unnest = st.Unnest((_ARG, _ARG), "u", ("x", "y"), None)
    source = st.RowsFrom((series, unnest), "r", ("n",))
    letters = Array(("a", "b", "c"), ColumnType(Kind.STRING))
    functions = [
        series_of(series, [1, 2], _never),
        unnest_of(unnest, [letters, None], [None, None]),
    ]
    relation = rows_from_of(source, functions)
    assert [column.name for column in relation.columns] == ["n", "x", "y"]
    assert relation.rows == [(1, "a", None), (2, "b", None), (None, "c", None)]


def _never() -> None:
    """An interrupt check of a statement never cancelled."""
