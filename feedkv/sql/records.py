"""Row values as values: ``(1, 'a')``, ``ROW(1, 'a')``, and what a record-returning
function such as ``jsonb_each`` gives in a SELECT list.

A :class:`Record` is PostgreSQL's anonymous ``record`` (CockroachDB's tuple): its values
in order, typed by them. Records equal, hash and sort element by element, as CockroachDB
compares tuples: NULL before every value (so ``DISTINCT``, ``GROUP BY`` and ``ORDER BY``
take them as they take a column), NaN after NULL and before every number. Its text is
PostgreSQL's ``record_out``, which CockroachDB's wire and CLI write: ``(1,a)``, a NULL as
nothing (``(2,)``), an element quoted when it is empty or holds a quote, a backslash, a
parenthesis, a comma or white space, a quote or backslash inside doubled (``(1,"a b")``).

To Python (an embedded ``db.sql`` result) a record is a read-only sequence of its values:
it iterates, indexes, equals a tuple of the same values and shows as one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

__all__ = ["RECORD_OID", "Record"]

# pg_type.oid of ``record``, the type a row value is sent as (as CockroachDB sends a tuple)
RECORD_OID = 2249


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Record(Sequence[Any]):
    values: tuple[Any, ...]
    # NB: the places of JSONB elements: a JSON true or "a" is a Python True or str, which
    # shows as true or "a" only when known for JSON (as a JSONB column's type tells it)
    json_at: frozenset[int] = frozenset()
    # The elements' names, where the record is a table's row (``row_to_json(t)``): its
    # JSON object's keys. Not part of its value: records compare by their elements.
    names: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return self.values == other
        return isinstance(other, Record) and self.values == other.values

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        for a, b in zip(self.values, other.values, strict=False):
            if a == b or (a is None and b is None):
                continue
            return _element_before(a, b)
        return len(self.values) < len(other.values)

    def __hash__(self) -> int:
        return hash(self.values)

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Record: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return Record(self.values[index])  # NB: for Python's eyes only, without json_at
        return self.values[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        return repr(self.values)

    def text(self, show: Callable[[Any, bool], str]) -> str:
        """PostgreSQL's text of the record, each non-NULL element shown by ``show``
        (told whether it is a JSONB value)."""
        parts = []
        for place, value in enumerate(self.values):
            if value is None:
                parts.append("")
                continue
            shown = show(value, place in self.json_at)
            if not shown or any(ch in _SPECIAL or ch.isspace() for ch in shown):
                shown = '"' + shown.replace("\\", "\\\\").replace('"', '""') + '"'
            parts.append(shown)
        return "(" + ",".join(parts) + ")"


_SPECIAL = frozenset('"\\(),')


def _element_before(a: Any, b: Any) -> bool:
    """Whether element ``a`` sorts before a different ``b``: NULL first, then NaN,
    then the values' own order."""
    if a is None or b is None:
        return a is None
    a_nan, b_nan = _is_nan(a), _is_nan(b)
    if a_nan or b_nan:
        return a_nan and not b_nan
    return bool(a < b)


def _is_nan(value: Any) -> bool:
    return bool(value != value)  # NB: a float or Decimal NaN is the one value unequal to itself
