"""ENUM values: a label of a user-defined type (``CREATE TYPE mood AS ENUM (...)``).

A value knows its type's labels, so it orders by the position of its label in them,
as PostgreSQL orders enums (``'sad' < 'happy'`` when declared so), not by the text.
Values of two different enum types do not compare. Keys store the position (key
order is enum order), values the label; decoding either needs the column's labels
(:func:`feedkv.sql.types.from_key`, :func:`feedkv.sql.types.from_value`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from feedkv.errors import SQLError

__all__ = ["EnumValue"]


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class EnumValue:
    label: str
    labels: tuple[str, ...]
    type_name: str = ""

    @classmethod
    def of(cls, label: str, labels: tuple[str, ...], type_name: str) -> EnumValue:
        if label not in labels:
            raise SQLError("22P02", f'invalid input value for enum {type_name}: "{label}"')
        return cls(label, labels, type_name)

    @property
    def position(self) -> int:
        return self.labels.index(self.label)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EnumValue)
            and self.labels == other.labels
            and self.label == other.label
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, EnumValue) or other.labels != self.labels:
            return NotImplemented
        return self.position < other.position

    def __hash__(self) -> int:
        return hash((self.label, self.labels))

    def __str__(self) -> str:
        return self.label
