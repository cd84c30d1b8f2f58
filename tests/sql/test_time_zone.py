"""The session's time zone: what ``SET TIME ZONE`` accepts and how an embedded session's
results follow it (the SQL side is in testdata/session_vars.test, the wire side in
tests/pgwire/test_session_time_zone.py)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.time_zone import checked_zone, offset_text, timestamp_text, zone_named


@pytest.mark.parametrize(
    ("given", "kept", "offset_in_may"),
    [
        ("UTC", "UTC", "+00"),
        ("gmt", "UTC", "+00"),
        ("America/New_York", "America/New_York", "-04"),
        ("asia/kolkata", "Asia/Kolkata", "+05:30"),
        ("-4", "-4", "-04"),
        ("+05:30", "+05:30", "+05:30"),
        ("+00:00", "UTC", "+00"),
    ],
)
def test_a_zone_is_an_iana_name_or_an_offset(given: str, kept: str, offset_in_may: str) -> None:
    assert checked_zone("timezone", given) == kept
    may = datetime.datetime(2024, 5, 1, 13, tzinfo=datetime.UTC).astimezone(zone_named(kept))
    assert offset_text(may) == offset_in_may


@pytest.mark.parametrize("given", ["Mars/Olympus", "+25:00", "America", "../etc/passwd", ""])
def test_anything_else_is_22023(given: str) -> None:
    with pytest.raises(SQLError) as caught:
        checked_zone("timezone", given)
    assert caught.value.code == "22023"
    assert caught.value.message.startswith('invalid value for parameter "timezone"')


def test_an_embedded_sessions_timestamptz_values_are_in_its_zone(db: DB) -> None:
    session = db.session()
    instant = datetime.datetime(2024, 5, 1, 13, tzinfo=datetime.UTC)
    session.execute("SET TIME ZONE 'America/New_York'")
    ((value,),) = session.execute("SELECT '2024-05-01 13:00:00+00'::TIMESTAMPTZ").rows
    assert value == instant  # the same instant...
    assert value.utcoffset() == datetime.timedelta(hours=-4) and value.hour == 9  # ...there
    # another session keeps UTC
    ((other,),) = db.session().execute("SELECT '2024-05-01 09:00:00'::TIMESTAMPTZ").rows
    assert other == datetime.datetime(2024, 5, 1, 9, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("zone", "text"),
    [
        ("UTC", "2024-06-01 16:00:00+00"),
        ("America/New_York", "2024-06-01 12:00:00-04"),
        ("Asia/Kolkata", "2024-06-01 21:30:00+05:30"),
        ("-00:30:15", "2024-06-01 15:29:45-00:30:15"),
    ],
)
def test_a_timestamptz_is_written_with_its_offset_in_the_zone(zone: str, text: str) -> None:
    instant = datetime.datetime(2024, 6, 1, 16, tzinfo=datetime.UTC)
    assert timestamp_text(instant, zone_named(zone)) == text


@pytest.mark.parametrize(
    ("zone", "given", "text"),
    [
        # before 1883 New York kept its local mean time, 4:56:02 behind Greenwich
        ("America/New_York", "0001-01-01 00:00:00+00", "0001-12-31 19:03:58-04:56:02 BC"),
        ("America/New_York", "0001-01-01 04:56:01.5+00", "0001-12-31 23:59:59.5-04:56:02 BC"),
        ("America/New_York", "0001-01-01 04:56:02+00", "0001-01-01 00:00:00-04:56:02"),
        ("Asia/Tokyo", "9999-12-31 23:00:00+00", "10000-01-01 08:00:00+09"),
        ("America/New_York", "9999-12-31 23:00:00+00", "9999-12-31 18:00:00-05"),
    ],
)
def test_a_timestamptz_beyond_the_years_in_the_zone_is_written_as_cockroachdb_does(
    db: DB, zone: str, given: str, text: str
) -> None:
    """An instant of years 1 to 9999 in UTC whose wall clock time in the session's zone
    is not (year 0, year 10000) is written as CockroachDB writes it (its
    WireFormatTimestamp: year 0 is ``0001 ... BC``), alone or in a record, not a crash;
    an embedded session gets that instant in UTC."""
    session = db.session()
    session.execute(f"SET TIME ZONE '{zone}'")
    ((written, record),) = session.execute(
        f"SELECT '{given}'::TIMESTAMPTZ::STRING, ('{given}'::TIMESTAMPTZ, 1)::STRING"
    ).rows
    assert (written, record) == (text, f'("{text}",1)')
    ((value,),) = session.execute(f"SELECT '{given}'::TIMESTAMPTZ").rows
    assert value == datetime.datetime.fromisoformat(given)


@pytest.mark.parametrize(
    "expression", ["extract(year FROM t)", "to_char(t, 'YYYY')", "to_json(t)", "t::TIME"]
)
@pytest.mark.parametrize(
    ("zone", "given"),
    [("America/New_York", "0001-01-01 00:00:00+00"), ("Asia/Tokyo", "9999-12-31 23:00:00+00")],
)
def test_the_wall_clock_time_of_a_timestamptz_beyond_the_years_is_22008(
    db: DB, zone: str, given: str, expression: str
) -> None:
    """What needs that wall clock time as a value (a year feedkv cannot hold, as it
    cannot hold an instant before year 1: ``t - INTERVAL '1 day'`` below) is a clean
    22008, never a crash."""
    session = db.session()
    session.execute(f"SET TIME ZONE '{zone}'")
    with pytest.raises(SQLError) as caught:
        session.execute(f"SELECT {expression} FROM (SELECT '{given}'::TIMESTAMPTZ AS t) AS s")
    assert caught.value.code == "22008", caught.value.message


def test_an_instant_before_year_1_is_22008(db: DB) -> None:
    session = db.session()
    session.execute("SET TIME ZONE 'America/New_York'")
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT '0001-01-01 00:00:00+00'::TIMESTAMPTZ - INTERVAL '1 day'")
    assert caught.value.code == "22008", caught.value.message


def test_zones_are_known_on_a_machine_without_system_time_zone_data() -> None:
    """zoneinfo reads the system's tz database, else the ``tzdata`` package (a
    dependency for that): with no system path to search, a zone is still found."""
    code = (
        "import datetime; from feedkv.sql.time_zone import checked_zone, zone_named; "
        "zone = zone_named(checked_zone('timezone', 'america/new_york')); "
        "print(datetime.datetime(2024, 6, 1, 16, tzinfo=datetime.UTC).astimezone(zone))"
    )
    env = {**os.environ, "PYTHONTZPATH": ""}  # NB: empty: no system directory at all
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2024-06-01 12:00:00-04:00"
