"""The rows of the set-returning functions a FROM clause reads, ``generate_series`` and
``unnest``, from their argument values: pure functions, shared by a source read once
(its arguments constants) and a LATERAL one (read again for each row to its left, its
arguments naming that row's columns)."""

from __future__ import annotations

import datetime
import decimal
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.arrays import Array
from feedkv.sql.interrupt import chunked
from feedkv.sql.interval import Interval
from feedkv.sql.relation import Relation
from feedkv.sql.types import ColumnType, Kind, kind_name, kind_of_value, type_of_value

__all__ = ["rows_from_of", "series_of", "series_shape", "series_type", "unnest_of"]

_TIMES = (Kind.TIMESTAMP, Kind.TIMESTAMPTZ)
# NB: a set-returning function's rows are held in memory (a Relation's list, ~80 bytes a
# row): past this many a series is refused (53200, as CockroachDB's memory budget
# refuses a query), not allocated until the node runs out of memory
MAX_SERIES_ROWS = 10_000_000


def series_of(source: st.Series, values: Sequence[Any], check: Callable[[], None]) -> Relation:
    """The rows of ``generate_series(start, stop [, step])``: INTs from ``start`` to
    ``stop`` included, ``step`` apart (none past ``stop``), as CockroachDB's INT overload;
    a whole number written as a DECIMAL constant (``2e4``) is that INT, as there; none
    for a NULL argument. Over TIMESTAMPs or TIMESTAMPTZs, an INTERVAL ``step``
    (:func:`_time_series`). ``check`` raises when the statement is cancelled: it is
    called between chunks of the rows (:func:`~feedkv.sql.interrupt.chunked`)."""
    if any(isinstance(v, datetime.datetime | Interval) for v in values):
        return _time_series(source, values, check)
    numbers: list[int] = []
    for value in values:
        if (
            isinstance(value, decimal.Decimal)
            and value.is_finite()
            and value == value.to_integral()
        ):
            value = int(value)
        if value is None:
            return series_shape(source, ColumnType(Kind.INT))
        if not isinstance(value, int) or isinstance(value, bool):
            raise SQLError("42883", "unknown signature: generate_series() takes INT arguments here")
        numbers.append(value)
    start, stop = numbers[0], numbers[1]
    step = numbers[2] if len(numbers) > 2 else 1
    if step == 0:
        raise SQLError("22023", "step cannot be 0")
    series = range(start, stop + (1 if step > 0 else -1), step)
    _check_size(len(series))
    rows: list[tuple[Any, ...]] = [(v,) for chunk in chunked(series, check) for v in chunk]
    return _numbered(source.alias, [source.column], [ColumnType(Kind.INT)], rows, source)


def series_type(args: Sequence[ColumnType | None]) -> ColumnType:
    """The type of ``generate_series``' column from its arguments' (``None``: not known):
    a TIMESTAMP[TZ] when its start or stop is one, a TIMESTAMPTZ when only its step is
    known to be an INTERVAL (as PostgreSQL resolves placeholder times), else an INT."""
    times = [t for t in args[:2] if t is not None and t.kind in _TIMES]
    if times:
        return times[0]
    stepped = len(args) == 3 and args[2] is not None and args[2].kind is Kind.INTERVAL
    return ColumnType(Kind.TIMESTAMPTZ if stepped else Kind.INT)


def series_shape(source: st.Series, ctype: ColumnType) -> Relation:
    """``generate_series``' columns, its own of ``ctype``, without rows."""
    return _numbered(source.alias, [source.column], [ctype], [], source)


def _time_series(source: st.Series, values: Sequence[Any], check: Callable[[], None]) -> Relation:
    """``generate_series(start, stop, step)`` over TIMESTAMPs (or TIMESTAMPTZs), as
    PostgreSQL's and CockroachDB's: ``start``, then each time ``step`` (an INTERVAL, or
    its text) is added to the last, while it has not passed ``stop``; none for a NULL
    argument."""
    if len(values) == 3 and isinstance(values[2], str):
        values = [*values[:2], Interval.parse(values[2])]
    if not _times_and_step(values):
        shown = ", ".join(type_of_value(v) for v in values)
        raise SQLError(
            "42883",
            f"unknown signature: generate_series({shown}) (a series of times takes a "
            "start and a stop both TIMESTAMP or both TIMESTAMPTZ, and an INTERVAL step)",
        )
    start, stop, step = values
    zoned = any(isinstance(v, datetime.datetime) and v.tzinfo is not None for v in values)
    ctype = ColumnType(Kind.TIMESTAMPTZ if zoned else Kind.TIMESTAMP)
    if start is None or stop is None or step is None:
        return series_shape(source, ctype)
    if step.span() == 0:
        raise SQLError("22023", "step cannot be 0")
    rising = step.span() > 0
    # NB: its length known before it is made (a month counted as 30 days, as the
    # INTERVAL's span counts it: close enough for a bound)
    _check_size(max(0, (stop - start) // datetime.timedelta(microseconds=1) // step.span()) + 1)

    def times() -> Iterator[datetime.datetime]:
        at = start
        while at <= stop if rising else at >= stop:
            yield at
            try:
                at = step.added_to(at)
            except (OverflowError, ValueError):  # NB: past year 9999: the series ends
                return

    rows: list[tuple[Any, ...]] = [(t,) for chunk in chunked(times(), check) for t in chunk]
    return _numbered(source.alias, [source.column], [ctype], rows, source)


def _check_size(rows: int) -> None:
    if rows > MAX_SERIES_ROWS:
        raise SQLError(
            "53200",
            f"generate_series() would produce more than {MAX_SERIES_ROWS} rows, which a "
            "statement may not hold in memory (a set-returning function's rows are)",
        )


def _times_and_step(values: Sequence[Any]) -> bool:
    """Whether ``values`` fit ``generate_series(timestamp, timestamp, interval)``: two
    times both with a zone or both without, and an INTERVAL; any of them may be NULL."""
    if len(values) != 3:
        return False
    times = [v for v in values[:2] if v is not None]
    return (
        all(isinstance(v, datetime.datetime) for v in times)
        and len({v.tzinfo is None for v in times}) <= 1
        and (values[2] is None or isinstance(values[2], Interval))
    )


def unnest_of(
    source: st.Unnest, values: Sequence[Any], declared: Sequence[ColumnType | None]
) -> Relation:
    """The rows of ``unnest(a [, b...])``: the arrays' elements side by side, the
    shorter arrays padded with NULLs, none for a NULL array (as PostgreSQL's); each
    column of its array's element type (``declared``: each argument's type, if known,
    which a NULL array's elements take)."""
    arrays: list[Array] = []
    types: list[ColumnType] = []
    for value, ctype in zip(values, declared, strict=True):
        if value is None:
            value = Array((), ctype.element if ctype is not None else None)
        if not isinstance(value, Array):
            kind = kind_of_value(value)
            raise SQLError(
                "42883", f"unknown signature: unnest({kind_name(kind) if kind else 'unknown'})"
            )
        arrays.append(value)
        types.append(value.element or ColumnType(Kind.STRING))
    rows = list(itertools.zip_longest(*(a.values for a in arrays)))
    return _numbered(source.alias, list(source.columns), types, rows, source)


def rows_from_of(source: st.RowsFrom, functions: Sequence[Relation]) -> Relation:
    """The rows of ``ROWS FROM (...)`` from each function's (``functions``, in order):
    the n-th rows of each side by side, a function out of rows giving NULLs, until
    every one is."""
    names = [column.name for relation in functions for column in relation.columns]
    types = [column.type for relation in functions for column in relation.columns]
    pads = [(None,) * len(relation.columns) for relation in functions]
    rows = [
        tuple(
            value
            for row, pad in zip(rows, pads, strict=True)
            for value in (pad if row is None else row)
        )
        for rows in itertools.zip_longest(*(relation.rows for relation in functions))
    ]
    return Relation.of(source.alias, names, types, rows, source.columns)


def _numbered(
    alias: str,
    names: list[str],
    types: list[ColumnType],
    rows: list[tuple[Any, ...]],
    source: st.Series | st.Unnest,
) -> Relation:
    """A set-returning function's rows, each with its number (from 1) in a last column
    when it was asked WITH ORDINALITY."""
    if source.ordinality is not None:
        names, types = [*names, source.ordinality], [*types, ColumnType(Kind.INT)]
        rows = [(*row, n) for n, row in enumerate(rows, start=1)]
    return Relation.of(alias, names, types, rows)
