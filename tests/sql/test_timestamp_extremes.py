"""The earliest and the latest real timestamps (0001-01-01 00:00:00, which is Go's zero
``time.Time`` and .NET's ``DateTime.MinValue``, and 9999-12-31 23:59:59.999999) are
values like any other, apart from ``-infinity`` and ``infinity``: they were held as the
same ``datetime``, so year 1 read back as ``-infinity`` and the last microsecond as
``infinity``."""

from __future__ import annotations

import datetime

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.time_zone import InfiniteTimestamp

FIRST = datetime.datetime(1, 1, 1)
LAST = datetime.datetime.max


def test_year_one_is_a_timestamp_not_minus_infinity(db: DB) -> None:
    [row] = db.sql(
        "SELECT '0001-01-01 00:00:00'::TIMESTAMP::STRING, '0001-01-01 00:00:00'::TIMESTAMP::DATE, "
        "'0001-01-01'::DATE::TIMESTAMP, '0001-01-01'::DATE::TIMESTAMP::STRING, "
        "'0001-01-01 00:00:00+00'::TIMESTAMPTZ::STRING, "
        "'0001-01-01'::TIMESTAMP = '-infinity'::TIMESTAMP, "
        "'0001-01-01'::TIMESTAMP > '-infinity'::TIMESTAMP"
    ).rows
    assert row == (
        "0001-01-01 00:00:00",
        datetime.date(1, 1, 1),
        FIRST,
        "0001-01-01 00:00:00",
        "0001-01-01 00:00:00+00",
        False,
        True,
    )


def test_the_last_microsecond_is_a_timestamp_not_infinity(db: DB) -> None:
    [row] = db.sql(
        "SELECT ('9999-12-31 23:59:59.999999'::TIMESTAMP - INTERVAL '1 day')::STRING, "
        "'9999-12-31 23:59:59.999999'::TIMESTAMP = 'infinity'::TIMESTAMP, "
        "'9999-12-31 23:59:59.999999'::TIMESTAMP < 'infinity'::TIMESTAMP, "
        "'9999-12-31 23:59:59.999999'::TIMESTAMP::DATE, "
        "('infinity'::TIMESTAMP - INTERVAL '1 day')::STRING"
    ).rows
    assert row == (
        "9999-12-30 23:59:59.999999",
        False,
        True,
        datetime.date(9999, 12, 31),
        "infinity",
    )
    with pytest.raises(SQLError) as caught:
        db.sql("SELECT '-infinity'::TIMESTAMP::DATE")
    assert caught.value.code == "22008"


def test_extremes_and_infinities_keep_apart_in_key_and_value_columns(db: DB) -> None:
    db.sql("CREATE TABLE ends (at TIMESTAMP PRIMARY KEY, atz TIMESTAMPTZ, INDEX (atz))")
    db.sql(
        "INSERT INTO ends VALUES ('infinity', '-infinity'), "
        "('9999-12-31 23:59:59.999999', '0001-01-01 00:00:00+00'), "
        "('0001-01-01 00:00:00', '9999-12-31 23:59:59.999999+00'), ('-infinity', 'infinity')"
    )
    by_key = db.sql("SELECT at::STRING, atz::STRING FROM ends ORDER BY at").rows
    assert by_key == [
        ("-infinity", "infinity"),
        ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999+00"),
        ("9999-12-31 23:59:59.999999", "0001-01-01 00:00:00+00"),
        ("infinity", "-infinity"),
    ]
    by_index = db.sql("SELECT atz::STRING FROM ends@ends_atz_idx ORDER BY atz DESC").rows
    assert by_index == [(a,) for _, a in by_key]
    assert db.sql("SELECT at FROM ends WHERE at = '0001-01-01'").rows == [(FIRST,)]
    assert db.sql("SELECT at FROM ends WHERE at > '9999-12-31 23:59:59.999999'").rows == [
        (InfiniteTimestamp(True, aware=False),)
    ]
    [(first, last)] = db.sql(
        "SELECT atz, at FROM ends WHERE at = '9999-12-31 23:59:59.999999'"
    ).rows
    assert (first, last) == (FIRST.replace(tzinfo=datetime.UTC), LAST)
    assert not isinstance(first, InfiniteTimestamp) and not isinstance(last, InfiniteTimestamp)
    assert db.sql("SELECT min(at)::STRING, max(atz)::STRING FROM ends").rows == [
        ("-infinity", "infinity")
    ]


def test_infinities_order_past_every_real_datetime() -> None:
    infinity, minus = InfiniteTimestamp(True, aware=False), InfiniteTimestamp(False, aware=False)
    assert sorted([LAST, infinity, FIRST, minus]) == [minus, FIRST, LAST, infinity]
    assert infinity != LAST and minus != datetime.datetime.min and infinity == infinity
    assert infinity > LAST and minus < FIRST and minus < infinity
    assert max(LAST, infinity) is infinity and min(minus, FIRST) is minus
    assert infinity + datetime.timedelta(days=-1) is infinity
    assert str(infinity.astimezone(datetime.UTC)) == "infinity"
    assert infinity.astimezone(datetime.UTC) == InfiniteTimestamp(True, aware=True)
    with pytest.raises(TypeError):
        assert infinity < InfiniteTimestamp(True, aware=True)
