"""``feedkv debug rangefeed``: events printed as they arrive, through a node restart, and
a clean exit on Ctrl-C."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import feedkv
from feedkv.cli.debug_rangefeed import format_event, parse_key
from feedkv.errors import InvalidArgumentError
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Value
from feedkv.testing.node_process import NodeProcess, free_port
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

DEADLINE_S = 30.0


def debug_rangefeed(*args: str) -> subprocess.Popen[str]:
    """``feedkv debug rangefeed ARGS`` as a subprocess with its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "feedkv.cli.main", "debug", "rangefeed", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Lines:
    """A subprocess's stdout, line by line, read with a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(
            target=lambda: [self._lines.put(line) for line in stdout], daemon=True
        ).start()

    def until(self, predicate: object, timeout: float = DEADLINE_S) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while not predicate(seen):  # type: ignore[operator]
            try:
                seen.append(self._lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"timed out; output so far: {seen}") from None
        return seen


def values_of(lines: list[str]) -> list[tuple[str, str | None]]:
    records = [json.loads(line) for line in lines]
    return [(r["key"], r["value"]) for r in records if r["type"] == "value"]


def test_the_feed_prints_changes_survives_a_node_restart_and_exits_cleanly_on_ctrl_c(
    tmp_path: Path,
) -> None:
    port = free_port()
    node = NodeProcess(tmp_path / "store", "--listen", f"127.0.0.1:{port}")
    watcher = debug_rangefeed(
        "--url",
        node.url,
        "--format",
        "json",
        "--since",
        "0",
        "app/",
    )
    try:
        lines = Lines(watcher)
        with feedkv.connect(node.url) as db:
            db.put(b"app/a", b"1")
            db.put(b"other", b"not watched")
            db.put(b"app/b", b"2")
        out = lines.until(lambda seen: len(values_of(seen)) >= 2)
        # NB: sorted: a watcher that registers after both puts reads them in its catch-up
        # scan, by key (descending); a rangefeed orders each key's changes, not keys'
        assert sorted(values_of(out)) == [("app/a", "1"), ("app/b", "2")]
        node.kill()
        node = NodeProcess(tmp_path / "store", "--listen", f"127.0.0.1:{port}")
        with feedkv.connect(node.url) as db:
            db.put(b"app/c", b"3")
        out = lines.until(lambda seen: ("app/c", "3") in values_of(seen))
        assert ("app/a", "1") not in values_of(out)  # nothing already printed comes again
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=DEADLINE_S) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
        node.terminate()


def test_timestamp_order_replays_history_in_commit_order_across_keys(tmp_path: Path) -> None:
    """Ten keys written twice and a store busy elsewhere: the history of ``app/`` would be
    read by key (keys descending); ``--timestamp-order`` keeps commit order."""
    node = NodeProcess(tmp_path / "store")
    try:
        with feedkv.connect(node.url) as db:
            for round_ in (b"1", b"2"):
                with db.transaction() as txn:
                    for i in range(10):
                        txn.put(b"app/%d" % i, round_)
            with db.transaction() as txn:
                for i in range(100):
                    txn.put(b"other/%d" % i, b"x")
        watcher = debug_rangefeed(
            "--url", node.url, "--format", "json", "--since", "0", "--timestamp-order", "app/"
        )
        try:
            out = Lines(watcher).until(lambda seen: len(values_of(seen)) >= 20)
            records = [json.loads(line) for line in out if json.loads(line)["type"] == "value"]
            assert [r["value"] for r in records] == ["1"] * 10 + ["2"] * 10
            assert [r["key"] for r in records[:10]] == [f"app/{i}" for i in range(10)]
        finally:
            watcher.kill()
    finally:
        node.terminate()


def test_timestamp_order_holds_across_ranges(tmp_path: Path) -> None:
    """Writes alternate between two ranges of the span: the feed delivers each range's
    history on its own, ``--timestamp-order`` prints them merged in commit order."""
    node = NodeProcess(tmp_path / "store")
    try:
        with feedkv.connect(node.url) as db:
            db.split(b"app/m")
            for i in range(10):
                db.put(b"app/z%d" % i if i % 2 else b"app/a%d" % i, b"%d" % i)
        watcher = debug_rangefeed(
            "--url", node.url, "--format", "json", "--since", "0", "--timestamp-order", "app/"
        )
        try:
            out = Lines(watcher).until(lambda seen: len(values_of(seen)) >= 10)
            records = [json.loads(line) for line in out if json.loads(line)["type"] == "value"]
            assert [r["value"] for r in records] == [str(i) for i in range(10)]
            stamps = [Timestamp.parse(r["ts"]) for r in records]
            assert stamps == sorted(stamps)
        finally:
            watcher.kill()
    finally:
        node.terminate()


def test_an_unreachable_node_is_retried_until_interrupted(tmp_path: Path) -> None:
    watcher = debug_rangefeed(
        "--url",
        f"feedkv://127.0.0.1:{free_port()}",
        "k",
    )
    try:
        assert watcher.stderr is not None
        first = watcher.stderr.readline()
        assert "retrying until interrupted" in first
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=DEADLINE_S) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()


def test_a_bad_since_timestamp_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "feedkv.cli.main",
            "debug",
            "rangefeed",
            "--since",
            "yesterday",
            "k",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert result.returncode == 1
    assert "invalid timestamp 'yesterday'" in result.stderr


def test_keys_take_python_escapes() -> None:
    assert parse_key("a\\x00b\\xff") == b"a\x00b\xff"
    assert parse_key("") == b""
    with pytest.raises(InvalidArgumentError, match="bad key"):
        parse_key("\\x4")


def test_events_print_as_text_or_one_json_object_per_line() -> None:
    ts = Timestamp(5, 1)
    value = Value(b"k", b"new", ts, b"old")
    assert format_event(value, "text") == "5.0000000001  b'k' -> b'new'  (was b'old')"
    assert json.loads(format_event(value, "json")) == {
        "type": "value",
        "key": "k",
        "value": "new",
        "ts": "5.0000000001",
        "prev_value": "old",
    }
    deletion = json.loads(format_event(Value(b"\xff", None, ts), "json"))
    assert (deletion["key"], deletion["value"]) == ("\\xff", None)
    checkpoint = json.loads(format_event(Checkpoint(Span(b"a", b"b"), ts), "json"))
    assert checkpoint == {"type": "checkpoint", "start": "a", "end": "b", "ts": "5.0000000001"}
    assert format_event(Error(ErrorReason.SLOW_CONSUMER, "behind"), "text") == (
        "error SLOW_CONSUMER: behind"
    )
