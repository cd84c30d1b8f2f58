"""``feedkv start``'s settings from its flags."""

from __future__ import annotations

from feedkv.cli.start import store_config


def test_merges_start_below_a_quarter_of_the_maximum_range_size() -> None:
    config = store_config("1s", "5s", "64MiB")
    assert config.range_max_bytes == 64 << 20
    assert config.range_min_bytes == 16 << 20
