"""``EXTRACT`` (``date_part``) and ``date_trunc`` over dates, times and timestamps, as
CockroachDB computes them: pure functions of the field or unit and the value.

``EXTRACT`` gives a FLOAT, as CockroachDB's does (PostgreSQL 14 gives NUMERIC; the
printed values are the same for whole numbers): ``second`` keeps the fraction,
``epoch`` counts seconds since 1970-01-01 UTC, ``dow`` counts Sunday as 0 and
``isodow`` as 7. A TIMESTAMPTZ is taken in the session's time zone (its ``epoch`` is
the instant's, whatever the zone). A DATE is its midnight; a TIME has only the fields of
a time of day.

``date_trunc`` keeps the value's type (TIMESTAMP or TIMESTAMPTZ): every field below the
unit is set to its start (``week`` truncates to the Monday), a TIMESTAMPTZ's in the
session's time zone (``day``: its local midnight). A DATE or a TIME is
refused rather than given the type PostgreSQL picks for it.

``EXTRACT`` from an INTERVAL reads its parts: ``year`` and ``month`` from its months,
``day`` from its days, ``hour`` down to ``microsecond`` from its time, each truncated
toward zero as PostgreSQL's; ``epoch`` is its span in seconds, a year as 365.25 days and
the remaining months as 30 days each.

An unknown field or unit is 22023, naming it.
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import math
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.interval import Interval
from feedkv.sql.time_zone import (
    InfiniteTimestamp,
    current_zone,
    infinity_of,
    posix_zone,
    shifted,
)

__all__ = ["age", "at_time_zone", "date_trunc", "extract", "to_timestamp"]

_EPOCH = datetime.datetime(1970, 1, 1)
_TIME_FIELDS = frozenset({"hour", "minute", "second", "millisecond", "microsecond", "epoch"})


def _naive(value: datetime.datetime, zone: datetime.tzinfo | None = None) -> datetime.datetime:
    """``value``'s wall time: its own for a TIMESTAMP, in ``zone`` (the session's time zone
    by default) for a TIMESTAMPTZ."""
    if value.tzinfo is None:
        return value
    return shifted(value, zone or current_zone()).replace(tzinfo=None)


# The fields of an infinite timestamp that are infinite too (the others are NULL), as
# PostgreSQL's.
_INFINITE_FIELDS = frozenset(
    {"epoch", "julian", "year", "isoyear", "decade", "century", "millennium"}
)


def extract(field: str, value: Any) -> float | None:
    """``EXTRACT(field FROM value)``."""
    name = field.lower()
    if isinstance(value, datetime.datetime) and infinity_of(value):
        if name not in _INFINITE_FIELDS:
            return None
        return -math.inf if infinity_of(value) == "-infinity" else math.inf
    if isinstance(value, Interval):
        return _interval_field(name, value)
    if isinstance(value, datetime.time):
        if name not in _TIME_FIELDS:
            raise SQLError("22023", f"unsupported timespan: {name}")
        moment = datetime.datetime.combine(_EPOCH.date(), value)
    elif isinstance(value, datetime.datetime):
        moment = _naive(value, datetime.UTC if name == "epoch" else None)
    elif isinstance(value, datetime.date):
        moment = datetime.datetime.combine(value, datetime.time())
    else:
        raise TypeError(value)
    seconds = moment.second + moment.microsecond / 1_000_000
    fields: dict[str, Any] = {
        "millennium": (moment.year + 999) // 1000,
        "century": (moment.year + 99) // 100,
        "decade": moment.year // 10,
        "year": moment.year,
        "isoyear": moment.isocalendar()[0],
        "quarter": (moment.month + 2) // 3,
        "month": moment.month,
        "week": moment.isocalendar()[1],
        "day": moment.day,
        "dow": moment.isoweekday() % 7,
        "isodow": moment.isoweekday(),
        "doy": moment.timetuple().tm_yday,
        "hour": moment.hour,
        "minute": moment.minute,
        "second": seconds,
        "millisecond": seconds * 1_000,
        "microsecond": moment.second * 1_000_000 + moment.microsecond,
    }
    if name == "epoch":
        delta = moment - _EPOCH
        return delta.days * 86_400 + delta.seconds + delta.microseconds / 1_000_000
    found = fields.get(name)
    if found is None:
        raise SQLError("22023", f"unsupported timespan: {name}")
    return float(found)


def _toward_zero(count: int, unit: int) -> int:
    return count // unit if count >= 0 else -(-count // unit)


_SECONDS_PER_DAY = 86_400


def _interval_field(name: str, value: Interval) -> float:
    years = _toward_zero(value.months, 12)
    months = value.months - years * 12
    micros = value.micros
    if name == "epoch":
        days = years * 365.25 + months * 30 + value.days
        return days * _SECONDS_PER_DAY + micros / 1_000_000
    second_micros = micros - _toward_zero(micros, 60_000_000) * 60_000_000
    fields = {
        "millennium": _toward_zero(years, 1000),
        "century": _toward_zero(years, 100),
        "decade": _toward_zero(years, 10),
        "year": years,
        "quarter": _toward_zero(months, 3) + 1,
        "month": months,
        "day": value.days,
        "hour": _toward_zero(micros, 3_600_000_000),
        "minute": _toward_zero(micros, 60_000_000) - _toward_zero(micros, 3_600_000_000) * 60,
        "second": second_micros / 1_000_000,
        "millisecond": second_micros / 1_000,
        "microsecond": second_micros,
    }
    found = fields.get(name)
    if found is None:
        raise SQLError("22023", f"unsupported timespan: {name}")
    return float(found)


_UNITS = (
    "microseconds",
    "milliseconds",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
    "decade",
    "century",
    "millennium",
)


def date_trunc(unit: str, value: Any) -> datetime.datetime:
    """``date_trunc(unit, value)`` for a TIMESTAMP or TIMESTAMPTZ ``value``, or a DATE,
    which is read as its midnight in the session's time zone and gives a TIMESTAMPTZ,
    as CockroachDB's."""
    name = unit.lower().rstrip("s") if unit.lower() not in _UNITS else unit.lower()
    name = {"microsecond": "microseconds", "millisecond": "milliseconds"}.get(name, name)
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = datetime.datetime.combine(value, datetime.time(), tzinfo=current_zone())
    if not isinstance(value, datetime.datetime):
        if isinstance(value, datetime.time):
            raise SQLError("0A000", "date_trunc of a TIME is not supported: cast it to TIMESTAMP")
        raise TypeError(value)
    if name not in _UNITS:
        raise SQLError("22023", f"unsupported timespan: {unit.lower()}")
    if infinity_of(value):
        return value
    tz = value.tzinfo
    moment = _naive(value)
    if name == "microseconds":
        truncated = moment
    elif name == "milliseconds":
        truncated = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    elif name in ("second", "minute", "hour", "day"):
        keep = ("second", "minute", "hour", "day").index(name)
        truncated = moment.replace(microsecond=0)
        if keep >= 1:
            truncated = truncated.replace(second=0)
        if keep >= 2:
            truncated = truncated.replace(minute=0)
        if keep >= 3:
            truncated = truncated.replace(hour=0)
    else:
        day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        if name == "week":
            truncated = day - datetime.timedelta(days=day.weekday())
        elif name == "month":
            truncated = day.replace(day=1)
        elif name == "quarter":
            truncated = day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
        else:
            span = {"year": 1, "decade": 10, "century": 100, "millennium": 1000}[name]
            first = 1 if span >= 100 else 0  # centuries and millennia start at year ...01
            year = (day.year - first) // span * span + first
            truncated = day.replace(year=max(year, 1), month=1, day=1)
    if tz is None:
        return truncated
    return truncated.replace(tzinfo=current_zone()).astimezone(datetime.UTC)


def age(end: Any, begin: Any) -> Interval:
    """``age(end, begin)``: ``end - begin`` in years, months and days (then the time),
    field by field with borrows, as PostgreSQL's: a month borrowed is the earlier
    moment's month (``age('2020-03-01', '2020-01-31')`` is 1 mon 1 day). Each is a
    TIMESTAMP, a TIMESTAMPTZ (compared as instants) or a DATE (its midnight)."""
    later, earlier = _moment(end), _moment(begin)
    if (later.tzinfo is None) != (earlier.tzinfo is None):
        # NB: a TIMESTAMP beside a TIMESTAMPTZ is read in the session's time zone
        later, earlier = _aware(later), _aware(earlier)
    if infinity_of(later) or infinity_of(earlier):
        raise SQLError("22008", "cannot subtract infinite timestamps")
    sign = 1
    if later < earlier:
        later, earlier, sign = earlier, later, -1
    later, earlier = _naive(later), _naive(earlier)
    months = (later.year - earlier.year) * 12 + later.month - earlier.month
    days = later.day - earlier.day
    seconds = (later - later.replace(hour=0, minute=0, second=0, microsecond=0)) - (
        earlier - earlier.replace(hour=0, minute=0, second=0, microsecond=0)
    )
    micros = seconds // datetime.timedelta(microseconds=1)
    if micros < 0:
        micros += 86_400_000_000
        days -= 1
    if days < 0:
        days += calendar.monthrange(earlier.year, earlier.month)[1]
        months -= 1
    return Interval(sign * months, sign * days, sign * micros)


def at_time_zone(zone: Any, value: Any) -> datetime.datetime:
    """``value AT TIME ZONE zone`` (``timezone(zone, value)``): a TIMESTAMPTZ's wall
    clock time in ``zone``, as a TIMESTAMP; a TIMESTAMP read as a wall clock time in
    ``zone``, as the TIMESTAMPTZ of that instant; a DATE cast to a TIMESTAMPTZ first
    (its midnight in the session's zone), as PostgreSQL does. ``zone`` as
    :func:`~feedkv.sql.time_zone.posix_zone` reads it; an infinite timestamp stays
    infinite; 22008 for a time outside the years 1 to 9999."""
    if not isinstance(zone, str) or not isinstance(value, datetime.date):
        raise TypeError(value)
    tz = posix_zone(zone)
    if not isinstance(value, datetime.datetime):
        midnight = datetime.datetime.combine(value, datetime.time(), tzinfo=current_zone())
        value = shifted(midnight, datetime.UTC)
    infinity = infinity_of(value)
    if infinity is not None:
        return InfiniteTimestamp(infinity == "infinity", value.tzinfo is None)
    if value.tzinfo is not None:
        return shifted(value, tz).replace(tzinfo=None)
    return shifted(value.replace(tzinfo=tz), datetime.UTC)


def _moment(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day)
    raise TypeError(value)


def _aware(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=current_zone())


def to_timestamp(seconds: Any) -> datetime.datetime:
    """``to_timestamp(seconds)``: the TIMESTAMPTZ that many seconds after the Unix
    epoch (22008 out of the range of a timestamp)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float | decimal.Decimal):
        raise TypeError(seconds)
    try:
        micros = round(decimal.Decimal(seconds) * 1_000_000)
        return _EPOCH.replace(tzinfo=datetime.UTC) + datetime.timedelta(microseconds=micros)
    except (OverflowError, ValueError, decimal.InvalidOperation):
        raise SQLError("22008", f"timestamp out of range: {seconds}") from None
