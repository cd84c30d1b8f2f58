"""Changefeed metrics read from the feeds a node runs: running, progress and lag by
``metrics_label`` scope, backfills (a manual wall clock, no node)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from feedkv.changefeed.metrics import ChangefeedMetrics
from feedkv.util.hlc import Timestamp
from feedkv.util.metrics import Registry

SECOND = 1_000_000_000


@dataclass
class FakeFeed:
    high_water: Timestamp
    backfill_pending: int = 0


def scrape(registry: Registry) -> dict[str, float]:
    text = registry.exposition().decode()
    # NB: the parser names a counter's samples x_total, whatever the text says
    return {
        (family.name if family.type == "counter" else s.name)
        + "".join(f"{{{k}={v}}}" for k, v in sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_running_feeds_progress_and_lag_by_scope() -> None:
    registry = Registry()
    now = [100 * SECOND]
    metrics = ChangefeedMetrics(registry, wall_ns=lambda: now[0])
    ahead, behind = FakeFeed(Timestamp(95 * SECOND)), FakeFeed(Timestamp(70 * SECOND))
    scanning = FakeFeed(Timestamp(99 * SECOND), backfill_pending=2)
    with (
        metrics.tracking(None, ahead),
        metrics.tracking(None, behind),
        metrics.tracking("orders", scanning),
    ):
        values = scrape(registry)
        assert values["changefeed_running{scope=default}"] == 2
        assert values["changefeed_running{scope=orders}"] == 1
        assert values["changefeed_checkpoint_progress{scope=default}"] == 70 * SECOND
        assert values["changefeed_max_behind_nanos{scope=default}"] == 30 * SECOND
        assert values["changefeed_max_behind_nanos{scope=orders}"] == 1 * SECOND
        assert values["changefeed_backfill_count{scope=default}"] == 0
        assert values["changefeed_backfill_count{scope=orders}"] == 1
        assert values["changefeed_backfill_pending_ranges{scope=orders}"] == 2
        behind.high_water = Timestamp(98 * SECOND)
        now[0] = 101 * SECOND
        values = scrape(registry)
        assert values["changefeed_max_behind_nanos{scope=default}"] == 6 * SECOND
    values = scrape(registry)
    assert values["changefeed_running{scope=default}"] == 0
    assert values["changefeed_running{scope=orders}"] == 0  # a scope once seen stays, at 0
    assert values["changefeed_max_behind_nanos{scope=default}"] == 0


def test_the_default_scopes_pushed_metrics_read_zero_before_any_feed() -> None:
    registry = Registry()
    ChangefeedMetrics(registry)
    values = scrape(registry)
    for name in (
        "changefeed_emitted_messages",
        "changefeed_emitted_bytes",
        "changefeed_flushed_bytes",
        "changefeed_error_retries",
        "changefeed_failures",
        "changefeed_commit_latency_count",
    ):
        assert values[f"{name}{{scope=default}}"] == 0, name


def test_pushed_metrics_go_to_their_scope() -> None:
    registry = Registry()
    metrics = ChangefeedMetrics(registry)
    metrics.scope("orders").emitted_messages.inc(3)
    metrics.scope(None).emitted_messages.inc(1)
    assert metrics.scope("orders") is metrics.scope("orders")
    values = scrape(registry)
    assert values["changefeed_emitted_messages{scope=orders}"] == 3
    assert values["changefeed_emitted_messages{scope=default}"] == 1
