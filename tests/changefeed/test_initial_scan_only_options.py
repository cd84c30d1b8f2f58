"""``initial_scan='only'`` refuses the options CockroachDB refuses with it: a changefeed
that ends after its scan has no resolved markers, end time, diff, or updated and MVCC
timestamps."""

from __future__ import annotations

import pytest

from feedkv.changefeed.options import parse_options
from feedkv.errors import SQLError
from feedkv.util.hlc import Timestamp

NOW = Timestamp(1_700_000_000 * 10**9, 0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("updated", None),
        ("mvcc_timestamp", None),
        ("resolved", None),
        ("diff", None),
        ("end_time", str(NOW.wall + 10**9)),
    ],
)
def test_initial_scan_only_refuses_what_cockroachdb_refuses(name: str, value: str | None) -> None:
    for only in ([("initial_scan", "only")], [("initial_scan_only", None)]):
        with pytest.raises(SQLError) as caught:
            parse_options([*only, (name, value)], now=NOW)
        assert caught.value.code == "22023"
        assert caught.value.message == f"cannot specify both initial_scan_only and {name}"


def test_initial_scan_only_keeps_the_options_it_can_honour() -> None:
    options = parse_options([("initial_scan", "only"), ("format", "csv")], now=NOW)
    assert options.initial_scan == "only" and options.format == "csv"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            [("initial_scan", "yes"), ("no_initial_scan", None)],
            "cannot specify both initial_scan and no_initial_scan",
        ),
        (
            [("no_initial_scan", None), ("initial_scan", "no")],
            "cannot specify both initial_scan and no_initial_scan",
        ),
        (
            [("initial_scan_only", None), ("initial_scan", "only")],
            "cannot specify both initial_scan and initial_scan_only",
        ),
        (
            [("no_initial_scan", None), ("initial_scan_only", None)],
            "cannot specify both initial_scan='only' and no_initial_scan",
        ),
        (
            [("no_initial_scan", None), ("no_initial_scan", None)],
            "option no_initial_scan is given more than once",
        ),
    ],
)
def test_two_spellings_of_the_initial_scan_are_refused_as_cockroachdb_words_it(
    given: list[tuple[str, str | None]], message: str
) -> None:
    """Not "initial_scan is given more than once", which names an option the user may
    have written only once."""
    with pytest.raises(SQLError) as caught:
        parse_options(given, now=NOW)
    assert caught.value.code == "22023"
    assert caught.value.message == message
