"""A real Prometheus server (Debian's ``prometheus``, which ``make`` installs) scrapes a
node every second and answers PromQL about a changefeed that runs while rows are
written: the questions operators' alerts ask."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.testing.node_process import free_port
from feedkv.testing.waiting import wait_until

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus binary is not installed (Debian's prometheus package; "
    "`make` installs it)",
)

DEADLINE = 60.0
CONFIG = StoreConfig(
    closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
)


class Prometheus:
    """A Prometheus server on loopback scraping ``target`` (host:port) every second."""

    def __init__(self, directory: Path, target: str) -> None:
        assert PROMETHEUS is not None
        directory.mkdir()
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: feedkv\n"
            "    metrics_path: /_status/vars\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = directory / "prometheus.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={directory / 'data'}",
                    f"--web.listen-address={self.url.removeprefix('http://')}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.client = httpx.Client(base_url=self.url, timeout=10)
        wait_until(self._ready, timeout_s=DEADLINE, poll_s=0.1, what="Prometheus ready")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
        try:
            return self.client.get("/-/ready").status_code == 200
        except httpx.TransportError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector ``promql`` evaluates to now."""
        answer = self.client.get("/api/v1/query", params={"query": promql}).json()
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def value(self, promql: str) -> float | None:
        """The single value of ``promql`` now (``None``: an empty vector)."""
        result = self.query(promql)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def kind(self, metric: str) -> str | None:
        """The type Prometheus recorded for ``metric`` from its scrapes' TYPE lines."""
        answer = self.client.get("/api/v1/metadata", params={"metric": metric}).json()
        assert answer["status"] == "success", answer
        found: list[dict[str, str]] = answer["data"].get(metric, [])
        return found[0]["type"] if found else None

    def close(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    database = feedkv.connect(
        tmp_path / "store", config=CONFIG, changefeed_runner="thread", http_addr="127.0.0.1:0"
    )
    yield database
    database.close()


@pytest.fixture
def prometheus(tmp_path: Path, db: DB) -> Iterator[Prometheus]:
    assert db.node is not None
    server = Prometheus(tmp_path / "prometheus", db.node.http_url.removeprefix("http://"))
    yield server
    server.close()


def test_prometheus_sees_a_running_changefeed_emit_while_rows_are_written(
    db: DB, prometheus: Prometheus, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, s STRING)")
    db.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'file://{tmp_path / 'out'}' "
        "WITH min_checkpoint_frequency='100ms'"
    )
    stop = threading.Event()

    def write() -> None:
        session = db.session()
        i = 0
        while not stop.is_set():
            i += 1
            session.execute(f"INSERT INTO orders VALUES ({i}, 'row {i}')")
            stop.wait(0.02)  # wait-ok: paces the writer (about 50 rows a second)

    writer = threading.Thread(target=write, name="writer")
    writer.start()
    try:
        wait_until(
            lambda: prometheus.value('up{job="feedkv"}') == 1,
            timeout_s=DEADLINE,
            poll_s=0.2,
            what="Prometheus scraping the node",
        )
        wait_until(
            lambda: prometheus.value('changefeed_running{scope="default"}') == 1,
            timeout_s=DEADLINE,
            poll_s=0.2,
            what="changefeed_running == 1",
        )

        def emitting() -> bool:
            rate = prometheus.value("sum(rate(changefeed_emitted_messages[5s]))")
            return rate is not None and rate > 0

        wait_until(emitting, timeout_s=DEADLINE, poll_s=0.2, what="a rate of emitted messages")

        def inserting() -> bool:
            rate = prometheus.value("rate(sql_insert_count[5s])")
            return rate is not None and rate > 0

        wait_until(inserting, timeout_s=DEADLINE, poll_s=0.2, what="a rate of inserts")

        def commit_latency() -> bool:
            p99 = prometheus.value(
                "histogram_quantile(0.99, sum by (le) (rate(changefeed_commit_latency_bucket[5s])))"
            )
            return p99 is not None and p99 > 0

        wait_until(commit_latency, timeout_s=DEADLINE, poll_s=0.2, what="a commit latency")
        behind = prometheus.value('changefeed_max_behind_nanos{scope="default"}')
        assert behind is not None and behind > 0
        assert prometheus.value("liveness_livenodes") == 1
        # counters typed as CockroachDB types them, under their own names
        assert prometheus.kind("sql_insert_count") == "counter"
        assert prometheus.kind("changefeed_emitted_messages") == "counter"
        assert prometheus.kind("changefeed_running") == "gauge"
        assert prometheus.value("jobs_changefeed_currently_paused") == 0
    finally:
        stop.set()
        writer.join()
