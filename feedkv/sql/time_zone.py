"""The session's time zone (``SET TIME ZONE``), as CockroachDB takes it.

A zone is UTC (its default; also ``GMT``, ``Z``, ``Etc/UTC``), an IANA name
(``America/New_York``, any case) or an ISO 8601 offset from UTC (``-04:00``, ``+5:30``,
``-4``: west of Greenwich is negative). A TIMESTAMPTZ is an instant, stored in UTC; the
zone only says how one reads and writes it: text without an offset is read in the zone,
a TIMESTAMPTZ is shown (and cast to TIMESTAMP or DATE) in the zone.

The zone of the statement running is a context variable the session sets around each
statement (:func:`statement_zone`), so that the conversions deep in the type layer
(:mod:`feedkv.sql.types`) follow it without threading a session through them; outside a
session's statement (a changefeed decoding rows) it is UTC.

TIMESTAMP and TIMESTAMPTZ have two more values, as in PostgreSQL (and CockroachDB since
v24.3): ``infinity``, later than every other, and ``-infinity``, earlier. They are
:class:`InfiniteTimestamp` values, apart from every real one (9999-12-31 23:59:59.999999
and 0001-01-01 00:00:00 are values too); :func:`infinity_of` tells them, and they are
written, read and cast as themselves, never shifted to a zone.
"""

from __future__ import annotations

import datetime
import functools
import re
import zoneinfo
from contextvars import ContextVar
from typing import Any, Self

from feedkv.errors import SQLError

__all__ = [
    "COCKROACH_INFINITY",
    "INFINITE_MICROS",
    "ZONE",
    "InfiniteTimestamp",
    "checked_zone",
    "current_zone",
    "infinite_timestamp",
    "infinity_of",
    "offset_text",
    "posix_zone",
    "shifted",
    "statement_zone",
    "timestamp_text",
    "zone_named",
]

# NB: LOCAL and DEFAULT are the server's zone, which is UTC, as in CockroachDB
_UTC_NAMES = frozenset(
    {"utc", "etc/utc", "gmt", "etc/gmt", "z", "zulu", "uct", "universal", "local", "default"}
)
_OFFSET = re.compile(r"([+-]?)(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")
# The zone of the statement running (set and reset it as statement_zone does)
ZONE: ContextVar[datetime.tzinfo] = ContextVar("feedkv_statement_zone", default=datetime.UTC)


def checked_zone(name: str, value: str) -> str:
    """``value`` as the session variable ``timezone`` keeps it: ``UTC`` for UTC, an IANA
    zone's own spelling, an offset as given; 22023 for anything else (as CockroachDB)."""
    text = value.strip()
    _, canonical = _zone(text)
    return canonical


@functools.lru_cache(maxsize=256)
def posix_zone(text: str) -> datetime.tzinfo:
    """The zone ``text`` names in ``AT TIME ZONE`` and ``timezone()``: a name as
    :func:`zone_named` reads it, or an offset in POSIX's sense, hours *west* of UTC,
    with or without ``UTC`` or ``GMT`` before it (``'+3'`` and ``'UTC+3'`` are three
    hours behind UTC), as PostgreSQL and CockroachDB read it there; 22023 for anything
    else.

    NB: only SET TIME ZONE reads an offset as ISO 8601 does (east of UTC)."""
    stripped = text.strip()
    key = _zone_keys().get(stripped.lower())
    if stripped.lower() in _UTC_NAMES or key is not None:
        return _zone(stripped)[0]
    offset = _OFFSET.fullmatch(re.sub(r"^(?i:utc|gmt)(?=[+-])", "", stripped))
    if offset is None:
        raise SQLError("22023", f"unknown time zone {text}")
    west = _offset_delta(offset)
    if west is None:
        raise SQLError("22023", f"unknown time zone {text}: its offset is out of range")
    return datetime.timezone(west if offset.group(1) == "-" else -west)


def _offset_delta(offset: re.Match[str]) -> datetime.timedelta | None:
    """The size of the offset :data:`_OFFSET` matched (its sign apart); None when it is
    a day or more, or its minutes or seconds are 60 or more."""
    hours, minutes, seconds = (int(part or 0) for part in offset.groups()[1:])
    if hours >= 24 or minutes >= 60 or seconds >= 60:
        return None
    return datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds)


def shifted(value: datetime.datetime, zone: datetime.tzinfo) -> datetime.datetime:
    """The aware ``value`` as the same instant in ``zone`` (``value.astimezone(zone)``);
    22008 when its wall clock time there falls outside the years 1 to 9999, the range
    of a timestamp here (0001-01-01 00:10 at UTC-3 is still in year 0 in UTC)."""
    try:
        return value.astimezone(zone)
    except OverflowError:
        raise SQLError("22008", "timestamp out of range") from None


def zone_named(text: str) -> datetime.tzinfo:
    """The zone ``text`` (a value :func:`checked_zone` accepted) names."""
    return _zone(text.strip())[0]


@functools.lru_cache(maxsize=256)
def _zone(text: str) -> tuple[datetime.tzinfo, str]:
    if text.lower() in _UTC_NAMES:
        return datetime.UTC, "UTC"
    offset = _OFFSET.fullmatch(text)
    if offset is not None:
        delta = _offset_delta(offset)
        if delta is None:
            raise _unknown(text)
        if not delta:
            return datetime.UTC, "UTC"
        return datetime.timezone(-delta if offset.group(1) == "-" else delta), text
    key = _zone_keys().get(text.lower())
    if key is None:
        raise _unknown(text)
    return zoneinfo.ZoneInfo(key), key


@functools.cache
def _zone_keys() -> dict[str, str]:
    """Every IANA zone name this system knows, by its lower case (names are read in any
    case, as PostgreSQL does)."""
    return {key.lower(): key for key in zoneinfo.available_timezones()}


def _unknown(text: str) -> SQLError:
    return SQLError(
        "22023",
        f'invalid value for parameter "timezone": "\'{text}\'"',
        detail=f'cannot find time zone "{text}": unknown time zone {text}',
    )


def current_zone() -> datetime.tzinfo:
    """The zone of the statement running in this context (UTC outside one)."""
    return ZONE.get()


class statement_zone:
    """Run the body with ``zone`` as :func:`current_zone`. NB: a class, not a
    generator-based context manager: it is entered two to three times a statement, and a
    generator's frame and contextlib's wrapper cost three Python calls more each time."""

    __slots__ = ("_token", "_zone")

    def __init__(self, zone: datetime.tzinfo) -> None:
        self._zone = zone

    def __enter__(self) -> None:
        self._token = ZONE.set(self._zone)

    def __exit__(self, *exc: object) -> None:
        ZONE.reset(self._token)


def offset_text(value: datetime.datetime) -> str:
    """The UTC offset of an aware ``value`` as PostgreSQL writes it: ``+00``, ``-04``,
    ``+05:30`` (seconds only when there are some)."""
    offset = value.utcoffset() or datetime.timedelta()
    sign = "-" if offset < datetime.timedelta() else "+"
    seconds = abs(int(offset.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}"
    if minutes or secs:
        text += f":{minutes:02d}"
    if secs:
        text += f":{secs:02d}"
    return text


# ``infinity`` and ``-infinity`` as microseconds, stored and on the wire (as PostgreSQL's
# binary form): the ends of the INT64 range, far past any real timestamp's (years 1 to
# 9999 are within +-2**58 of 1970 or 2000).
INFINITE_MICROS = {"infinity": 2**63 - 1, "-infinity": -(2**63)}


class InfiniteTimestamp(datetime.datetime):
    """``infinity`` (``positive``) or ``-infinity``, a TIMESTAMP's (naive) or a
    TIMESTAMPTZ's (``aware``, in UTC): later (earlier) than every real datetime and equal
    only to the same infinity. NB: its fields are the latest (earliest) datetime's, so
    code that reads them unasked sees a far moment; adding an interval leaves it, a zone
    change gives the same infinity with or without the zone."""

    positive: bool

    def __new__(cls, positive: bool, aware: bool) -> Self:
        edge = datetime.datetime.max if positive else datetime.datetime.min
        zone = datetime.UTC if aware else None
        self = super().__new__(
            cls, *edge.timetuple()[:6], microsecond=edge.microsecond, tzinfo=zone
        )
        self.positive = positive
        return self

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (InfiniteTimestamp, (self.positive, self.tzinfo is not None))

    def _side(self, other: object) -> int | None:
        """How ``other`` compares: 1 if self is later, -1 earlier, 0 equal; None when
        they do not compare (not a datetime; naive against aware, which datetime refuses)."""
        if not isinstance(other, datetime.datetime):
            return None
        if (self.tzinfo is None) != (other.tzinfo is None):
            return None
        mine = 1 if self.positive else -1
        if isinstance(other, InfiniteTimestamp):
            return (mine - (1 if other.positive else -1)) // 2
        return mine

    def __eq__(self, other: object) -> bool:
        if isinstance(other, datetime.date):
            return self._side(other) == 0
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, datetime.date):
            return self._side(other) != 0
        return NotImplemented

    def __hash__(self) -> int:
        return hash((InfiniteTimestamp, self.positive, self.tzinfo is None))

    def __lt__(self, other: datetime.date) -> bool:
        side = self._side(other)
        return NotImplemented if side is None else side < 0

    def __le__(self, other: datetime.date) -> bool:
        side = self._side(other)
        return NotImplemented if side is None else side <= 0

    def __gt__(self, other: datetime.date) -> bool:
        side = self._side(other)
        return NotImplemented if side is None else side > 0

    def __ge__(self, other: datetime.date) -> bool:
        side = self._side(other)
        return NotImplemented if side is None else side >= 0

    def __add__(self, other: datetime.timedelta) -> Self:
        return self if isinstance(other, datetime.timedelta) else NotImplemented

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return self if isinstance(other, datetime.timedelta) else super().__sub__(other)

    def replace(self, *args: Any, **kwargs: Any) -> Self:
        if args or set(kwargs) - {"tzinfo"}:
            raise ValueError(f"{infinity_of(self)} has no fields to replace")
        zone = kwargs.get("tzinfo", self.tzinfo)
        return type(self)(self.positive, zone is not None)

    def astimezone(self, tz: datetime.tzinfo | None = None) -> Self:
        return type(self)(self.positive, aware=True)

    def __str__(self) -> str:
        return "infinity" if self.positive else "-infinity"

    def __repr__(self) -> str:
        aware = self.tzinfo is not None
        return f"InfiniteTimestamp(positive={self.positive}, aware={aware})"


def infinity_of(value: datetime.datetime) -> str | None:
    """``'infinity'`` or ``'-infinity'`` for a timestamp that is one, else None."""
    if isinstance(value, InfiniteTimestamp):
        return "infinity" if value.positive else "-infinity"
    return None


# CockroachDB's ``infinity`` and ``-infinity`` timestamps are sentinel instants: its
# pgdate.TimeInfinity, 294277-01-01 23:59:59.999999 UTC (a day past its latest supported
# time), and TimeNegativeInfinity, -210898425600 s from the epoch (late 4715 BC, before
# its earliest), as (seconds, nanoseconds) since the Unix epoch: what its Avro and
# protobuf changefeed encoders write for them.
COCKROACH_INFINITY = {
    "infinity": (9_224_318_102_399, 999_999_000),
    "-infinity": (-210_898_425_600, 0),
}


def infinite_timestamp(text: str, aware: bool) -> datetime.datetime | None:
    """The timestamp ``text`` names if it is ``infinity`` (or ``+infinity``) or
    ``-infinity`` in any case, a TIMESTAMPTZ's (in UTC) if ``aware``; else None."""
    word = text.strip().lower()
    if word not in ("infinity", "+infinity", "-infinity"):
        return None
    return InfiniteTimestamp(word[0] != "-", aware)


def timestamp_text(value: datetime.datetime, zone: datetime.tzinfo | None = None) -> str:
    """A TIMESTAMP or TIMESTAMPTZ as CockroachDB (and PostgreSQL) writes it as text:
    ``2024-06-01 12:00:00.5``, no trailing zeros in the fraction; an aware ``value`` in
    ``zone`` (default :func:`current_zone`) with its offset, ``-04`` or ``+05:30``;
    ``infinity`` and ``-infinity`` as those words."""
    infinity = infinity_of(value)
    if infinity is not None:
        return infinity
    if value.tzinfo is not None:
        try:
            local = value.astimezone(zone or current_zone())
        except OverflowError:
            return _beyond_years_text(value, zone or current_zone())
        return timestamp_text(local.replace(tzinfo=None)) + offset_text(local)
    text = value.isoformat(sep=" ")
    # a fraction is written only when there are microseconds, so it never strips to "."
    return text.rstrip("0") if value.microsecond else text


# 400 Gregorian years, in days: a whole number of weeks, so a zone's rules (its offset
# before its first transition, its yearly DST rule after its last) are the same for an
# instant and that instant 400 years on
_GREGORIAN_CYCLE = datetime.timedelta(days=146_097)


def _beyond_years_text(value: datetime.datetime, zone: datetime.tzinfo) -> str:
    """:func:`timestamp_text` of an instant whose wall clock time in ``zone`` falls
    outside the years 1 to 9999 (0001-01-01 00:00 UTC is still 1 BC in New York), as
    CockroachDB writes it: year 0 is ``0001 ... BC``, year 10000 is ``10000``; worked
    out 400 years nearer, where a datetime can hold it."""
    years = 400 if value.year < 5000 else -400
    local = (value + _GREGORIAN_CYCLE * (1 if years > 0 else -1)).astimezone(zone)
    year = local.year - years
    text = timestamp_text(local.replace(tzinfo=None))
    text = text[text.index("-") :] + offset_text(local)
    if year <= 0:
        return f"{1 - year:04d}{text} BC"  # NB: there is no year 0: 1 BC comes before 1 AD
    return f"{year:04d}{text}"
