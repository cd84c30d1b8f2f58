"""BIT and VARBIT values: strings of bits, as PostgreSQL and CockroachDB define them.

A value is its bits in order (``B'0101'``). ``BIT(n)`` holds exactly ``n`` bits (``BIT``
alone is ``BIT(1)``), ``VARBIT(n)`` at most ``n`` (``VARBIT`` alone any number); a value
of another length is refused (22026), never padded or cut. Bit strings compare bit by
bit, a shorter one first when it is a prefix of the other: the order of their text,
which is also how they are stored (in keys too).

Casts: from a string of ``0`` and ``1``, and from an INT to ``BIT(n)`` (its ``n`` low
bits, two's complement, as ``5::BIT(4)`` is ``0101``); to an INT, the reverse.

Operators, as CockroachDB's: ``&``, ``|`` and ``#`` (exclusive or) of two bit strings
of one length (22026 otherwise), ``~`` flips each bit, ``<<`` and ``>>`` shift by an INT
within the value's length, zeros coming in (a negative count shifts the other way).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from feedkv.errors import SQLError

__all__ = ["BitString"]


@dataclass(frozen=True, slots=True, order=True)
class BitString:
    bits: str

    @classmethod
    def parse(cls, text: str) -> BitString:
        """A bit string from its text (22P02 for any other character than 0 or 1)."""
        for ch in text:
            if ch not in "01":
                raise SQLError(
                    "22P02",
                    f'could not parse string as bit array: "{ch}" is not a valid binary digit',
                )
        return cls(text)

    @classmethod
    def of_int(cls, value: int, width: int) -> BitString:
        """The ``width`` low bits of ``value`` (two's complement)."""
        return cls(format(value & ((1 << width) - 1), f"0{width}b") if width else "")

    def fitted(self, width: int | None, varying: bool) -> BitString:
        """This value as one of BIT(width) / VARBIT(width): 22026 if it is not."""
        if width is None:
            if varying:
                return self
            width = 1
        if varying and len(self.bits) > width:
            raise SQLError(
                "22026", f"bit string length {len(self.bits)} too large for type VARBIT({width})"
            )
        if not varying and len(self.bits) != width:
            raise SQLError(
                "22026", f"bit string length {len(self.bits)} does not match type BIT({width})"
            )
        return self

    def to_bytes(self) -> bytes:
        """The bits packed eight to a byte, the last byte padded with zeros (the wire's
        binary form, after the bit count)."""
        padded = self.bits + "0" * (-len(self.bits) % 8)
        return int(padded, 2).to_bytes(len(padded) // 8, "big") if padded else b""

    @classmethod
    def from_bytes(cls, count: int, data: bytes) -> BitString:
        if count < 0 or len(data) * 8 < count:
            raise SQLError("22P03", "invalid length in external bit string")
        text = "".join(format(b, "08b") for b in data)
        return cls(text[:count])

    def combined(self, symbol: str, other: BitString) -> BitString:
        """``self & other``, ``|`` or ``#`` (``symbol``), bit by bit."""
        name, apply = _COMBINATIONS[symbol]
        width = len(self.bits)
        if len(other.bits) != width:
            raise SQLError("22026", f"cannot {name} bit strings of different sizes")
        return BitString.of_int(apply(int(self.bits or "0", 2), int(other.bits or "0", 2)), width)

    def inverted(self) -> BitString:
        return BitString(self.bits.translate(_FLIP))

    def shifted(self, count: int) -> BitString:
        """Shifted ``count`` places left (right if negative), zeros coming in."""
        width = len(self.bits)
        if count >= 0:
            count = min(count, width)
            return BitString(self.bits[count:] + "0" * count)
        count = min(-count, width)
        return BitString("0" * count + self.bits[: width - count])

    def as_int(self, width: int) -> int:
        """The INT of ``width`` bits these stand for: their low ``width`` bits, two's
        complement when there are that many (``B'1010'::INT`` is 10, 64 ones are -1)."""
        low = self.bits[-width:]
        value = int(low or "0", 2)
        return value - (1 << width) if len(low) == width and low[0] == "1" else value

    def __str__(self) -> str:
        return self.bits


_COMBINATIONS: dict[str, tuple[str, Callable[[int, int], int]]] = {
    "&": ("AND", operator.and_),
    "|": ("OR", operator.or_),
    "#": ("XOR", operator.xor),
}
_FLIP = str.maketrans("01", "10")
