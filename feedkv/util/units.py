"""Durations and sizes as people type them on a command line (``200ms``, ``64MiB``)."""

from __future__ import annotations

import re

from feedkv.errors import InvalidArgumentError

__all__ = ["counted", "parse_duration_ns", "parse_size"]

_DURATION = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>ns|us|µs|ms|s|m|h)?$")
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_SIZE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>B|KiB|MiB|GiB|KB|MB|GB)?$", re.IGNORECASE)
_UNIT_BYTES = {
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
}


def parse_duration_ns(text: str) -> int:
    """A duration such as ``1s``, ``200ms``, ``1.5s``, ``1h`` or ``500us`` (bare numbers:
    seconds)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise InvalidArgumentError(
            f"bad duration {text!r}: expected a number with a unit (ns, us, ms, s, m, h), e.g. 1s"
        )
    return int(float(match["num"]) * _UNIT_NS[match["unit"] or "s"])


def parse_size(text: str) -> int:
    """A size such as ``64MiB``, ``512KiB``, ``1GB`` or ``4096`` (bare numbers: bytes)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise InvalidArgumentError(
            f"bad size {text!r}: expected a number with a unit (B, KiB, MiB, GiB), e.g. 64MiB"
        )
    return int(float(match["num"]) * _UNIT_BYTES[(match["unit"] or "b").lower()])


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is one (``1 message``, ``2 messages``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
