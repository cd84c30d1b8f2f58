"""Any SQL value as a JSON document part, as CockroachDB's ``tree.AsJSON`` converts it
for ``to_jsonb``, ``jsonb_build_object`` and ``jsonb_agg``.

Numbers stay numbers (a DECIMAL keeps its digits: ``1.50`` is written ``1.50``; a
FLOAT has its shortest digits: ``2.0`` is ``2``); a NaN or infinity, which JSON has no
number for, is the string CockroachDB writes (``"NaN"``, ``"Infinity"``). A
TIMESTAMPTZ is RFC 3339 in the session's time zone (``"2026-01-02T03:04:05.123Z"``,
``"...+01:00"`` elsewhere), a TIMESTAMP the same without a zone; neither has trailing
zeros in its fraction. An array is a JSON array of its elements' forms, an enum its
label, a row value ``(1, 'a')`` the object ``{"f1": 1, "f2": "a"}``, and every other
value (DATE, TIME, INTERVAL, UUID, BYTES as ``\\x...``, INET, BIT) the string of its
SQL text.

NB: this is the SQL side. The changefeed's JSON encoder writes text directly and has
forms of its own (a TIMESTAMPTZ always in UTC), so it does not use this module.
"""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.arrays import Array
from feedkv.sql.bits import BitString
from feedkv.sql.enums import EnumValue
from feedkv.sql.inet import Inet
from feedkv.sql.interval import Interval
from feedkv.sql.records import Record
from feedkv.sql.time_zone import current_zone, infinity_of, shifted
from feedkv.sql.types import format_value, type_of_value

__all__ = ["as_json"]


def as_json(value: Any) -> Any:
    """``value`` as it stands inside a JSON document (SQL NULL and JSON null are
    ``None``)."""
    if value is None or jsonb.is_json(value):
        return jsonb.document(value)
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return format_value(value)
        # NB: CockroachDB's JSON number of a FLOAT is the decimal of its shortest digits,
        # trailing zeros dropped: 2.0 is 2, 100.0 is 1E+2 (as Decimal.normalize writes)
        return decimal.Decimal(repr(float(value))).normalize()
    if isinstance(value, decimal.Decimal):
        return value if value.is_finite() else format_value(value)
    if isinstance(value, datetime.datetime):
        return _rfc3339(value)
    if isinstance(value, Array):
        return [as_json(v) for v in value.values]
    if isinstance(value, EnumValue):
        return value.label
    if isinstance(value, Record):
        if value.names:  # a table's row: its columns' names
            return {name: as_json(v) for name, v in zip(value.names, value.values, strict=True)}
        # NB: an unlabelled tuple's keys are its elements' places, as CockroachDB and
        # PostgreSQL name a record's anonymous columns
        return {f"f{place}": as_json(v) for place, v in enumerate(value.values, start=1)}
    if isinstance(value, _AS_TEXT):
        return format_value(value)
    raise SQLError("0A000", f"a value of type {type_of_value(value)} has no JSON form here")


# Values whose JSON form is the string of their SQL text.
_AS_TEXT = (bytes, datetime.date, datetime.time, uuid.UUID, Interval, Inet, BitString)


def _rfc3339(value: datetime.datetime) -> str:
    """Go's ``time.RFC3339Nano`` (TIMESTAMPTZ, in the session's zone, ``Z`` for UTC)
    or the same without the zone (TIMESTAMP); ``infinity`` and ``-infinity`` as those
    words."""
    infinity = infinity_of(value)
    if infinity is not None:
        return infinity
    if value.tzinfo is not None:
        value = shifted(value, current_zone())
    wall = value.replace(tzinfo=None).isoformat()
    zone = value.isoformat()[len(wall) :]  # "" for a TIMESTAMP, else "+hh:mm"
    if value.microsecond:
        wall = wall.rstrip("0")
    return wall + ("Z" if zone == "+00:00" else zone)
