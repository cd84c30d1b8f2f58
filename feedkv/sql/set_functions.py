"""The rows of the set-returning functions a FROM clause reads, ``generate_series`` and
``unnest``, from their argument values: pure functions, shared by a source read once
(its arguments constants) and a LATERAL one (read again for each row to its left, its
arguments naming that row's columns)."""

from __future__ import annotations

import decimal
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.arrays import Array
from feedkv.sql.interrupt import chunked
from feedkv.sql.relation import Relation
from feedkv.sql.types import ColumnType, Kind, kind_name, kind_of_value

__all__ = ["rows_from_of", "series_of", "unnest_of"]


def series_of(source: st.Series, values: Sequence[Any], check: Callable[[], None]) -> Relation:
    """The rows of ``generate_series(start, stop [, step])``: INTs from ``start`` to
    ``stop`` included, ``step`` apart (none past ``stop``), as CockroachDB's INT overload;
    a whole number written as a DECIMAL constant (``2e4``) is that INT, as there; none
    for a NULL argument. ``check`` raises when the statement is cancelled: it is called
    between chunks of the rows (:func:`~feedkv.sql.interrupt.chunked`)."""
    numbers: list[int] = []
    for value in values:
        if (
            isinstance(value, decimal.Decimal)
            and value.is_finite()
            and value == value.to_integral()
        ):
            value = int(value)
        if value is None:
            return _numbered(source.alias, [source.column], [ColumnType(Kind.INT)], [], source)
        if not isinstance(value, int) or isinstance(value, bool):
            raise SQLError("42883", "unknown signature: generate_series() takes INT arguments here")
        numbers.append(value)
    start, stop = numbers[0], numbers[1]
    step = numbers[2] if len(numbers) > 2 else 1
    if step == 0:
        raise SQLError("22023", "step cannot be 0")
    series = range(start, stop + (1 if step > 0 else -1), step)
    rows: list[tuple[Any, ...]] = [(v,) for chunk in chunked(series, check) for v in chunk]
    return _numbered(source.alias, [source.column], [ColumnType(Kind.INT)], rows, source)


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
