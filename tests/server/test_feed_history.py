"""The admin page's bounded history of each changefeed's lag and throughput."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.server.feed_history import FeedHistory, Sample

S = 1_000_000_000


def test_lag_is_sample_time_minus_high_water_and_throughput_is_messages_per_second() -> None:
    history = FeedHistory(interval_s=1, window_s=60)
    history.record(7, Sample(100 * S, 90 * S, 0))
    history.record(7, Sample(102 * S, 101 * S, 50))
    series = history.series(7)
    assert series.times == [100.0, 102.0]
    assert series.lag_s == [10.0, 1.0]
    assert series.rows_per_s == [None, 25.0]


def test_a_sample_sooner_than_the_interval_is_dropped() -> None:
    history = FeedHistory(interval_s=10, window_s=60)
    assert history.record(1, Sample(100 * S, 100 * S, None))
    assert not history.record(1, Sample(105 * S, 100 * S, None))
    assert not history.record(1, Sample(99 * S, 100 * S, None))  # from the past
    assert history.record(1, Sample(110 * S, 100 * S, None))
    assert history.series(1).times == [100.0, 110.0]


def test_samples_older_than_the_window_go() -> None:
    history = FeedHistory(interval_s=1, window_s=5)
    for second in range(20):
        history.record(1, Sample((100 + second) * S, 100 * S, second))
    assert history.series(1).times == [114.0, 115.0, 116.0, 117.0, 118.0, 119.0]


def test_the_feed_sampled_longest_ago_goes_when_there_are_too_many() -> None:
    history = FeedHistory(interval_s=1, window_s=5, max_feeds=2)
    history.record(1, Sample(100 * S, 100 * S, None))
    history.record(2, Sample(100 * S, 100 * S, None))
    history.record(1, Sample(101 * S, 100 * S, None))
    history.record(3, Sample(101 * S, 100 * S, None))
    assert history.series(2).times == []
    assert len(history.series(1).times) == 2
    assert len(history.series(3).times) == 1


def test_unknown_counts_and_a_restarted_count_give_no_negative_rate() -> None:
    history = FeedHistory(interval_s=1, window_s=60)
    history.record(1, Sample(100 * S, 100 * S, 500))
    history.record(1, Sample(101 * S, 100 * S, None))  # ran elsewhere
    history.record(1, Sample(102 * S, 100 * S, 10))
    history.record(1, Sample(103 * S, 100 * S, 5))  # restarted here
    assert history.series(1).rows_per_s == [None, None, None, 0.0]


def test_forget_drops_jobs_that_no_longer_exist() -> None:
    history = FeedHistory(interval_s=1, window_s=60)
    history.record(1, Sample(100 * S, 100 * S, None))
    history.record(2, Sample(100 * S, 100 * S, None))
    history.forget({2})
    assert history.series(1).times == []
    assert history.series(2).times == [100.0]


@pytest.mark.parametrize(
    ("interval_s", "window_s", "max_feeds"), [(0, 60, 1), (10, 5, 1), (1, 60, 0)]
)
def test_bad_bounds_are_refused(interval_s: float, window_s: float, max_feeds: int) -> None:
    with pytest.raises(InvalidArgumentError, match="interval_s"):
        FeedHistory(interval_s=interval_s, window_s=window_s, max_feeds=max_feeds)
