"""The metrics that warn of a changefeed falling behind, scraped from a node's
``/_status/vars``: ``changefeed_lagging_ranges`` (with the ``lagging_ranges_threshold``
and ``lagging_ranges_polling_interval`` options), and each job's distance from the
garbage-collection horizon (``changefeed_gc_threshold_distance_nanos``,
``jobs_changefeed_protected_age_sec``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.testing.waiting import wait_until

DEADLINE = 30.0
GC_TTL_NS = 600 * 1_000_000_000
CONFIG = StoreConfig(
    closed_ts_interval_s=0.01,
    closed_ts_target_ns=50_000_000,
    push_poll_s=0.01,
    sync=False,
    gc_ttl_ns=GC_TTL_NS,
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    database = feedkv.connect(
        tmp_path / "store", config=CONFIG, changefeed_runner="thread", http_addr="127.0.0.1:0"
    )
    database.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    database.sql("INSERT INTO t VALUES (1, 'a')")
    yield database
    database.close()


def scrape(db: DB) -> dict[str, float]:
    """Every sample: ``name`` or ``name{k=v}`` -> value."""
    assert db.node is not None
    response = httpx.get(db.node.http_url + "/_status/vars", timeout=10)
    assert response.status_code == 200
    out = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_lagging_ranges_counts_ranges_behind_each_feeds_threshold(db: DB, tmp_path: Path) -> None:
    # a threshold of 1 ms: every range lags (closed timestamps trail by 50 ms); the
    # default of 3 minutes: none does
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'a'}' WITH metrics_label='strict', "
        "lagging_ranges_threshold='1ms', lagging_ranges_polling_interval='10ms'"
    )
    db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'b'}' WITH metrics_label='lax'")
    found = wait_until(
        lambda: (
            (s := scrape(db)).get("changefeed_lagging_ranges{scope=strict}", 0) >= 1
            and s.get("changefeed_running{scope=lax}") == 1
            and s
        ),
        timeout_s=DEADLINE,
        what="the strict feed's ranges to count as lagging",
    )
    assert found["changefeed_lagging_ranges{scope=lax}"] == 0
    assert found["changefeed_lagging_ranges{scope=default}"] == 0


def test_gc_distance_and_protected_age_follow_the_most_behind_job(db: DB, tmp_path: Path) -> None:
    # the job's history is held from its cursor until its first checkpoint, an hour away
    cursor = db.now()
    time_before = time.time_ns()
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'out'}' WITH "
        f"cursor='{cursor.wall}.{cursor.logical:010d}', min_checkpoint_frequency='1h', "
        "metrics_label='held'"
    )
    found = wait_until(
        lambda: (s := scrape(db)).get("changefeed_gc_threshold_distance_nanos{scope=held}") and s,
        timeout_s=DEADLINE,
        what="the job's distance from the GC horizon",
    )
    time_after = time.time_ns()
    distance = found["changefeed_gc_threshold_distance_nanos{scope=held}"]
    # distance = cursor - (now - ttl), for a now between the two readings
    assert (
        cursor.wall - (time_after - GC_TTL_NS)
        <= distance
        <= cursor.wall - (time_before - GC_TTL_NS)
    )
    age = found["jobs_changefeed_protected_age_sec"]
    assert (time_before - cursor.wall) / 1e9 <= age <= (time_after - cursor.wall) / 1e9 + 1e-3
    assert "changefeed_gc_threshold_distance_nanos{scope=default}" not in found

    # the distance falls as the stuck job ages
    later = wait_until(
        lambda: (
            (d := scrape(db)["changefeed_gc_threshold_distance_nanos{scope=held}"]) < distance and d
        ),
        timeout_s=DEADLINE,
        what="the distance to fall",
    )
    assert later < distance
