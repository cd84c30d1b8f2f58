"""``feedkv debug rangefeed``: print a span's events the moment they arrive.

It connects (retrying until a node answers), opens a rangefeed from ``--since`` (default:
now, so only new changes) and prints one line per event, flushed at once: values and
checkpoints as text, or one JSON object per line with ``--format json``. The history from
``--since`` comes in order per key; ``--timestamp-order`` prints every value in timestamp
order across the whole span, each once every range has checkpointed past it
(:class:`~feedkv.rangefeed.reorder.TimestampOrderer`). The feed hides
splits, merges and reconnects; Ctrl-C (SIGINT) closes it and exits 0.
"""

from __future__ import annotations

import codecs
import json
import signal
import sys
import threading
from typing import TextIO

from feedkv.cli.credentials import Login, connect
from feedkv.db import DB
from feedkv.errors import ExternalError, InvalidArgumentError
from feedkv.rangefeed.event import Checkpoint, Event, Value
from feedkv.rangefeed.reorder import TimestampOrderer
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, Span, check_key, prefix_end

__all__ = ["format_event", "parse_key", "run_debug_rangefeed"]

RETRY_S = 1.0


def parse_key(text: str) -> bytes:
    """A key from the command line: UTF-8 text with Python escapes (``\\xff``, ``\\x00``)."""
    try:
        key: bytes = codecs.escape_decode(text.encode())[0]
    except ValueError as exc:
        raise InvalidArgumentError(f"bad key {text!r}: {exc}") from exc
    return check_key(key) if key else key


def _show(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def format_event(event: Event, fmt: str) -> str:
    if fmt == "json":
        if isinstance(event, Value):
            record: dict[str, object] = {
                "type": "value",
                "key": _show(event.key),
                "value": _show(event.value),
                "ts": str(event.ts),
            }
            if event.prev_value is not None:
                record["prev_value"] = _show(event.prev_value)
        elif isinstance(event, Checkpoint):
            record = {
                "type": "checkpoint",
                "start": _show(event.span.start),
                "end": _show(event.span.end),
                "ts": str(event.ts),
            }
        else:
            record = {"type": "error", "reason": event.reason.value, "message": event.message}
        return json.dumps(record)
    if isinstance(event, Value):
        text = f"{event.ts}  {event.key!r} -> {event.value!r}"
        return text + (f"  (was {event.prev_value!r})" if event.prev_value is not None else "")
    if isinstance(event, Checkpoint):
        return f"{event.ts}  checkpoint {event.span}"
    return f"error {event.reason.value}: {event.message}"


def run_debug_rangefeed(
    url: str,
    start: str,
    end: str | None,
    since: str | None,
    with_diff: bool,
    fmt: str,
    *,
    timestamp_order: bool = False,
    out: TextIO = sys.stdout,
    stop: threading.Event | None = None,
    login: Login | None = None,
) -> int:
    start_key = parse_key(start)
    end_key = (
        parse_key(end) if end is not None else (prefix_end(start_key) if start_key else KEY_MAX)
    )
    span = Span(start_key, end_key)
    since_ts = Timestamp.parse_decimal(since) if since is not None else None
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    db = _connect(url, stop, login)
    if db is None:
        return 0
    try:
        feed_start = since_ts or db.now()
        feed = db.rangefeed(span, feed_start, with_diff=with_diff, timestamp_order=timestamp_order)

        def close_on_stop() -> None:
            stop.wait()
            feed.close()

        threading.Thread(target=close_on_stop, daemon=True).start()
        orderer = TimestampOrderer([span], feed_start) if timestamp_order else None
        for event in feed:
            for ready in orderer.push(event) if orderer is not None else (event,):
                print(format_event(ready, fmt), file=out, flush=True)
    finally:
        db.close()
    return 0


def _connect(url: str, stop: threading.Event, login: Login | None = None) -> DB | None:
    """Connect, retrying every second until a node answers or ``stop`` is set."""
    warned = False
    while not stop.is_set():
        try:
            return connect(url, login)
        except ExternalError as exc:
            if not warned:
                print(f"feedkv: {exc}; retrying until interrupted", file=sys.stderr, flush=True)
                warned = True
        stop.wait(RETRY_S)
    return None
