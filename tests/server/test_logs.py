"""A node's logs: JSON lines in STORE/logs/feedkv.log from --log-level up, warnings and
errors on stderr too."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.server.logs import JSONFormatter, configure_logging
from feedkv.testing.node_process import NodeProcess


def record(
    message: str, level: int = logging.INFO, *args: object, **extra: object
) -> logging.LogRecord:
    made = logging.LogRecord("feedkv.test", level, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_line_is_one_json_object_with_node_level_and_message() -> None:
    line = JSONFormatter("3").format(record("hello %s", logging.WARNING, "there", range=7))
    entry = json.loads(line)
    assert entry["node"] == "3"
    assert entry["level"] == "warning"
    assert entry["message"] == "hello there"
    assert entry["logger"] == "feedkv.test"
    assert entry["range"] == 7
    assert "job" not in entry
    assert entry["time"].endswith("+00:00")


def test_a_changefeed_jobs_thread_names_its_job() -> None:
    lines: list[str] = []

    def log() -> None:
        lines.append(JSONFormatter("1").format(record("failed")))

    thread = threading.Thread(target=log, name="changefeed-42")
    thread.start()
    thread.join()
    assert json.loads(lines[0])["job"] == 42
    assert json.loads(JSONFormatter("1").format(record("x", job=5)))["job"] == 5


def test_an_exception_goes_into_the_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        made = record("it broke", logging.ERROR)
        made.exc_info = sys.exc_info()
    entry = json.loads(JSONFormatter("1").format(made))
    assert "ValueError: boom" in entry["exception"]


def test_configured_logging_writes_the_file_from_its_level_and_warns_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = configure_logging(tmp_path, "1", "warning")
    try:
        logger = logging.getLogger("feedkv.test_logs")
        logger.info("not kept")
        logger.warning("kept: %d", 1)
    finally:
        setup.close()
    lines = [json.loads(line) for line in setup.path.read_text().splitlines()]
    assert [entry["message"] for entry in lines] == ["kept: 1"]
    assert setup.path == tmp_path / "logs" / "feedkv.log"
    assert "kept: 1" in capsys.readouterr().err
    assert setup.handlers[0] not in logging.getLogger().handlers


def test_a_bad_level_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="--log-level 'loud'"):
        configure_logging(Path("unused"), "1", "loud")


def test_feedkv_start_logs_json_to_its_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    node = NodeProcess(store, "--changefeed-runner", "thread", "--log-level", "debug")
    assert node.terminate() == 0
    entries = [
        json.loads(line) for line in (store / "logs" / "feedkv.log").read_text().splitlines()
    ]
    messages = [entry["message"] for entry in entries]
    assert any(m.startswith("feedkv node listening on feedkv://") for m in messages)
    assert "draining" in messages
    assert {entry["node"] for entry in entries} == {"1"}
