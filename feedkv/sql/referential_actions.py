"""What a foreign key's ON DELETE / ON UPDATE action does to a referencing row.

When a referenced row goes (DELETE) or changes the values a foreign key references
(UPDATE), each row that references it undergoes the key's action, in the same
transaction, as in PostgreSQL and CockroachDB:

- ``NO ACTION`` / ``RESTRICT``: nothing; the statement fails (23503) while such a row
  exists. (They differ only for deferred checks, which neither feedkv nor CockroachDB
  has.)
- ``CASCADE``: a delete deletes the referencing row; an update gives it the referenced
  row's new values.
- ``SET NULL``: the referencing columns become NULL.
- ``SET DEFAULT``: they take their columns' defaults (which must then name a row of the
  referenced table, else 23503).

This module is the pure part: :func:`referencing_change` turns one referencing row into
what it becomes. :mod:`feedkv.sql.constraints` finds the rows and writes the changes,
which then go through every check a write goes through (their own foreign keys and
actions included), so actions chain across tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.descriptor import ForeignKey

__all__ = ["ACTS", "CASCADES_LIMIT", "action_of", "referencing_change"]

Row = Mapping[int, Any]

ACTS = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})  # the actions that write
# Rounds of cascaded writes one statement may make, as CockroachDB's default
# foreign_key_cascades_limit: a bound on work, not on correctness (cycles end by
# themselves once the rows hold the new values).
CASCADES_LIMIT = 10_000


def action_of(fk: ForeignKey, new_parent: Row | None) -> str:
    """The action ``fk`` takes when its referenced row is deleted (``new_parent`` is
    None) or updated to ``new_parent``."""
    return fk.on_delete if new_parent is None else fk.on_update


def referencing_change(
    fk: ForeignKey,
    action: str,
    row: Row,
    new_parent: Row | None,
    defaults: Sequence[Any] = (),
) -> dict[int, Any] | None:
    """What referencing ``row`` becomes under ``action`` (one of :data:`ACTS`): the new
    row, or ``None`` when it is deleted. ``new_parent``: the referenced row's new
    values (``None``: it was deleted); ``defaults``: the referencing columns' default
    values, for SET DEFAULT."""
    if action == "CASCADE":
        if new_parent is None:
            return None
        values: Sequence[Any] = [new_parent.get(i) for i in fk.referenced]
    elif action == "SET NULL":
        values = [None] * len(fk.column_ids)
    elif action == "SET DEFAULT":
        values = defaults
    else:
        raise SQLError("XX000", f"foreign key {fk.name!r} has no writing action {action!r}")
    changed = dict(row)
    changed.update(zip(fk.column_ids, values, strict=True))
    return changed
