"""JSONB values, and the one thing Python cannot say about them on its own: a JSON
``null`` is not SQL NULL.

A JSONB value in Python is its parsed document (dict, list, str, int, Decimal, bool).
A number with a fraction or an exponent is a ``decimal.Decimal`` holding its digits, as
CockroachDB keeps a JSON number as an apd decimal: ``'{"a": 1.10}'::JSONB`` reads back
as ``{"a": 1.10}`` and ``'1e2'::JSONB`` as ``1E+2`` (:func:`loads`); an integer is an
``int``. A float may stand in a document built in Python, and is written as Python
writes it.
Inside a document a JSON null is ``None``, as :mod:`json` gives it; a whole value that
is the JSON null is :data:`JSON_NULL`, since ``None`` is SQL NULL everywhere else. So
``'null'::JSONB IS NULL`` is false, ``'{"a": null}'::JSONB -> 'a'`` is ``JSON_NULL``
while ``->> 'a'`` is SQL NULL, and a JSONB column holding JSON null is stored as the
text ``null`` (a SQL NULL stores nothing). Use :func:`document` to put a value inside
another document and :func:`from_document` to take one out.
A whole value that is a JSON string is a :class:`JsonString`: a ``str`` marked as a
document, so that it is not read as JSON text again when a JSONB value is cast or
written to a JSONB column (``'"s"'::JSONB::JSONB``, ``INSERT ... SELECT`` of a JSONB
column, a JSONB parameter ``"s"``).

NB: stores written before JSON null had a value of its own kept it as SQL NULL; such
rows read back as SQL NULL, as they were stored (the difference was lost on write).
"""

from __future__ import annotations

import decimal
import json
from typing import Any, Final

__all__ = [
    "JSON_NULL",
    "JsonNull",
    "JsonString",
    "as_text",
    "concat",
    "contains",
    "document",
    "dumps",
    "from_document",
    "is_json",
    "loads",
    "sort_key",
    "type_name",
]


class JsonNull:
    """The JSON ``null`` as a whole SQL value (one instance: :data:`JSON_NULL`)."""

    _instance: JsonNull | None = None

    def __new__(cls) -> JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __reduce__(self) -> str:
        return "JSON_NULL"  # NB: unpickles as the module's singleton (Spark partitions)

    def __hash__(self) -> int:
        return hash("feedkv.sql.jsonb.JSON_NULL")

    def __eq__(self, other: object) -> bool:
        return other is self


JSON_NULL: Final = JsonNull()


class JsonString(str):
    """A whole JSONB value that is a JSON string (see the module): it compares, hashes
    and prints as its ``str``."""

    __slots__ = ()


def document(value: Any) -> Any:
    """``value`` as it stands inside a JSON document (``JSON_NULL`` and SQL NULL both
    become the document's ``None``)."""
    return None if value is JSON_NULL else value


def from_document(value: Any) -> Any:
    """A part of a document taken out as a whole JSONB value (``None``: ``JSON_NULL``,
    a string: a :class:`JsonString`)."""
    if value is None:
        return JSON_NULL
    return JsonString(value) if type(value) is str else value


def concat(left: Any, right: Any) -> Any:
    """``left || right`` of two JSONB values, as PostgreSQL's: two objects merge (the
    right one's keys win), and anything else is the array of both's elements (a value
    that is no array is one element)."""
    a, b = document(left), document(right)
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **b}
    return [*(a if isinstance(a, list) else [a]), *(b if isinstance(b, list) else [b])]


def is_json(value: Any) -> bool:
    """Whether ``value`` can only be a JSONB value (a document or ``JSON_NULL``)."""
    return value is JSON_NULL or isinstance(value, dict | list)


def as_text(value: Any) -> str | None:
    """A JSON value as ``->>`` gives it: a string as its text, a JSON null as SQL NULL,
    anything else as JSON text."""
    if value is None or value is JSON_NULL:
        return None
    if isinstance(value, str):
        return str(value)  # NB: text, no longer a document (its ::JSONB parses it)
    if isinstance(value, bool):
        return "true" if value else "false"
    return dumps(value, spaced=True)


def loads(text: str) -> Any:
    """A JSONB value from JSON text, its numbers keeping their digits (a fraction or an
    exponent: a ``Decimal``). Raises ValueError for text that is not JSON, ``NaN`` and
    ``Infinity`` included."""
    return from_document(json.loads(text, parse_float=decimal.Decimal, parse_constant=_constant))


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def dumps(value: Any, *, spaced: bool = False) -> str:
    """A JSONB value as JSON text: compact (storage, keys sorted) or as CockroachDB
    prints it (``{"a": 1, "b": [1, 2]}``, keys sorted)."""
    separators = (", ", ": ") if spaced else (",", ":")
    try:
        return json.dumps(
            document(value), sort_keys=True, separators=separators, ensure_ascii=False
        )
    except TypeError:  # NB: a DECIMAL inside (to_jsonb(1.50)), which json cannot write
        return _dumps_decimals(document(value), *separators)


def _dumps_decimals(value: Any, item_separator: str, key_separator: str) -> str:
    """:func:`dumps` of a document holding finite DECIMALs, written with their digits."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        items = (
            json.dumps(k, ensure_ascii=False)
            + key_separator
            + _dumps_decimals(v, item_separator, key_separator)
            for k, v in sorted(value.items())
        )
        return "{" + item_separator.join(items) + "}"
    if isinstance(value, list | tuple):
        parts = (_dumps_decimals(v, item_separator, key_separator) for v in value)
        return "[" + item_separator.join(parts) + "]"
    return json.dumps(value, ensure_ascii=False)


def type_name(value: Any) -> str:
    """``jsonb_typeof``: object, array, string, number, boolean or null."""
    value = document(value)
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "number"


# CockroachDB's (and PostgreSQL's) order of JSON values of different types.
_RANK = {"null": 0, "string": 1, "number": 2, "boolean": 3, "array": 4, "object": 5}


def sort_key(value: Any) -> tuple[Any, ...]:
    """A key whose order is JSONB's: null < strings < numbers < false < true < arrays <
    objects; arrays element by element, then shorter first; objects by their number of
    pairs, then key by key and value by value in key order."""
    value = document(value)
    kind = type_name(value)
    rank = _RANK[kind]
    if isinstance(value, list):
        return (rank, len(value), tuple(sort_key(v) for v in value))
    if isinstance(value, dict):
        items = sorted(value.items())
        return (
            rank,
            len(items),
            tuple(k for k, _ in items),
            tuple(sort_key(v) for _, v in items),
        )
    if value is None:
        return (rank,)
    return (rank, value)


def contains(a: Any, b: Any, *, top: bool = True) -> bool:
    """``a @> b``: every path and value of ``b`` is in ``a``. An array contains an array
    whose elements each are contained by one of its elements (and, at the top level
    only, a scalar it holds); an object contains an object whose pairs it contains."""
    a, b = document(a), document(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and all(
            k in a and contains(a[k], v, top=False) for k, v in b.items()
        )
    if isinstance(a, list):
        if isinstance(b, list):
            return all(any(contains(x, y, top=False) for x in a) for y in b)
        return top and not isinstance(b, dict) and any(_same_scalar(x, b) for x in a)
    return _same_scalar(a, b)


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return sort_key(a) == sort_key(b)
