"""INTERVAL values: months, days and microseconds, kept apart as PostgreSQL keeps them
(a month is not a fixed number of days, nor a day of hours across a DST change).

Two intervals compare, as in PostgreSQL, by their span with a month as 30 days and a
day as 24 hours: ``'1 month' = '30 days'`` is true. Text reads PostgreSQL's forms
(``1 year 2 mons 3 days 04:05:06.5``, ``2 hours``, ``-10s``, ``1h30m``, ISO 8601
``P1Y2M3DT4H5M6S``) and prints PostgreSQL's default style, as CockroachDB does.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import re
from dataclasses import dataclass

from feedkv.errors import SQLError

__all__ = ["Interval"]

_MICROS_PER_DAY = 86_400_000_000
_DAYS_PER_MONTH = 30

# Unit names (singular, plural, short) -> (months, days, microseconds) per one.
_UNITS: dict[str, tuple[int, int, int]] = {}
for _names, _amount in (
    (("microsecond", "microseconds", "us", "usec", "usecs"), (0, 0, 1)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs"), (0, 0, 1_000)),
    (("second", "seconds", "s", "sec", "secs"), (0, 0, 1_000_000)),
    (("minute", "minutes", "m", "min", "mins"), (0, 0, 60_000_000)),
    (("hour", "hours", "h", "hr", "hrs"), (0, 0, 3_600_000_000)),
    (("day", "days", "d"), (0, 1, 0)),
    (("week", "weeks", "w"), (0, 7, 0)),
    (("month", "months", "mon", "mons"), (1, 0, 0)),
    (("year", "years", "y", "yr", "yrs"), (12, 0, 0)),
    (("decade", "decades"), (120, 0, 0)),
    (("century", "centuries"), (1200, 0, 0)),
):
    for _name in _names:
        _UNITS[_name] = _amount

_TERM = re.compile(r"([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*([a-z]+)")
_NUMBER = re.compile(r"([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)(?=\s|$)")
_CLOCK = re.compile(r"([+-])?(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d+)?))?")
_ISO = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?"
    r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Interval:
    months: int = 0
    days: int = 0
    micros: int = 0

    # Comparison: by span (a month is 30 days, a day 24 hours), as PostgreSQL.

    def span(self) -> int:
        return (self.months * _DAYS_PER_MONTH + self.days) * _MICROS_PER_DAY + self.micros

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and self.span() == other.span()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return self.span() < other.span()

    def __hash__(self) -> int:
        return hash(self.span())

    # Arithmetic.

    def __add__(self, other: Interval) -> Interval:
        return Interval(
            self.months + other.months, self.days + other.days, self.micros + other.micros
        )

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)

    def __sub__(self, other: Interval) -> Interval:
        return self + -other

    def times(self, factor: float | int | decimal.Decimal) -> Interval:
        """``self * factor``, spilling fractions of months into days and of days into
        microseconds (as PostgreSQL)."""
        months = decimal.Decimal(self.months) * decimal.Decimal(str(factor))
        whole_months = int(months)
        days = (
            decimal.Decimal(self.days) * decimal.Decimal(str(factor))
            + (months - whole_months) * _DAYS_PER_MONTH
        )
        whole_days = int(days)
        micros = (
            decimal.Decimal(self.micros) * decimal.Decimal(str(factor))
            + (days - whole_days) * _MICROS_PER_DAY
        )
        return Interval(whole_months, whole_days, int(micros.to_integral_value()))

    def added_to(self, value: datetime.date) -> datetime.datetime:
        """``value + self`` for a DATE (a TIMESTAMP at its midnight, as PostgreSQL) or
        a TIMESTAMP[TZ]: months first (clamped to the month's last day), then days,
        then the time."""
        if not isinstance(value, datetime.datetime):
            value = datetime.datetime(value.year, value.month, value.day)
        year, month = divmod(value.month - 1 + self.months, 12)
        year += value.year
        day = min(value.day, _days_in(year + 0, month + 1))
        moved = value.replace(year=year, month=month + 1, day=day)
        return moved + datetime.timedelta(days=self.days, microseconds=self.micros)

    # Text.

    # Justification (PostgreSQL's justify_hours, justify_days, justify_interval): whole
    # days of the time moved into days, whole 30-day months of the days into months, and
    # the parts left with one sign where the function moved something between them.

    def justify_hours(self) -> Interval:
        days, micros = _toward_zero(self.micros, _MICROS_PER_DAY)
        days, micros = _same_sign(self.days + days, micros, _MICROS_PER_DAY)
        return Interval(self.months, days, micros)

    def justify_days(self) -> Interval:
        months, days = _toward_zero(self.days, _DAYS_PER_MONTH)
        months, days = _same_sign(self.months + months, days, _DAYS_PER_MONTH)
        return Interval(months, days, self.micros)

    def justify_interval(self) -> Interval:
        days, micros = _toward_zero(self.micros, _MICROS_PER_DAY)
        months, days = _toward_zero(self.days + days, _DAYS_PER_MONTH)
        months += self.months
        # NB: the months take their sign from the days and time together (a month of
        # -1 hour is 29 days 23:00:00, not 1 mon -01:00:00)
        if months > 0 and (days < 0 or (days == 0 and micros < 0)):
            months, days = months - 1, days + _DAYS_PER_MONTH
        elif months < 0 and (days > 0 or (days == 0 and micros > 0)):
            months, days = months + 1, days - _DAYS_PER_MONTH
        days, micros = _same_sign(days, micros, _MICROS_PER_DAY)
        return Interval(months, days, micros)

    @classmethod
    def parse(cls, text: str) -> Interval:
        """``text`` in one of PostgreSQL's input forms; 22007 otherwise."""
        source = text.strip().lower()
        if not source:
            raise _bad(text)
        if source.startswith(("p", "-p")):
            return _iso(text, source)
        months = days = 0
        micros = decimal.Decimal(0)
        pos = 0
        seen = clocked = False
        while pos < len(source):
            if source[pos].isspace() or source[pos] == ",":
                pos += 1
                continue
            clock = _CLOCK.match(source, pos)
            if clock and (clock.end() == len(source) or not source[clock.end()].isalpha()):
                sign = -1 if clock.group(1) == "-" else 1
                hours, minutes = int(clock.group(2)), int(clock.group(3))
                seconds = decimal.Decimal(clock.group(4) or 0)
                micros += sign * ((hours * 60 + minutes) * 60 + seconds) * 1_000_000
                pos, seen, clocked = clock.end(), True, True
                continue
            term = _TERM.match(source, pos)
            number = _NUMBER.match(source, pos) if term is None else None
            if number is not None:
                # NB: a number without a unit is days before a time ('1 02:00'), else
                # seconds, and only last ('1 day 3'), as PostgreSQL reads it
                after = len(source) - len(source[number.end() :].lstrip())
                amount = decimal.Decimal(number.group(1))
                if after < len(source) and _CLOCK.match(source, after):
                    part = Interval(0, 1, 0).times(amount)
                    days, micros = days + part.days, micros + part.micros
                elif after == len(source) and not clocked:
                    micros += amount * 1_000_000
                else:
                    raise _bad(text)
                pos, seen = after, True
                continue
            if term is None:
                raise _bad(text)
            unit = _UNITS.get(term.group(2))
            if unit is None:
                raise _bad(text)
            amount = decimal.Decimal(term.group(1))
            part = Interval(*unit).times(amount)
            months, days = months + part.months, days + part.days
            micros += part.micros
            pos, seen = term.end(), True
        if not seen:
            raise _bad(text)
        return cls(months, days, int(micros.to_integral_value()))

    def __str__(self) -> str:
        """PostgreSQL's default style: ``1 year 2 mons -3 days +04:05:06.5``. A unit is
        plural unless its count is 1 (``-1 days``); a positive part after a negative one
        carries a ``+``."""
        parts = []
        after_negative = False
        years, months = divmod(abs(self.months), 12)
        sign = -1 if self.months < 0 else 1
        for count, unit in ((sign * years, "year"), (sign * months, "mon"), (self.days, "day")):
            if count:
                plus = "+" if after_negative and count > 0 else ""
                parts.append(f"{plus}{count} {unit}{'s' if count != 1 else ''}")
                after_negative = count < 0
        if self.micros or not parts:
            total = abs(self.micros)
            seconds, fraction = divmod(total, 1_000_000)
            minutes, seconds = divmod(seconds, 60)
            hours, minutes = divmod(minutes, 60)
            clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
            if fraction:
                clock += f".{fraction:06d}".rstrip("0")
            parts.append(("-" if self.micros < 0 else "+" if after_negative else "") + clock)
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Interval({self.months}, {self.days}, {self.micros})"

    # Storage.

    def to_primitive(self) -> str:
        return f"{self.months}:{self.days}:{self.micros}"

    @classmethod
    def from_primitive(cls, raw: str) -> Interval:
        months, days, micros = raw.split(":")
        return cls(int(months), int(days), int(micros))


def _iso(text: str, source: str) -> Interval:
    negative = source.startswith("-")
    match = _ISO.fullmatch(source[1:] if negative else source, 0)
    if match is None or not any(match.groups()):
        raise _bad(text)
    years, months, weeks, days, hours, minutes, seconds = (
        decimal.Decimal(g) if g else decimal.Decimal(0) for g in match.groups()
    )
    micros = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000
    value = Interval(int(years * 12 + months), int(weeks * 7 + days), int(micros))
    return -value if negative else value


def _toward_zero(amount: int, unit: int) -> tuple[int, int]:
    """``(whole units, rest)`` of ``amount``, both of its sign (as C's division)."""
    whole = abs(amount) // unit * (1 if amount >= 0 else -1)
    return whole, amount - whole * unit


def _same_sign(whole: int, rest: int, unit: int) -> tuple[int, int]:
    """``whole`` units and ``rest`` of the same sign: one unit moved into the rest when
    they differ."""
    if whole > 0 and rest < 0:
        return whole - 1, rest + unit
    if whole < 0 and rest > 0:
        return whole + 1, rest - unit
    return whole, rest


def _days_in(year: int, month: int) -> int:
    if month == 12:
        return 31
    return (datetime.date(year, month + 1, 1) - datetime.date(year, month, 1)).days


def _bad(text: str) -> SQLError:
    return SQLError("22007", f"invalid input syntax for type interval: {text!r}")
