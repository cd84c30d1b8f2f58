"""Durations and sizes as people type them on a command line (``200ms``, ``64MiB``)."""

from __future__ import annotations

import re

from feedkv.errors import InvalidArgumentError

__all__ = ["counted", "go_duration", "parse_duration_ns", "parse_size"]

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


def go_duration(ns: int) -> str:
    """``ns`` as Go's ``time.Duration`` prints it, as CockroachDB's messages quote
    durations: ``0s``, ``200ms``, ``1.5s``, ``30s``, ``1m0s``, ``1h0m0s``."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 10**9:
        unit, size = next((u, n) for u, n in (("ms", 10**6), ("µs", 10**3), ("ns", 1)) if ns >= n)
        return sign + _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{hours}h{minutes}m" if hours else f"{minutes}m" if minutes else ""
    return sign + text + _decimal(rest, 10**9) + "s"


def _decimal(n: int, size: int) -> str:
    whole, part = divmod(n, size)
    if not part:
        return str(whole)
    return f"{whole}." + f"{part:0{len(str(size)) - 1}d}".rstrip("0")


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
