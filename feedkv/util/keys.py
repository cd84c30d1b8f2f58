"""Keys and spans of the user keyspace.

Keys are byte strings ordered byte-wise. The user keyspace is ``[KEY_MIN, KEY_MAX)``:
every non-empty key shorter than ``MAX_KEY_BYTES`` that sorts below ``KEY_MAX``.
A :class:`Span` is the half-open interval ``[start, end)``; its end is exclusive and
must sort strictly after its start.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from feedkv.errors import InvalidKeyError, InvalidSpanError

__all__ = [
    "KEY_MAX",
    "KEY_MIN",
    "MAX_KEY_BYTES",
    "Span",
    "check_key",
    "key_next",
    "merge_spans",
    "prefix_end",
]

KEY_MIN = b""
KEY_MAX = b"\xff\xff"

# NB: LMDB keys are at most 511 bytes and the MVCC layer adds an escape overhead and a
# 14-byte version suffix, so user keys stay well below that.
MAX_KEY_BYTES = 400


def check_key(key: bytes) -> bytes:
    """Return ``key`` if it is a valid user key, else raise :class:`InvalidKeyError`."""
    if type(key) is not bytes:
        raise InvalidKeyError(f"keys are bytes, not {type(key).__name__}")
    if not key:
        raise InvalidKeyError("the empty key is not a valid key")
    if len(key) > MAX_KEY_BYTES:
        raise InvalidKeyError(
            f"key of {len(key)} bytes is longer than the limit of {MAX_KEY_BYTES} bytes"
        )
    if key >= KEY_MAX:
        raise InvalidKeyError(f"key {key[:16]!r} is not below KEY_MAX {KEY_MAX!r}")
    return key


def key_next(key: bytes) -> bytes:
    """The smallest key that sorts after ``key``."""
    return key + b"\x00"


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key that sorts after every key starting with ``prefix``.

    ``[prefix, prefix_end(prefix))`` is exactly the keys with that prefix. A prefix of
    only 0xff bytes (or the empty prefix) has no such key inside the keyspace, so
    ``KEY_MAX`` is returned.
    """
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return KEY_MAX
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """The keys ``k`` with ``start <= k < end`` (end exclusive)."""

    start: bytes
    end: bytes

    def __post_init__(self) -> None:
        if type(self.start) is not bytes or type(self.end) is not bytes:
            raise InvalidSpanError("span bounds are bytes")
        if self.end <= self.start:
            raise InvalidSpanError(
                f"invalid span [{self.start!r}, {self.end!r}): "
                "the end (exclusive) must sort after the start"
            )

    @classmethod
    def of(cls, span: Span | tuple[bytes, bytes]) -> Span:
        """``span`` as a :class:`Span`: a ``Span``, or a ``(start, end)`` pair of bytes (as
        a rangefeed takes); :class:`InvalidSpanError` names anything else."""
        if isinstance(span, Span):
            return span
        if isinstance(span, tuple | list) and len(span) == 2:
            return cls(*span)
        raise InvalidSpanError(
            f"a span is a Span or a (start, end) pair of bytes, not {span!r:.60}"
        )

    @classmethod
    def for_key(cls, key: bytes) -> Span:
        """The span holding exactly ``key``."""
        return cls(key, key_next(key))

    @classmethod
    def for_prefix(cls, prefix: bytes) -> Span:
        """The span of every key starting with ``prefix``."""
        return cls(prefix, prefix_end(prefix))

    def contains_key(self, key: bytes) -> bool:
        return self.start <= key < self.end

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end

    def intersect(self, other: Span) -> Span | None:
        """The keys in both spans, or ``None`` if they do not overlap."""
        start = max(self.start, other.start)
        end = min(self.end, other.end)
        return Span(start, end) if start < end else None

    def subtract(self, other: Span) -> list[Span]:
        """The parts of this span not in ``other`` (zero, one or two spans, in order)."""
        if not self.overlaps(other):
            return [self]
        parts = []
        if self.start < other.start:
            parts.append(Span(self.start, other.start))
        if other.end < self.end:
            parts.append(Span(other.end, self.end))
        return parts

    def __str__(self) -> str:
        return f"[{self.start!r}, {self.end!r})"


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as sorted, non-overlapping, non-adjacent spans."""
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and span.start <= merged[-1].end:
            if span.end > merged[-1].end:
                merged[-1] = Span(merged[-1].start, span.end)
        else:
            merged.append(span)
    return merged
