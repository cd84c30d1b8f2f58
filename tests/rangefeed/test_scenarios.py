"""Scenario scripts that pin a rangefeed's events one by one on a real embedded node.

Each file under ``testdata/scenarios/`` is a script run top to bottom; its leading
``#`` comment says what it pins. Timestamps are real HLC times, so scripts never spell
them out: a command binds a time to a name (``-> t1``) and expectations refer to it as
``t1``, ``t1-1`` or ``t1+1`` (one tick before or after). ``#`` starts a comment.

Setup (before any other command):

- ``feed-config FIELD=INT ...`` / ``store-config FIELD=INT ...``: override fields of
  the suite's :class:`FeedConfig` / :class:`StoreConfig` (see ``conftest.py``). The
  pusher runs on its own every ``push_interval_s``; a script makes it push quickly with a
  small ``push_age_ns`` and never with a huge one.

Writes and reads (keys and values are bare words; ``<deleted>`` is no value):

- ``put KEY VALUE [-> NAME]``, ``delete KEY [-> NAME]``: committed writes; NAME is the
  write's timestamp.
- ``now -> NAME``: the node's clock now.
- ``get KEY VALUE``: the current value of KEY is VALUE.
- ``split KEY``: split the range holding KEY there.
- ``txn TXN begin ANCHOR``: a hand-coordinated transaction with its record at ANCHOR.
- ``txn TXN write KEY VALUE [-> NAME]``: an intent; NAME is its write timestamp.
- ``txn TXN commit|abort [fails TEXT]``: end it and resolve its intents; with ``fails``,
  the end must raise an error whose message contains TEXT.

Feeds:

- ``register TAG START END [since NAME] [diff]``: a server-side registration of
  ``[START, END)`` after NAME (exclusive; default: the zero timestamp), on its own stream.
- ``expect TAG`` and then indented lines, each the next matching event of TAG:

  - ``value KEY VALUE @TIME [prev VALUE]``: the next value event is exactly this
    (``prev`` omitted: no previous value). Checkpoints before it are passed over.
  - ``checkpoint [>= TIME | > TIME | = TIME]``: the first checkpoint that satisfies the
    bound (bare: the next checkpoint). A value before it fails, so ``checkpoint >= t``
    also says that nothing more in the span arrives up to ``t``.
  - ``error REASON``: the stream ends with this reason; only checkpoints may precede it.

Every event a registration receives is also checked against the stream contracts
(ARCHITECTURE.md): no value at or below ``since`` or below a checkpoint already sent,
per-key ascending values, checkpoints that never go backwards, nothing after an error.
At the end of a script no received value may be left unexpected. A failure names the
script line and shows the events seen so far, timestamps rendered with the script's names.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
from feed_helpers import DEADLINE_S, Collector, begin, end_txn, write_intent

import feedkv
from feedkv import DB
from feedkv.kv.api import Transaction
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

SCENARIOS = Path(__file__).parent / "testdata" / "scenarios"
ZERO = Timestamp(0, 0)
DELETED = "<deleted>"
C = TypeVar("C", FeedConfig, StoreConfig)

# Scenarios that expose a production bug: file name -> what is wrong.
KNOWN_BUGS: dict[str, str] = {}


class ScenarioFailure(AssertionError):
    pass


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    text: str
    words: list[str]
    block: list[Line] = field(default_factory=list)


def parse(path: Path) -> list[Line]:
    """The script's commands, each ``expect`` with its indented lines as its block."""
    lines: list[Line] = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        text = raw.split("#", 1)[0].rstrip()
        if not text.strip():
            continue
        line = Line(number, text.strip(), shlex.split(text))
        if raw[:1].isspace():
            if not lines or lines[-1].words[0] != "expect":
                raise ScenarioFailure(f"{path.name}:{number}: an indented line outside expect")
            lines[-1].block.append(line)
        else:
            lines.append(line)
    return lines


@dataclass
class Feed:
    """One registration's stream and what the runner has checked of it so far."""

    since: Timestamp
    collector: Collector
    cursor: int = 0  # events before it are matched by expectations
    checked: int = 0  # events before it are checked against the contracts
    top: Timestamp = ZERO  # highest checkpoint received
    last_per_key: dict[bytes, Timestamp] = field(default_factory=dict)
    ended: bool = False


class Scenario:
    def __init__(self, path: Path, tmp_path: Path, store_config: StoreConfig) -> None:
        self.path = path
        self.tmp_path = tmp_path
        self.store_config = store_config
        self.feed_config = FeedConfig(push_age_ns=100_000_000, push_interval_s=0.02)
        self.names: dict[str, Timestamp] = {}
        self.txns: dict[str, tuple[Transaction, list[bytes]]] = {}
        self.feeds: dict[str, Feed] = {}
        self.line: Line | None = None
        self._db: DB | None = None

    # Running.

    def run(self) -> None:
        try:
            for line in parse(self.path):
                self.line = line
                self.execute(line)
            self.line = None
            for tag, feed in self.feeds.items():
                self.check(tag, feed)
                left = [e for e in feed.collector.of_all()[feed.cursor :] if isinstance(e, Value)]
                if left:
                    self.fail(f"values of {tag} no expectation matched: {self.show(left)}", tag)
        finally:
            if self._db is not None:
                self._db.close()

    @property
    def db(self) -> DB:
        if self._db is None:
            self._db = feedkv.connect(
                self.tmp_path / "store", config=self.store_config, feed_config=self.feed_config
            )
        return self._db

    @property
    def store(self) -> Store:
        assert self.db.node is not None
        return self.db.node.store

    @property
    def node_feeds(self) -> StoreFeeds:
        assert self.db.node is not None
        return self.db.node.feeds

    def execute(self, line: Line) -> None:
        command, *args = line.words
        handler = getattr(self, "do_" + command.replace("-", "_"), None)
        if handler is None:
            self.fail(f"unknown command {command!r}")
        handler(args, line)

    def bind(self, args: list[str], ts: Timestamp) -> list[str]:
        """Bind ``-> NAME`` at the end of ``args`` to ``ts``; return the other args."""
        if len(args) >= 2 and args[-2] == "->":
            if args[-1] in self.names:
                self.fail(f"{args[-1]} is already bound")
            self.names[args[-1]] = ts
            return args[:-2]
        return args

    # Commands.

    def do_feed_config(self, args: list[str], _line: Line) -> None:
        self.feed_config = self._configured(self.feed_config, args)

    def do_store_config(self, args: list[str], _line: Line) -> None:
        self.store_config = self._configured(self.store_config, args)

    def _configured(self, config: C, args: list[str]) -> C:
        if self._db is not None:
            self.fail("configuration must come before the first command that uses the node")
        fields: dict[str, Any] = {}
        for arg in args:
            name, _, value = arg.partition("=")
            fields[name] = int(value)
        return dataclasses.replace(config, **fields)

    def do_put(self, args: list[str], _line: Line) -> None:
        key, value = args[:2]
        self.bind(args, self.db.put(key.encode(), value.encode()))

    def do_delete(self, args: list[str], _line: Line) -> None:
        self.bind(args, self.db.delete(args[0].encode()))

    def do_now(self, args: list[str], _line: Line) -> None:
        self.bind(args, self.db.now())

    def do_get(self, args: list[str], _line: Line) -> None:
        key, want = args
        got = self.db.get(key.encode())
        if got != value_of(want):
            self.fail(f"get {key}: {got!r}")

    def do_split(self, args: list[str], _line: Line) -> None:
        self.db.split(args[0].encode())

    def do_txn(self, args: list[str], _line: Line) -> None:
        name, verb, *rest = args
        if verb == "begin":
            self.txns[name] = (begin(self.store, rest[0].encode()), [])
            return
        txn, keys = self.txns[name]
        if verb == "write":
            key, value = rest[:2]
            txn = write_intent(self.store, txn, key.encode(), value.encode())
            self.txns[name] = (txn, [*keys, key.encode()])
            self.bind(rest, txn.write_ts)
        elif verb in ("commit", "abort"):
            spans = tuple(Span.for_key(key) for key in keys)
            try:
                end_txn(self.store, txn, spans, commit=verb == "commit")
            except Exception as exc:
                if rest[:1] != ["fails"] or rest[1] not in str(exc):
                    raise
            else:
                if rest[:1] == ["fails"]:
                    self.fail(f"{verb} did not fail")
        else:
            self.fail(f"unknown txn verb {verb!r}")

    def do_register(self, args: list[str], _line: Line) -> None:
        tag, start, end, *options = args
        since = ZERO
        if "since" in options:
            since = self.time(options[options.index("since") + 1])
        stream = self.node_feeds.new_stream()
        self.node_feeds.register(
            tag, Span(start.encode(), end.encode()), since, "diff" in options, stream
        )
        self.feeds[tag] = Feed(since, Collector(stream))

    def do_expect(self, args: list[str], line: Line) -> None:
        tag = args[0]
        if tag not in self.feeds:
            self.fail(f"no registration {tag!r}")
        for expected in line.block:
            self.line = expected
            kind, *rest = expected.words
            if kind == "value":
                self.expect_value(tag, rest)
            elif kind == "checkpoint":
                self.expect_checkpoint(tag, rest)
            elif kind == "error":
                self.expect_error(tag, rest)
            else:
                self.fail(f"unknown expectation {kind!r}")

    # Expectations.

    def expect_value(self, tag: str, args: list[str]) -> None:
        key, value, at, *prev = args
        if not at.startswith("@") or prev[:1] not in ([], ["prev"]):
            self.fail("expected: value KEY VALUE @TIME [prev VALUE]")
        want = Value(
            key.encode(), value_of(value), self.time(at[1:]), value_of(prev[1]) if prev else None
        )
        event = self.next_event(tag, lambda e: not isinstance(e, Checkpoint))
        if event != want:
            self.fail(f"wanted {self.show([want])}, got {self.show([event])}", tag)

    def expect_checkpoint(self, tag: str, args: list[str]) -> None:
        bound: Callable[[Timestamp], bool] = lambda _ts: True  # noqa: E731
        if args:
            op, name = args
            ts = self.time(name)
            bounds: dict[str, Callable[[Timestamp], bool]] = {
                ">=": lambda got: got >= ts,
                ">": lambda got: got > ts,
                "=": lambda got: got == ts,
            }
            if op not in bounds:
                self.fail("expected: checkpoint [>= TIME | > TIME | = TIME]")
            bound = bounds[op]
        event = self.next_event(tag, lambda e: not isinstance(e, Checkpoint) or bound(e.ts))
        if not isinstance(event, Checkpoint):
            self.fail(f"wanted a checkpoint, got {self.show([event])}", tag)

    def expect_error(self, tag: str, args: list[str]) -> None:
        event = self.next_event(tag, lambda e: not isinstance(e, Checkpoint))
        if not isinstance(event, Error) or event.reason is not ErrorReason[args[0]]:
            self.fail(f"wanted error {args[0]}, got {self.show([event])}", tag)

    def next_event(self, tag: str, stop: Callable[[Event], bool]) -> Event:
        """The first event from the cursor on for which ``stop`` holds; the cursor moves
        past it. Waits for events up to the suite's deadline."""
        feed = self.feeds[tag]
        deadline = time.monotonic() + DEADLINE_S
        while True:
            events = feed.collector.of_all()
            while feed.cursor < len(events):
                event = events[feed.cursor]
                feed.cursor += 1
                if stop(event):
                    return event
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail(f"timed out after {DEADLINE_S} s", tag)
            feed.collector.events.extend(feed.collector.stream.take(min(left, 0.05)))
            self.check(tag, feed)

    def check(self, tag: str, feed: Feed) -> None:
        """Check events not checked yet against the stream contracts."""
        events = feed.collector.of_all()
        for event in events[feed.checked :]:
            feed.checked += 1
            if feed.ended:
                self.fail(f"an event after the stream's error: {self.show([event])}", tag)
            if isinstance(event, Error):
                feed.ended = True
            elif isinstance(event, Checkpoint):
                if event.ts < feed.top:
                    self.fail(f"checkpoint went back from {self.show_ts(feed.top)}", tag)
                feed.top = event.ts
            elif event.ts <= feed.since or event.ts <= feed.top:
                self.fail(f"{self.show([event])} at or below since or a checkpoint", tag)
            elif event.ts <= feed.last_per_key.get(event.key, ZERO):
                self.fail(f"{self.show([event])} not after the key's previous value", tag)
            else:
                feed.last_per_key[event.key] = event.ts

    # Times and messages.

    def time(self, expr: str) -> Timestamp:
        for sign, step in (("-", Timestamp.prev), ("+", Timestamp.next)):
            name, found, ticks = expr.partition(sign)
            if found:
                ts = self.time(name)
                for _ in range(int(ticks)):
                    ts = step(ts)
                return ts
        if expr not in self.names:
            self.fail(f"unbound time {expr!r}")
        return self.names[expr]

    def show_ts(self, ts: Timestamp) -> str:
        for name, bound in self.names.items():
            if ts == bound:
                return name
            if ts == bound.prev():
                return f"{name}-1"
        closest = [(name, b) for name, b in self.names.items() if b < ts]
        if closest:
            name, bound = max(closest, key=lambda nb: nb[1])
            return f"{ts!r}(>{name})"
        return repr(ts)

    def show(self, events: Sequence[Event]) -> str:
        shown = []
        for event in events:
            if isinstance(event, Value):
                prev = f" prev {text_of(event.prev_value)}" if event.prev_value is not None else ""
                shown.append(
                    f"value {event.key.decode()} {text_of(event.value)} "
                    f"@{self.show_ts(event.ts)}{prev}"
                )
            elif isinstance(event, Checkpoint):
                shown.append(f"checkpoint {self.show_ts(event.ts)}")
            else:
                shown.append(f"error {event.reason.name} {event.message!r}")
        return "; ".join(shown)

    def fail(self, message: str, tag: str | None = None) -> NoReturn:
        where = f"{self.path.name}:{self.line.number}: {self.line.text}" if self.line else ""
        seen = ""
        if tag is not None:
            feed = self.feeds[tag]
            events = feed.collector.of_all()
            seen = (
                f"\nevents of {tag} matched so far: {self.show(events[: feed.cursor])}"
                f"\nevents of {tag} after them: {self.show(events[feed.cursor :])}"
            )
        raise ScenarioFailure(f"{where}\n{message}{seen}")


def value_of(text: str) -> bytes | None:
    return None if text == DELETED else text.encode()


def text_of(value: bytes | None) -> str:
    return DELETED if value is None else value.decode()


def scenarios() -> Iterator[object]:
    for path in sorted(SCENARIOS.glob("*.txt")):
        marks = []
        if path.name in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=f"BUG: {KNOWN_BUGS[path.name]}"))
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", list(scenarios()))
def test_scenario(path: Path, tmp_path: Path, store_config: StoreConfig) -> None:
    Scenario(path, tmp_path, store_config).run()
