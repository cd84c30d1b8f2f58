"""The admin page shows a changefeed job that runs on Spark: its throughput (the rows
its batches read, Spark's rates for the last batch) and the ranges its batches read, each
up to the offset its last batch ended at; the node's metrics time its micro-batches. A
real node, a real local Spark job into a file sink, the page's JSON over HTTP and the
page itself in headless Chromium (Debian's ``chromium``; that part is skipped, saying
so, where it is missing)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.server.http import OVERVIEW_PATH
from feedkv.testing.chromium import Chromium, chromium_binary
from feedkv.testing.waiting import wait_until

DEADLINE_S = 240.0  # Spark starts slowly on a loaded machine
ROWS = 100


@pytest.fixture
def served(tmp_path: Path, spark: Any) -> Iterator[DB]:
    """A node running changefeed jobs on Spark (the session's), its HTTP port open."""
    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    database = feedkv.connect(
        tmp_path / "store", config=config, http_addr="127.0.0.1:0", admin_sample_s=0.2
    )
    database.serving_url()
    yield database
    database.close()


def feed_of(url: str, job_id: int) -> dict[str, Any]:
    response = httpx.get(url + OVERVIEW_PATH)
    assert response.status_code == 200, response.text
    [feed] = [f for f in response.json()["changefeeds"] if f["job_id"] == str(job_id)]
    assert isinstance(feed, dict)
    return feed


def test_the_page_shows_a_spark_jobs_throughput_and_the_ranges_it_reads(
    served: DB, tmp_path: Path
) -> None:
    db = served
    assert db.node is not None
    url = db.node.http_url
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    db.sql("ALTER TABLE t SPLIT AT VALUES (50)")
    db.sql("INSERT INTO t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(ROWS)))
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{tmp_path}/out' "
        "WITH resolved = '1s', min_checkpoint_frequency = '1s'"
    ).rows

    def read_the_scan() -> dict[str, Any] | None:
        feed = feed_of(url, job_id)
        spark = feed["spark"]
        return feed if spark is not None and feed["high_water"] != "0,0" and spark["rows"] else None

    feed = wait_until(read_the_scan, timeout_s=DEADLINE_S, poll_s=0.2, what="a finished batch")
    assert feed["runner_kind"] == "spark"
    assert feed["spark_batches"] >= 1
    batch = feed["spark"]
    assert batch["batch_id"] >= 0 and batch["duration_s"] is not None
    # the table's two ranges (split at 50), each read up to where the last batch ended
    ranges = feed["ranges"]
    assert len(ranges) >= 2, ranges
    assert {r["resolved"] for r in ranges} == {feed["high_water"]}
    assert all(r["node"] == 1 for r in ranges)
    # and the node's metrics time its micro-batches
    metrics = httpx.get(url + "/metrics").text
    timed = re.search(
        r'^changefeed_spark_batch_nanos_count\{scope="default"\} (\S+)$', metrics, re.M
    )
    assert timed is not None and float(timed.group(1)) >= 1

    # the page's throughput chart counts the rows its batches read
    def rows_charted() -> bool:
        rates = feed_of(url, job_id)["history"]["rows_per_s"]
        return any(rate for rate in rates if rate)

    db.sql("INSERT INTO t VALUES " + ", ".join(f"({i}, 'w{i}')" for i in range(ROWS, 2 * ROWS)))
    wait_until(rows_charted, timeout_s=DEADLINE_S, poll_s=0.2, what="throughput on the chart")

    if chromium_binary() is not None:  # NB: make installs it; the page over HTTP is checked
        _check_in_browser(tmp_path, url, job_id)


def _check_in_browser(tmp_path: Path, url: str, job_id: object) -> None:
    """The Spark job's batch and ranges as headless Chromium shows the page."""
    with Chromium(tmp_path / "chromium-profile") as browser:
        section = f'section.feed[data-job-id="{job_id}"]'
        browser.navigate(url + "/?refresh=200")
        shown = browser.poll(
            lambda: (
                browser.evaluate(
                    f"(document.querySelector('{section} dd.spark') || {{}}).textContent || ''"
                ).startswith("batch ")
                and browser.evaluate(f"document.querySelector('{section} dd.spark').textContent")
            ),
            timeout_s=DEADLINE_S,
            what="the Spark job's last batch on the page",
        )
        assert " rows, " in shown and "processed" in shown, shown
        summary = browser.evaluate(
            f"document.querySelector('{section} .feed-ranges summary').textContent"
        )
        assert summary.startswith("ranges its batches read (") and not summary.endswith("(0)")
        shot = browser.screenshot(tmp_path / "spark-job.png")
        print(f"admin page, a Spark job: {shot}")
        assert browser.errors == []
