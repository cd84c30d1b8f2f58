"""Node-wide limits on what changefeeds buffer, as the CDC design states them: a node
started with ``--max-changefeed-memory`` and ``--max-disk-changefeed-storage`` keeps the
records its changefeeds hold for a sink that stops accepting within memory, then spills
them to disk, then the changefeed stalls (``running_status`` says ``stalled``,
``changefeed_stalled`` counts it), tears its feed down, and restarts from its high-water
mark once the sink takes its backlog: nothing is lost.

On both runners: the thread runner (sinks in the node process) and Spark (sinks in
Spark's Python workers, the node's children, sharing the node's limits through its
buffer ledger). A real ``feedkv start`` process, a real webhook endpoint on loopback that
holds every request until it is let go, the node's metrics over HTTP, and the anonymous
resident memory (``RssAnon`` in ``/proc``: the store's memory-mapped file pages are not
the changefeed's) of the node and every process it started, sampled while the rows go
in. The default set lets the sink go as soon as the job shows it stalled; the soak tests
hold it for a minute, as the design's test says. The Spark case also kills (SIGKILL) the
workers whose sinks spilled while the job is stalled: their files go with them, and the
node's buffer counters count what the workers' sinks took."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import feedkv
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until
from feedkv.testing.webhook_endpoint import WebhookEndpoint

DEADLINE = 180.0
MEMORY_LIMIT = 2 << 20
DISK_LIMIT = 4 << 20
ROW_BYTES = 4096
HOLD_S = 60.0  # how long the soak tests' sink takes nothing
CHECK_S = 1.0  # how often a soak test looks at the job while the sink holds
WARM_UP = 200  # rows the sink takes before it holds


@dataclass(frozen=True)
class Runner:
    """How a runner's case is run: the rows written (``rows * ROW_BYTES`` in all, many
    times what the limits let the node hold) and how much the anonymous memory of the
    processes that hold the sinks' records (the node; Spark's Python workers) may grow
    while the sink holds everything: the memory limit, plus the rows in flight in the
    write path and the reads, plus the allocators' slack (a Spark worker started
    meanwhile counts what it imports)."""

    name: str
    rows: int
    rss_growth_bound: int


# Measured here: thread: about 35-39 MiB with the limits, 110 MiB without them (the feed
# buffered every row it read). Spark: its workers 60-90 MiB in all, its JVM 83-116 MiB
# (heap it takes for the Arrow batches passing through, at most 8 MiB each, and keeps).
THREAD = Runner("thread", 16_000, 64 << 20)
SPARK = Runner("spark", 16_000, 128 << 20)
JVM_GROWTH_BOUND = 256 << 20


def node_args(runner: Runner) -> tuple[str, ...]:
    return (
        "--changefeed-runner",
        runner.name,
        "--closed-ts-target",
        "100ms",
        "--max-changefeed-memory",
        "2MiB",
        "--max-disk-changefeed-storage",
        "4MiB",
    )


@pytest.fixture
def endpoint() -> Iterator[WebhookEndpoint]:
    with WebhookEndpoint() as server:
        yield server


class RssSampler:
    """Samples the ``RssAnon`` of a process and of every process it started (Spark's JVM
    and Python workers) on a thread until stopped, and keeps how much each grew: from
    its first sample to its peak. Spark starts short-lived workers to plan and commit
    each micro-batch, so a sum over the tree at one moment says more about how many of
    those were alive then than about what is buffered; a process's own growth does
    not. A worker started after the first sample grows from what an idle worker weighs
    (the heaviest worker then), not from the bare fork it starts as."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._first: dict[int, tuple[str, int]] = {}
        self._peak: dict[int, int] = {}
        self._idle_worker = 0  # none before the first sample
        self._sample()
        self._idle_worker = max(
            (rss for kind, rss in self._first.values() if kind == "workers"), default=0
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        for pid in _tree(self._pid):
            rss = _rss_anon(pid)
            if pid not in self._first:
                kind = _kind(pid)
                idle = self._idle_worker if kind == "workers" else 0
                self._first[pid] = (kind, max(rss, idle))
            self._peak[pid] = max(self._peak.get(pid, 0), rss)

    def _run(self) -> None:
        while not self._stop.wait(0.1):  # a measurement's cadence, not a wait for an event
            self._sample()

    def stop(self) -> dict[str, int]:
        """How much the processes grew, by kind: ``node``, ``jvm``, ``workers``."""
        self._stop.set()
        self._thread.join()
        growth = {"node": 0, "jvm": 0, "workers": 0}
        for pid, (kind, first) in self._first.items():
            growth[kind] += max(0, self._peak[pid] - first)
        return growth


def _kind(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "workers"
    if b"java" in command.split(b"\0")[0]:
        return "jvm"
    return "node" if b"feedkv.cli.main" in command else "workers"


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _mib(growth: dict[str, int]) -> dict[str, float]:
    return {kind: round(n / 2**20, 1) for kind, n in growth.items()}


def _rss_anon(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^RssAnon:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) * 1024 if found is not None else 0


def metric(node: NodeProcess, name: str) -> float:
    text = httpx.get(node.http_url + "/metrics", verify=node.http_verify).text
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert found is not None, f"no {name} in the node's metrics"
    return float(found.group(1))


class KeysSeen:
    """The primary keys of the rows an endpoint accepted, read from each request once."""

    def __init__(self, endpoint: WebhookEndpoint) -> None:
        self._endpoint = endpoint
        self._read = 0
        self.keys: set[int] = set()

    def __call__(self) -> set[int]:
        new = self._endpoint.accepted[self._read :]
        self._read += len(new)
        for request in new:
            self.keys.update(row["key"][0] for row in request.json.get("payload", ()))
        return self.keys


def stall_and_recover(
    tmp_path: Path,
    endpoint: WebhookEndpoint,
    runner: Runner,
    hold_s: float,
    *,
    kill_spilling: bool = False,
) -> None:
    """Write many times the limits into a changefeed whose sink holds every request;
    the job stalls within the limits; let the sink go after ``hold_s`` seconds of
    holding (0: once the job shows it stalled): every row arrives, the job recovers.
    ``kill_spilling``: first kill the processes whose sinks spilled (Spark's workers)."""
    node = NodeProcess(tmp_path / "store", *node_args(runner))
    try:
        with feedkv.connect(node.url) as db:
            _stall_and_recover(node, db, endpoint, runner, hold_s, kill_spilling)
    finally:
        if node.process.poll() is None:
            node.terminate()


def spill_owners(store: Path) -> set[int]:
    """The pids named by the spill files in the node's spill directory."""
    names = (path.name for path in (store / "changefeed-spill").glob("feedkv-sink-*.spill"))
    return {int(name.removeprefix("feedkv-sink-").partition(".")[0]) for name in names}


def _stall_and_recover(
    node: NodeProcess,
    db: feedkv.DB,
    endpoint: WebhookEndpoint,
    runner: Runner,
    hold_s: float,
    kill_spilling: bool,
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    # batches of 100 rows, or of what came within 100 ms; the default cadence of
    # flushes (30 s): in between, what the sink has not taken is buffered
    config = json.dumps({"Flush": {"Messages": 100, "Frequency": "100ms"}})
    job_id = db.sql(
        f"CREATE CHANGEFEED FOR t INTO '{endpoint.uri()}' WITH "
        f"webhook_sink_config='{config}', webhook_client_timeout='300s'"
    ).rows[0][0]

    def status() -> str:
        rows = db.sql(f"SELECT running_status FROM [SHOW CHANGEFEED JOB {job_id}]").rows
        return str(rows[0][0])

    wait_until(lambda: status().startswith("running"), timeout_s=DEADLINE, what="the job")
    value = "x" * ROW_BYTES
    # NB: the first rows go through while the sink accepts, so every process the job
    # runs (Spark's workers) has started before the baseline
    db.sql("INSERT INTO t VALUES " + ", ".join(f"({k}, '{value}')" for k in range(WARM_UP)))
    seen = KeysSeen(endpoint)
    wait_until(lambda: len(seen()) == WARM_UP, timeout_s=DEADLINE, what="the first rows")
    endpoint.hold()
    rss = RssSampler(node.process.pid)
    for start in range(WARM_UP, runner.rows, 200):
        db.sql(
            "INSERT INTO t VALUES "
            + ", ".join(f"({k}, '{value}')" for k in range(start, start + 200))
        )
    wait_until(lambda: endpoint.held, timeout_s=DEADLINE, what="a request to hold")
    held_since = time.monotonic()
    stalled = wait_until(
        lambda: (found := status()).startswith("stalled") and found,
        timeout_s=DEADLINE,
        what="the job to show it is stalled",
    )
    assert "buffers are full" in stalled and "restarts from its high-water mark" in stalled
    assert metric(node, "changefeed_stalled") == 1.0
    assert metric(node, "changefeed_buffer_memory_bytes") <= MEMORY_LIMIT
    assert 0 < metric(node, "changefeed_buffer_disk_bytes") <= DISK_LIMIT
    pause = threading.Event()
    while time.monotonic() - held_since < hold_s:  # the sink takes nothing for hold_s
        assert status().startswith("stalled")
        assert metric(node, "changefeed_buffer_memory_bytes") <= MEMORY_LIMIT
        assert metric(node, "changefeed_buffer_disk_bytes") <= DISK_LIMIT
        pause.wait(CHECK_S)
    growth = rss.stop()
    written = runner.rows * ROW_BYTES >> 20
    print(f"{runner.name}: RssAnon grew by MiB {_mib(growth)} while {written} MiB went in")
    if kill_spilling:
        owners = spill_owners(node.store) & set(_tree(node.process.pid))
        assert owners and node.process.pid not in owners, f"spilled by {owners}"
        for pid in owners:
            os.kill(pid, signal.SIGKILL)
        # NB: what the node reads of its buffers (the metrics here) reaps the dead
        wait_until(
            lambda: (
                metric(node, "changefeed_buffer_disk_bytes") >= 0
                and not owners & spill_owners(node.store)
            ),
            timeout_s=DEADLINE,
            what=f"the spill files of the killed workers {owners} to be removed",
        )
    endpoint.let_go()
    wait_until(
        lambda: len(seen()) == runner.rows,
        timeout_s=DEADLINE * 2,
        poll_s=0.2,
        what=f"every one of the {runner.rows} rows at the sink",
    )
    assert seen() == set(range(runner.rows))
    wait_until(
        lambda: status().startswith("running") and metric(node, "changefeed_stalled") == 0.0,
        timeout_s=DEADLINE,
        what="the job to recover",
    )
    # NB: the recovered job's sinks drop what they spilled once it is delivered
    wait_until(
        lambda: metric(node, "changefeed_buffer_disk_bytes") == 0.0,
        timeout_s=DEADLINE,
        what="the spilled bytes to drain after the recovery",
    )
    held = growth["node"] + growth["workers"]  # where the sinks and their buffers live
    assert held < runner.rss_growth_bound, f"RssAnon grew {_mib(growth)} MiB"
    assert growth["jvm"] < JVM_GROWTH_BOUND, f"the JVM's RssAnon grew {_mib(growth)} MiB"
    # the node's process's sinks or its Spark workers', every row went in and out
    assert metric(node, "changefeed_buffer_entries_in") >= runner.rows
    assert metric(node, "changefeed_buffer_entries_out") >= runner.rows
    assert metric(node, "changefeed_buffer_entries_mem_acquired") > 0


@pytest.mark.slow(20)
def test_a_sink_that_stops_accepting_stalls_a_thread_feed_within_the_limits(
    tmp_path: Path, endpoint: WebhookEndpoint
) -> None:
    stall_and_recover(tmp_path, endpoint, THREAD, hold_s=0)


@pytest.mark.slow(120)
def test_a_sink_that_stops_accepting_stalls_a_spark_job_within_the_limits(
    tmp_path: Path, endpoint: WebhookEndpoint
) -> None:
    stall_and_recover(tmp_path, endpoint, SPARK, hold_s=0, kill_spilling=True)


@pytest.mark.soak
@pytest.mark.parametrize("runner", [THREAD, SPARK], ids=lambda r: r.name)
def test_a_sink_that_takes_nothing_for_a_minute_loses_nothing(
    tmp_path: Path, endpoint: WebhookEndpoint, runner: Runner
) -> None:
    stall_and_recover(tmp_path, endpoint, runner, hold_s=HOLD_S)
