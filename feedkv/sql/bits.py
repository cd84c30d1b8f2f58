"""BIT and VARBIT values: strings of bits, as PostgreSQL and CockroachDB define them.

A value is its bits in order (``B'0101'``). ``BIT(n)`` holds exactly ``n`` bits (``BIT``
alone is ``BIT(1)``), ``VARBIT(n)`` at most ``n`` (``VARBIT`` alone any number); a value
of another length is refused (22026), never padded or cut. Bit strings compare bit by
bit, a shorter one first when it is a prefix of the other: the order of their text,
which is also how they are stored (in keys too).

Casts: from a string of ``0`` and ``1``, and from an INT to ``BIT(n)`` (its ``n`` low
bits, two's complement, as ``5::BIT(4)`` is ``0101``).
"""

from __future__ import annotations

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

    def __str__(self) -> str:
        return self.bits
