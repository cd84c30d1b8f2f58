"""``SET TIME ZONE`` over the wire, with psycopg: an IANA zone or an offset is accepted,
a TIMESTAMPTZ's text is written in it (as CockroachDB writes ``2024-05-01 09:00:00-04``),
text without an offset is read in it, and an unknown zone is 22023."""

from __future__ import annotations

import datetime
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.adapt import Loader


class RawText(Loader):
    """The column's text as the server sent it (psycopg would parse a TIMESTAMPTZ)."""

    def load(self, data: Any) -> str:
        return bytes(data).decode()


def connect(url: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url, autocommit=True)
    conn.adapters.register_loader("timestamptz", RawText)
    return conn


INSTANT = "'2024-05-01 13:00:00+00'::TIMESTAMPTZ"


def test_a_timestamptz_is_written_in_the_sessions_time_zone(pg_url: str) -> None:
    with connect(pg_url) as conn:
        assert conn.execute(f"SELECT {INSTANT}").fetchone() == ("2024-05-01 13:00:00+00",)
        conn.execute("SET TIME ZONE 'America/New_York'")
        assert conn.execute("SHOW TIME ZONE").fetchone() == ("America/New_York",)
        assert conn.execute(f"SELECT {INSTANT}").fetchone() == ("2024-05-01 09:00:00-04",)
        winter = "'2024-01-15 13:00:00+00'::TIMESTAMPTZ"  # standard time: -05
        assert conn.execute(f"SELECT {winter}").fetchone() == ("2024-01-15 08:00:00-05",)
        # text without an offset is a wall time in the zone
        row = conn.execute(f"SELECT '2024-05-01 09:00:00'::TIMESTAMPTZ = {INSTANT}").fetchone()
        assert row == (True,)
        conn.execute("SET timezone = '+05:30'")
        assert conn.execute(f"SELECT {INSTANT}").fetchone() == ("2024-05-01 18:30:00+05:30",)
    with connect(pg_url) as other:  # the zone is the session's own
        assert other.execute(f"SELECT {INSTANT}").fetchone() == ("2024-05-01 13:00:00+00",)


@pytest.mark.parametrize(
    ("zone", "text"),
    [
        ("America/New_York", "2024-06-01 12:00:00.5-04"),
        ("Asia/Kolkata", "2024-06-01 21:30:00.5+05:30"),
        ("UTC", "2024-06-01 16:00:00.5+00"),
    ],
)
def test_a_timestamptz_cast_to_string_is_its_wire_text(pg_url: str, zone: str, text: str) -> None:
    """As CockroachDB: the offset is ``-04`` when its minutes are zero, no trailing zeros
    in the fraction, the same text whether the value or its ``::STRING`` is sent."""
    value = "'2024-06-01 12:00:00.500-04'::TIMESTAMPTZ"
    with connect(pg_url) as conn:
        conn.execute(f"SET TIME ZONE '{zone}'")
        assert conn.execute(f"SELECT {value}, {value}::STRING").fetchone() == (text, text)


def test_an_unknown_time_zone_is_22023_and_changes_nothing(pg_url: str) -> None:
    with connect(pg_url) as conn:
        with pytest.raises(errors.InvalidParameterValue) as caught:
            conn.execute("SET TIME ZONE 'Mars/Olympus'")
        assert str(caught.value).startswith('invalid value for parameter "timezone"')
        assert conn.execute("SHOW TIME ZONE").fetchone() == ("UTC",)


def test_the_client_is_told_the_new_time_zone_and_gives_values_in_it(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert str(conn.info.timezone) == "UTC"
        conn.execute("SET TIME ZONE 'America/New_York'")  # a ParameterStatus follows
        assert str(conn.info.timezone) == "America/New_York"
        (value,) = conn.execute(f"SELECT {INSTANT}").fetchone() or (None,)
        assert isinstance(value, datetime.datetime)
        assert value.utcoffset() == datetime.timedelta(hours=-4) and value.hour == 9
