"""The array functions of PostgreSQL that CockroachDB offers: ``array_append``,
``array_prepend``, ``array_cat``, ``array_remove``, ``array_position``,
``array_positions``, ``array_to_string`` and ``string_to_array``.

Unlike the scalar functions (:mod:`feedkv.sql.scalar_functions`), these are not
strict: each is given its NULL arguments and answers as PostgreSQL does. A NULL array
is an empty one to ``array_append``, ``array_prepend`` and ``array_cat``, and NULL to
the others; a NULL element is appended, removed or found like any other (elements
match when they are *not distinct*, so NULL finds NULL).

An element joins an array as a value of the array's element type (``coerce``: 42804
or 22P02 when it is not one), as ``||`` joins them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.arrays import Array
from feedkv.sql.types import ColumnType, Kind, coerce, kind_of_value, type_of_value

__all__ = ["FUNCTIONS", "array_to_string"]

_STRING = ColumnType(Kind.STRING)


def _array(value: Any, name: str) -> Array | None:
    if value is not None and not isinstance(value, Array):
        raise SQLError(
            "42883", f"unknown signature: {name}() takes an array, not {type_of_value(value)}"
        )
    return value


def _element_type(value: Any) -> ColumnType:
    """The element type of an array made from ``value`` alone (STRING for a NULL, as
    ``ARRAY[NULL]`` is typed)."""
    if isinstance(value, Array):
        raise SQLError("0A000", "arrays of arrays are not supported")
    return ColumnType(kind_of_value(value) or Kind.STRING)


def _of(array: Array, value: Any) -> Any:
    return None if value is None else coerce(value, array.element, None)


def array_append(array: Any, value: Any) -> Array:
    """array_append(a, x): ``a`` with ``x`` last."""
    found = _array(array, "array_append")
    if found is None:
        return Array((value,), _element_type(value))
    return Array((*found.values, _of(found, value)), found.element)


def array_prepend(value: Any, array: Any) -> Array:
    """array_prepend(x, a): ``a`` with ``x`` first."""
    found = _array(array, "array_prepend")
    if found is None:
        return Array((value,), _element_type(value))
    return Array((_of(found, value), *found.values), found.element)


def array_cat(first: Any, second: Any) -> Array | None:
    """array_cat(a, b): ``a``'s elements then ``b``'s; NULL only when both are."""
    left, right = _array(first, "array_cat"), _array(second, "array_cat")
    if left is None or right is None:
        return left if right is None else right
    # NB: an empty array is of any element type: ARRAY[] (STRING[]) takes ints
    element = left.element if left.values or not right.values else right.element
    if left.values and right.values and left.element.kind is not right.element.kind:
        raise SQLError(
            "42883",
            f"unknown signature: array_cat({type_of_value(left)}, {type_of_value(right)})",
        )
    return Array(left.values + right.values, element)


def array_remove(array: Any, value: Any) -> Array | None:
    """array_remove(a, x): ``a`` without the elements not distinct from ``x``."""
    found = _array(array, "array_remove")
    if found is None:
        return None
    target = _of(found, value)
    return Array(tuple(v for v in found.values if v != target), found.element)


def array_positions(array: Any, value: Any) -> Array | None:
    """array_positions(a, x): the 1-based positions of the elements not distinct from
    ``x``, in order (empty when there are none)."""
    found = _array(array, "array_positions")
    if found is None:
        return None
    target = _of(found, value)
    at = tuple(n for n, v in enumerate(found.values, start=1) if v == target)
    return Array(at, ColumnType(Kind.INT))


def array_position(array: Any, value: Any) -> int | None:
    """array_position(a, x): the first of :func:`array_positions`, NULL for none."""
    positions = array_positions(array, value)
    return positions.values[0] if positions is not None and positions.values else None


def array_to_string(
    text: Callable[[Any], str], array: Any, separator: Any, null: Any = None
) -> str | None:
    """array_to_string(a, sep [, null_text]): the elements' text (``text`` renders
    one) joined by ``sep``; a NULL element is ``null_text``, or left out without one."""
    found = _array(array, "array_to_string")
    if found is None or separator is None:
        return None
    parts = [text(v) if v is not None else null for v in found.values]
    return str(separator).join(p for p in parts if p is not None)


def string_to_array(value: Any, separator: Any, null: Any = None) -> Array | None:
    """string_to_array(s, sep [, null_text]): ``s`` split at each ``sep`` (a NULL one
    splits it into its characters, an empty one not at all); a part equal to
    ``null_text`` is NULL. An empty ``s`` is an empty array."""
    if value is None:
        return None
    if not isinstance(value, str) or not isinstance(separator, str | None):
        raise SQLError("42883", "unknown signature: string_to_array() takes strings")
    if not value:
        parts: list[str] = []
    elif separator is None:
        parts = list(value)
    elif not separator:
        parts = [value]
    else:
        parts = value.split(separator)
    return Array(tuple(None if p == null else p for p in parts), _STRING)


# name -> (function, fewest arguments, most); array_to_string takes a renderer first
FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    "array_append": (array_append, 2, 2),
    "array_prepend": (array_prepend, 2, 2),
    "array_cat": (array_cat, 2, 2),
    "array_remove": (array_remove, 2, 2),
    "array_position": (array_position, 2, 2),
    "array_positions": (array_positions, 2, 2),
    "array_to_string": (array_to_string, 2, 3),
    "string_to_array": (string_to_array, 2, 3),
}
