"""A node's logs: one JSON object a line in ``logs/feedkv.log`` of its store directory
(as CockroachDB keeps ``logs/`` beside its data), warnings and errors on stderr too.

Each line holds ``time`` (UTC, ISO 8601 with microseconds), ``level``, ``node`` (the
node's id), ``logger``, ``message``, and when known ``job`` (a changefeed job's id: a
record logged by the job's thread, ``changefeed-<id>``, or given as ``extra={"job":
id}``), ``range`` (``extra={"range": id}``) and ``exception`` (its traceback).

Only ``feedkv start`` configures logging (:func:`configure_logging`): an embedded node
lives in a program that owns its own. Libraries' chatter (py4j's reconnects, grpc's)
is kept to warnings.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from feedkv.errors import FeedKVError, InvalidArgumentError

__all__ = ["LEVELS", "JSONFormatter", "LogSetup", "configure_logging"]

LEVELS = ("debug", "info", "warning", "error")
QUIET_LIBRARIES = ("py4j", "grpc", "urllib3", "botocore", "httpx", "httpcore")
_JOB_THREAD = re.compile(r"changefeed-(\d+)$")


class JSONFormatter(logging.Formatter):
    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node  # NB: "" until the node knows its id (a new one joins first)

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname.lower(),
            "node": self.node,
            "logger": record.name,
            "message": record.getMessage(),
        }
        job = getattr(record, "job", None)
        if job is None:
            match = _JOB_THREAD.match(record.threadName or "")
            job = int(match.group(1)) if match else None
        if job is not None:
            entry["job"] = job
        range_id = getattr(record, "range", None)
        if range_id is not None:
            entry["range"] = range_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


@dataclass
class LogSetup:
    """What :func:`configure_logging` installed; :meth:`close` takes it away."""

    path: Path
    handlers: tuple[logging.Handler, ...]
    previous_level: int

    def name_node(self, node: str) -> None:
        """The node's id, in the lines from now on (it is known once the node joined)."""
        for handler in self.handlers:
            if isinstance(handler.formatter, JSONFormatter):
                handler.formatter.node = node

    def to_file_only(self, level: int, message: str, exc: BaseException | None = None) -> None:
        """``message`` in the log file alone: what the command prints on stderr itself
        (with ``exc``'s traceback when it is no :class:`FeedKVError`)."""
        trace = None if exc is None or isinstance(exc, FeedKVError) else exc
        exc_info = (type(trace), trace, trace.__traceback__) if trace is not None else None
        record = logging.LogRecord("feedkv.node", level, __file__, 0, message, None, exc_info)
        self.handlers[0].handle(record)

    def close(self) -> None:
        root = logging.getLogger()
        for handler in self.handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(self.previous_level)


def configure_logging(store: Path, node: str, level: str = "info") -> LogSetup:
    """Log at ``level`` and above to ``store/logs/feedkv.log`` as JSON lines, and
    warnings and errors to stderr as text. ``InvalidArgumentError`` names a bad level."""
    if level.lower() not in LEVELS:
        raise InvalidArgumentError(f"--log-level {level!r}: expected one of {', '.join(LEVELS)}")
    directory = store / "logs"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "feedkv.log"
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setLevel(level.upper())
    to_file.setFormatter(JSONFormatter(node))
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(logging.Formatter("feedkv: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    previous = root.level
    root.setLevel(level.upper())
    root.addHandler(to_file)
    root.addHandler(to_stderr)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    return LogSetup(path, (to_file, to_stderr), previous)
