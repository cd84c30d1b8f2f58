"""A node started with its metrics off (``feedkv.connect(..., metrics=False)``, what
``feedkv bench changefeed`` compares against): SQL and changefeeds work the same, and
the HTTP port exposes no metric."""

from __future__ import annotations

from pathlib import Path

import httpx

import feedkv
from feedkv.kv.store import StoreConfig

CONFIG = StoreConfig(
    closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
)


def test_a_node_with_metrics_off_runs_sql_and_changefeeds_and_exposes_no_metric(
    tmp_path: Path,
) -> None:
    db = feedkv.connect(
        tmp_path / "store",
        config=CONFIG,
        changefeed_runner="thread",
        http_addr="127.0.0.1:0",
        metrics=False,
    )
    try:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        feed = db.sql("EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan='only'")
        assert len(list(feed)) == 2
        assert db.sql("SELECT count(*) FROM t").rows == [(2,)]
        assert db.node is not None
        scraped = httpx.get(db.node.http_url + "/_status/vars", timeout=10)
        assert scraped.status_code == 200
        assert "changefeed_" not in scraped.text and "sql_" not in scraped.text
    finally:
        db.close()
