"""``changefeed.lagging_ranges``: which ranges of a feed count as lagging, how often they
are counted, and the options that set both."""

from __future__ import annotations

import pytest

from feedkv.changefeed.lagging import LaggingRanges
from feedkv.changefeed.options import (
    DEFAULT_LAGGING_RANGES_POLLING_INTERVAL,
    DEFAULT_LAGGING_RANGES_THRESHOLD,
    parse_options,
)
from feedkv.errors import SQLError
from feedkv.rangefeed.client import FeedRange
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

S = 1_000_000_000
NOW = Timestamp(1000 * S)


def piece(range_id: int, resolved_s: float) -> FeedRange:
    key = bytes([range_id])
    return FeedRange(range_id, Span(key, key + b"\xff"), Timestamp(int(resolved_s * S)), 1)


def test_a_range_lags_when_its_resolved_timestamp_is_further_behind_than_the_threshold() -> None:
    lagging = LaggingRanges(threshold_s=10, polling_interval_s=1)
    ranges = [piece(1, 995), piece(2, 990), piece(3, 989.9), piece(4, 10)]
    assert lagging.poll(1000 * S, lambda: ranges) == 2  # 10 s behind is not past 10 s


def test_the_count_is_taken_again_only_once_the_polling_interval_passed() -> None:
    lagging = LaggingRanges(threshold_s=10, polling_interval_s=60)
    reads: list[int] = []

    def ranges() -> list[FeedRange]:
        reads.append(1)
        return current

    current = [piece(1, 900)]
    assert lagging.poll(1000 * S, ranges) == 1
    current = [piece(1, 1055)]  # caught up, but not counted yet
    assert lagging.poll(1030 * S, ranges) == 1
    assert lagging.poll(1060 * S, ranges) == 0
    assert len(reads) == 2


def test_options_default_to_cockroachdbs_and_take_durations() -> None:
    defaults = parse_options((), now=NOW)
    assert defaults.lagging_ranges_threshold == DEFAULT_LAGGING_RANGES_THRESHOLD == 180.0
    assert defaults.lagging_ranges_polling_interval == DEFAULT_LAGGING_RANGES_POLLING_INTERVAL
    given = parse_options(
        (("lagging_ranges_threshold", "30s"), ("lagging_ranges_polling_interval", "250ms")),
        now=NOW,
    )
    assert (given.lagging_ranges_threshold, given.lagging_ranges_polling_interval) == (30.0, 0.25)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("lagging_ranges_threshold", "0s", "must be more than 0s"),
        ("lagging_ranges_polling_interval", "0s", "must be more than 0s"),
        ("lagging_ranges_threshold", "-1m", "negative"),
        ("lagging_ranges_polling_interval", "often", "is not a duration"),
        ("lagging_ranges_threshold", None, "needs a duration"),
    ],
)
def test_bad_lagging_ranges_options_are_refused_naming_them(
    name: str, value: str | None, words: str
) -> None:
    with pytest.raises(SQLError) as raised:
        parse_options(((name, value),), now=NOW)
    assert raised.value.code == "22023"
    assert name in raised.value.message and words in raised.value.message
