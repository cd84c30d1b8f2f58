"""A validator for rangefeed streams: does a feed keep every promise it makes?

Feed the events of one feed to :meth:`FeedValidator.observe`, in the order the consumer
saw them, then compare them with the store's committed history in
:meth:`FeedValidator.check`. Each broken promise becomes a :class:`Violation` naming its
:class:`Contract`, the key, the timestamps and the index of the event (counted from 0
over every event observed). The contracts are those of ``ARCHITECTURE.md`` ("Contracts:
RangeFeed stream") for one feed ``(spans, since, with_diff)``:

- **in spans**: every value's key, and every checkpoint's span, lies in the feed's spans.
- **exclusive base**: no value at a timestamp ``<= since``.
- **per-key order**: per key, values arrive in strictly ascending timestamp order. A
  value sent twice breaks it, unless ``allow_duplicates`` (see below).
- **checkpoint**: after ``Checkpoint(span, T)`` no value in ``span`` at ``<= T`` follows.
- **checkpoint order**: the checkpoint of any part of the key space never goes backwards.
- **completeness**: every committed version in the spans with ``since < ts <= up_to``
  was emitted; by default each key must be complete up to the highest checkpoint that
  covered it, the timestamp the feed itself promised was final.
- **committed values only**: every value emitted is a committed version: same key, same
  timestamp, same value. Aborted and intermediate transaction writes never are.
- **diff**: with ``with_diff``, ``prev_value`` is the key's newest committed value below
  the event's timestamp (``None`` if there is none or it was a deletion); without it,
  ``prev_value`` is ``None``.
- **error is last**: nothing follows an :class:`~feedkv.rangefeed.event.Error`.

The multi-range client is at-least-once across process restarts: a consumer that resumes
from its last stored checkpoint is sent again what followed it. To validate the events of
several runs strung together, pass ``allow_duplicates=True``: a value exactly equal
(key, timestamp, value) to one already observed is then accepted anywhere, even below a
checkpoint, while a previously unseen value older than one already seen is still
reported. NB: a resumed run may checkpoint below what an earlier run reached, which is
still reported as **checkpoint order** (it is a broken promise of one stream); a harness
that strings runs together drops those violations by their ``contract``.

``observe`` is cheap, so a validator can ride along a long feed: a value costs a few
dictionary operations and two binary searches (O(log n)); a checkpoint costs a binary
search plus the key intervals it covers. Memory grows with the number of distinct values.
Not thread-safe: one owner.
"""

from __future__ import annotations

import enum
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from feedkv.errors import InvalidArgumentError
from feedkv.rangefeed.event import Checkpoint, Error, Event, Value
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, merge_spans

__all__ = [
    "CommittedVersion",
    "Contract",
    "FeedValidator",
    "Version",
    "Violation",
    "assert_valid",
    "check_resolved_feed",
    "read_until_resolved",
]

MAX_LISTED = 20  # violations assert_valid spells out before it only counts the rest


class Contract(enum.StrEnum):
    """The promises a rangefeed stream makes; :attr:`Violation.contract` is one of them."""

    IN_SPANS = "in spans"
    EXCLUSIVE_BASE = "exclusive base"
    PER_KEY_ORDER = "per-key order"
    CHECKPOINT = "checkpoint"
    CHECKPOINT_ORDER = "checkpoint order"
    COMPLETENESS = "completeness"
    COMMITTED_ONLY = "committed values only"
    DIFF = "diff"
    ERROR_LAST = "error is last"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken promise.

    ``contract`` is a :class:`Contract` value; ``message`` names the key, the timestamps
    and the events involved. ``key`` is the key concerned, if one is; ``event_index`` is
    the offending event's position among the observed events (from 0), or ``None`` when
    the violation is something missing (**completeness**).
    """

    contract: str
    message: str
    key: bytes | None = None
    event_index: int | None = None

    def __str__(self) -> str:
        return f"[{self.contract}] {self.message}"


class CommittedVersion(Protocol):
    """A committed version of one key, as the store holds it: ``value=None`` is a deletion.

    :class:`~feedkv.storage.export.ExportedVersion` (from ``iter_export``) and
    :class:`Version` both fit. Plain tuples do not: wrap them as ``Version(*t)``.
    """

    @property
    def key(self) -> bytes: ...

    @property
    def ts(self) -> Timestamp: ...

    @property
    def value(self) -> bytes | None: ...


class Version(NamedTuple):
    """A committed version built by hand: ``Version(b"k", Timestamp(5), b"v")``."""

    key: bytes
    ts: Timestamp
    value: bytes | None


class _Mark(NamedTuple):
    """A checkpoint as observed: its timestamp, its event index and its span."""

    ts: Timestamp
    event_index: int
    span: Span


class _CheckpointMap:
    """The highest checkpoint seen for every key.

    The key space is cut into intervals ``[starts[i], starts[i + 1])`` at every boundary a
    checkpoint used, each holding the highest checkpoint that covered it (``None``: never
    covered). Like :class:`~feedkv.rangefeed.frontier.SpanFrontier`, but answering "which
    checkpoint covers this key" (a binary search) rather than the minimum over all keys,
    and remembering the event that made each promise so a violation can name it.
    """

    def __init__(self) -> None:
        self._starts: list[bytes] = [b""]
        self._marks: list[_Mark | None] = [None]

    def at(self, key: bytes) -> _Mark | None:
        """The highest checkpoint that covered ``key`` so far, or ``None``."""
        return self._marks[bisect_right(self._starts, key) - 1]

    def forward(self, mark: _Mark) -> list[_Mark]:
        """Raise every part of ``mark.span`` to ``mark``; returns the earlier, higher
        checkpoints of the parts that ``mark`` would have lowered (left unchanged)."""
        first = self._cut(mark.span.start)
        last = self._cut(mark.span.end)
        higher: list[_Mark] = []
        for i in range(first, last):
            current = self._marks[i]
            if current is None or current.ts < mark.ts:
                self._marks[i] = mark
            elif current.ts > mark.ts:
                higher.append(current)
        return higher

    def _cut(self, key: bytes) -> int:
        i = bisect_right(self._starts, key) - 1
        if self._starts[i] == key:
            return i
        self._starts.insert(i + 1, key)
        self._marks.insert(i + 1, self._marks[i])
        return i + 1


class FeedValidator:
    """Checks one feed's events against the store's committed history.

    ``spans`` and ``since`` (exclusive) are the feed's registration; ``with_diff`` says
    whether it asked for ``prev_value``. ``allow_duplicates`` accepts a value equal
    (key, ts, value) to one already observed, for at-least-once streams (see the module
    docstring).

    Call :meth:`observe` for every event in the order the consumer received it, then
    :meth:`check` once the feed has stopped. ``check`` does not change the validator, so
    it may be called again after more events.
    """

    def __init__(
        self,
        spans: Iterable[Span],
        since: Timestamp,  # exclusive
        with_diff: bool = False,
        *,
        allow_duplicates: bool = False,
    ) -> None:
        self.spans = merge_spans(spans)
        if not self.spans:
            raise InvalidArgumentError("a feed validator needs at least one non-empty span")
        self.since = since
        self.with_diff = with_diff
        self.allow_duplicates = allow_duplicates
        self._span_starts = [span.start for span in self.spans]
        self._count = 0
        self._found: list[Violation] = []
        # (key, ts, value) -> index of its first event: what was emitted, each once.
        self._seen: dict[tuple[bytes, Timestamp, bytes | None], int] = {}
        # (key, ts) -> index of the first value at that version, for completeness.
        self._versions: dict[tuple[bytes, Timestamp], int] = {}
        # (key, ts, prev_value) -> index of its first event, for the diff check.
        self._diffs: dict[tuple[bytes, Timestamp, bytes | None], int] = {}
        self._newest: dict[bytes, tuple[Timestamp, int]] = {}  # key -> (ts, event index)
        self._checkpoints = _CheckpointMap()
        self._error: tuple[int, Error] | None = None
        self._after_error: tuple[int, Event] | None = None
        self._after_error_count = 0

    @property
    def events(self) -> int:
        """How many events were observed."""
        return self._count

    def observe(self, event: Event) -> None:
        """Take the next event of the feed. Never raises for a broken contract: the
        violations found are returned by :meth:`check`."""
        index = self._count
        self._count += 1
        if self._error is not None:
            if self._after_error is None:
                self._after_error = (index, event)
            self._after_error_count += 1
        if isinstance(event, Value):
            self._observe_value(index, event)
        elif isinstance(event, Checkpoint):
            self._observe_checkpoint(index, event)
        elif isinstance(event, Error):
            if self._error is None:
                self._error = (index, event)
        else:
            raise InvalidArgumentError(
                f"event #{index} is a {type(event).__name__}, not a Value, Checkpoint or Error"
            )

    def observe_all(self, events: Iterable[Event]) -> None:
        """:meth:`observe` each of ``events`` in order."""
        for event in events:
            self.observe(event)

    def check(
        self, history: Iterable[CommittedVersion], up_to: Timestamp | None = None
    ) -> list[Violation]:
        """Every violation found, ordered by event index (missing versions last).

        ``history`` holds every committed version in the feed's spans (versions outside
        them are ignored), in any order; read it from a snapshot taken after the feed
        stopped, so that everything the feed could have emitted is in it. The diff check
        also needs each key's newest version at or below ``since``: export from the zero
        timestamp when ``with_diff``. A history holding two different values for one
        (key, ts) raises :class:`~feedkv.errors.InvalidArgumentError`.

        ``up_to`` (inclusive) bounds the completeness check; by default each key is
        checked up to the highest checkpoint that covered it, and a key no checkpoint
        covered is not checked.
        """
        committed: dict[tuple[bytes, Timestamp], bytes | None] = {}
        for version in history:
            key, ts, value = version.key, version.ts, version.value
            if not self._in_spans(key):
                continue
            at = (key, ts)
            if at in committed:
                if committed[at] != value:
                    raise InvalidArgumentError(
                        f"the history holds two values for key {key!r} at {ts}: "
                        f"{_show(committed[at])} and {_show(value)}"
                    )
                continue
            committed[at] = value
        found = list(self._found)
        found += self._check_error_last()
        found += self._check_committed(committed)
        if self.with_diff:
            found += self._check_diffs(committed)
        found.sort(key=lambda v: (v.event_index is None, v.event_index or 0))
        found += self._check_complete(committed, up_to)
        return found

    # Observing.

    def _observe_value(self, index: int, event: Value) -> None:
        key, ts = event.key, event.ts
        if self.with_diff:
            self._diffs.setdefault((key, ts, event.prev_value), index)
        elif event.prev_value is not None:
            self._report(
                Contract.DIFF,
                f"event #{index}: value of key {key!r} at {ts} carries prev_value "
                f"{_show(event.prev_value)}, but the feed did not ask for diffs",
                key,
                index,
            )
        ident = (key, ts, event.value)
        repeat_of = self._seen.get(ident)
        if repeat_of is None:
            self._seen[ident] = index
        elif self.allow_duplicates:
            return
        self._versions.setdefault((key, ts), index)
        if not self._in_spans(key):
            self._report(
                Contract.IN_SPANS,
                f"event #{index}: value of key {key!r} at {ts} is outside the feed's spans "
                f"{_show_spans(self.spans)}",
                key,
                index,
            )
            return
        if ts <= self.since:
            self._report(
                Contract.EXCLUSIVE_BASE,
                f"event #{index}: value of key {key!r} at {ts} is at or below the feed's "
                f"base timestamp {self.since} (exclusive)",
                key,
                index,
            )
            return
        mark = self._checkpoints.at(key)
        if mark is not None and ts <= mark.ts:
            self._report(
                Contract.CHECKPOINT,
                f"event #{index}: value of key {key!r} at {ts} follows checkpoint "
                f"#{mark.event_index} of {mark.span} at {mark.ts}, which promised nothing at "
                f"or below it",
                key,
                index,
            )
        newest = self._newest.get(key)
        if newest is None or ts > newest[0]:
            self._newest[key] = (ts, index)
            return
        newest_ts, newest_index = newest
        if repeat_of is not None:
            what = f"repeats event #{repeat_of}"
        elif ts == newest_ts:
            what = f"is a second value at the timestamp of event #{newest_index}"
        else:
            what = f"is older than event #{newest_index} of the same key at {newest_ts}"
        self._report(
            Contract.PER_KEY_ORDER,
            f"event #{index}: value of key {key!r} at {ts} {what}",
            key,
            index,
        )

    def _observe_checkpoint(self, index: int, event: Checkpoint) -> None:
        span, ts = event.span, event.ts
        if not self._spans_contain(span):
            self._report(
                Contract.IN_SPANS,
                f"event #{index}: checkpoint of {span} at {ts} reaches outside the feed's "
                f"spans {_show_spans(self.spans)}",
                None,
                index,
            )
        higher = self._checkpoints.forward(_Mark(ts, index, span))
        if higher:
            top = max(higher)
            self._report(
                Contract.CHECKPOINT_ORDER,
                f"event #{index}: checkpoint of {span} at {ts} goes back from checkpoint "
                f"#{top.event_index} of {top.span} at {top.ts}",
                None,
                index,
            )

    def _report(self, contract: Contract, message: str, key: bytes | None, index: int) -> None:
        self._found.append(Violation(contract, message, key, index))

    # Checking against the history.

    def _check_error_last(self) -> list[Violation]:
        if self._error is None or self._after_error is None:
            return []
        error_index, error = self._error
        index, event = self._after_error
        more = self._after_error_count - 1
        tail = f" ({more} more follow)" if more else ""
        return [
            Violation(
                Contract.ERROR_LAST,
                f"event #{index} ({_show_event(event)}) follows the stream's end, "
                f"error #{error_index} ({error.reason.value}: {error.message!r}){tail}",
                event.key if isinstance(event, Value) else None,
                index,
            )
        ]

    def _check_committed(
        self, committed: dict[tuple[bytes, Timestamp], bytes | None]
    ) -> list[Violation]:
        found: list[Violation] = []
        for (key, ts, value), index in self._seen.items():
            if ts <= self.since or not self._in_spans(key):
                continue  # reported when observed
            at = (key, ts)
            if at not in committed:
                found.append(
                    Violation(
                        Contract.COMMITTED_ONLY,
                        f"event #{index}: value {_show(value)} of key {key!r} at {ts} is not "
                        f"a committed version (an aborted or intermediate write?)",
                        key,
                        index,
                    )
                )
            elif committed[at] != value:
                found.append(
                    Violation(
                        Contract.COMMITTED_ONLY,
                        f"event #{index}: value {_show(value)} of key {key!r} at {ts} differs "
                        f"from the committed value {_show(committed[at])}",
                        key,
                        index,
                    )
                )
        return found

    def _check_diffs(
        self, committed: dict[tuple[bytes, Timestamp], bytes | None]
    ) -> list[Violation]:
        by_key: dict[bytes, list[Timestamp]] = {}
        for key, ts in committed:
            by_key.setdefault(key, []).append(ts)
        for stamps in by_key.values():
            stamps.sort()
        found: list[Violation] = []
        for (key, ts, prev), index in self._diffs.items():
            if ts <= self.since or not self._in_spans(key):
                continue
            stamps = by_key.get(key, [])
            below = bisect_left(stamps, ts) - 1
            if below < 0:
                expected: bytes | None = None
                source = "there is no earlier version"
            else:
                expected = committed[key, stamps[below]]
                source = f"the committed value below it is {_show(expected)} (at {stamps[below]})"
            if prev != expected:
                found.append(
                    Violation(
                        Contract.DIFF,
                        f"event #{index}: value of key {key!r} at {ts} carries prev_value "
                        f"{_show(prev, none='None')}, but {source}",
                        key,
                        index,
                    )
                )
        return found

    def _check_complete(
        self, committed: dict[tuple[bytes, Timestamp], bytes | None], up_to: Timestamp | None
    ) -> list[Violation]:
        found: list[Violation] = []
        for (key, ts), value in committed.items():
            if ts <= self.since or (key, ts) in self._versions:
                continue
            if up_to is not None:
                if ts > up_to:
                    continue
                why = f"up_to {up_to}"
            else:
                mark = self._checkpoints.at(key)
                if mark is None or ts > mark.ts:
                    continue
                why = f"checkpoint #{mark.event_index} of {mark.span} at {mark.ts}"
            found.append(
                Violation(
                    Contract.COMPLETENESS,
                    f"committed value {_show(value)} of key {key!r} at {ts} was never emitted, "
                    f"though it is above the base {self.since} and at or below {why}",
                    key,
                    None,
                )
            )
        return found

    # Spans.

    def _in_spans(self, key: bytes) -> bool:
        i = bisect_right(self._span_starts, key) - 1
        return i >= 0 and self.spans[i].contains_key(key)

    def _spans_contain(self, span: Span) -> bool:
        i = bisect_right(self._span_starts, span.start) - 1
        return i >= 0 and self.spans[i].contains(span)


class _ClosableFeed(Protocol):
    def __iter__(self) -> Iterator[Event]: ...

    def close(self) -> None: ...


def read_until_resolved(feed: _ClosableFeed, ts: Timestamp, *, timeout_s: float) -> list[Event]:
    """The events of ``feed`` up to and including its first checkpoint at or above
    ``ts``; a feed still short of it after ``timeout_s`` is closed (its events so far
    are returned: the caller's check that the last is that checkpoint then fails)."""
    closer = threading.Timer(timeout_s, feed.close)
    closer.start()
    events: list[Event] = []
    try:
        for event in feed:
            events.append(event)
            if isinstance(event, Checkpoint) and event.ts >= ts:
                break
    finally:
        closer.cancel()
    return events


def assert_valid(violations: Sequence[object], *, what: str = "the feed") -> None:
    """Raise :class:`AssertionError` listing the first 20 of ``violations`` (and how many
    more there are), saying that ``what`` broke them; do nothing if there are none."""
    if not violations:
        return
    lines = [f"{what} broke {len(violations)} promise(s):"]
    lines += [f"  {violation}" for violation in violations[:MAX_LISTED]]
    if len(violations) > MAX_LISTED:
        lines.append(f"  ... and {len(violations) - MAX_LISTED} more")
    raise AssertionError("\n".join(lines))


class _Exporter(Protocol):
    def export(self, span: Span, lo: Timestamp, hi: Timestamp) -> Iterable[CommittedVersion]: ...


def check_resolved_feed(
    events: Sequence[Event], db: _Exporter, span: Span, since: Timestamp, last: Timestamp
) -> list[CommittedVersion]:
    """The check that ends a test of a feed of ``span`` from ``since`` (exclusive), read
    until resolved past ``last`` (:func:`read_until_resolved`): the feed did resolve
    past ``last``, and ``events`` keep every promise (:class:`FeedValidator`) against
    what ``db`` holds of ``span`` in ``(since, last]``. Raises :class:`AssertionError`
    naming what failed; returns that history, for the caller's own checks."""
    resolved = bool(events) and isinstance(events[-1], Checkpoint) and events[-1].ts >= last
    if not resolved:
        raise AssertionError(
            f"the feed did not resolve past the last write at {last}; its last event: "
            f"{_show_event(events[-1]) if events else 'none'}"
        )
    validator = FeedValidator([span], since)
    validator.observe_all(events)
    history = list(db.export(span, since, last))
    assert_valid(validator.check(history, up_to=last))
    return history


def _show(value: bytes | None, *, none: str = "None (a deletion)") -> str:
    if value is None:
        return none
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _show_spans(spans: Sequence[Span]) -> str:
    return ", ".join(str(span) for span in spans)


def _show_event(event: Event) -> str:
    if isinstance(event, Value):
        return f"value of key {event.key!r} at {event.ts}"
    if isinstance(event, Checkpoint):
        return f"checkpoint of {event.span} at {event.ts}"
    return f"error {event.reason.value}"
