"""CockroachDB's aggregates that are another one under a name of their own, named for
it in the result: every(b) is bool_and(b), concat_agg(s) joins the values with nothing
between them (STRING or BYTES, in its ORDER BY's order), count_rows() counts the rows;
each works as a window function too."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, s STRING, b BOOL)")
    db.sql("INSERT INTO t VALUES (1, 'a', true), (2, 'b', NULL), (3, 'c', false)")
    return db


def test_every_is_bool_and(t: DB) -> None:
    result = t.sql("SELECT every(b) FROM t")
    assert (result.columns, result.rows) == (("every",), [(False,)])
    assert t.sql("SELECT every(b) FROM t WHERE k < 3").rows == [(True,)]  # NULLs skipped
    assert t.sql("SELECT every(b) FROM t WHERE false").rows == [(None,)]


def test_concat_agg_joins_strings_and_bytes_in_order(t: DB) -> None:
    result = t.sql("SELECT concat_agg(s ORDER BY k DESC) FROM t")
    assert (result.columns, result.rows) == (("concat_agg",), [("cba",)])
    assert t.sql("SELECT concat_agg(s::BYTES ORDER BY k) FROM t").rows == [(b"abc",)]
    assert t.sql("SELECT concat_agg(s) OVER (ORDER BY k) FROM t").rows == [
        ("a",),
        ("ab",),
        ("abc",),
    ]


def test_count_rows_counts_every_row(t: DB) -> None:
    result = t.sql("SELECT count_rows() FROM generate_series(1, 100)")
    assert (result.columns, result.rows) == (("count_rows",), [(100,)])
    assert t.sql("SELECT count_rows() OVER () FROM t").rows == [(3,), (3,), (3,)]


@pytest.mark.parametrize(
    "call", ["every(k)", "count_rows(1)", "concat_agg(s, s)", "every(b, b)", "concat_agg(NULL)"]
)
def test_wrong_arguments_are_refused(t: DB, call: str) -> None:
    with pytest.raises(SQLError) as raised:
        t.sql(f"SELECT {call} FROM t")
    assert raised.value.code in ("42883", "42725")
