"""What ``ALTER TABLE ... ALTER COLUMN ... TYPE`` must do to a column's stored values.

CockroachDB sorts a column type change into three kinds, and so does feedkv:

- **trivial**: every stored value is already a value of the new type, encoded the
  same way (INT4 to INT8, STRING(10) to STRING): only the descriptor
  changes;
- **validate**: the new type is a narrower one of the same family (INT8 to INT4,
  STRING to STRING(5)): nothing is rewritten, but every stored value must fit, else
  the change fails (22003, 22001) and changes nothing;
- **rewrite**: the values become other values (INT to STRING, DECIMAL(10,2) to
  DECIMAL(10,1), anything with ``USING``): every row is rewritten in the change's
  transaction, so a changefeed sees the rows at the change's timestamp, as it sees an
  ADD COLUMN's backfill.

A rewrite without ``USING`` takes each value through the cast PostgreSQL would apply on
assignment (:func:`automatic`); other kinds need ``USING`` (42804, with a hint saying
so), as in PostgreSQL and CockroachDB.
"""

from __future__ import annotations

import enum

from feedkv.sql.types import ColumnType, Kind

__all__ = ["Conversion", "automatic", "conversion"]


class Conversion(enum.Enum):
    TRIVIAL = "trivial"
    VALIDATE = "validate"
    REWRITE = "rewrite"


_NUMBERS = frozenset({Kind.INT, Kind.FLOAT, Kind.DECIMAL})
_TIMES = frozenset({Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ})
# Kinds whose width only bounds the values (a wider or unbounded one holds them all).
_BOUNDED_BY_WIDTH = frozenset({Kind.INT, Kind.STRING})


def conversion(old: ColumnType, new: ColumnType, *, using: bool = False) -> Conversion:
    """Which kind of change turning a column of type ``old`` into ``new`` is; ``using``:
    the statement gives a USING expression (always a rewrite, unless the types are the
    same and it is the column itself, which the caller decides)."""
    if using:
        return Conversion.REWRITE
    if old == new:
        return Conversion.TRIVIAL
    if old.kind is not new.kind:
        return Conversion.REWRITE
    if old.kind in _BOUNDED_BY_WIDTH and _same_but_width(old, new):
        if new.width is None or (old.width is not None and new.width >= old.width):
            return Conversion.TRIVIAL
        return Conversion.VALIDATE
    if old.kind is Kind.DECIMAL and new.precision is None and new.scale is None:
        return Conversion.TRIVIAL  # every DECIMAL value is one of unbounded DECIMAL
    return Conversion.REWRITE


def _same_but_width(old: ColumnType, new: ColumnType) -> bool:
    # NB: to CHAR(n) from a STRING, stored values lose their trailing spaces: a rewrite
    return old.precision == new.precision and old.scale == new.scale and old.fixed >= new.fixed


def automatic(old: Kind, new: Kind) -> bool:
    """Whether values of kind ``old`` become values of kind ``new`` without USING: the
    assignment casts (between numbers, from anything to STRING, between dates and
    timestamps)."""
    if old is new or new is Kind.STRING:
        return True
    if old in _NUMBERS and new in _NUMBERS:
        return True
    return old in _TIMES and new in _TIMES
