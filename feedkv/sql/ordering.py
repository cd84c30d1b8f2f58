"""ORDER BY's order, as CockroachDB sorts: NULLs first ascending (so last descending),
NaN after NULL and before every other number."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from feedkv.sql import jsonb
from feedkv.sql.expr import Compiled, Context
from feedkv.sql.types import is_nan

__all__ = ["sorted_rows"]


def sorted_rows(
    items: list[Any],
    keys: Sequence[tuple[Compiled, bool]],
    context: Context,
    env_of: Callable[[Any], tuple[Any, ...]] | None = None,
) -> list[Any]:
    """``items`` sorted in place by ``keys`` over each item's row (``env_of(item)``, or
    the item itself). NULLs sort first ascending (as in CockroachDB), so last
    descending; stable sorts from the last key to the first give a multi-key order."""
    for key, descending in reversed(keys):

        def sort_key(item: Any, key: Compiled = key) -> tuple[int, Any]:
            value = key(env_of(item) if env_of is not None else item, context)
            if value is None:
                return (0, 0)
            if jsonb.is_json(value):
                return (2, jsonb.sort_key(value))
            # NB: NaN after NULL and before every number, as in CockroachDB
            return (1, 0) if is_nan(value) else (2, value)

        def json_sort_key(item: Any, key: Compiled = key) -> tuple[int, Any]:
            value = key(env_of(item) if env_of is not None else item, context)
            return (0, 0) if value is None else (2, jsonb.sort_key(value))

        try:
            items.sort(key=sort_key, reverse=descending)
        except TypeError:
            # NB: values of kinds Python cannot order together (a number and an object)
            # are a JSONB column's, whose scalars look like SQL values: JSONB's order.
            items.sort(key=json_sort_key, reverse=descending)
    return items
