"""ENUM values: a label of a user-defined type (``CREATE TYPE mood AS ENUM (...)``).

A value knows its type's labels, so it orders by the position of its label in them,
as PostgreSQL orders enums (``'sad' < 'happy'`` when declared so), not by the text.
Values of two different enum types do not compare.

Each label also has a *code*, its physical representation, as CockroachDB gives each
enum member one: a byte string, the codes ascending in the labels' order. Keys and
stored values hold the code, not the position or the label: ``ALTER TYPE ... ADD VALUE
'x' BEFORE 'y'`` gives the new label a code between its neighbours' (there is always
one, :func:`code_between`), so no stored key moves, and ``RENAME VALUE`` keeps the
code, so no stored value changes. Decoding either needs the column's labels and codes
(:func:`feedkv.sql.types.from_key`, :func:`feedkv.sql.types.from_value`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from feedkv.errors import InvariantViolation, SQLError

__all__ = ["EnumValue", "code_between", "first_codes"]


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class EnumValue:
    label: str
    labels: tuple[str, ...]
    type_name: str = ""
    codes: tuple[bytes, ...] = ()  # each label's code, as ``labels``
    type_id: int = 0  # the type's descriptor id (its OID is 100000 + id)

    @classmethod
    def of(
        cls,
        label: str,
        labels: tuple[str, ...],
        type_name: str,
        codes: tuple[bytes, ...] = (),
        type_id: int = 0,
    ) -> EnumValue:
        if label not in labels:
            raise SQLError("22P02", f'invalid input value for enum {type_name}: "{label}"')
        return cls(label, labels, type_name, codes, type_id)

    @property
    def position(self) -> int:
        return self.labels.index(self.label)

    @property
    def code(self) -> bytes:
        """The label's code, as keys and stored values hold it."""
        if len(self.codes) != len(self.labels):
            raise InvariantViolation(f"enum {self.type_name} has no code for label {self.label!r}")
        return self.codes[self.position]

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


def first_codes(count: int) -> tuple[bytes, ...]:
    """The codes of a new type's ``count`` labels: evenly spread over the byte strings of
    the fewest bytes that hold them, so a label added later finds room near any of them.
    NB: trailing zero bytes are dropped (the order stays): below a code that ends in
    one there would be no room (nothing lies between ``01`` and ``01 00``)."""
    width = 1
    while 256**width <= count:
        width += 1
    step = 256**width // (count + 1)
    return tuple(((i + 1) * step).to_bytes(width, "big").rstrip(b"\0") for i in range(count))


def code_between(low: bytes | None, high: bytes | None) -> bytes:
    """A byte string strictly between ``low`` and ``high`` (``None``: no bound) in byte
    order, short, and never ending in a zero byte (so there is always room below it
    too). Past the last code it is the next one up (``c0`` then ``c1``: a type whose
    labels are added at the end, the usual ALTER TYPE, grows a byte per 255 of them),
    before the first the next one down; between two, their midpoint (the digits as
    base-256 fractions; where the bounds' digits are adjacent it takes ``low``'s and
    goes a digit deeper, no longer bound by ``high``)."""
    if low is not None and high is not None and low >= high:
        raise InvariantViolation(f"no enum code between {low.hex()} and {high.hex()}")
    if high is None:
        return _after(low or b"")
    if low is None:
        return _before(high)
    bound: bytes | None = high
    out = bytearray()
    at = 0
    while True:
        a = low[at] if at < len(low) else 0
        b = bound[at] if bound is not None and at < len(bound) else 256
        if b - a > 1:
            out.append((a + b) // 2)
            return bytes(out)
        out.append(a)
        if b - a == 1:
            bound = None
        at += 1


def _after(low: bytes) -> bytes:
    for at, byte in enumerate(low):
        if byte < 255:
            return low[:at] + bytes((byte + 1,))
    return low + b"\x80"


def _before(high: bytes) -> bytes:
    for at, byte in enumerate(high):
        if byte > 1:
            return high[:at] + bytes((byte - 1,))
    return high[:-1] + bytes((high[-1] - 1, 255))  # NB: high ends in 1 here
