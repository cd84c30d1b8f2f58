"""DECIMAL's special values as CockroachDB has them: ``NaN``, ``Infinity`` and
``-Infinity`` are values a DECIMAL column holds (also in a key or an index); every NaN is
one quiet, unsigned NaN, equal to itself, ordered below -Infinity; ``x IS NAN`` and
``isnan(x)``. feedkv
refused them ("only finite numbers"), so a file of inserts failed and later reads
answered from a table missing rows."""

from __future__ import annotations

import decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError

NAN = decimal.Decimal("NaN")
INF = decimal.Decimal("Infinity")


def _texts(rows: list[tuple[object, ...]]) -> list[tuple[str, ...]]:
    return [tuple(str(value) for value in row) for row in rows]


def test_every_nan_spelling_is_one_quiet_nan(db: DB) -> None:
    [row] = db.sql(
        "SELECT 'NaN'::DECIMAL, '-NaN'::DECIMAL, 'sNaN'::DECIMAL, '-sNaN'::DECIMAL, "
        "'inf'::DECIMAL, '-Infinity'::DECIMAL, 'NaN'::FLOAT::DECIMAL"
    ).rows
    assert _texts([row]) == [("NaN", "NaN", "NaN", "NaN", "Infinity", "-Infinity", "NaN")]


def test_a_key_of_specials_orders_nan_first_and_keeps_scales(db: DB) -> None:
    db.sql("CREATE TABLE t (d DECIMAL, v DECIMAL(3, 1), PRIMARY KEY (d, v))")
    db.sql(
        "INSERT INTO t VALUES (1.00, 1.00), ('NaN', 'NaN'), ('Inf', 'Inf'), "
        "('-Inf', '-Inf'), ('-0.0000', '-0.0000'), (3, 3)"
    )
    assert _texts(db.sql("SELECT d, v FROM t ORDER BY d").rows) == [
        ("NaN", "NaN"),
        ("-Infinity", "-Infinity"),
        ("-0.0000", "-0.0"),
        ("1.00", "1.0"),
        ("3", "3.0"),
        ("Infinity", "Infinity"),
    ]
    assert _texts(db.sql("SELECT d FROM t ORDER BY d DESC").rows)[0] == ("Infinity",)


@pytest.mark.parametrize("duplicate", ["('-NaN', '-NaN')", "('sNaN', 'NaN')", "(0, 0)"])
def test_nans_and_zeros_are_one_key(db: DB, duplicate: str) -> None:
    db.sql("CREATE TABLE t (d DECIMAL, v DECIMAL(3, 1), PRIMARY KEY (d, v))")
    db.sql("INSERT INTO t VALUES ('NaN', 'NaN'), ('-0.00', '-0.0')")
    with pytest.raises(SQLError) as caught:
        db.sql(f"INSERT INTO t VALUES {duplicate}")
    assert caught.value.code == "23505"


def test_an_index_of_specials_orders_and_finds_them(db: DB) -> None:
    db.sql("CREATE TABLE s (k INT PRIMARY KEY, d DECIMAL, INDEX idx (d))")
    db.sql(
        "INSERT INTO s VALUES (1, NULL), (2, 'NaN'), (3, '-NaN'), (4, 'Inf'), (5, '-Inf'), "
        "(6, 0), (7, 1), (8, -1), (9, '-0.00')"
    )
    ascending = [str(d) for (d,) in db.sql("SELECT d FROM s@idx ORDER BY d, k").rows]
    assert ascending == ["None", "NaN", "NaN", "-Infinity", "-1", "0", "-0.00", "1", "Infinity"]
    descending = [str(d) for (d,) in db.sql("SELECT d FROM s ORDER BY d DESC, k").rows]
    assert descending == ["Infinity", "1", "0", "-0.00", "-1", "-Infinity", "NaN", "NaN", "None"]
    zeros = sorted(str(d) for (d,) in db.sql("SELECT d FROM s@idx WHERE d = 0").rows)
    assert zeros == ["-0.00", "0"]
    assert db.sql("SELECT k FROM s WHERE d = 'inf'::DECIMAL").rows == [(4,)]
    above = db.sql("SELECT count(*) FROM s WHERE d > 'NaN'").rows
    assert above == [(6,)]  # every number but NaN and NULL


def test_is_nan_is_equality_with_nan(db: DB) -> None:
    db.sql("CREATE TABLE s (k INT PRIMARY KEY, d DECIMAL, f FLOAT)")
    db.sql("INSERT INTO s VALUES (1, 'NaN', 'NaN'), (2, 1, 1), (3, NULL, NULL)")
    assert db.sql("SELECT k FROM s WHERE d IS NAN ORDER BY k").rows == [(1,)]
    assert db.sql("SELECT k FROM s WHERE d IS NOT NAN ORDER BY k").rows == [(2,)]
    assert db.sql("SELECT f IS NAN, f IS NOT NAN, isnan(d) FROM s ORDER BY k").rows == [
        (True, False, True),
        (False, True, False),
        (None, None, None),
    ]


def test_arithmetic_and_aggregates_carry_nan_and_infinity(db: DB) -> None:
    [row] = db.sql(
        "SELECT 'NaN'::DECIMAL + 1, 'inf'::DECIMAL - 1, 'inf'::DECIMAL - 'inf'::DECIMAL, "
        "'inf'::DECIMAL * 0, 1 / 'inf'::DECIMAL"
    ).rows
    assert _texts([row]) == [("NaN", "Infinity", "NaN", "NaN", "0")]
    [row] = db.sql(
        "SELECT sum(x), min(x), max(x) FROM (VALUES ('NaN'::DECIMAL), (1::DECIMAL)) v(x)"
    ).rows
    assert _texts([row]) == [("NaN", "NaN", "1")]
    groups = db.sql(
        "SELECT x, count(*) FROM (VALUES ('NaN'::DECIMAL), (1::DECIMAL), "
        "('NaN'::DECIMAL + 1)) v(x) GROUP BY x ORDER BY x"
    ).rows
    assert _texts(groups) == [("NaN", "2"), ("1", "1")]
    with pytest.raises(SQLError) as caught:
        db.sql("SELECT 'inf'::DECIMAL / 0")
    assert caught.value.code == "22012"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT 101.00::DECIMAL(6,4)",
            "value with precision 6, scale 4 must round to an absolute value less than 10^2",
        ),
        (
            "SELECT 1::DECIMAL(2, 2)",
            "value with precision 2, scale 2 must round to an absolute value less than 1",
        ),
    ],
)
def test_a_value_too_wide_for_its_precision_names_the_limit(db: DB, sql: str, message: str) -> None:
    with pytest.raises(SQLError) as caught:
        db.sql(sql)
    assert (caught.value.code, caught.value.message) == ("22003", message)
