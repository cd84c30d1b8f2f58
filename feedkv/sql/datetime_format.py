"""``to_char(value, template)`` of a TIMESTAMP, TIMESTAMPTZ or DATE, as PostgreSQL and
CockroachDB write it: a pure function of the value and the template (a TIMESTAMPTZ is
written in the session's time zone).

The template's patterns: ``YYYY`` ``YYY`` ``YY`` ``Y`` ``IYYY`` (ISO year) ``MM``
``MONTH`` ``Month`` ``month`` ``MON`` ``Mon`` ``mon`` ``DD`` ``DDD`` (day of year) ``D``
(day of week, Sunday 1) ``ID`` (ISO, Monday 1) ``DAY`` ``Day`` ``day`` ``DY`` ``Dy``
``dy`` ``IW`` ``WW`` ``Q`` ``J`` (Julian day) ``HH`` ``HH12`` ``HH24`` ``MI`` ``SS``
``MS`` ``US`` ``SSSS`` (seconds past midnight) ``AM`` ``PM`` ``am`` ``pm`` ``A.M.``
``P.M.`` ``a.m.`` ``p.m.`` ``TZ`` ``tz`` ``OF``; the prefix ``FM`` drops a pattern's
padding (names are padded to 9 characters, numbers with zeros). Text in double quotes
and a character after a backslash are copied; anything else is copied as it is.
"""

from __future__ import annotations

import datetime
from typing import Any

from feedkv.sql.time_zone import current_zone, infinity_of, shifted

__all__ = ["to_char"]

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _case(name: str, pattern: str) -> str:
    """A name in the case of its pattern: ``MONTH`` upper, ``Month`` capitalized,
    ``month`` lower."""
    if pattern.isupper():
        return name.upper()
    return name.lower() if pattern.islower() else name


def _meridiem(moment: datetime.datetime, pattern: str) -> str:
    word = "AM" if moment.hour < 12 else "PM"
    if "." in pattern:
        word = f"{word[0]}.{word[1]}."
    return word.lower() if pattern[0].islower() else word


def _zone(moment: datetime.datetime, offset: bool) -> str:
    if moment.tzinfo is None:
        return ""
    if offset:
        minutes = int(moment.utcoffset().total_seconds()) // 60  # type: ignore[union-attr]
        sign, minutes = ("-" if minutes < 0 else "+"), abs(minutes)
        hours, rest = divmod(minutes, 60)
        return f"{sign}{hours:02d}" + (f":{rest:02d}" if rest else "")
    return moment.tzname() or ""


def _number(moment: datetime.datetime, pattern: str) -> tuple[int, int]:
    """A numeric pattern's value and its zero-padded width."""
    iso = moment.isocalendar()
    hour12 = moment.hour % 12 or 12
    values = {
        "YYYY": (moment.year, 4), "YYY": (moment.year % 1000, 3), "YY": (moment.year % 100, 2),
        "Y": (moment.year % 10, 1), "IYYY": (iso.year, 4), "MM": (moment.month, 2),
        "DDD": (moment.timetuple().tm_yday, 3), "DD": (moment.day, 2),
        "D": (moment.isoweekday() % 7 + 1, 1), "ID": (iso.weekday, 1), "IW": (iso.week, 2),
        "WW": ((moment.timetuple().tm_yday - 1) // 7 + 1, 2),
        "Q": ((moment.month - 1) // 3 + 1, 1), "J": (moment.toordinal() + 1721425, 1),
        "HH24": (moment.hour, 2), "HH12": (hour12, 2), "HH": (hour12, 2),
        "MI": (moment.minute, 2), "SS": (moment.second, 2),
        "MS": (moment.microsecond // 1000, 3), "US": (moment.microsecond, 6),
        "SSSS": (moment.hour * 3600 + moment.minute * 60 + moment.second, 1),
    }  # fmt: skip
    return values[pattern]


_NAMES = ("MONTH", "Month", "month", "MON", "Mon", "mon", "DAY", "Day", "day", "DY", "Dy", "dy")
_MERIDIEMS = ("A.M.", "P.M.", "a.m.", "p.m.", "AM", "PM", "am", "pm")
_NUMBERS = (
    "IYYY", "YYYY", "HH24", "HH12", "SSSS", "YYY", "DDD", "YY", "MM", "DD", "ID", "IW", "WW",
    "HH", "MI", "SS", "MS", "US", "Y", "D", "Q", "J",
)  # fmt: skip
# NB: longest first, so HH24 is not read as HH then 24
_PATTERNS = sorted((*_NAMES, *_MERIDIEMS, *_NUMBERS, "TZ", "tz", "OF"), key=len, reverse=True)


def _field(moment: datetime.datetime, pattern: str, fill: bool) -> str:
    if pattern in _NAMES:
        upper = pattern.upper()
        month = upper in ("MONTH", "MON")
        name = _MONTHS[moment.month - 1] if month else _DAYS[moment.weekday()]
        if upper in ("MON", "DY"):
            return _case(name[:3], pattern)
        return _case(name.ljust(9) if fill else name, pattern)
    if pattern in _MERIDIEMS:
        return _meridiem(moment, pattern)
    if pattern in ("TZ", "tz", "OF"):
        text = _zone(moment, pattern == "OF")
        return text.lower() if pattern == "tz" else text
    value, width = _number(moment, pattern)
    return str(value).zfill(width) if fill else str(value)


def to_char(value: Any, template: Any) -> str:
    """``to_char(value, template)``: ``value`` written by the patterns of ``template``."""
    if not isinstance(template, str):
        raise TypeError(template)
    if isinstance(value, datetime.datetime):
        if infinity_of(value):
            return ""  # NB: as PostgreSQL: an infinite timestamp writes as nothing
        moment = shifted(value, current_zone()) if value.tzinfo is not None else value
    elif isinstance(value, datetime.date):
        moment = datetime.datetime(value.year, value.month, value.day)
    else:
        raise TypeError(value)
    out, at = [], 0
    while at < len(template):
        if template[at] == '"':
            end = template.find('"', at + 1)
            end = len(template) if end < 0 else end
            out.append(template[at + 1 : end])
            at = end + 1
            continue
        if template[at] == "\\" and at + 1 < len(template):
            out.append(template[at + 1])
            at += 2
            continue
        fill = not template.startswith("FM", at)
        start = at if fill else at + 2
        pattern = next((p for p in _PATTERNS if template.startswith(p, start)), None)
        if pattern is None:
            out.append(template[at])
            at += 1
            continue
        out.append(_field(moment, pattern, fill))
        at = start + len(pattern)
    return "".join(out)
