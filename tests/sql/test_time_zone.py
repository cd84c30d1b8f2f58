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
