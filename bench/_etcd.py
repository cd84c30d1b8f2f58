"""etcd beside feedkv, for `feedkv bench rangefeed`: the same single-key watch latency
and the same fan-out workload, against Debian's ``etcd-server`` on loopback.

etcd runs as one member with its defaults (a WAL fsync per commit, as feedkv syncs its
group commits). The clients use etcd's JSON gateway (``/v3/kv/put``, ``/v3/watch``)
through httpx: etcd's Python gRPC clients are unmaintained, and feedkv's own clients are
Python too, so both sides pay for a Python client.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from feedkv.testing.node_process import free_port
from feedkv.testing.waiting import wait_until

__all__ = ["Etcd", "etcd", "etcd_watch_latency", "etcd_write_ratio", "watchers_main"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Etcd:
    """A running single-member etcd: its client URL and the process."""

    def __init__(self, binary: str, data: Path) -> None:
        client, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.log = data.with_suffix(".log")
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    "--data-dir",
                    str(data),
                    "--listen-client-urls",
                    self.url,
                    "--advertise-client-urls",
                    self.url,
                    "--listen-peer-urls",
                    peer_url,
                    "--initial-advertise-peer-urls",
                    peer_url,
                    "--initial-cluster",
                    f"default={peer_url}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_until(self._healthy, timeout_s=30, what=f"etcd at {self.url} (log: {self.log})")

    def _healthy(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"etcd exited: {self.log.read_text()[-2000:]}")
        try:
            return httpx.get(f"{self.url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@contextmanager
def etcd(data: Path) -> Iterator[Etcd | None]:
    """etcd on loopback, or ``None`` when ``etcd`` is not installed."""
    binary = shutil.which("etcd")
    if binary is None:
        yield None
        return
    server = Etcd(binary, data)
    try:
        yield server
    finally:
        server.stop()


def put(client: httpx.Client, url: str, key: bytes, value: bytes) -> None:
    response = client.post(f"{url}/v3/kv/put", json={"key": _b64(key), "value": _b64(value)})
    response.raise_for_status()


class Watcher:
    """One etcd watch stream (its own HTTP request) read on a daemon thread: counts events
    and calls ``on_event`` with each response's receipt time. It ends when etcd stops or
    the process exits (httpx cannot interrupt a read from another thread)."""

    def __init__(
        self, url: str, key: bytes, range_end: bytes | None = None, on_event: Any = None
    ) -> None:
        request: dict[str, Any] = {"key": _b64(key)}
        if range_end is not None:
            request["range_end"] = _b64(range_end)
        self.body = {"create_request": request}
        self.url = url
        self.events = 0
        self.created = threading.Event()
        self.error: str | None = None
        self.on_event = on_event
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with httpx.stream(
                "POST",
                f"{self.url}/v3/watch",
                json=self.body,
                timeout=httpx.Timeout(5.0, read=None),
            ) as response:
                for line in response.iter_lines():
                    result = json.loads(line).get("result", {})
                    if result.get("created"):
                        self.created.set()
                    events = result.get("events")
                    if events:
                        self.events += len(events)
                        if self.on_event is not None:
                            self.on_event(time.perf_counter())
        except httpx.HTTPError as exc:
            self.error = repr(exc)  # etcd stopped, or reported with the figures
        finally:
            self.created.set()


def etcd_watch_latency(server: Etcd, samples: int) -> dict[str, Any]:
    """A put's acknowledgement to its watch event's receipt, one put at a time."""
    got = threading.Event()
    receipt: list[float] = []

    def seen(at: float) -> None:
        receipt.append(at)
        got.set()

    watcher = Watcher(server.url, b"watched", on_event=seen)
    if not watcher.created.wait(10) or watcher.error:
        raise RuntimeError(f"the etcd watch did not start: {watcher.error}")
    latencies = []
    with httpx.Client() as client:
        for i in range(samples):
            got.clear()
            put(client, server.url, b"watched", b"%d" % i)
            acked = time.perf_counter()
            if not got.wait(10):
                raise RuntimeError("the etcd watch stopped delivering")
            latencies.append(max(0.0, receipt[-1] - acked))
    return {"samples": samples, "latencies": latencies}


def etcd_write_ratio(
    tmp: Path,
    seconds: float,
    clients: int,
    drive: Callable[..., tuple[int, list[float]]],
    key_of: Callable[[int], bytes],
    value: bytes,
) -> dict[str, Any]:
    """The fan-out workload: ``clients`` writers at full speed with 0, 1 and 100 watchers
    of the written prefix in another process (a fresh etcd each time)."""
    rates: dict[int, float] = {}
    received: dict[int, Any] = {}
    for feeds in (0, 1, 100):
        with etcd(tmp / f"etcd-write-{feeds}") as server:
            assert server is not None
            reader = None
            if feeds:
                reader = subprocess.Popen(
                    [sys.executable, __file__, server.url, str(feeds)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert reader.stdout is not None
                if reader.stdout.readline().strip() != "ready":
                    raise RuntimeError("the etcd watcher process did not start")

            def writer(client: httpx.Client, url: str = server.url) -> Callable[[int], None]:
                return lambda i: put(client, url, key_of(i), value)

            commits, _lat = drive(clients, seconds, lambda: writer(httpx.Client()))
            rates[feeds] = commits / seconds
            if reader is not None:
                out, _ = reader.communicate(timeout=300)  # closing stdin ends the watchers
                received[feeds] = json.loads(out)
    return {
        "commits_per_s": {str(k): round(v) for k, v in rates.items()},
        "ratio_1_feed": round(rates[1] / rates[0], 3),
        "ratio_100_feeds": round(rates[100] / rates[0], 3),
        "watchers": {str(k): v for k, v in received.items()},
    }


def watchers_main(url: str, feeds: int) -> None:
    """The watcher process of :func:`etcd_write_ratio`: ``feeds`` watch streams of the
    written prefix until stdin closes; prints what they received."""
    watchers = [Watcher(url, b"kv0/", b"kv0/\xff") for _ in range(feeds)]
    for watcher in watchers:
        if not watcher.created.wait(30) or watcher.error:
            raise RuntimeError(f"an etcd watch did not start: {watcher.error}")
    print("ready", flush=True)
    sys.stdin.read()
    events = sum(w.events for w in watchers)
    errors = sorted({w.error for w in watchers if w.error is not None})
    print(json.dumps({"values_received": events, "errors": errors}))


if __name__ == "__main__":
    watchers_main(sys.argv[1], int(sys.argv[2]))
