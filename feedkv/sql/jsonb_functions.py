"""The JSONB functions that build or rewrite a document: ``jsonb_set``,
``jsonb_insert``, ``jsonb_strip_nulls``, ``jsonb_pretty`` and ``jsonb_build_array``, as
PostgreSQL and CockroachDB define them: pure functions of JSONB values
(:mod:`feedkv.sql.jsonb`), which they never change in place.

A path is a STRING[] (or its text, ``'{a,0}'``) of object keys and array indexes; an
index below 0 counts from the end. ``jsonb_set`` and ``jsonb_insert`` give the target
unchanged when the path leads nowhere before its last step; a step into an array that is
not an integer is 22P02, a path into a scalar 22023.
"""

from __future__ import annotations

import copy
import decimal
from collections.abc import Sequence
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import jsonb
from feedkv.sql.arrays import Array, parse_array_text
from feedkv.sql.as_json import as_json

__all__ = [
    "array_elements",
    "build_array",
    "each",
    "jsonb_insert",
    "jsonb_pretty",
    "jsonb_set",
    "object_keys",
    "strip_nulls",
]

_SCALARS = (str, int, float, decimal.Decimal)


def _json(value: Any) -> Any:
    """A JSONB argument's document (``TypeError`` for a value of another type)."""
    if not (jsonb.is_json(value) or isinstance(value, _SCALARS)):
        raise TypeError(value)
    return jsonb.document(value)


def _path(value: Any) -> list[str | None]:
    if isinstance(value, Array):
        return [None if v is None else str(v) for v in value.values]
    if isinstance(value, str):
        return [None if v is None else str(v) for v in parse_array_text(value)]
    raise TypeError(value)


def _index(step: str | None, position: int) -> int:
    try:
        return int(step)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SQLError(
            "22P02", f"path element at position {position} is not an integer: {step!r}"
        ) from None


def _container(document: Any, steps: Sequence[str | None]) -> Any:
    """The object or array the path's last step is in, or ``None`` if the path leads
    nowhere; 22023 for a path into a scalar."""
    if not isinstance(document, dict | list):
        raise SQLError("22023", "cannot set path in scalar")
    node: Any = document
    for position, step in enumerate(steps, start=1):
        if isinstance(node, dict):
            node = node.get(step) if step is not None else None
        else:
            index = _index(step, position)
            node = node[index] if -len(node) <= index < len(node) else None
        if not isinstance(node, dict | list):
            return None
    return node


def jsonb_set(target: Any, path: Any, value: Any, create_missing: Any = True) -> Any:
    """``jsonb_set(target, path, new [, create_missing])``: ``target`` with the value
    at ``path`` replaced by ``new``, or added where it is missing (unless
    ``create_missing`` is false: an index past either end of an array adds at that end)."""
    document, steps, new = copy.deepcopy(_json(target)), _path(path), _json(value)
    if not isinstance(create_missing, bool):
        raise TypeError(create_missing)
    if not steps:
        return jsonb.from_document(document)
    node = _container(document, steps[:-1])
    last = steps[-1]
    if isinstance(node, dict) and last is not None and (last in node or create_missing):
        node[last] = new
    elif isinstance(node, list):
        index = _index(last, len(steps))
        if -len(node) <= index < len(node):
            node[index] = new
        elif create_missing:
            node.insert(0 if index < 0 else len(node), new)
    return jsonb.from_document(document)


def jsonb_insert(target: Any, path: Any, value: Any, after: Any = False) -> Any:
    """``jsonb_insert(target, path, new [, insert_after])``: ``new`` put into the array
    before (or after) the index ``path`` ends in, or into the object under its last key,
    which must be missing (22023 otherwise)."""
    document, steps, new = copy.deepcopy(_json(target)), _path(path), _json(value)
    if not isinstance(after, bool):
        raise TypeError(after)
    if not steps:
        return jsonb.from_document(document)
    node = _container(document, steps[:-1])
    last = steps[-1]
    if isinstance(node, dict) and last is not None:
        if last in node:
            raise SQLError("22023", "cannot replace existing key")
        node[last] = new
    elif isinstance(node, list):
        index = _index(last, len(steps))
        if index < 0:
            index = max(len(node) + index, -1 if after else 0)
        node.insert(min(index + after, len(node)), new)
    return jsonb.from_document(document)


def _stripped(document: Any) -> Any:
    if isinstance(document, dict):
        return {k: _stripped(v) for k, v in document.items() if v is not None}
    if isinstance(document, list):
        return [_stripped(v) for v in document]
    return document


def strip_nulls(target: Any) -> Any:
    """``jsonb_strip_nulls(j)``: every object field whose value is null removed, at any
    depth (an array's nulls stay)."""
    return jsonb.from_document(_stripped(_json(target)))


def _pretty(document: Any, depth: int) -> str:
    indent, inner = "    " * depth, "    " * (depth + 1)
    if isinstance(document, dict) and document:
        items = [
            f"{inner}{jsonb.dumps(key)}: {_pretty(document[key], depth + 1)}"
            for key in sorted(document)
        ]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(document, list) and document:
        items = [inner + _pretty(item, depth + 1) for item in document]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return jsonb.dumps(jsonb.from_document(document), spaced=True)


def jsonb_pretty(target: Any) -> str:
    """``jsonb_pretty(j)``: its text, one element or field a line, indented by four
    spaces."""
    return _pretty(_json(target), 0)


def build_array(values: Sequence[Any]) -> Any:
    """``jsonb_build_array(...)``: a JSON array of the values (a SQL NULL is a JSON
    null)."""
    return [as_json(v) for v in values]


def object_keys(target: Any) -> list[str]:
    """``jsonb_object_keys(j)``'s rows: an object's keys, in the order its text has them
    (22023 for an array or a scalar)."""
    document = _json(target)
    if not isinstance(document, dict):
        what = "an array" if isinstance(document, list) else "a scalar"
        raise SQLError("22023", f"cannot call jsonb_object_keys on {what}")
    return sorted(document)


def array_elements(target: Any) -> list[Any]:
    """``jsonb_array_elements(j)``'s rows: an array's elements, each a JSONB value
    (22023 for an object or a scalar)."""
    document = _json(target)
    if not isinstance(document, list):
        what = "an object" if isinstance(document, dict) else "a scalar"
        raise SQLError("22023", f"cannot extract elements from {what}")
    return [jsonb.from_document(v) for v in document]


def each(target: Any, function: str = "jsonb_each") -> list[tuple[str, Any]]:
    """``jsonb_each(j)``'s rows: an object's keys and values, in :func:`object_keys`'s
    order (22023 for an array or a scalar, naming ``function``, the one called)."""
    document = _json(target)
    if not isinstance(document, dict):
        raise SQLError("22023", f"cannot call {function} on a non-object")
    return [(key, jsonb.from_document(document[key])) for key in sorted(document)]
