"""CockroachDB's aggregates beyond the common ones: ``corr`` (a FLOAT, over the rows
where both arguments are non-NULL), ``sum_int`` (an INT, 22003 past INT8), ``sum`` and
``avg`` over INTERVAL, and ``bit_and`` / ``bit_or`` over bit strings of one length."""

from __future__ import annotations

import decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.bits import BitString
from feedkv.sql.interval import Interval


@pytest.fixture
def points(db: DB) -> DB:
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, x FLOAT, y FLOAT, d DECIMAL, i INTERVAL, b VARBIT)")
    db.sql(
        "INSERT INTO p VALUES (1, 1, 2, 1, '1 day', B'1100'), (2, 2, 4, 2, '2 hours', B'1010'), "
        "(3, 3, 6, 4, NULL, B'1001'), (4, NULL, 100, NULL, NULL, NULL)"
    )
    return db


def test_corr_of_points_on_a_line_is_one_or_minus_one(points: DB) -> None:
    [(up, down, mixed)] = points.sql("SELECT corr(y, x), corr(-y, x), corr(d, x) FROM p").rows
    assert up == pytest.approx(1.0)
    assert down == pytest.approx(-1.0)
    assert mixed == pytest.approx(0.9819805060619657)  # (1,1) (2,2) (3,4)


def test_corr_is_null_without_two_pairs_or_without_variation(points: DB) -> None:
    assert points.sql("SELECT corr(y, x) FROM p WHERE k = 1").rows == [(None,)]
    assert points.sql("SELECT corr(y, 1.0) FROM p").rows == [(None,)]
    assert points.sql("SELECT corr(y, x) FROM p WHERE k > 9").rows == [(None,)]


def test_corr_takes_two_numbers_only(points: DB) -> None:
    for call in ("corr(y, i)", "corr(y)", "corr(y, x, d)"):
        with pytest.raises(SQLError) as caught:
            points.sql(f"SELECT {call} FROM p")
        assert caught.value.code == "42883"


def test_sum_int_stays_an_int_and_refuses_to_overflow(points: DB) -> None:
    assert points.sql("SELECT sum_int(k), sum(k) FROM p").rows == [(10, decimal.Decimal(10))]
    assert points.sql("SELECT sum_int(k) FROM p WHERE k > 9").rows == [(None,)]
    with pytest.raises(SQLError) as overflow:
        points.sql("SELECT sum_int(9223372036854775807 - k + 2) FROM p")
    assert overflow.value.code == "22003"
    with pytest.raises(SQLError) as not_int:
        points.sql("SELECT sum_int(x) FROM p")
    assert not_int.value.code == "42883"


def test_sum_and_avg_of_intervals_are_intervals(points: DB) -> None:
    assert points.sql("SELECT sum(i)::STRING, avg(i)::STRING FROM p").rows == [
        ("1 day 02:00:00", "13:00:00")
    ]
    [(total,)] = points.sql("SELECT sum(i) FROM p WHERE k = 1").rows
    assert total == Interval(days=1)
    assert points.sql("SELECT sum(i), avg(i) FROM p WHERE k > 2").rows == [(None, None)]


def test_bit_and_and_bit_or_combine_bit_strings(points: DB) -> None:
    assert points.sql("SELECT bit_and(b), bit_or(b) FROM p").rows == [
        (BitString("1000"), BitString("1111"))
    ]
    assert points.sql("SELECT bit_and(k), bit_or(k) FROM p").rows == [(0, 7)]


def test_bit_strings_of_different_lengths_do_not_combine(points: DB) -> None:
    points.sql("INSERT INTO p (k, b) VALUES (5, B'1')")
    for call, word in (("bit_and", "AND"), ("bit_or", "OR")):
        with pytest.raises(SQLError) as caught:
            points.sql(f"SELECT {call}(b) FROM p")
        assert (caught.value.code, caught.value.message) == (
            "22026",
            f"cannot {word} bit strings of different sizes",
        )


def test_corr_is_the_float_nearest_the_exact_correlation(db: DB) -> None:
    db.sql("CREATE TABLE s (y FLOAT, x FLOAT)")
    pairs = [(1, 10), (2, 25), (2, 25), (3, 40), (3, 40), (3, 40)] + [(4, 100)] * 4
    db.sql("INSERT INTO s VALUES " + ", ".join(f"({y}, {x})" for y, x in pairs))
    # exactly 0.93300782264796802628...: a float sum would end ...9681
    assert db.sql("SELECT corr(y, x) FROM s").rows == [(0.933007822647968,)]
    # DISTINCT takes each distinct pair once: four pairs
    [(distinct,)] = db.sql("SELECT corr(DISTINCT y, x) FROM s").rows
    assert distinct == pytest.approx(0.9326733179802503)
    db.sql("INSERT INTO s VALUES (1.7976931348623157e308, 0)")
    with pytest.raises(SQLError) as caught:
        db.sql("SELECT corr(y, x) FROM s")
    assert (caught.value.code, caught.value.message) == ("22003", "float out of range")
