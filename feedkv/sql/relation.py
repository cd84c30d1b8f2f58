"""A query's rows read as a table: a derived table (``FROM (SELECT ...) AS s``) or a
CTE's (``WITH a AS (...)``), which joins and SELECT read as they read a table.

Its columns take the query's names (or those the alias lists) and types: the type the
query's expression has where it follows from the tree, else the kind of the column's
first non-NULL value (STRING when it has none: only a constant's conversion reads it,
and there is no row to convert it for). It has no primary key: grouping by all of its
columns determines them, as for any expression.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.descriptor import Column
from feedkv.sql.enums import EnumValue
from feedkv.sql.types import ColumnType, Kind, enum_type_of, kind_of_value

__all__ = ["Relation", "column_types"]


@dataclass(frozen=True, slots=True)
class Relation:
    """Rows with named, typed columns; ``name`` qualifies them (``""``: nothing does,
    as for a subquery without an alias)."""

    name: str
    columns: tuple[Column, ...]
    rows: list[tuple[Any, ...]]

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return self.columns  # NB: no key: only all columns together determine a row

    @classmethod
    def of(
        cls,
        name: str,
        columns: Sequence[str],
        types: Sequence[ColumnType | None],
        rows: list[tuple[Any, ...]],
        renames: Sequence[str] = (),
    ) -> Relation:
        """The rows of a query whose result has ``columns`` of ``types``; ``renames``
        name its leading columns anew (``AS s (a, b)``)."""
        if len(renames) > len(columns):
            raise SQLError(
                "42P10",
                f'table "{name}" has {len(columns)} columns available but '
                f"{len(renames)} columns specified",
            )
        names = [*renames, *columns[len(renames) :]]
        kinds = column_types(types, rows, len(columns))
        made = tuple(
            Column(i + 1, column, kind)
            for i, (column, kind) in enumerate(zip(names, kinds, strict=True))
        )
        return cls(name, made, rows)


def column_types(
    types: Sequence[ColumnType | None], rows: Sequence[tuple[Any, ...]], width: int
) -> list[ColumnType]:
    """Each column's type: the one given, else the kind of its first non-NULL value, else
    STRING."""
    out = []
    for i in range(width):
        given = types[i] if i < len(types) else None
        if given is None:
            value = next((row[i] for row in rows if row[i] is not None), None)
            kind = Kind.JSONB if jsonb.is_json(value) else kind_of_value(value)
            if isinstance(value, EnumValue):
                given = enum_type_of(value)
            else:
                given = ColumnType(kind or Kind.STRING)
        out.append(given)
    return out
