"""Durations and sizes from the command line, each with a clear error for bad input."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.util.units import go_duration, parse_duration_ns, parse_size


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1s", 10**9),
        ("200ms", 2 * 10**8),
        ("1.5s", 15 * 10**8),
        ("500us", 500_000),
        ("2", 2 * 10**9),
        ("1h", 3600 * 10**9),
    ],
)
def test_durations_take_a_unit_and_bare_numbers_are_seconds(text: str, ns: int) -> None:
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["", "fast", "-1s", "1d", "1 s s"])
def test_a_bad_duration_names_the_units_it_accepts(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="bad duration"):
        parse_duration_ns(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [("64MiB", 64 << 20), ("512kib", 512 << 10), ("1GB", 10**9), ("4096", 4096), ("1.5 KiB", 1536)],
)
def test_sizes_take_binary_or_decimal_units_and_bare_numbers_are_bytes(
    text: str, size: int
) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "big", "-1MiB", "64MiBs", "1TB"])
def test_a_bad_size_names_the_units_it_accepts(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"bad size .* e\.g\. 64MiB"):
        parse_size(text)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (2 * 10**8, "200ms"),
        (1_500_000_000, "1.5s"),
        (30 * 10**9, "30s"),
        (60 * 10**9, "1m0s"),
        (90 * 10**9, "1m30s"),
        (3600 * 10**9, "1h0m0s"),
        (1500, "1.5µs"),
        (-5 * 10**9, "-5s"),
    ],
)
def test_durations_print_as_go_prints_them(ns: int, text: str) -> None:
    """As CockroachDB's messages quote them (``min_checkpoint_frequency (30s)``)."""
    assert go_duration(ns) == text
