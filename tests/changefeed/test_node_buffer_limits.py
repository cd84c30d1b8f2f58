"""Node-wide limits on what changefeeds buffer, as the CDC design states them: a node
started with ``--max-changefeed-memory`` and ``--max-disk-changefeed-storage`` keeps the
records its changefeeds hold for a sink that stops accepting within memory, then spills
them to disk, then the changefeed stalls (``running_status`` says ``stalled``,
``changefeed_stalled`` counts it), tears its feed down, and restarts from its high-water
mark once the sink takes its backlog: nothing is lost.

A real ``feedkv start`` process, a real webhook endpoint on loopback that holds every
request until it is let go, the node's metrics over HTTP, and its anonymous resident
memory (``RssAnon`` in ``/proc``: the store's memory-mapped file pages are not the
changefeed's) sampled while the rows go in."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import feedkv
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

DEADLINE = 60.0
MEMORY_LIMIT = 2 << 20
DISK_LIMIT = 4 << 20
ROWS = 16_000
ROW_BYTES = 4096  # 64 MiB of rows in all: many times what the limits let the node hold
# What the node's anonymous memory may grow by while the sink holds everything: the
# memory limit, plus the rows in flight in the write path and the rangefeed's queues, plus
# the allocator's slack. Measured here: about 35 MiB with the limits, 110 MiB without
# them (512MiB / 4GiB: the feed buffers every row it reads).
RSS_GROWTH_BOUND = 64 << 20
NODE_ARGS = (
    "--changefeed-runner",
    "thread",
    "--closed-ts-target",
    "100ms",
    "--max-changefeed-memory",
    "2MiB",
    "--max-disk-changefeed-storage",
    "4MiB",
)


class HoldingEndpoint:
    """A webhook endpoint on loopback that holds every request until :meth:`let_go`,
    then answers 200; it keeps the primary keys of the rows it received."""

    def __init__(self) -> None:
        self.going = threading.Event()
        self.keys: set[int] = set()
        self.requests = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    outer.requests += 1
                outer.going.wait(DEADLINE * 4)
                payload = json.loads(body)["payload"]
                with lock:
                    outer.keys.update(row["key"][0] for row in payload)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"webhook-http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def let_go(self) -> None:
        self.going.set()

    def close(self) -> None:
        self.going.set()
        self.server.shutdown()
        self._thread.join()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[HoldingEndpoint]:
    server = HoldingEndpoint()
    yield server
    server.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    started = NodeProcess(tmp_path / "store", *NODE_ARGS)
    yield started
    if started.process.poll() is None:
        started.terminate()


class RssSampler:
    """Samples a process's ``RssAnon`` on a thread until stopped; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self._status = Path(f"/proc/{pid}/status")
        self.peak = self.read()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def read(self) -> int:
        """The process's RssAnon now (0: it has exited)."""
        try:
            text = self._status.read_text()
        except OSError:
            return 0
        found = re.search(r"^RssAnon:\s+(\d+) kB", text, re.M)
        return int(found.group(1)) * 1024 if found is not None else 0

    def _run(self) -> None:
        while not self._stop.wait(0.02):  # a measurement's cadence, not a wait for an event
            self.peak = max(self.peak, self.read())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def metric(node: NodeProcess, name: str) -> float:
    text = httpx.get(node.http_url + "/metrics", verify=node.http_verify).text
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert found is not None, f"no {name} in the node's metrics"
    return float(found.group(1))


def test_a_sink_that_stops_accepting_stalls_the_feed_within_the_limits_and_loses_nothing(
    node: NodeProcess, endpoint: HoldingEndpoint
) -> None:
    with feedkv.connect(node.url) as db:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        # batches of 100 rows, or of what came within 100 ms; the default cadence of
        # flushes (30 s): in between, what the sink has not taken is buffered
        config = json.dumps({"Flush": {"Messages": 100, "Frequency": "100ms"}})
        job_id = db.sql(
            f"CREATE CHANGEFEED FOR t INTO '{endpoint.url}' WITH "
            f"webhook_sink_config='{config}', webhook_client_timeout='300s'"
        ).rows[0][0]

        def status() -> str:
            rows = db.sql(f"SELECT running_status FROM [SHOW CHANGEFEED JOB {job_id}]").rows
            return str(rows[0][0])

        wait_until(lambda: status().startswith("running"), timeout_s=DEADLINE, what="the job")
        rss = RssSampler(node.process.pid)
        baseline = rss.peak
        assert baseline > 0
        value = "x" * ROW_BYTES
        for start in range(0, ROWS, 200):
            db.sql(
                "INSERT INTO t VALUES "
                + ", ".join(f"({k}, '{value}')" for k in range(start, start + 200))
            )
        stalled = wait_until(
            lambda: (found := status()).startswith("stalled") and found,
            timeout_s=DEADLINE,
            what="the job to show it is stalled",
        )
        assert "buffers are full" in stalled and "restarts from its high-water mark" in stalled
        assert metric(node, "changefeed_stalled") == 1.0
        assert metric(node, "changefeed_buffer_memory_bytes") <= MEMORY_LIMIT
        assert 0 < metric(node, "changefeed_buffer_disk_bytes") <= DISK_LIMIT
        growth = rss.stop() - baseline
        assert growth < RSS_GROWTH_BOUND, f"RssAnon grew {growth >> 20} MiB"
        print(f"RssAnon grew {growth / 2**20:.1f} MiB while {ROWS * ROW_BYTES >> 20} MiB went in")

        endpoint.let_go()
        wait_until(
            lambda: len(endpoint.keys) == ROWS,
            timeout_s=DEADLINE * 2,
            what=f"every one of the {ROWS} rows at the sink",
        )
        assert endpoint.keys == set(range(ROWS))
        wait_until(
            lambda: status().startswith("running") and metric(node, "changefeed_stalled") == 0.0,
            timeout_s=DEADLINE,
            what="the job to recover",
        )
        assert metric(node, "changefeed_buffer_disk_bytes") == 0.0
        entries_in = metric(node, "changefeed_buffer_entries_in")
        assert entries_in >= ROWS
        assert metric(node, "changefeed_buffer_entries_mem_acquired") > 0
